//! RESP2/RESP3 reply writer over a connection's output buffer.
//!
//! Every reply is appended in place (no intermediate values), integers go through `itoa`,
//! and the caller flushes the whole buffer once per read batch.

use bytes::{BufMut, BytesMut};

/// Output buffer plus the protocol version the client negotiated with HELLO.
#[derive(Debug, Default)]
pub struct Out {
    pub buf: BytesMut,
    pub resp3: bool,
}

#[inline]
fn put_len(buf: &mut BytesMut, prefix: u8, n: i64) {
    let mut b = itoa::Buffer::new();
    buf.put_u8(prefix);
    buf.extend_from_slice(b.format(n).as_bytes());
    buf.extend_from_slice(b"\r\n");
}

impl Out {
    pub fn new(resp3: bool) -> Self {
        Out {
            buf: BytesMut::with_capacity(16 * 1024),
            resp3,
        }
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    #[inline]
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// A status reply; `s` must not contain CR or LF.
    #[inline]
    pub fn simple(&mut self, s: &str) {
        self.buf.put_u8(b'+');
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An error reply. `msg` is the full message without the leading '-', e.g.
    /// "ERR syntax error"; CR/LF are replaced by spaces as Redis does.
    pub fn error(&mut self, msg: &str) {
        self.buf.put_u8(b'-');
        for &c in msg.as_bytes() {
            self.buf
                .put_u8(if c == b'\r' || c == b'\n' { b' ' } else { c });
        }
        self.buf.extend_from_slice(b"\r\n");
    }

    #[inline]
    pub fn int(&mut self, n: i64) {
        put_len(&mut self.buf, b':', n);
    }

    #[inline]
    pub fn bulk(&mut self, s: &[u8]) {
        put_len(&mut self.buf, b'$', s.len() as i64);
        self.buf.extend_from_slice(s);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// A bulk string holding the decimal form of `n` (e.g. GET of an int-encoded string).
    #[inline]
    pub fn bulk_int(&mut self, n: i64) {
        let mut b = itoa::Buffer::new();
        self.bulk(b.format(n).as_bytes());
    }

    /// Null bulk: `$-1` in RESP2, `_` in RESP3.
    #[inline]
    pub fn null(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"$-1\r\n");
        }
    }

    /// Null array: `*-1` in RESP2, `_` in RESP3.
    #[inline]
    pub fn null_array(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"*-1\r\n");
        }
    }

    #[inline]
    pub fn array(&mut self, n: usize) {
        put_len(&mut self.buf, b'*', n as i64);
    }

    /// A map of `n` pairs; RESP2 flattens it into an array of 2n elements.
    #[inline]
    pub fn map(&mut self, n: usize) {
        if self.resp3 {
            put_len(&mut self.buf, b'%', n as i64);
        } else {
            put_len(&mut self.buf, b'*', 2 * n as i64);
        }
    }

    #[inline]
    pub fn set(&mut self, n: usize) {
        put_len(
            &mut self.buf,
            if self.resp3 { b'~' } else { b'*' },
            n as i64,
        );
    }

    /// Out-of-band push (pub/sub messages); an array in RESP2.
    #[inline]
    pub fn push(&mut self, n: usize) {
        put_len(
            &mut self.buf,
            if self.resp3 { b'>' } else { b'*' },
            n as i64,
        );
    }

    /// A double: `,` in RESP3, a bulk string in RESP2 (Redis 7.0 uses `%.17g`).
    pub fn double(&mut self, d: f64) {
        let s = fmt_double(d);
        if self.resp3 {
            self.buf.put_u8(b',');
            self.buf.extend_from_slice(s.as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(s.as_bytes());
        }
    }

    /// A boolean: `#t`/`#f` in RESP3, `:1`/`:0` in RESP2.
    pub fn boolean(&mut self, b: bool) {
        if self.resp3 {
            self.buf
                .extend_from_slice(if b { b"#t\r\n" } else { b"#f\r\n" });
        } else {
            self.int(b as i64);
        }
    }

    /// Verbatim string (`=len\r\ntxt:...`), a plain bulk string in RESP2.
    pub fn verbatim(&mut self, s: &[u8], fmt: &str) {
        if self.resp3 {
            put_len(&mut self.buf, b'=', (s.len() + 4) as i64);
            self.buf.extend_from_slice(fmt.as_bytes());
            self.buf.put_u8(b':');
            self.buf.extend_from_slice(s);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(s);
        }
    }

    /// Big number (`(` in RESP3), a bulk string in RESP2.
    pub fn big_number(&mut self, digits: &str) {
        if self.resp3 {
            self.buf.put_u8(b'(');
            self.buf.extend_from_slice(digits.as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(digits.as_bytes());
        }
    }

    /// Array of bulk strings.
    pub fn bulks<I, T>(&mut self, items: I)
    where
        I: ExactSizeIterator<Item = T>,
        T: AsRef<[u8]>,
    {
        self.array(items.len());
        for it in items {
            self.bulk(it.as_ref());
        }
    }

    /// Appends already-encoded RESP bytes.
    pub fn raw(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
}

/// Formats like C's `%.17g`, with `inf`/`-inf`/`nan` as Redis prints them.
pub fn fmt_double(d: f64) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    fmt_g(d, 17)
}

/// C `%.<prec>g` formatting.
pub fn fmt_g(d: f64, prec: usize) -> String {
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let prec = prec.max(1);
    let sci = format!("{:.*e}", prec - 1, d);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= prec as i32 {
        let mant = trim_zeros(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", mant, sign, exp.abs())
    } else {
        let decimals = (prec as i32 - 1 - exp).max(0) as usize;
        let s = format!("{:.*}", decimals, d);
        trim_zeros(&s).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g17() {
        assert_eq!(fmt_double(1.1), "1.1000000000000001");
        assert_eq!(fmt_double(1.5), "1.5");
        assert_eq!(fmt_double(3.0), "3");
        assert_eq!(fmt_double(1e20), "1e+20");
        assert_eq!(fmt_double(0.0001), "0.0001");
        assert_eq!(fmt_double(0.00001), "1.0000000000000001e-05");
        assert_eq!(fmt_double(f64::INFINITY), "inf");
        assert_eq!(fmt_double(-2.5), "-2.5");
    }

    #[test]
    fn resp2_vs_resp3() {
        let mut o = Out::new(false);
        o.null();
        o.map(1);
        o.boolean(true);
        assert_eq!(&o.buf[..], b"$-1\r\n*2\r\n:1\r\n");
        let mut o = Out::new(true);
        o.null();
        o.map(1);
        o.boolean(true);
        assert_eq!(&o.buf[..], b"_\r\n%1\r\n#t\r\n");
    }
}
