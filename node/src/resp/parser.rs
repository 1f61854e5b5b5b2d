//! Resumable RESP request parser (multibulk arrays of bulk strings, and inline commands).
//!
//! The parser never consumes bytes of an incomplete request: it records how far it got in
//! [`Parser`] and resumes there when more input arrives, so a request split across many reads
//! costs O(bytes), not O(reads × bytes). Declared lengths are validated but never used to
//! allocate up front, so `*2147483647` or `$999999999999` cost nothing until data arrives.
//!
//! A complete request is reported as its length in bytes; its arguments are then borrowed
//! slices of the caller's buffer ([`Parser::args`]), not refcounted `Bytes` split off it: a
//! split costs two atomic operations per argument (increment, then the drop's decrement),
//! which was 5–13% of a pipelined command's CPU. The caller advances its buffer past the
//! request once it is done with the arguments.

use memchr::memchr;

/// Longest inline request or header line we accept without a newline (Redis: 64 KiB).
pub const INLINE_MAX: usize = 64 * 1024;
/// Largest multibulk element count (Redis: INT_MAX, checked as `> 1024*1024*1024*2-1`).
const MAX_MULTIBULK: i64 = i32::MAX as i64;
/// Unauthenticated clients may only send tiny requests (Redis 7.0 behaviour).
const UNAUTH_MULTIBULK: i64 = 10;
const UNAUTH_BULK: i64 = 16384;

/// A protocol error; the connection replies `-ERR Protocol error: <msg>` and closes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    #[error("invalid multibulk length")]
    MultibulkLen,
    #[error("invalid bulk length")]
    BulkLen,
    #[error("expected '$', got '{0}'")]
    ExpectedDollar(char),
    #[error("unbalanced quotes in request")]
    UnbalancedQuotes,
    #[error("too big inline request")]
    InlineTooBig,
    #[error("too big mbulk count string")]
    MbulkCountTooBig,
    #[error("too big bulk count string")]
    BulkCountTooBig,
    #[error("unauthenticated multibulk length")]
    UnauthMultibulk,
    #[error("unauthenticated bulk length")]
    UnauthBulk,
}

/// Parser state carried between reads for one connection.
#[derive(Debug, Default)]
pub struct Parser {
    /// Declared element count of the multibulk being parsed, once its header is read.
    expected: Option<usize>,
    /// Offset in the buffer where parsing resumes.
    pos: usize,
    /// (start, len) of each complete argument seen so far, relative to the buffer start.
    spans: Vec<(usize, usize)>,
    /// Bulk length of the argument whose header was read but whose payload is incomplete.
    pending_bulk: Option<usize>,
    /// The last complete request was an inline one: its words (owned: quotes and escapes
    /// rewrite them) are in `inline`, not in `spans`.
    is_inline: bool,
    inline: Vec<Vec<u8>>,
    /// A complete request was reported and `spans`/`inline` describe it until the next parse.
    complete: bool,
}

/// Limits that depend on the connection (authentication, proto-max-bulk-len).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_bulk: i64,
    pub authenticated: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk: 512 * 1024 * 1024,
            authenticated: true,
        }
    }
}

fn parse_i64(line: &[u8]) -> Option<i64> {
    if line.is_empty() || line.len() > 20 {
        return None;
    }
    let (neg, digits) = match line[0] {
        b'-' => (true, &line[1..]),
        _ => (false, line),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as i64)?;
    }
    Some(if neg { -v } else { v })
}

/// A header line's number and the offset of its `\r`, for the common line: a type byte,
/// then 1 to 18 digits (no sign, no overflow possible), then `\r`. Found in one pass,
/// where the general path calls memchr (whose setup costs more than these few bytes) and
/// then parses. None for anything else, incomplete lines included: the general path
/// decides those, so errors and waiting for more input are exactly as before.
#[inline]
fn short_header(line: &[u8]) -> Option<(usize, i64)> {
    // An index loop: the iterator adaptors (enumerate, take, skip) cost as much as memchr.
    let end = line.len().min(20);
    let mut v: i64 = 0;
    let mut i = 1;
    while i < end {
        let c = line[i];
        if c.is_ascii_digit() && i <= 18 {
            v = v * 10 + i64::from(c - b'0');
            i += 1;
            continue;
        }
        return (c == b'\r' && i > 1).then_some((i, v));
    }
    None
}

/// The `\r` offset and number of the header line at the front of `line`, whose type byte
/// must be `kind` (`*`, which the caller has already seen, or `$`), or None until the line
/// and its `\n` are in. The common line takes [`short_header`]; any other the general path,
/// whose errors come in Redis's order: `too_big` for a line past INLINE_MAX, ExpectedDollar
/// for another type byte, `bad` for a number that does not parse. Inlined: a call per
/// header line cost a pipelined GET 3% of its instructions.
#[inline(always)]
fn header_line(
    line: &[u8],
    kind: u8,
    too_big: ProtoError,
    bad: ProtoError,
) -> Result<Option<(usize, i64)>, ProtoError> {
    let first = line.first().copied();
    if first == Some(kind) {
        if let Some((nl, n)) = short_header(line) {
            return Ok((line.len() >= nl + 2).then_some((nl, n)));
        }
    }
    let Some(nl) = memchr(b'\r', line) else {
        return if line.len() > INLINE_MAX {
            Err(too_big)
        } else {
            Ok(None)
        };
    };
    if nl > INLINE_MAX {
        return Err(too_big);
    }
    if line.len() < nl + 2 {
        return Ok(None);
    }
    match first {
        Some(c) if c == kind => {}
        c => return Err(ProtoError::ExpectedDollar(c.unwrap_or(b' ') as char)),
    }
    Ok(Some((nl, parse_i64(&line[1..nl]).ok_or(bad)?)))
}

impl Parser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets any partial or reported request, keeping the allocations: parsing starts
    /// afresh at the front of the next buffer.
    pub fn reset(&mut self) {
        self.expected = None;
        self.pos = 0;
        self.spans.clear();
        // A look-ahead parser reset after a huge partial request keeps no huge table.
        if self.spans.capacity() > 4096 {
            self.spans.shrink_to(64);
        }
        self.pending_bulk = None;
        self.is_inline = false;
        self.inline.clear();
        self.complete = false;
    }

    /// Bytes the parser holds for the request in progress (its argument table, inline
    /// words): counted with the query buffer against client-query-buffer-limit, since a
    /// multibulk of many empty arguments costs more here than in the buffer.
    pub fn mem(&self) -> usize {
        self.spans.capacity() * std::mem::size_of::<(usize, usize)>()
            + self.inline.iter().map(|w| w.capacity()).sum::<usize>()
    }

    /// Bytes of the buffered partial request already parsed (its complete arguments and
    /// the header of the bulk in progress): Redis has moved those out of its query buffer.
    pub fn parsed_len(&self) -> usize {
        self.pos
    }

    /// The length of the bulk whose header was read and whose data is still arriving.
    pub fn pending_bulk(&self) -> Option<usize> {
        self.pending_bulk
    }

    /// True when no partial request is buffered.
    pub fn is_idle(&self) -> bool {
        self.expected.is_none() && self.pos == 0
    }

    /// Parses one complete request at the front of `buf`, which it never modifies.
    /// Returns Ok(Some(n)) when the first `n` bytes of `buf` are a complete request (its
    /// arguments are then available from [`Parser::args`]; the caller must drop those `n`
    /// bytes before the next call), Ok(None) when more input is needed (call again with the
    /// same bytes plus more), or a protocol error.
    /// An empty request (`*0`, an empty inline line) has no arguments (callers skip it).
    pub fn parse(&mut self, buf: &[u8], lim: Limits) -> Result<Option<usize>, ProtoError> {
        if self.complete {
            self.complete = false;
            self.is_inline = false;
            self.inline.clear();
            self.spans.clear();
            if self.spans.capacity() > 4096 {
                self.spans.shrink_to(64);
            }
        }
        if self.expected.is_none() {
            if buf.is_empty() {
                return Ok(None);
            }
            if buf[0] != b'*' {
                return self.parse_inline(buf);
            }
            // Multibulk header.
            let Some((nl, n)) = header_line(
                buf,
                b'*',
                ProtoError::MbulkCountTooBig,
                ProtoError::MultibulkLen,
            )?
            else {
                return Ok(None);
            };
            if n > MAX_MULTIBULK {
                return Err(ProtoError::MultibulkLen);
            }
            if !lim.authenticated && n > UNAUTH_MULTIBULK {
                return Err(ProtoError::UnauthMultibulk);
            }
            if n <= 0 {
                // `*0` / `*-1`: an empty request, skipped like Redis does.
                self.complete = true;
                return Ok(Some(nl + 2));
            }
            self.expected = Some(n as usize);
            self.pos = nl + 2;
            self.spans.clear();
            self.spans.reserve((n as usize).min(1024));
        }
        let expected = self.expected.unwrap_or(0);
        while self.spans.len() < expected {
            let blen = match self.pending_bulk {
                Some(l) => l,
                None => {
                    if self.pos >= buf.len() {
                        return Ok(None);
                    }
                    let rest = &buf[self.pos..];
                    let Some((nl, l)) =
                        header_line(rest, b'$', ProtoError::BulkCountTooBig, ProtoError::BulkLen)?
                    else {
                        return Ok(None);
                    };
                    if l < 0 || l > lim.max_bulk {
                        return Err(ProtoError::BulkLen);
                    }
                    if !lim.authenticated && l > UNAUTH_BULK {
                        return Err(ProtoError::UnauthBulk);
                    }
                    self.pos += nl + 2;
                    self.pending_bulk = Some(l as usize);
                    l as usize
                }
            };
            // Payload plus CRLF must be fully buffered.
            if buf.len() - self.pos < blen + 2 {
                return Ok(None);
            }
            self.spans.push((self.pos, blen));
            self.pos += blen + 2;
            self.pending_bulk = None;
        }
        let n = self.pos;
        self.expected = None;
        self.pos = 0;
        self.complete = true;
        Ok(Some(n))
    }

    fn parse_inline(&mut self, buf: &[u8]) -> Result<Option<usize>, ProtoError> {
        let Some(nl) = memchr(b'\n', buf) else {
            if buf.len() > INLINE_MAX {
                return Err(ProtoError::InlineTooBig);
            }
            return Ok(None);
        };
        if nl > INLINE_MAX {
            return Err(ProtoError::InlineTooBig);
        }
        let mut end = nl;
        if end > 0 && buf[end - 1] == b'\r' {
            end -= 1;
        }
        self.inline = split_args(&buf[..end]).ok_or(ProtoError::UnbalancedQuotes)?;
        self.is_inline = true;
        self.complete = true;
        Ok(Some(nl + 1))
    }

    /// Fills `view` (cleared first) with the arguments of the request the last
    /// [`Parser::parse`] reported complete; `buf` must be the buffer given to that call,
    /// not yet advanced. Empty when no complete request is pending.
    pub fn args<'a>(&'a self, buf: &'a [u8], view: &mut Vec<&'a [u8]>) {
        view.clear();
        if !self.complete {
            return;
        }
        if self.is_inline {
            view.extend(self.inline.iter().map(|w| &w[..]));
        } else {
            self.buf_args(buf, view);
        }
    }

    /// [`Parser::args`] for a multibulk request, borrowing only `buf` (not the parser):
    /// false, with `view` empty, for an inline request, whose words the parser owns.
    pub fn buf_args<'b>(&self, buf: &'b [u8], view: &mut Vec<&'b [u8]>) -> bool {
        view.clear();
        if !self.complete || self.is_inline {
            return false;
        }
        // Spans were checked against the buffer while parsing; `get` keeps a caller's
        // mistake (another buffer) from panicking.
        view.extend(
            self.spans
                .iter()
                .map(|&(s, l)| buf.get(s..s + l).unwrap_or_default()),
        );
        true
    }
}

/// An empty vector of argument views with another lifetime, keeping the allocation: lets a
/// connection reuse one `Vec<&[u8]>` across requests although each request borrows its
/// read buffer anew. (Collecting an emptied `IntoIter` into a same-layout `Vec` reuses the
/// allocation in place; in the worst case it would just allocate.)
// `filter_map` to `None` is the point: it changes the element lifetime, which `filter` can't.
#[allow(clippy::unnecessary_filter_map)]
pub fn recycle_view<'b>(mut v: Vec<&[u8]>) -> Vec<&'b [u8]> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

fn hex_val(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Splits a line like Redis's `sdssplitargs`: whitespace-separated words, "double quotes"
/// with \n \r \t \b \a \\ \" \xHH escapes, 'single quotes' with \' only. None when quotes
/// are unbalanced or a closing quote is not followed by a space.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut cur = Vec::new();
        let mut inq = false;
        let mut insq = false;
        loop {
            if inq {
                if i >= n {
                    return None;
                }
                if line[i] == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && hex_val(line[i + 2]).is_some()
                    && hex_val(line[i + 3]).is_some()
                {
                    let h = hex_val(line[i + 2]).unwrap_or(0);
                    let l = hex_val(line[i + 3]).unwrap_or(0);
                    cur.push(h * 16 + l);
                    i += 3;
                } else if line[i] == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        c => c,
                    });
                } else if line[i] == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(line[i]);
                }
            } else if insq {
                if i >= n {
                    return None;
                }
                if line[i] == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if line[i] == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(line[i]);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        i += 1;
                        break;
                    }
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        out.push(cur);
    }
}

/// C's `atoi` as glibc runs it (`(int)strtol(s, NULL, 10)`): leading blanks, a sign, then
/// digits up to the first other byte (a NUL included); 0 when there are none. Out of range,
/// strtol saturates to a `long` and the cast to `int` keeps its low 32 bits. Redis parses a
/// few counts this way (a command's numkeys in COMMAND GETKEYS, the Lua debugger's
/// arguments and its protocol lengths), and odd input must read as it does there.
pub fn c_atoi(b: &[u8]) -> i64 {
    let mut i = b
        .iter()
        .take_while(|c| matches!(c, b' ' | b'\t'..=b'\r'))
        .count();
    let neg = match b.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    // i128 holds every saturated magnitude, and i64::MIN's too.
    let mut v: i128 = 0;
    for &c in b[i.min(b.len())..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
    {
        v = (v * 10 + i128::from(c - b'0')).min(i128::from(i64::MAX) + 1);
    }
    let v = if neg { -v } else { v };
    let long = v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    i64::from(long as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    use bytes::{Buf, BytesMut};

    /// Parses one request of `buf` and drops its bytes, as the connection loop does.
    fn next(p: &mut Parser, buf: &mut BytesMut) -> Result<Option<Vec<Vec<u8>>>, ProtoError> {
        let Some(n) = p.parse(buf, Limits::default())? else {
            return Ok(None);
        };
        let mut view = Vec::new();
        p.args(buf, &mut view);
        let got = view.iter().map(|a| a.to_vec()).collect();
        buf.advance(n);
        Ok(Some(got))
    }

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtoError> {
        let mut p = Parser::new();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(args) = next(&mut p, &mut buf)? {
            out.push(args);
        }
        Ok(out)
    }

    #[test]
    fn multibulk_and_inline() {
        let r = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\nset a \"b c\"\n").unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0], vec![b"GET".to_vec(), b"k".to_vec()]);
        assert_eq!(r[1], vec![b"PING".to_vec()]);
        assert_eq!(r[2], vec![b"set".to_vec(), b"a".to_vec(), b"b c".to_vec()]);
    }

    #[test]
    fn byte_at_a_time() {
        let input = b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$0\r\n\r\n";
        let mut p = Parser::new();
        let mut buf = BytesMut::new();
        let mut got = None;
        for &b in input.iter() {
            buf.extend_from_slice(&[b]);
            if let Some(args) = next(&mut p, &mut buf).unwrap() {
                got = Some(args);
            }
        }
        let got = got.unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(&got[1][..], b"hello");
        assert!(buf.is_empty());
    }

    #[test]
    fn errors() {
        assert_eq!(parse_all(b"*abc\r\n"), Err(ProtoError::MultibulkLen));
        assert_eq!(parse_all(b"*3000000000\r\n"), Err(ProtoError::MultibulkLen));
        assert_eq!(
            parse_all(b"*1\r\n+x\r\n"),
            Err(ProtoError::ExpectedDollar('+'))
        );
        // A '*' where a bulk is due is no header either (the one-pass path takes either).
        assert_eq!(
            parse_all(b"*1\r\n*1\r\n"),
            Err(ProtoError::ExpectedDollar('*'))
        );
        // Redis's order: the line is complete before its type byte is judged.
        assert_eq!(parse_all(b"*1\r\n+x"), Ok(vec![]));
        assert_eq!(parse_all(b"*1\r\n$-5\r\n"), Err(ProtoError::BulkLen));
        assert_eq!(
            parse_all(b"*1\r\n$999999999999\r\n"),
            Err(ProtoError::BulkLen)
        );
        assert_eq!(parse_all(b"set \"a\n"), Err(ProtoError::UnbalancedQuotes));
        let big = vec![b'a'; INLINE_MAX + 10];
        assert_eq!(parse_all(&big), Err(ProtoError::InlineTooBig));
    }

    /// The one-pass header path answers only where the general one (memchr, then
    /// parse_i64) would give the same line end and number.
    fn general_header(line: &[u8]) -> Option<(usize, i64)> {
        let nl = memchr(b'\r', line)?;
        Some((nl, parse_i64(line.get(1..nl)?)?))
    }

    #[test]
    fn short_header_edges() {
        assert_eq!(short_header(b"*2\r\n"), Some((2, 2)));
        assert_eq!(short_header(b"$16\r"), Some((3, 16)));
        assert_eq!(
            short_header(b"$999999999999999999\r"),
            Some((19, 999_999_999_999_999_999))
        );
        // Left to the general path: 19 digits (may overflow), no digits, a sign, no '\r' yet.
        assert_eq!(short_header(b"$9999999999999999999\r"), None);
        assert_eq!(short_header(b"$\r\n"), None);
        assert_eq!(short_header(b"$-1\r\n"), None);
        assert_eq!(short_header(b"$12"), None);
        assert_eq!(short_header(b"$1x\r"), None);
    }

    proptest::proptest! {
        #[test]
        fn short_header_agrees_with_the_general_path(
            kind in proptest::sample::select(b"*$".to_vec()),
            rest in proptest::collection::vec(
                proptest::sample::select(b"0123456789\r\n-+ x*$".to_vec()), 0..26)
        ) {
            // The parser looks at a line only once its type byte is known to be '*' or '$'.
            let mut line = vec![kind];
            line.extend_from_slice(&rest);
            if let Some(h) = short_header(&line) {
                proptest::prop_assert_eq!(Some(h), general_header(&line));
            }
        }

        /// Whole requests split at any point parse to the same arguments (both header
        /// paths are taken: a split inside a header line sends it down the general one).
        #[test]
        fn split_requests_parse_the_same(
            args in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..30), 1..5),
            cut in 0usize..200,
        ) {
            let mut req = format!("*{}\r\n", args.len()).into_bytes();
            for a in &args {
                req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                req.extend_from_slice(a);
                req.extend_from_slice(b"\r\n");
            }
            let cut = cut.min(req.len());
            let mut p = Parser::new();
            let mut buf = BytesMut::from(&req[..cut]);
            let first = next(&mut p, &mut buf).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            let got = match first {
                Some(got) => got,
                None => {
                    buf.extend_from_slice(&req[cut..]);
                    next(&mut p, &mut buf)
                        .map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?
                        .ok_or_else(|| proptest::test_runner::TestCaseError::fail("incomplete"))?
                }
            };
            proptest::prop_assert_eq!(got, args);
            proptest::prop_assert!(buf.is_empty());
        }
    }

    #[test]
    fn recycled_view_keeps_its_allocation() {
        let buf = b"abc".to_vec();
        let mut v: Vec<&[u8]> = Vec::with_capacity(32);
        v.push(&buf[..]);
        let w: Vec<&'static [u8]> = recycle_view(v);
        assert!(w.is_empty());
        assert!(w.capacity() >= 32, "capacity {}", w.capacity());
    }

    #[test]
    fn args_are_views_of_the_buffer() {
        let mut p = Parser::new();
        let buf = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n";
        let n = p.parse(buf, Limits::default()).unwrap().unwrap();
        assert_eq!(n, 20);
        let mut view = Vec::new();
        p.args(buf, &mut view);
        assert_eq!(view, vec![&b"GET"[..], &b"k"[..]]);
        assert_eq!(view[0].as_ptr(), buf[8..].as_ptr(), "borrowed, not copied");
        // An incomplete request leaves nothing to read.
        assert_eq!(p.parse(&buf[n..n + 5], Limits::default()), Ok(None));
        let mut view = Vec::new();
        p.args(&buf[n..], &mut view);
        assert!(view.is_empty());
        assert_eq!(p.parse(&buf[n..], Limits::default()), Ok(Some(14)));
        let mut view = Vec::new();
        p.args(&buf[n..], &mut view);
        assert_eq!(view, vec![&b"PING"[..]]);
    }

    #[test]
    fn partial_request_memory_is_reported() {
        let mut p = Parser::new();
        let mut buf = b"*2147483647\r\n".to_vec();
        for _ in 0..10_000 {
            buf.extend_from_slice(b"$0\r\n\r\n");
        }
        assert_eq!(p.parse(&buf, Limits::default()), Ok(None));
        assert!(p.mem() >= 10_000 * 16, "{}", p.mem());
        p.reset();
        assert!(
            p.mem() <= 64 * 16,
            "reset gives the table back: {}",
            p.mem()
        );
    }

    #[test]
    fn huge_declared_count_allocates_nothing() {
        let mut p = Parser::new();
        let buf = &b"*2147483647\r\n$3\r\nfoo\r\n"[..];
        assert_eq!(p.parse(buf, Limits::default()), Ok(None));
        assert!(p.spans.capacity() <= 1024);
    }

    /// glibc's atoi, including its out-of-range results (strtol saturates, the int cast
    /// keeps the low bits).
    #[test]
    fn c_atoi_reads_as_glibc() {
        for (input, want) in [
            (&b" 42x"[..], 42),
            (b"\t\n-7", -7),
            (b"+3", 3),
            (b"x", 0),
            (b"", 0),
            (b"- 1", 0),
            (b"4\x005", 4),
            (b"99999999999", i64::from(99_999_999_999_i64 as i32)),
            (b"9999999999999999999999", -1),
            (b"-9999999999999999999999", 0),
        ] {
            assert_eq!(c_atoi(input), want, "{input:?}");
        }
    }
}
