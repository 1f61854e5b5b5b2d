//! RESP2/RESP3 reply writer over a connection's output buffer.
//!
//! Every reply is appended in place (no intermediate values), integers go through `itoa`,
//! and the caller flushes the whole buffer once per read batch.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Output buffer plus the protocol version the client negotiated with HELLO.
///
/// The replies are `front` followed by `buf`. `front` stays empty unless `shares` is set:
/// then a big stored value that is already refcounted ([`Out::bulk_shared`]) goes out from
/// its own buffer instead of being copied into `buf` (Valkey 9 writes big values from the
/// stored object too; Redis 7.0 copies them). Code that reads `buf` as the whole reply
/// stream either runs on an `Out` that never shares or calls [`Out::flatten`] first.
#[derive(Debug, Default)]
pub struct Out {
    pub buf: BytesMut,
    pub resp3: bool,
    /// Whether big shared values may be queued by reference: set by a client connection
    /// on a plain socket, and off while a script's `redis.call` reads its replies back.
    pub shares: bool,
    /// Reply bytes ahead of `buf`, in order: what `buf` held before a shared value, then
    /// the value.
    front: VecDeque<Bytes>,
    /// The bytes in `front`.
    front_len: usize,
}

/// The smallest shared value worth queueing by reference rather than copying (the
/// segment costs a few pushes and an extra iovec; a copy of this size costs ~1 us).
const SHARE_MIN: usize = 16 * 1024;

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
        Out::with_buf(BytesMut::new(), resp3)
    }

    /// A writer that appends to `buf` (and never shares).
    pub fn with_buf(buf: BytesMut, resp3: bool) -> Self {
        Out {
            buf,
            resp3,
            shares: false,
            front: VecDeque::new(),
            front_len: 0,
        }
    }

    /// All the reply bytes waiting, shared values included.
    pub fn len(&self) -> usize {
        self.front_len + self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.front_len == 0 && self.buf.is_empty()
    }

    /// Whether shared values are queued ahead of `buf`.
    pub fn has_front(&self) -> bool {
        self.front_len > 0
    }

    /// The replies written from offset `at` (a former [`Out::len`]) on, when they all lie
    /// in `buf`; `None` when `at` falls in the shared part (a reply that began with a
    /// shared value's header, so a bulk string).
    pub fn since(&self, at: usize) -> Option<&[u8]> {
        self.buf.get(at.checked_sub(self.front_len)?..)
    }

    /// Drops the replies written after offset `at` (a former [`Out::len`]): CLIENT REPLY
    /// OFF and SKIP, a read retried after a load.
    pub fn truncate(&mut self, at: usize) {
        if at < self.front_len {
            // Rare (a shared reply dropped): cut the flat copy instead.
            self.flatten();
        }
        self.buf.truncate(at - self.front_len);
    }

    /// Moves the shared part into `buf` (a copy), for code that writes or reads `buf` as
    /// the whole reply stream.
    pub fn flatten(&mut self) {
        if self.front_len == 0 {
            return;
        }
        let mut all = BytesMut::with_capacity(self.len());
        for seg in self.front.drain(..) {
            all.extend_from_slice(&seg);
        }
        all.extend_from_slice(&self.buf);
        self.front_len = 0;
        self.buf = all;
    }

    /// Drops everything waiting; `buf` keeps its allocation.
    pub fn clear(&mut self) {
        self.front.clear();
        self.front_len = 0;
        self.buf.clear();
    }

    /// Drops everything waiting and gives the allocations back (an idle connection holds
    /// no reply memory).
    pub fn reset(&mut self) {
        self.front = VecDeque::new();
        self.front_len = 0;
        self.buf = BytesMut::new();
    }

    /// Exchanges the waiting replies (not the protocol or sharing settings) with `other`'s.
    pub fn swap_replies(&mut self, other: &mut Out) {
        std::mem::swap(&mut self.buf, &mut other.buf);
        std::mem::swap(&mut self.front, &mut other.front);
        std::mem::swap(&mut self.front_len, &mut other.front_len);
    }

    /// The waiting replies as at most `dst.len()` slices, in order; returns how many.
    pub fn io_slices<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for seg in self.front.iter().map(|b| &b[..]).chain([&self.buf[..]]) {
            if n == dst.len() {
                break;
            }
            if !seg.is_empty() {
                dst[n] = IoSlice::new(seg);
                n += 1;
            }
        }
        n
    }

    /// Drops the first `n` waiting bytes (written to the socket); returns how many of them
    /// came out of `buf`, which keeps its allocation as `BytesMut::advance` does.
    pub fn consume(&mut self, mut n: usize) -> usize {
        while n > 0 {
            let Some(seg) = self.front.front_mut() else {
                break;
            };
            let take = n.min(seg.len());
            seg.advance(take);
            self.front_len -= take;
            n -= take;
            if seg.is_empty() {
                self.front.pop_front();
            }
        }
        let from_buf = n.min(self.buf.len());
        self.buf.advance(from_buf);
        from_buf
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

    /// A bulk string of a value held in a refcounted buffer: queued by reference when big
    /// and this writer shares, copied like [`Out::bulk`] otherwise.
    #[inline]
    pub fn bulk_shared(&mut self, s: &Bytes) {
        if !self.shares || s.len() < SHARE_MIN {
            self.bulk(s);
            return;
        }
        put_len(&mut self.buf, b'$', s.len() as i64);
        let head = self.buf.split().freeze();
        self.front_len += head.len() + s.len();
        self.front.push_back(head);
        self.front.push_back(s.clone());
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

    /// Integers and bulk strings of every digit count and around the big-copy limit come
    /// out as the plain formatting says, after whatever the buffer held (full or not).
    #[test]
    fn frames_match_their_formatting() {
        for n in [i64::MIN, -10, -1, 0, 7, 10, 99, 100, 123_456, i64::MAX] {
            for cap in [0, 5, 64] {
                let mut o = Out::new(false);
                o.buf = BytesMut::with_capacity(cap);
                o.buf.extend_from_slice(b"+x\r\n");
                o.int(n);
                assert_eq!(&o.buf[..], format!("+x\r\n:{n}\r\n").as_bytes());
            }
        }
        for len in [0usize, 1, 9, 10, 99, 100, 4095, 4096, 5000] {
            let v: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            for cap in [0, 7, len + 3] {
                let mut o = Out::new(false);
                o.buf = BytesMut::with_capacity(cap);
                o.buf.extend_from_slice(b"+x\r\n");
                o.bulk(&v);
                let mut want = format!("+x\r\n${len}\r\n").into_bytes();
                want.extend_from_slice(&v);
                want.extend_from_slice(b"\r\n");
                assert_eq!(&o.buf[..], &want[..], "len {len} cap {cap}");
            }
        }
    }

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

    /// The replies of a sharing writer, as one byte string.
    fn stream(o: &Out) -> Vec<u8> {
        let mut slices = [IoSlice::new(&[]); 64];
        let n = o.io_slices(&mut slices);
        slices[..n].iter().flat_map(|s| s.iter().copied()).collect()
    }

    proptest::proptest! {
        /// A writer that shares big values holds exactly the bytes of one that copies them,
        /// whatever the mix of replies; truncating at any reply boundary and consuming in
        /// any steps agree with the copying writer too.
        #[test]
        fn sharing_writes_the_bytes_copying_does(
            replies in proptest::collection::vec((0usize..3, 0usize..40_000), 1..12),
            cut in 0usize..12,
            steps in proptest::collection::vec(1usize..70_000, 1..20),
        ) {
            let mut shared = Out::new(false);
            shared.shares = true;
            let mut copied = Out::new(false);
            let mut marks = Vec::new();
            for (i, &(kind, len)) in replies.iter().enumerate() {
                marks.push((shared.len(), copied.len()));
                let v = Bytes::from((0..len).map(|j| (i * 31 + j) as u8).collect::<Vec<_>>());
                match kind {
                    0 => { shared.bulk_shared(&v); copied.bulk(&v); }
                    1 => { shared.int(len as i64); copied.int(len as i64); }
                    _ => { shared.raw(&v); copied.raw(&v); }
                }
            }
            proptest::prop_assert_eq!(shared.len(), copied.len());
            proptest::prop_assert_eq!(stream(&shared), &copied.buf[..]);
            // `since` finds a reply that lies in the buffer.
            let (at, at_copied) = marks[cut % marks.len()];
            if let Some(tail) = shared.since(at) {
                proptest::prop_assert_eq!(tail, &copied.buf[at_copied..]);
            }
            // Held and taken back (the end-of-tick flush), then truncated at a reply's
            // start.
            let mut held = Out::default();
            held.swap_replies(&mut shared);
            proptest::prop_assert!(shared.is_empty());
            shared.swap_replies(&mut held);
            shared.truncate(at);
            copied.truncate(at_copied);
            proptest::prop_assert_eq!(stream(&shared), &copied.buf[..]);
            shared.ok();
            copied.ok();
            // Consuming in steps, as partial writes do.
            let mut all = stream(&shared);
            for step in steps.iter().cycle() {
                if shared.is_empty() {
                    break;
                }
                let step = (*step).min(shared.len());
                let from_buf = shared.consume(step);
                proptest::prop_assert!(from_buf <= step);
                all.drain(..step);
                proptest::prop_assert_eq!(stream(&shared), &all[..]);
            }
            let mut f = Out::new(false);
            f.shares = true;
            f.bulk_shared(&Bytes::from(vec![7u8; SHARE_MIN]));
            f.ok();
            let before = stream(&f);
            f.flatten();
            proptest::prop_assert!(!f.has_front());
            proptest::prop_assert_eq!(&f.buf[..], &before[..]);
        }
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
