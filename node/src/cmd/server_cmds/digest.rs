//! DEBUG DIGEST and DEBUG DIGEST-VALUE: Redis 7.0's content digests (debug.c), byte for
//! byte, so Redis's test suites can compare datasets and values (COPY, DEBUG RELOAD,
//! replicas) on tessera-node as they do on redis-server.

use tessera_rdb::RdbValue;

use super::debug::live;
use crate::cmd::{CmdResult, Ctx};
use crate::db::value::NO_EXPIRE;
use crate::db::{Entry, STRIPES};

type Digest = [u8; 20];

fn sha1(parts: &[&[u8]]) -> Digest {
    let mut h = sha1_smol::Sha1::new();
    for p in parts {
        h.update(p);
    }
    h.digest().bytes()
}

/// Redis's xorDigest: order-free accumulation.
fn xor(d: &mut Digest, data: &[u8]) {
    for (a, b) in d.iter_mut().zip(sha1(&[data])) {
        *a ^= b;
    }
}

/// Redis's mixDigest: xor, then hash the result (order matters).
fn mix(d: &mut Digest, data: &[u8]) {
    xor(d, data);
    *d = sha1(&[&d[..]]);
}

/// A double as C's `%.17g` writes it (Redis 7.0 digests sorted set scores that way).
pub(crate) fn fmt_g17(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{:.16e}", v.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let sign = if v < 0.0 { "-" } else { "" };
    if !(-4..17).contains(&exp) {
        let m = mant.trim_end_matches('0').trim_end_matches('.');
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{m}e{esign}{:02}", exp.unsigned_abs());
    }
    let (int, frac) = if exp >= 0 {
        let cut = (exp as usize + 1).min(digits.len());
        (digits[..cut].to_string(), digits[cut..].to_string())
    } else {
        let zeros = "0".repeat(exp.unsigned_abs() as usize - 1);
        ("0".to_string(), format!("{zeros}{digits}"))
    };
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        format!("{sign}{int}")
    } else {
        format!("{sign}{int}.{frac}")
    }
}

/// Redis's xorObjectDigest: the value's type, its content, and whether it has a TTL.
fn value_digest(d: &mut Digest, e: &Entry) {
    let v = crate::db::rdb::to_rdb(&e.value);
    let type_code: u32 = match &v {
        RdbValue::String(_) => 0,
        RdbValue::List(_) => 1,
        RdbValue::Set(_) => 2,
        RdbValue::ZSet(_) => 3,
        RdbValue::Hash(_) => 4,
        RdbValue::Stream(_) => 6,
    };
    mix(d, &type_code.to_be_bytes());
    match &v {
        RdbValue::String(s) => mix(d, s),
        RdbValue::List(items) => items.iter().for_each(|x| mix(d, x)),
        RdbValue::Set(items) => items.iter().for_each(|x| xor(d, x)),
        RdbValue::ZSet(items) => {
            for (m, score) in items {
                let mut el = [0u8; 20];
                mix(&mut el, m);
                mix(&mut el, fmt_g17(*score).as_bytes());
                xor(d, &el);
            }
        }
        RdbValue::Hash(pairs) => {
            for (f, val) in pairs {
                let mut el = [0u8; 20];
                mix(&mut el, f);
                mix(&mut el, val);
                xor(d, &el);
            }
        }
        RdbValue::Stream(s) => {
            for (id, fields) in &s.entries {
                mix(d, format!("{}.{}", id.ms, id.seq).as_bytes());
                for (f, val) in fields {
                    mix(d, f);
                    mix(d, val);
                }
            }
        }
    }
    if e.expire_at() != NO_EXPIRE {
        xor(d, b"!!expire!!");
    }
}

fn hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// DEBUG DIGEST-VALUE key...: one digest per key (40 zeros for a missing key).
pub(super) fn digest_value(ctx: &mut Ctx<'_>, keys: &[&[u8]]) -> CmdResult {
    let db = ctx.cl.db;
    let now = crate::server::now_ms();
    ctx.out.array(keys.len());
    for key in keys {
        let slot = crate::slot::key_hash_slot(key);
        let mut d = [0u8; 20];
        {
            let g = ctx.srv.ks.lock_stripe(crate::db::stripe_of(slot));
            if let Some(e) = g.get(db, slot, key).filter(|e| live(e, now)) {
                value_digest(&mut d, e);
            }
        }
        ctx.out.simple(&hex(&d));
    }
    Ok(())
}

/// DEBUG DIGEST: the whole dataset's digest (40 zeros when empty). Each key's digest (its
/// name mixed with its value's) is xored in (order-free); each non-empty database's number
/// is mixed in before its keys.
pub(super) fn digest(ctx: &mut Ctx<'_>) -> CmdResult {
    let now = crate::server::now_ms();
    let mut total = [0u8; 20];
    for db in 0..ctx.srv.ks.databases() {
        let mut acc = [0u8; 20];
        let mut any = false;
        for i in 0..STRIPES {
            let g = ctx.srv.ks.lock_stripe(i);
            let Some(slots) = g.db(db) else { continue };
            for (_, m) in slots.maps() {
                for (k, e) in m.iter().filter(|(_, e)| live(e, now)) {
                    let mut d = [0u8; 20];
                    mix(&mut d, k);
                    value_digest(&mut d, e);
                    xor(&mut acc, &d);
                    any = true;
                }
            }
        }
        if any {
            mix(&mut total, &(db as u32).to_be_bytes());
            for (a, b) in total.iter_mut().zip(acc) {
                *a ^= b;
            }
        }
    }
    ctx.out.simple(&hex(&total));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::fmt_g17;

    #[test]
    fn g17_as_c() {
        let cases = [
            (1.0, "1"),
            (1.5, "1.5"),
            (-3.0, "-3"),
            (0.1, "0.10000000000000001"),
            (1e20, "1e+20"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (123.456, "123.456"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (2.0 / 7.0, "0.2857142857142857"),
        ];
        for (v, want) in cases {
            assert_eq!(fmt_g17(v), want, "{v}");
        }
    }
}
