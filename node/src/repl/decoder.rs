//! The replica side of the replication stream as a pure, I/O-free state machine: the
//! replies to the handshake (AUTH, PING, REPLCONF), the reply to PSYNC, the RDB payload
//! (`$<len>` or `$EOF:<mark>`) and the command stream after it.
//!
//! Everything the master sends is untrusted (any client can point us at a fake master with
//! REPLICAOF), so no declared length is ever used to reserve memory: reply lines are
//! bounded like Redis's (64 KiB without a newline), the RDB is handed out in chunks as
//! bytes arrive (the caller streams them to disk), the `$EOF:` mark is searched in a
//! sliding window of 39 bytes, and one command of the stream may not declare a bulk larger
//! than proto-max-bulk-len nor buffer more than [`StreamLimits::max_command`] bytes. Any
//! malformed input is a [`DecodeError`]: the link drops and the replica retries, as Redis
//! does.
//!
//! # Driving it (the link in `replica.rs`, or a fuzz target)
//!
//! ```ignore
//! let mut dec = Decoder::new(StreamLimits::default());
//! dec.feed(bytes);                  // or read into `dec.read_space()`
//! // after sending PSYNC (and before its reply is decoded):
//! dec.expect_psync();
//! let mut args = Vec::new();
//! while let Some(ev) = dec.next(&mut args)? {
//!     // Event::Reply / FullResync / Continue / RdbStart / RdbData / RdbEnd / Command
//! }
//! // None: feed more bytes and call `next` again.
//! ```
//!
//! Bytes of an event stay valid until the next call on the decoder. Once `next` returned
//! an error, every later call returns it again.

use std::borrow::Cow;

use bytes::{Buf, BytesMut};

use crate::resp::parser::INLINE_MAX;
use crate::resp::{Limits, Parser, ProtoError};

/// Length of a replication id and of the `$EOF:` mark.
pub const ID_LEN: usize = 40;
/// Smallest encoding of one multibulk element (`$0\r\n\r\n`): a declared count whose
/// smallest encoding exceeds the command bound is refused before any of it arrives.
const MIN_ELEMENT: u64 = 6;
/// How much of the peer's bytes an error message quotes.
const QUOTE_MAX: usize = 96;
/// Free space below which [`Decoder::read_space`] grows the buffer, and by how much.
const READ_LOW: usize = 16 * 1024;
const READ_CHUNK: usize = 64 * 1024;
/// Buffer capacity past which a drained buffer is reallocated at READ_CHUNK.
const SHRINK_ABOVE: usize = 16 * READ_CHUNK;

/// Bounds on the post-sync command stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// Largest bulk length a command may declare (proto-max-bulk-len).
    pub max_bulk: u64,
    /// Most bytes one incomplete command may hold in the buffer. Redis exempts its master
    /// from client-query-buffer-limit; we allow a full query buffer plus one maximal bulk,
    /// so a command a client could send to the master also passes its replica.
    pub max_command: u64,
}

impl Default for StreamLimits {
    /// Redis's defaults: proto-max-bulk-len 512 MiB, client-query-buffer-limit 1 GiB.
    fn default() -> Self {
        StreamLimits::new(512 << 20, 1 << 30)
    }
}

impl StreamLimits {
    pub fn new(proto_max_bulk_len: u64, client_query_buffer_limit: u64) -> Self {
        StreamLimits {
            max_bulk: proto_max_bulk_len,
            max_command: client_query_buffer_limit.saturating_add(proto_max_bulk_len),
        }
    }
}

/// Why the master's bytes were refused. Peer bytes are quoted escaped and truncated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("reply line longer than {INLINE_MAX} bytes without a newline")]
    LineTooLong,
    #[error("malformed reply from master: '{0}'")]
    BadReply(String),
    #[error("master replied with wrong +FULLRESYNC syntax: '{0}'")]
    BadFullResync(String),
    #[error("master replied with wrong +CONTINUE syntax: '{0}'")]
    BadContinue(String),
    #[error("unexpected reply to PSYNC: '{0}'")]
    BadPsync(String),
    #[error("MASTER aborted replication with an error: '{0}'")]
    Aborted(String),
    #[error("bad RDB payload header from MASTER: '{0}'")]
    BadPayloadHeader(String),
    #[error("bad $EOF: mark of {0} bytes (a mark is {ID_LEN} bytes)")]
    BadEofMark(usize),
    #[error("master using the inline protocol, desync?")]
    Inline,
    #[error("command stream: multibulk length {0} exceeds the command bound of {1} bytes")]
    MultibulkTooLarge(u64, u64),
    #[error("command stream: one command holds {0} bytes, over the bound of {1} bytes")]
    CommandTooBig(usize, u64),
    #[error(
        "command stream: protocol error: {0} (bulk lengths are bounded by proto-max-bulk-len)"
    )]
    Proto(#[from] ProtoError),
}

/// How the RDB payload is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RdbLen {
    /// `$<len>`: exactly this many bytes (declared by the peer: never reserved).
    Sized(u64),
    /// `$EOF:<mark>`: up to the 40-byte mark (diskless sync).
    Eof,
}

/// One step of the replication protocol.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A reply to a handshake command: `+text` (ok) or `-text` (not ok); also a `-ERR`
    /// reply to PSYNC.
    Reply { ok: bool, text: Cow<'a, str> },
    /// `+FULLRESYNC <replid> <offset>`: the RDB payload follows.
    FullResync { replid: &'a str, offset: u64 },
    /// `+CONTINUE [<new replid>]`: the command stream follows.
    Continue { replid: Option<&'a str> },
    /// The payload header was read.
    RdbStart(RdbLen),
    /// The next bytes of the RDB (never the `$EOF:` mark).
    RdbData(&'a [u8]),
    /// The RDB is complete; what follows is the command stream.
    RdbEnd,
    /// One command of the stream, `len` bytes of it (its arguments are in the vector given
    /// to [`Decoder::next`]; none for an empty request or a keep-alive newline).
    Command { len: usize },
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    Handshake,
    Psync,
    PayloadHeader,
    Sized { left: u64 },
    Eof { mark: [u8; ID_LEN] },
    Stream,
}

/// The replica's decoder of everything its master sends. See the module docs.
#[derive(Debug)]
pub struct Decoder {
    buf: BytesMut,
    phase: Phase,
    /// Bytes of the last event, dropped at the next call (events borrow them).
    consumed: usize,
    parser: Parser,
    limits: StreamLimits,
    failed: Option<DecodeError>,
}

/// Peer bytes for an error message: escaped, truncated.
pub fn quote(b: &[u8]) -> String {
    let cut = b.len().min(QUOTE_MAX);
    let mut s = b[..cut].escape_ascii().to_string();
    if cut < b.len() {
        s.push_str("...");
    }
    s
}

/// A replication id: 40 ASCII letters or digits (it reaches INFO and the RDB aux fields).
fn valid_id(w: &[u8]) -> Option<&str> {
    if w.len() != ID_LEN || !w.iter().all(u8::is_ascii_alphanumeric) {
        return None;
    }
    std::str::from_utf8(w).ok()
}

/// A decimal u64 with digits only.
fn parse_u64(w: &[u8]) -> Option<u64> {
    if w.is_empty() || w.len() > 20 || !w.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(w).ok()?.parse().ok()
}

impl Decoder {
    pub fn new(limits: StreamLimits) -> Self {
        Decoder {
            buf: BytesMut::with_capacity(READ_CHUNK),
            phase: Phase::Handshake,
            consumed: 0,
            parser: Parser::new(),
            limits,
            failed: None,
        }
    }

    /// A decoder of a command stream alone, with no handshake or payload before it (the
    /// import link of an atomic slot migration).
    pub fn stream(limits: StreamLimits) -> Self {
        let mut d = Decoder::new(limits);
        d.phase = Phase::Stream;
        d
    }

    /// Drops the bytes of the last event.
    fn settle(&mut self) {
        if self.consumed > 0 {
            self.buf.advance(self.consumed.min(self.buf.len()));
            self.consumed = 0;
            // A big command grew the buffer: once it is decoded, give the room back (as
            // Redis trims its master client's query buffer), or a replica holds as much
            // again as the largest value it was ever sent (unit/pendingquerybuf).
            if self.buf.capacity() > SHRINK_ABOVE && self.buf.len() <= READ_CHUNK {
                let mut fresh = BytesMut::with_capacity(READ_CHUNK);
                fresh.extend_from_slice(&self.buf);
                self.buf = fresh;
            }
        }
    }

    /// Appends bytes received from the master.
    pub fn feed(&mut self, data: &[u8]) {
        self.settle();
        self.buf.extend_from_slice(data);
    }

    /// The buffer to read the socket into (appends; at least 16 KiB free). How much it
    /// holds is bounded by the phase's rules, checked by [`Decoder::next`].
    pub fn read_space(&mut self) -> &mut BytesMut {
        self.settle();
        if self.buf.capacity() - self.buf.len() < READ_LOW {
            self.buf.reserve(READ_CHUNK);
        }
        &mut self.buf
    }

    /// Bytes received and not yet decoded.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.consumed.min(self.buf.len())
    }

    /// The next reply decoded is the answer to PSYNC (call after sending it).
    pub fn expect_psync(&mut self) {
        if matches!(self.phase, Phase::Handshake) {
            self.phase = Phase::Psync;
        }
    }

    /// SYNC was sent after a refused PSYNC: the next line is the payload's header.
    pub fn expect_payload(&mut self) {
        if matches!(self.phase, Phase::Handshake | Phase::Psync) {
            self.phase = Phase::PayloadHeader;
        }
    }

    /// Decodes the next event: Ok(None) when more bytes are needed. For
    /// [`Event::Command`] the arguments are put in `args` (cleared first).
    pub fn next<'a>(
        &'a mut self,
        args: &mut Vec<&'a [u8]>,
    ) -> Result<Option<Event<'a>>, DecodeError> {
        args.clear();
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.settle();
        match self.step() {
            Ok(Some((consumed, ev))) => {
                self.consumed = consumed;
                Ok(Some(self.event(ev, args)))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Decides the next event without borrowing: (bytes it covers, what it is).
    fn step(&mut self) -> Result<Option<(usize, Step)>, DecodeError> {
        match self.phase {
            Phase::Handshake | Phase::Psync | Phase::PayloadHeader => {
                // Lone newlines keep the link alive while the master prepares the RDB.
                let skip = self.buf.iter().take_while(|&&b| b == b'\n').count();
                self.buf.advance(skip);
                let Some(nl) = memchr::memchr(b'\n', &self.buf) else {
                    if self.buf.len() > INLINE_MAX {
                        return Err(DecodeError::LineTooLong);
                    }
                    return Ok(None);
                };
                if nl > INLINE_MAX {
                    return Err(DecodeError::LineTooLong);
                }
                let end = if nl > 0 && self.buf[nl - 1] == b'\r' {
                    nl - 1
                } else {
                    nl
                };
                let step = self.line(end)?;
                Ok(Some((nl + 1, step)))
            }
            Phase::Sized { left } => {
                if left == 0 {
                    self.phase = Phase::Stream;
                    return Ok(Some((0, Step::RdbEnd)));
                }
                if self.buf.is_empty() {
                    return Ok(None);
                }
                let take = usize::try_from(left)
                    .unwrap_or(usize::MAX)
                    .min(self.buf.len());
                self.phase = Phase::Sized {
                    left: left - take as u64,
                };
                Ok(Some((take, Step::Data(take))))
            }
            Phase::Eof { mark } => {
                if let Some(p) = memchr::memmem::find(&self.buf, &mark) {
                    if p > 0 {
                        return Ok(Some((p, Step::Data(p))));
                    }
                    self.phase = Phase::Stream;
                    return Ok(Some((ID_LEN, Step::RdbEnd)));
                }
                // All but the last 39 bytes are payload: the mark can only start there.
                let safe = self.buf.len().saturating_sub(ID_LEN - 1);
                if safe == 0 {
                    return Ok(None);
                }
                Ok(Some((safe, Step::Data(safe))))
            }
            Phase::Stream => self.command(),
        }
    }

    /// A reply line (`buf[..end]`, without CRLF) in the handshake, PSYNC or payload phase.
    fn line(&mut self, end: usize) -> Result<Step, DecodeError> {
        let l = &self.buf[..end];
        match self.phase {
            Phase::Handshake => match l.first() {
                Some(b'+') | Some(b'-') => Ok(Step::Reply(l[0] == b'+', end)),
                _ => Err(DecodeError::BadReply(quote(l))),
            },
            Phase::Psync => {
                if let Some(rest) = l.strip_prefix(b"+FULLRESYNC") {
                    let mut w = rest.split(|&b| b == b' ').filter(|w| !w.is_empty());
                    let id = w.next().and_then(valid_id).map(|_| ());
                    let off = w.next().and_then(parse_u64);
                    let (Some(()), Some(off), true) = (id, off, rest.first() == Some(&b' ')) else {
                        return Err(DecodeError::BadFullResync(quote(l)));
                    };
                    self.phase = Phase::PayloadHeader;
                    // The id is the first word after the prefix (checked above).
                    let start = 11 + rest.iter().take_while(|&&b| b == b' ').count();
                    return Ok(Step::FullResync(start, off));
                }
                if let Some(rest) = l.strip_prefix(b"+CONTINUE") {
                    let words: Vec<&[u8]> = rest
                        .split(|&b| b == b' ')
                        .filter(|w| !w.is_empty())
                        .take(2)
                        .collect();
                    let id = match words.as_slice() {
                        [] if rest.is_empty() || rest[0] == b' ' => None,
                        [id] if rest[0] == b' ' && valid_id(id).is_some() => {
                            Some(9 + rest.iter().take_while(|&&b| b == b' ').count())
                        }
                        _ => return Err(DecodeError::BadContinue(quote(l))),
                    };
                    self.phase = Phase::Stream;
                    return Ok(Step::Continue(id));
                }
                match l.first() {
                    Some(b'-') => Ok(Step::Reply(false, end)),
                    Some(b'+') => Err(DecodeError::BadPsync(quote(l))),
                    _ => Err(DecodeError::BadReply(quote(l))),
                }
            }
            Phase::PayloadHeader => {
                if l.first() == Some(&b'-') {
                    return Err(DecodeError::Aborted(quote(&l[1..])));
                }
                let Some(spec) = l.strip_prefix(b"$") else {
                    return Err(DecodeError::BadPayloadHeader(quote(l)));
                };
                if let Some(mark) = spec.strip_prefix(b"EOF:") {
                    let Ok(mark) = <[u8; ID_LEN]>::try_from(mark) else {
                        return Err(DecodeError::BadEofMark(mark.len()));
                    };
                    self.phase = Phase::Eof { mark };
                    return Ok(Step::RdbStart(RdbLen::Eof));
                }
                let Some(len) = parse_u64(spec) else {
                    return Err(DecodeError::BadPayloadHeader(quote(l)));
                };
                self.phase = Phase::Sized { left: len };
                Ok(Step::RdbStart(RdbLen::Sized(len)))
            }
            Phase::Sized { .. } | Phase::Eof { .. } | Phase::Stream => {
                Err(DecodeError::BadReply(quote(l)))
            }
        }
    }

    /// One command of the post-sync stream.
    fn command(&mut self) -> Result<Option<(usize, Step)>, DecodeError> {
        if self.parser.is_idle() {
            self.check_head()?;
        }
        let lim = Limits {
            max_bulk: i64::try_from(self.limits.max_bulk).unwrap_or(i64::MAX),
            authenticated: true,
        };
        match self.parser.parse(&self.buf, lim)? {
            Some(n) => Ok(Some((n, Step::Command(n)))),
            None => {
                if self.buf.len() as u64 > self.limits.max_command {
                    return Err(DecodeError::CommandTooBig(
                        self.buf.len(),
                        self.limits.max_command,
                    ));
                }
                Ok(None)
            }
        }
    }

    /// Checks the start of a new command: inline protocol (other than a keep-alive newline)
    /// is a desync, as in Redis; a multibulk count that cannot fit the bound is refused
    /// before its elements arrive.
    fn check_head(&self) -> Result<(), DecodeError> {
        match self.buf.first() {
            None => Ok(()),
            Some(b'\n') => Ok(()),
            Some(b'\r') => match self.buf.get(1) {
                None | Some(b'\n') => Ok(()),
                Some(_) => Err(DecodeError::Inline),
            },
            Some(b'*') => {
                let Some(cr) = memchr::memchr(b'\r', &self.buf) else {
                    return Ok(()); // the parser bounds the header line
                };
                // A malformed count is the parser's error.
                let Some(n) = parse_u64(&self.buf[1..cr]) else {
                    return Ok(());
                };
                if n.saturating_mul(MIN_ELEMENT) > self.limits.max_command {
                    return Err(DecodeError::MultibulkTooLarge(n, self.limits.max_command));
                }
                Ok(())
            }
            Some(_) => Err(DecodeError::Inline),
        }
    }

    /// Builds the borrowed event for a step.
    fn event<'a>(&'a self, step: Step, args: &mut Vec<&'a [u8]>) -> Event<'a> {
        let b = &self.buf[..];
        match step {
            Step::Reply(ok, end) => Event::Reply {
                ok,
                text: String::from_utf8_lossy(b.get(1..end).unwrap_or_default()),
            },
            Step::FullResync(start, offset) => Event::FullResync {
                replid: b
                    .get(start..start + ID_LEN)
                    .and_then(valid_id)
                    .unwrap_or_default(),
                offset,
            },
            Step::Continue(start) => Event::Continue {
                replid: start.and_then(|s| b.get(s..s + ID_LEN).and_then(valid_id)),
            },
            Step::RdbStart(l) => Event::RdbStart(l),
            Step::Data(n) => Event::RdbData(b.get(..n).unwrap_or_default()),
            Step::RdbEnd => Event::RdbEnd,
            Step::Command(n) => {
                self.parser.args(b, args);
                Event::Command { len: n }
            }
        }
    }
}

/// An event located in the buffer (offsets into it), before it is borrowed.
#[derive(Debug, Clone, Copy)]
enum Step {
    Reply(bool, usize),
    FullResync(usize, u64),
    Continue(Option<usize>),
    RdbStart(RdbLen),
    Data(usize),
    RdbEnd,
    Command(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef01234567";

    /// Feeds `input` one byte at a time and collects events rendered as strings.
    fn run(input: &[u8], psync_after: usize) -> Result<Vec<String>, DecodeError> {
        let mut d = Decoder::new(StreamLimits::new(1024, 4096));
        let mut out = Vec::new();
        let mut replies = 0;
        if psync_after == 0 {
            d.expect_psync();
        }
        for &b in input {
            d.feed(&[b]);
            loop {
                let mut args = Vec::new();
                let Some(ev) = d.next(&mut args)? else {
                    break;
                };
                let s = match ev {
                    Event::Reply { ok, text } => {
                        replies += 1;
                        format!("reply {ok} {text}")
                    }
                    Event::FullResync { replid, offset } => format!("full {replid} {offset}"),
                    Event::Continue { replid } => format!("continue {replid:?}"),
                    Event::RdbStart(l) => format!("start {l:?}"),
                    Event::RdbData(d) => format!("data {}", quote(d)),
                    Event::RdbEnd => "end".into(),
                    Event::Command { len } => format!(
                        "cmd {len} {}",
                        args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
                    ),
                };
                out.push(s);
                if replies == psync_after {
                    d.expect_psync();
                }
            }
        }
        // Merge byte-at-a-time data chunks for readable assertions.
        let mut merged: Vec<String> = Vec::new();
        for s in out {
            match (merged.last_mut(), s.strip_prefix("data ")) {
                (Some(last), Some(d)) if last.starts_with("data ") => last.push_str(d),
                _ => merged.push(s),
            }
        }
        Ok(merged)
    }

    #[test]
    fn full_sync_sized_then_stream() {
        let input = format!(
            "+PONG\r\n+OK\r\n+FULLRESYNC {ID} 7\r\n\n\n$5\r\nREDIS*2\r\n$3\r\nSET\r\n$1\r\nk\r\n\n"
        );
        let ev = run(input.as_bytes(), 2).unwrap();
        assert_eq!(
            ev,
            [
                "reply true PONG".to_string(),
                "reply true OK".into(),
                format!("full {ID} 7"),
                "start Sized(5)".into(),
                "data REDIS".into(),
                "end".into(),
                "cmd 20 SET k".into(),
                "cmd 1 ".into(),
            ]
        );
    }

    #[test]
    fn eof_form_finds_the_mark_across_reads() {
        let mark = "m".repeat(40);
        let input =
            format!("+FULLRESYNC {ID} 0\r\n$EOF:{mark}\r\nREDIS0009{mark}*1\r\n$4\r\nPING\r\n");
        let ev = run(input.as_bytes(), 0).unwrap();
        assert_eq!(
            ev,
            [
                format!("full {ID} 0"),
                "start Eof".into(),
                "data REDIS0009".into(),
                "end".into(),
                "cmd 14 PING".into(),
            ]
        );
    }

    #[test]
    fn continue_with_and_without_id() {
        assert_eq!(run(b"+CONTINUE\r\n", 0).unwrap(), ["continue None"]);
        assert_eq!(
            run(format!("+CONTINUE {ID}\r\n").as_bytes(), 0).unwrap(),
            [format!("continue Some(\"{ID}\")")]
        );
        assert!(matches!(
            run(b"+CONTINUE xyz\r\n", 0),
            Err(DecodeError::BadContinue(_))
        ));
    }

    #[test]
    fn malformed_replies_are_errors() {
        let bad: &[(&[u8], usize)] = &[
            (b"hello\r\n", 99),
            (b":1\r\n", 0),
            (b"+FULLRESYNC\r\n", 0),
            (b"+FULLRESYNC abc 0\r\n", 0),
            (format!("+FULLRESYNC {ID}\r\n").leak().as_bytes(), 0),
            (format!("+FULLRESYNC {ID} -1\r\n").leak().as_bytes(), 0),
            (format!("+FULLRESYNC{ID} 1\r\n").leak().as_bytes(), 0),
            (b"+WHAT\r\n", 0),
            (
                format!("+FULLRESYNC {ID} 0\r\n$EOF:short\r\n")
                    .leak()
                    .as_bytes(),
                0,
            ),
            (
                format!("+FULLRESYNC {ID} 0\r\n$-1\r\n").leak().as_bytes(),
                0,
            ),
            (format!("+FULLRESYNC {ID} 0\r\n*1\r\n").leak().as_bytes(), 0),
            (
                format!("+FULLRESYNC {ID} 0\r\n-ERR no\r\n")
                    .leak()
                    .as_bytes(),
                0,
            ),
            (b"+CONTINUE\r\nSET a b\r\n", 0),
            (b"+CONTINUE\r\n*2147483647\r\n", 0),
            (b"+CONTINUE\r\n*1\r\n$1025\r\n", 0),
            (b"+CONTINUE\r\n*1\r\n$x\r\n", 0),
            (b"+CONTINUE\r\n*1\r\n:1\r\n", 0),
        ];
        for (input, psync_after) in bad {
            let r = run(input, *psync_after);
            assert!(r.is_err(), "{} -> {r:?}", quote(input));
        }
    }

    #[test]
    fn bounds_hold_without_a_newline_or_end() {
        let mut d = Decoder::new(StreamLimits::new(1024, 4096));
        d.feed(&vec![b'+'; INLINE_MAX + 2]);
        assert_eq!(d.next(&mut Vec::new()), Err(DecodeError::LineTooLong));
        // The error sticks.
        assert_eq!(d.next(&mut Vec::new()), Err(DecodeError::LineTooLong));

        let mut d = Decoder::new(StreamLimits::new(1024, 4096));
        d.expect_psync();
        d.feed(b"+CONTINUE\r\n*600\r\n");
        assert!(matches!(
            d.next(&mut Vec::new()),
            Ok(Some(Event::Continue { .. }))
        ));
        for _ in 0..1000 {
            d.feed(b"$10\r\n0123456789\r\n");
            if let Err(e) = d.next(&mut Vec::new()) {
                assert!(matches!(e, DecodeError::CommandTooBig(..)), "{e}");
                return;
            }
        }
        panic!("a command past the bound was buffered");
    }

    #[test]
    fn huge_declared_rdb_is_not_reserved() {
        let mut d = Decoder::new(StreamLimits::default());
        d.expect_psync();
        d.feed(format!("+FULLRESYNC {ID} 0\r\n$100000000000000\r\nREDIS").as_bytes());
        let mut a = Vec::new();
        assert!(matches!(d.next(&mut a), Ok(Some(Event::FullResync { .. }))));
        let mut a = Vec::new();
        assert_eq!(
            d.next(&mut a),
            Ok(Some(Event::RdbStart(RdbLen::Sized(100_000_000_000_000))))
        );
        let mut a = Vec::new();
        assert_eq!(d.next(&mut a), Ok(Some(Event::RdbData(b"REDIS"))));
        assert!(d.read_space().capacity() < 1 << 20);
    }
}
