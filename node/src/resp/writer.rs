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

/// Copies shorter than this go forward whatever their alignment (the stall costs little).
const BIG_COPY: usize = 4096;
/// The back-to-front copy's step; also the distance under which a forward copy stalls.
const CHUNK: usize = 64;

/// Whether a forward copy from `src` to `dst` would have its stores 1-63 bytes ahead of
/// its loads modulo 4 KiB (see [`put_bytes`]).
#[inline]
fn aliased_4k(dst: *const u8, src: *const u8) -> bool {
    let ahead = (dst as usize).wrapping_sub(src as usize) & 4095;
    (1..CHUNK).contains(&ahead)
}

/// Appends `s`, copying a big one back to front when its destination sits just past the
/// source modulo 4 KiB. The CPU matches a load against earlier stores by the low 12 address
/// bits only, so a forward copy whose stores land 1-63 bytes ahead of its loads (mod 4096)
/// stalls on nearly every load ("4K aliasing"). That is the common case for a big value:
/// mimalloc page-aligns both the value and the output buffer, and the reply header
/// (`$102400\r\n`) puts the copy 9 bytes ahead. Measured on this machine's EPYC, 100 KB:
/// 37 us forward against 4-8 us backward or at other offsets; GET of 100 KB values took
/// twice Redis's CPU because of it.
#[inline]
pub fn put_bytes(buf: &mut BytesMut, s: &[u8]) {
    if s.len() < BIG_COPY {
        buf.extend_from_slice(s);
        return;
    }
    buf.reserve(s.len());
    let dst = buf.spare_capacity_mut().as_mut_ptr() as *mut u8;
    if !aliased_4k(dst, s.as_ptr()) {
        buf.extend_from_slice(s);
        return;
    }
    let mut end = s.len();
    while end > 0 {
        let from = end.saturating_sub(CHUNK);
        // SAFETY: `reserve` made room for s.len() bytes at `dst`; [from, end) lies inside
        // both `s` and that room, and a live &[u8] cannot overlap the buffer's spare room.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr().add(from), dst.add(from), end - from) };
        end = from;
    }
    // SAFETY: the s.len() bytes after the initialized part were all written above.
    unsafe { buf.advance_mut(s.len()) };
}

impl Out {
    /// Allocates nothing until the first reply: an idle connection of thousands holds no
    /// reply memory (5000 connections each held 16 KiB here, resident), and the short-lived
    /// writers of scripts and stream replies no longer pay for 16 KiB they rarely fill.
    pub fn new(resp3: bool) -> Self {
        Out {
            buf: BytesMut::new(),
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
        put_bytes(&mut self.buf, s);
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
            put_bytes(&mut self.buf, s);
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
        put_bytes(&mut self.buf, b);
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

    /// Big copies come out byte-exact whatever the distance between source and
    /// destination, the back-to-front path included (every offset mod 4096 is tried).
    #[test]
    fn put_bytes_copies_exactly_at_every_alignment() {
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut backward = 0;
        for len in [0usize, 1, 4095, 4096, 5000, 12_345] {
            for o in (0..4096).step_by(if len >= 4096 { 1 } else { 257 }) {
                let s = &src[o..o + len];
                let mut buf = BytesMut::with_capacity(16);
                buf.extend_from_slice(b"$9\r\n");
                buf.reserve(len);
                let dst = buf.spare_capacity_mut().as_ptr() as *const u8;
                if len >= BIG_COPY && aliased_4k(dst, s.as_ptr()) {
                    backward += 1;
                }
                put_bytes(&mut buf, s);
                assert_eq!(&buf[..4], b"$9\r\n");
                assert_eq!(&buf[4..], s, "len {len} offset {o}");
            }
        }
        assert!(backward > 0, "no copy took the back-to-front path");
    }

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
