//! A deliberately simple, independent RDB byte builder for tests: it emits the legacy
//! encodings (ziplist, zipmap, quicklist v1, text doubles...) that our writer never produces,
//! so the reader can be checked against them (and redis-server can confirm the bytes are real).

/// RDB length encoding.
pub fn len(out: &mut Vec<u8>, n: usize) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16384 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// A raw (unencoded) RDB string.
pub fn string(out: &mut Vec<u8>, s: &[u8]) {
    len(out, s.len());
    out.extend_from_slice(s);
}

fn as_int(s: &[u8]) -> Option<i64> {
    let t = std::str::from_utf8(s).ok()?;
    let v: i64 = t.parse().ok()?;
    (v.to_string() == t).then_some(v)
}

/// A ziplist holding `entries` (canonical integers get ziplist integer encodings).
pub fn ziplist(entries: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut prevlen = 0usize;
    let mut tail = 10usize;
    for e in entries {
        let start = body.len();
        if prevlen < 254 {
            body.push(prevlen as u8);
        } else {
            body.push(0xfe);
            body.extend_from_slice(&(prevlen as u32).to_le_bytes());
        }
        match as_int(e) {
            Some(v @ 0..=12) => body.push(0xf1 + v as u8),
            Some(v) if i8::try_from(v).is_ok() => {
                body.push(0xfe);
                body.push(v as i8 as u8);
            }
            Some(v) if i16::try_from(v).is_ok() => {
                body.push(0xc0);
                body.extend_from_slice(&(v as i16).to_le_bytes());
            }
            Some(v) if (-(1i64 << 23)..(1i64 << 23)).contains(&v) => {
                body.push(0xf0);
                body.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            Some(v) if i32::try_from(v).is_ok() => {
                body.push(0xd0);
                body.extend_from_slice(&(v as i32).to_le_bytes());
            }
            Some(v) => {
                body.push(0xe0);
                body.extend_from_slice(&v.to_le_bytes());
            }
            None => {
                let n = e.len();
                if n < 64 {
                    body.push(n as u8);
                } else if n < 16384 {
                    body.push(0x40 | (n >> 8) as u8);
                    body.push(n as u8);
                } else {
                    body.push(0x80);
                    body.extend_from_slice(&(n as u32).to_be_bytes());
                }
                body.extend_from_slice(e);
            }
        }
        tail = 10 + start;
        prevlen = body.len() - start;
    }
    let mut zl = Vec::new();
    zl.extend_from_slice(&((10 + body.len() + 1) as u32).to_le_bytes());
    zl.extend_from_slice(&(tail as u32).to_le_bytes());
    zl.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    zl.extend_from_slice(&body);
    zl.push(0xff);
    zl
}

/// A zipmap of field/value pairs.
pub fn zipmap(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
    fn zlen(out: &mut Vec<u8>, n: usize) {
        if n < 254 {
            out.push(n as u8);
        } else {
            out.push(254);
            out.extend_from_slice(&(n as u32).to_le_bytes());
        }
    }
    let mut zm = vec![pairs.len().min(253) as u8];
    for (k, v) in pairs {
        zlen(&mut zm, k.len());
        zm.extend_from_slice(k);
        zlen(&mut zm, v.len());
        zm.push(0);
        zm.extend_from_slice(v);
    }
    zm.push(0xff);
    zm
}

/// An intset with 16-bit members.
pub fn intset16(vals: &[i16]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&2u32.to_le_bytes());
    b.extend_from_slice(&(vals.len() as u32).to_le_bytes());
    for v in vals {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// A listpack with string entries only (6-bit lengths) — enough for the v11 set test.
pub fn listpack_short_strings(entries: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    for e in entries {
        assert!(e.len() < 63);
        body.push(0x80 | e.len() as u8);
        body.extend_from_slice(e);
        body.push(e.len() as u8 + 1);
    }
    let mut lp = Vec::new();
    lp.extend_from_slice(&((6 + body.len() + 1) as u32).to_le_bytes());
    lp.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    lp.extend_from_slice(&body);
    lp.push(0xff);
    lp
}

/// Appends the CRC64 trailer (after the EOF opcode already in `file`).
pub fn seal(mut file: Vec<u8>) -> Vec<u8> {
    let crc = tessera_rdb::crc64(&file);
    file.extend_from_slice(&crc.to_le_bytes());
    file
}
