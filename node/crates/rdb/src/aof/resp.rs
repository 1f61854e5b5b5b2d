//! Reading RESP commands from an AOF file, telling a truncated tail from corruption.

use std::io::{BufRead, Read};

use bytes::Bytes;

/// Longest `*N` / `$N` / annotation line accepted.
const MAX_LINE: u64 = 64 * 1024;
/// Reserve at most this much up front for a bulk whose length came from the file.
const MAX_PREALLOC: u64 = 64 * 1024;

/// Why reading an AOF stopped.
#[derive(Debug, thiserror::Error)]
pub enum AofReadError {
    /// The file ends inside a command: everything before `valid_up_to` is complete commands
    /// (what `aof-load-truncated yes` truncates the file to).
    #[error("AOF truncated: incomplete command at offset {valid_up_to}")]
    Truncated { valid_up_to: u64 },
    /// Bytes that are not RESP commands.
    #[error("bad AOF format at offset {offset}: {reason}")]
    Corrupt { offset: u64, reason: &'static str },
    #[error("i/o error reading AOF: {0}")]
    Io(#[from] std::io::Error),
}

/// True when an AOF file starts with an RDB preamble (`REDIS`), to be read with
/// [`crate::RdbReader`] first.
pub fn has_rdb_preamble(head: &[u8]) -> bool {
    head.starts_with(b"REDIS")
}

/// Streams commands (`Vec<Bytes>` of arguments) out of an AOF file.
///
/// Annotation lines (`#TS:...`) are skipped. MULTI/EXEC bookkeeping (an unterminated MULTI at
/// the end counts as truncation in Redis) is left to the caller, which can use
/// [`AofCommandReader::offset`] before each command.
pub struct AofCommandReader<R> {
    inner: R,
    offset: u64,
}

enum Step<T> {
    Ok(T),
    Eof,
}

impl<R: BufRead> AofCommandReader<R> {
    pub fn new(inner: R) -> Self {
        Self::with_offset(inner, 0)
    }

    /// For a reader positioned `offset` bytes into the file (e.g. after an RDB preamble).
    pub fn with_offset(inner: R, offset: u64) -> Self {
        AofCommandReader { inner, offset }
    }

    /// File offset just past the last complete command.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next command, `Ok(None)` at a clean end of file.
    pub fn next_command(&mut self) -> Result<Option<Vec<Bytes>>, AofReadError> {
        loop {
            let start = self.offset;
            let mut pos = start;
            let truncated = AofReadError::Truncated { valid_up_to: start };
            let line = match self.line(&mut pos)? {
                Step::Eof if pos == start => return Ok(None),
                Step::Eof => return Err(truncated),
                Step::Ok(l) => l,
            };
            if line.first() == Some(&b'#') {
                self.offset = pos;
                continue;
            }
            if line.first() != Some(&b'*') {
                return Err(AofReadError::Corrupt {
                    offset: start,
                    reason: "expected '*'",
                });
            }
            let argc = parse_num(&line[1..])
                .filter(|n| *n >= 1)
                .ok_or(AofReadError::Corrupt {
                    offset: start,
                    reason: "bad argument count",
                })?;
            let mut args = Vec::with_capacity(argc.min(1024) as usize);
            for _ in 0..argc {
                let at = pos;
                let line = match self.line(&mut pos)? {
                    Step::Eof => return Err(truncated),
                    Step::Ok(l) => l,
                };
                if line.first() != Some(&b'$') {
                    return Err(AofReadError::Corrupt {
                        offset: at,
                        reason: "expected '$'",
                    });
                }
                let len = parse_num(&line[1..]).ok_or(AofReadError::Corrupt {
                    offset: at,
                    reason: "bad bulk length",
                })?;
                let mut data = Vec::with_capacity(len.min(MAX_PREALLOC) as usize);
                let want = len + 2;
                let got = (&mut self.inner).take(want).read_to_end(&mut data)? as u64;
                if got < want {
                    return Err(truncated);
                }
                if !data.ends_with(b"\r\n") {
                    return Err(AofReadError::Corrupt {
                        offset: pos + len,
                        reason: "bulk not terminated by CRLF",
                    });
                }
                data.truncate(len as usize);
                pos += want;
                args.push(Bytes::from(data));
            }
            self.offset = pos;
            return Ok(Some(args));
        }
    }

    /// One CRLF (or LF) terminated line without its terminator; `Eof` if the file ends first.
    fn line(&mut self, pos: &mut u64) -> Result<Step<Vec<u8>>, AofReadError> {
        let mut buf = Vec::new();
        let n = (&mut self.inner)
            .take(MAX_LINE)
            .read_until(b'\n', &mut buf)? as u64;
        *pos += n;
        if buf.last() != Some(&b'\n') {
            if n >= MAX_LINE {
                return Err(AofReadError::Corrupt {
                    offset: *pos - n,
                    reason: "line too long",
                });
            }
            return Ok(Step::Eof);
        }
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        Ok(Step::Ok(buf))
    }
}

/// Appends one command in the RESP form AOF files use (`*N` then `$len` bulk strings).
pub fn encode_command<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    out.push(b'*');
    out.extend_from_slice(args.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        let a = a.as_ref();
        out.push(b'$');
        out.extend_from_slice(a.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends a timestamp annotation (`#TS:<unix seconds>`), as aof-timestamp-enabled writes.
pub fn encode_timestamp_annotation(out: &mut Vec<u8>, unix_secs: u64) {
    out.extend_from_slice(format!("#TS:{unix_secs}\r\n").as_bytes());
}

fn parse_num(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

impl<R: BufRead> Iterator for AofCommandReader<R> {
    type Item = Result<Vec<Bytes>, AofReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_command().transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AOF: &[u8] = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n#TS:1700000000\r\n*3\r\n$3\r\nset\r\n$1\r\nk\r\n$5\r\nv\r\nv!\r\n";

    #[test]
    fn reads_commands_and_skips_annotations() {
        let cmds: Vec<_> = AofCommandReader::new(AOF)
            .collect::<Result<_, _>>()
            .expect("valid aof");
        assert_eq!(cmds.len(), 2);
        assert_eq!(cmds[1][2].as_ref(), b"v\r\nv!");
    }

    #[test]
    fn every_prefix_is_clean_or_truncated() {
        let first_end = 4 + 4 + 8 + 4 + 3;
        // Clean stopping points: empty, after each command, and after the annotation.
        let ends = [0, first_end, first_end + 16, AOF.len()];
        for cut in 0..=AOF.len() {
            let mut r = AofCommandReader::new(&AOF[..cut]);
            let mut res = Ok(());
            for c in r.by_ref() {
                if let Err(e) = c {
                    res = Err(e);
                    break;
                }
            }
            match res {
                Ok(()) => assert!(ends.contains(&cut), "cut {cut} should be truncated"),
                Err(AofReadError::Truncated { valid_up_to }) => {
                    assert!(valid_up_to as usize <= cut);
                    assert!(ends.contains(&(valid_up_to as usize)));
                }
                Err(e) => panic!("cut {cut}: unexpected {e}"),
            }
        }
    }

    #[test]
    fn encoded_commands_read_back() {
        let mut out = Vec::new();
        encode_command(&mut out, &["SELECT", "0"]);
        encode_timestamp_annotation(&mut out, 1_700_000_000);
        encode_command(&mut out, &[&b"set"[..], b"k", b"v\r\nv!"]);
        assert_eq!(out, AOF);
    }

    #[test]
    fn garbage_is_corrupt_with_offset() {
        let mut data = AOF[..23].to_vec();
        data.extend_from_slice(b"hello\r\n");
        let mut r = AofCommandReader::new(&data[..]);
        assert!(r.next_command().expect("first ok").is_some());
        match r.next_command() {
            Err(AofReadError::Corrupt { offset, .. }) => assert_eq!(offset, 23),
            other => panic!("unexpected {other:?}"),
        }
    }
}
