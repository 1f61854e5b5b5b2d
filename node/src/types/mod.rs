//! Collection values (hash, list, set, sorted set) and the HyperLogLog string format.
//!
//! Pure data structures, no I/O: the command layer (`crate::cmd::{hash,list,set,zset,hll}`)
//! turns requests into calls on these.

pub mod geo;
pub mod hash;
pub mod hll;
pub mod indexed;
pub mod intset;
pub mod ldouble;
pub mod list;
pub mod pack;
pub mod pairmap;
pub mod set;
pub mod skiplist;
pub mod stream;
pub mod thin;
pub mod zset;

pub use hash::HashValue;
pub use list::ListValue;
pub use set::SetValue;
pub use stream::StreamValue;
pub use zset::ZSetValue;

/// Most members a small non-integer set keeps packed. Redis 7.0 stores such sets as a
/// hashtable (the set listpack came in 7.2); we keep the compact form for memory but report
/// "hashtable" in OBJECT ENCODING, and it is not configurable, as in 7.0.
pub const SET_PACK_ENTRIES: usize = 128;
/// Longest member a packed small set holds (see [`SET_PACK_ENTRIES`]).
pub const SET_PACK_VALUE: usize = 64;

/// Encoding thresholds, named after the redis.conf directives that set them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// hash-max-listpack-entries
    pub hash_max_listpack_entries: usize,
    /// hash-max-listpack-value
    pub hash_max_listpack_value: usize,
    /// set-max-intset-entries
    pub set_max_intset_entries: usize,
    /// Internal threshold of the packed small-set form ([`SET_PACK_ENTRIES`]); not a
    /// directive: Redis 7.0 has no set-max-listpack-entries.
    pub set_max_listpack_entries: usize,
    /// Internal, see [`SET_PACK_VALUE`].
    pub set_max_listpack_value: usize,
    /// zset-max-listpack-entries
    pub zset_max_listpack_entries: usize,
    /// zset-max-listpack-value
    pub zset_max_listpack_value: usize,
    /// list-max-listpack-size (negative: byte limit class -1..-5, positive: entry count)
    pub list_max_listpack_size: i64,
    /// hll-sparse-max-bytes
    pub hll_sparse_max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            set_max_listpack_entries: SET_PACK_ENTRIES,
            set_max_listpack_value: SET_PACK_VALUE,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            list_max_listpack_size: -2,
            hll_sparse_max_bytes: 3000,
        }
    }
}

/// Parses an integer the way Redis's `string2ll` does: optional '-', no '+', no leading
/// zeros, no spaces, fits in i64. Only such strings go into an intset.
pub fn parse_i64_strict(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits[0] == b'0' || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        let d = (d - b'0') as i64;
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d)?
        } else {
            v.checked_add(d)?
        };
    }
    Some(v)
}

/// Parses a float like Redis's `string2d`/strtod: rejects NaN, empty and space-padded input.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s).ok()?;
    if t.is_empty() || t.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let v: f64 = t.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// Formats a double like C's `printf("%.17g")`, which Redis 7.0 uses for scores
/// (`inf` / `-inf` for infinities): the node's one `%.17g`, from the RESP writer.
pub use crate::resp::writer::fmt_double as format_double;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_stay_small() {
        // Held unboxed in `db::Value` (24 bytes): a small one is its packed block alone.
        assert_eq!(std::mem::size_of::<HashValue>(), 16);
        assert_eq!(std::mem::size_of::<SetValue>(), 16);
        assert_eq!(std::mem::size_of::<ZSetValue>(), 16);
        assert_eq!(std::mem::size_of::<pack::Pack>(), 8);
        assert_eq!(std::mem::size_of::<intset::IntSet>(), 8);
    }

    #[test]
    fn strict_integers() {
        for ok in [
            "0",
            "1",
            "-1",
            "9223372036854775807",
            "-9223372036854775808",
        ] {
            assert_eq!(parse_i64_strict(ok.as_bytes()), ok.parse().ok(), "{ok}");
        }
        for bad in [
            "",
            "-",
            "+1",
            "01",
            "-0",
            " 1",
            "1 ",
            "9223372036854775808",
            "1a",
        ] {
            assert_eq!(parse_i64_strict(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn doubles_like_printf_17g() {
        let cases = [
            (1.0, "1"),
            (1.5, "1.5"),
            (1.1, "1.1000000000000001"),
            (0.1, "0.10000000000000001"),
            (-2.5, "-2.5"),
            (1e17, "1e+17"),
            (1e16, "10000000000000000"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (3.0e-300, "3.0000000000000002e-300"),
        ];
        for (d, want) in cases {
            assert_eq!(format_double(d), want, "{d:e}");
        }
    }

    #[test]
    fn floats_parse_like_strtod() {
        assert_eq!(parse_f64(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"1.5e3"), Some(1500.0));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b""), None);
        assert_eq!(parse_f64(b"abc"), None);
    }
}
