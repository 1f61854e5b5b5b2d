//! Exact bytes of the node-to-node messages (spec §3.1, §3.2) and the source's reading of
//! the ESTABLISH reply. Valkey writes every control message as a RESP array of bulk strings,
//! so a byte-identical stream keeps the target's replication offsets and its replicas'
//! backlogs equal to what a Valkey source would produce.

use super::job::{JobName, Outcome, SlotRange};
use super::ESTABLISH_TOO_LARGE;
use crate::msg::Name;

/// The control messages without arguments (everything but ESTABLISH, FINISH and CAPA).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncMsg {
    /// Both directions: liveness; the target's first one moves it out of waiting-for-ack.
    Ack,
    /// Source → target, written by the snapshot child as the snapshot's last command.
    SnapshotEof,
    /// Target → source: the snapshot is in, drain and pause.
    RequestPause,
    /// Source → target: writes are paused; everything before this is final.
    Paused,
    /// Target → source: caught up, may I take the slots?
    RequestFailover,
    /// Source → target: still paused, take them.
    FailoverGranted,
}

impl SyncMsg {
    pub const ALL: [SyncMsg; 6] = [
        SyncMsg::Ack,
        SyncMsg::SnapshotEof,
        SyncMsg::RequestPause,
        SyncMsg::Paused,
        SyncMsg::RequestFailover,
        SyncMsg::FailoverGranted,
    ];

    /// The subcommand as Valkey writes it (and names it in error texts).
    pub fn as_str(self) -> &'static str {
        match self {
            SyncMsg::Ack => "ACK",
            SyncMsg::SnapshotEof => "SNAPSHOT-EOF",
            SyncMsg::RequestPause => "REQUEST-PAUSE",
            SyncMsg::Paused => "PAUSED",
            SyncMsg::RequestFailover => "REQUEST-FAILOVER",
            SyncMsg::FailoverGranted => "FAILOVER-GRANTED",
        }
    }

    /// Case-insensitive match of a subcommand token.
    pub fn parse(tok: &[u8]) -> Option<SyncMsg> {
        SyncMsg::ALL
            .into_iter()
            .find(|m| tok.eq_ignore_ascii_case(m.as_str().as_bytes()))
    }

    /// `*3\r\n$7\r\nCLUSTER\r\n$9\r\nSYNCSLOTS\r\n$<n>\r\n<SUBCMD>\r\n`.
    pub fn bytes(self) -> Vec<u8> {
        command(&[
            b"CLUSTER".as_slice(),
            b"SYNCSLOTS",
            self.as_str().as_bytes(),
        ])
    }
}

/// A RESP array of bulk strings.
pub fn command<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(16 + args.iter().map(|a| a.as_ref().len() + 16).sum::<usize>());
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// ESTABLISH's argv: `CLUSTER SYNCSLOTS ESTABLISH SOURCE <id> NAME <name> SLOTSRANGE
/// <s> <e> ...`, in Valkey's field order (the target accepts any order, but the target
/// re-creates exactly this form for its replicas and AOF).
pub fn establish_args(source: &Name, name: &JobName, ranges: &[SlotRange]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = vec![
        b"CLUSTER".to_vec(),
        b"SYNCSLOTS".to_vec(),
        b"ESTABLISH".to_vec(),
        b"SOURCE".to_vec(),
        source.to_vec(),
        b"NAME".to_vec(),
        name.0.to_vec(),
        b"SLOTSRANGE".to_vec(),
    ];
    for r in ranges {
        v.push(r.start.to_string().into_bytes());
        v.push(r.end.to_string().into_bytes());
    }
    v
}

/// The exact ESTABLISH bytes of §3.2 (`*<8+2n>` ...). The source sends them; the target
/// proxies the same bytes to its replicas.
pub fn establish(source: &Name, name: &JobName, ranges: &[SlotRange]) -> Vec<u8> {
    command(&establish_args(source, name, ranges))
}

/// FINISH's argv: `CLUSTER SYNCSLOTS FINISH STATE SUCCESS|FAILED NAME <name> [MESSAGE
/// <text>]`. A Valkey 9.1 primary always ends up passing a message (`""` after a plain
/// success), so its FINISH has 9 arguments; `None` gives the 7-argument form replicas also
/// accept. `Cancelled` is written as FAILED (FINISH knows only two outcomes).
pub fn finish_args(name: &JobName, outcome: Outcome, message: Option<&[u8]>) -> Vec<Vec<u8>> {
    let state: &[u8] = match outcome {
        Outcome::Success => b"SUCCESS",
        Outcome::Failed | Outcome::Cancelled => b"FAILED",
    };
    let mut v: Vec<Vec<u8>> = vec![
        b"CLUSTER".to_vec(),
        b"SYNCSLOTS".to_vec(),
        b"FINISH".to_vec(),
        b"STATE".to_vec(),
        state.to_vec(),
        b"NAME".to_vec(),
        name.0.to_vec(),
    ];
    if let Some(m) = message {
        v.push(b"MESSAGE".to_vec());
        v.push(m.to_vec());
    }
    v
}

/// The bytes of [`finish_args`].
pub fn finish(name: &JobName, outcome: Outcome, message: Option<&[u8]>) -> Vec<u8> {
    command(&finish_args(name, outcome, message))
}

/// The source's `AUTH [user] <password>` (`masteruser`/`masterauth`), sent before ESTABLISH.
pub fn auth(user: Option<&[u8]>, password: &[u8]) -> Vec<u8> {
    match user {
        Some(u) => command(&[b"AUTH".as_slice(), u, password]),
        None => command(&[b"AUTH".as_slice(), password]),
    }
}

/// How much the source buffers while waiting for the ESTABLISH reply line (Valkey's
/// PROTO_IOBUF_LEN).
pub const ESTABLISH_REPLY_LIMIT: usize = 16 * 1024;

/// The source's reading of what the target answered to ESTABLISH.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EstablishReply {
    /// No complete line yet: read more.
    Incomplete,
    /// Anything but an error line is success; `consumed` bytes (the line with its CRLF)
    /// belong to the reply, the rest to the command stream that follows.
    Ok { consumed: usize },
    /// The job fails with this message.
    Failed(String),
}

/// Reads the reply to ESTABLISH from the bytes received so far.
///
/// A line starting with `-` fails the job with `Received error during handshake to target:
/// <the whole line, CRLF included>`; more than [`ESTABLISH_REPLY_LIMIT`] bytes without a
/// CRLF fail it with `Response to establish job is larger than buffer limit`. Valkey waits
/// for the buffer to *end* in CRLF; taking the first CRLF is the same for any target that
/// sends one line and waits, as Valkey and Tessera targets do.
pub fn parse_establish_reply(buf: &[u8]) -> EstablishReply {
    let line_end = buf
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| p + 2)
        .filter(|end| *end <= ESTABLISH_REPLY_LIMIT);
    let Some(end) = line_end else {
        return if buf.len() >= ESTABLISH_REPLY_LIMIT {
            EstablishReply::Failed(ESTABLISH_TOO_LARGE.to_string())
        } else {
            EstablishReply::Incomplete
        };
    };
    let line = &buf[..end];
    if line.first() == Some(&b'-') {
        EstablishReply::Failed(format!(
            "{}{}",
            super::HANDSHAKE_ERROR_PREFIX,
            String::from_utf8_lossy(line)
        ))
    } else {
        EstablishReply::Ok { consumed: end }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::asm::parse::{parse_establish, tests::FakeView};

    /// Decodes one RESP array of bulk strings (test helper): (args, bytes used).
    pub(crate) fn decode(buf: &[u8]) -> Option<(Vec<Vec<u8>>, usize)> {
        fn line(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
            let rel = buf.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
            Some((&buf[at..at + rel], at + rel + 2))
        }
        let (head, mut at) = line(buf, 0)?;
        let n: usize = std::str::from_utf8(head.strip_prefix(b"*")?)
            .ok()?
            .parse()
            .ok()?;
        let mut args = Vec::new();
        for _ in 0..n {
            let (h, next) = line(buf, at)?;
            let len: usize = std::str::from_utf8(h.strip_prefix(b"$")?)
                .ok()?
                .parse()
                .ok()?;
            let data = buf.get(next..next + len)?;
            if buf.get(next + len..next + len + 2)? != b"\r\n" {
                return None;
            }
            args.push(data.to_vec());
            at = next + len + 2;
        }
        Some((args, at))
    }

    const SRC: Name = [b'a'; 40];
    fn job_name() -> JobName {
        JobName([b'f'; 40])
    }

    #[test]
    fn establish_bytes_one_range() {
        let ranges = [SlotRange {
            start: 16383,
            end: 16383,
        }];
        let got = establish(&SRC, &job_name(), &ranges);
        let want = format!(
            "*10\r\n$7\r\nCLUSTER\r\n$9\r\nSYNCSLOTS\r\n$9\r\nESTABLISH\r\n$6\r\nSOURCE\r\n$40\r\n{}\r\n\
             $4\r\nNAME\r\n$40\r\n{}\r\n$10\r\nSLOTSRANGE\r\n$5\r\n16383\r\n$5\r\n16383\r\n",
            "a".repeat(40),
            "f".repeat(40)
        );
        assert_eq!(String::from_utf8_lossy(&got), want);
    }

    #[test]
    fn establish_bytes_three_ranges() {
        let ranges = [
            SlotRange {
                start: 16379,
                end: 16380,
            },
            SlotRange { start: 0, end: 9 },
            SlotRange {
                start: 100,
                end: 100,
            },
        ];
        let got = establish(&SRC, &job_name(), &ranges);
        let want = format!(
            "*14\r\n$7\r\nCLUSTER\r\n$9\r\nSYNCSLOTS\r\n$9\r\nESTABLISH\r\n$6\r\nSOURCE\r\n$40\r\n{}\r\n\
             $4\r\nNAME\r\n$40\r\n{}\r\n$10\r\nSLOTSRANGE\r\n\
             $5\r\n16379\r\n$5\r\n16380\r\n$1\r\n0\r\n$1\r\n9\r\n$3\r\n100\r\n$3\r\n100\r\n",
            "a".repeat(40),
            "f".repeat(40)
        );
        assert_eq!(String::from_utf8_lossy(&got), want);
    }

    #[test]
    fn establish_round_trips_through_the_target_parser() {
        let ranges = vec![
            SlotRange {
                start: 16379,
                end: 16380,
            },
            SlotRange {
                start: 16382,
                end: 16383,
            },
            SlotRange { start: 5, end: 5 },
        ];
        let bytes = establish(&SRC, &job_name(), &ranges);
        let (args, used) = decode(&bytes).expect("valid RESP");
        assert_eq!(used, bytes.len());
        assert_eq!(args, establish_args(&SRC, &job_name(), &ranges));
        let mut view = FakeView::new();
        view.myself = [b'z'; 40];
        view.assign(0, 16383, SRC);
        let refs: Vec<&[u8]> = args[3..].iter().map(|a| a.as_slice()).collect();
        let est = parse_establish(&refs, &view, false).expect("accepted");
        assert_eq!(est.name, job_name());
        assert_eq!(est.source, Some(SRC));
        assert_eq!(est.ranges, ranges);
    }

    #[test]
    fn control_message_bytes() {
        assert_eq!(
            SyncMsg::SnapshotEof.bytes(),
            b"*3\r\n$7\r\nCLUSTER\r\n$9\r\nSYNCSLOTS\r\n$12\r\nSNAPSHOT-EOF\r\n"
        );
        assert_eq!(
            SyncMsg::Ack.bytes(),
            b"*3\r\n$7\r\nCLUSTER\r\n$9\r\nSYNCSLOTS\r\n$3\r\nACK\r\n"
        );
        assert_eq!(
            SyncMsg::FailoverGranted.bytes(),
            b"*3\r\n$7\r\nCLUSTER\r\n$9\r\nSYNCSLOTS\r\n$16\r\nFAILOVER-GRANTED\r\n"
        );
        for m in SyncMsg::ALL {
            let (args, _) = decode(&m.bytes()).expect("valid");
            assert_eq!(SyncMsg::parse(&args[2].to_ascii_lowercase()), Some(m));
        }
        assert_eq!(SyncMsg::parse(b"ESTABLISH"), None);
    }

    #[test]
    fn finish_bytes() {
        let n = job_name();
        let f = finish(&n, Outcome::Failed, Some(b"Data was flushed"));
        let want = format!(
            "*9\r\n$7\r\nCLUSTER\r\n$9\r\nSYNCSLOTS\r\n$6\r\nFINISH\r\n$5\r\nSTATE\r\n$6\r\nFAILED\r\n\
             $4\r\nNAME\r\n$40\r\n{}\r\n$7\r\nMESSAGE\r\n$16\r\nData was flushed\r\n",
            "f".repeat(40)
        );
        assert_eq!(String::from_utf8_lossy(&f), want);
        let s = finish(&n, Outcome::Success, None);
        assert!(s.starts_with(b"*7\r\n"));
        assert_eq!(
            decode(&finish(&n, Outcome::Success, Some(b""))).map(|d| d.0.len()),
            Some(9)
        );
        assert_eq!(
            auth(Some(b"u"), b"p"),
            b"*3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$1\r\np\r\n"
        );
        assert_eq!(auth(None, b"p"), b"*2\r\n$4\r\nAUTH\r\n$1\r\np\r\n");
    }

    #[test]
    fn establish_reply() {
        assert_eq!(parse_establish_reply(b""), EstablishReply::Incomplete);
        assert_eq!(parse_establish_reply(b"+OK\r"), EstablishReply::Incomplete);
        assert_eq!(
            parse_establish_reply(b"+OK\r\n"),
            EstablishReply::Ok { consumed: 5 }
        );
        assert_eq!(
            parse_establish_reply(b"+OK\r\n*3\r\n"),
            EstablishReply::Ok { consumed: 5 }
        );
        assert_eq!(
            parse_establish_reply(b"-ERR Slot migration can only be used on primary nodes.\r\n"),
            EstablishReply::Failed(
                "Received error during handshake to target: -ERR Slot migration can only be used on primary nodes.\r\n"
                    .into()
            )
        );
        let big = vec![b'x'; ESTABLISH_REPLY_LIMIT - 1];
        assert_eq!(parse_establish_reply(&big), EstablishReply::Incomplete);
        let big = vec![b'x'; ESTABLISH_REPLY_LIMIT];
        assert_eq!(
            parse_establish_reply(&big),
            EstablishReply::Failed("Response to establish job is larger than buffer limit".into())
        );
        let mut late = vec![b'x'; ESTABLISH_REPLY_LIMIT];
        late.extend_from_slice(b"\r\n");
        assert!(matches!(
            parse_establish_reply(&late),
            EstablishReply::Failed(m) if m == ESTABLISH_TOO_LARGE
        ));
    }
}
