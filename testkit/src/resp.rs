//! The one RESP client: requests go out as bytes the test chose, replies come back parsed
//! without loss (RESP2 and RESP3), so two servers' replies compare byte for byte.
//!
//! [`Conn`] reads typed [`Reply`]s; [`Raw`] is the same connection whose reads come back as
//! the compact [`R`] view (aggregates flattened) that the older tests assert on.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A parsed RESP2/RESP3 reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    NullArray,
    Array(Vec<Reply>),
    Set(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    Double(String),
    Bool(bool),
    Push(Vec<Reply>),
    /// RESP3 blob error (`!`).
    BlobError(Vec<u8>),
    /// RESP3 attribute (`|`): its pairs.
    Attr(Vec<(Reply, Reply)>),
    /// A line of another type (big number...), whole.
    Other(String),
    /// The server closed the connection.
    Eof,
}

impl Reply {
    /// Sorts unordered collections (sets, and arrays when `arrays`) recursively, so replies
    /// whose element order is unspecified (SMEMBERS, SUNION...) compare equal.
    pub fn normalized(&self, arrays: bool) -> Reply {
        let sort = |v: &Vec<Reply>| {
            let mut v: Vec<Reply> = v.iter().map(|r| r.normalized(arrays)).collect();
            v.sort_by_key(|a| format!("{a:?}"));
            v
        };
        match self {
            Reply::Set(v) => Reply::Set(sort(v)),
            Reply::Array(v) if arrays => Reply::Array(sort(v)),
            Reply::Map(kv) => {
                let mut kv: Vec<(Reply, Reply)> = kv
                    .iter()
                    .map(|(k, v)| (k.normalized(arrays), v.normalized(arrays)))
                    .collect();
                kv.sort_by_key(|a| format!("{a:?}"));
                Reply::Map(kv)
            }
            r => r.clone(),
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(i) => Some(*i),
            _ => None,
        }
    }
}

/// The compact view of a reply: RESP3 aggregates flattened with their type byte, scalars
/// the RESP2 way.
#[derive(Debug, Clone, PartialEq)]
pub enum R {
    Simple(String),
    Err(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Arr(Vec<R>),
    /// RESP3 aggregate with its type byte (% ~ > |) flattened to elements.
    Agg(u8, Vec<R>),
    /// Another type byte and the rest of its line; `(0, "")` when the connection closed.
    Other(u8, String),
}

impl From<Reply> for R {
    fn from(r: Reply) -> R {
        let all = |v: Vec<Reply>| v.into_iter().map(R::from).collect::<Vec<_>>();
        let flat = |kv: Vec<(Reply, Reply)>| {
            kv.into_iter()
                .flat_map(|(k, v)| [R::from(k), R::from(v)])
                .collect::<Vec<_>>()
        };
        match r {
            Reply::Simple(s) => R::Simple(s),
            Reply::Error(s) => R::Err(s),
            Reply::Int(i) => R::Int(i),
            Reply::Bulk(b) | Reply::BlobError(b) => R::Bulk(b),
            Reply::Null | Reply::NullArray => R::Nil,
            Reply::Array(v) => R::Arr(all(v)),
            Reply::Set(v) => R::Agg(b'~', all(v)),
            Reply::Push(v) => R::Agg(b'>', all(v)),
            Reply::Map(kv) => R::Agg(b'%', flat(kv)),
            Reply::Attr(kv) => R::Agg(b'|', flat(kv)),
            Reply::Double(s) => R::Other(b',', s),
            Reply::Bool(b) => R::Other(b'#', if b { "t" } else { "f" }.into()),
            Reply::Other(line) => {
                let t = line.as_bytes().first().copied().unwrap_or(0);
                R::Other(t, line.get(1..).unwrap_or("").to_string())
            }
            Reply::Eof => R::Other(0, String::new()),
        }
    }
}

impl R {
    /// The reply rendered compactly for assertions.
    pub fn s(&self) -> String {
        match self {
            R::Simple(s) => s.clone(),
            R::Err(s) => s.clone(),
            R::Int(i) => i.to_string(),
            R::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            R::Nil => "(nil)".into(),
            R::Arr(v) | R::Agg(_, v) => {
                format!(
                    "[{}]",
                    v.iter().map(|x| x.s()).collect::<Vec<_>>().join(",")
                )
            }
            R::Other(_, s) => s.clone(),
        }
    }
}

/// One request as RESP bytes (an array of bulk strings).
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// Reads one reply from `r`. An empty read (closed connection) is [`Reply::Eof`].
pub fn read_reply(r: &mut impl BufRead) -> Reply {
    let l = read_line(r);
    if l.is_empty() {
        return Reply::Eof;
    }
    let (t, rest) = l.split_at(1);
    let n = || {
        rest.parse::<i64>()
            .unwrap_or_else(|e| panic!("length {l:?}: {e}"))
    };
    let blob = |r: &mut dyn BufRead, len: i64| {
        let len = usize::try_from(len).unwrap_or_else(|e| panic!("length {len}: {e}"));
        let mut b = vec![0u8; len + 2];
        r.read_exact(&mut b).expect("bulk");
        b.truncate(len);
        b
    };
    match t {
        "+" => Reply::Simple(rest.into()),
        "-" => Reply::Error(rest.into()),
        ":" => Reply::Int(n()),
        "$" | "=" => match n() {
            len if len < 0 => Reply::Null,
            len => Reply::Bulk(blob(r, len)),
        },
        "!" => Reply::BlobError(blob(r, n())),
        "*" | "~" | ">" => {
            if n() < 0 {
                return Reply::NullArray;
            }
            let v = (0..n()).map(|_| read_reply(r)).collect();
            match t {
                "*" => Reply::Array(v),
                "~" => Reply::Set(v),
                _ => Reply::Push(v),
            }
        }
        "%" | "|" => {
            let kv = (0..n()).map(|_| (read_reply(r), read_reply(r))).collect();
            if t == "%" {
                Reply::Map(kv)
            } else {
                Reply::Attr(kv)
            }
        }
        "_" => Reply::Null,
        "," => Reply::Double(rest.into()),
        "#" => Reply::Bool(rest == "t"),
        _ => Reply::Other(l.clone()),
    }
}

/// Reads one complete reply from `r` as the exact bytes the server sent (nested values
/// included), for byte-exact transcripts. Panics when the connection closes mid-value.
pub fn read_raw_reply(r: &mut impl BufRead, out: &mut Vec<u8>) {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).expect("read line");
    assert!(
        line.len() >= 3 && line.ends_with(b"\r\n"),
        "connection closed: {line:?}"
    );
    out.extend_from_slice(&line);
    let n: i64 = String::from_utf8_lossy(&line[1..line.len() - 2])
        .parse()
        .unwrap_or(0);
    match line[0] {
        b'$' | b'=' | b'!' if n >= 0 => {
            let len = usize::try_from(n).unwrap_or(0);
            let mut b = vec![0u8; len + 2];
            r.read_exact(&mut b).expect("read bulk");
            out.extend_from_slice(&b);
        }
        b'*' | b'>' | b'~' => {
            for _ in 0..n.max(0) {
                read_raw_reply(r, out);
            }
        }
        b'%' | b'|' => {
            for _ in 0..2 * n.max(0) {
                read_raw_reply(r, out);
            }
        }
        _ => {}
    }
}

/// One line without its CRLF ("" at end of stream).
fn read_line(r: &mut impl BufRead) -> String {
    let mut l = String::new();
    r.read_line(&mut l).expect("read line");
    l.trim_end_matches("\r\n").to_string()
}

/// A raw RESP connection reading typed [`Reply`]s.
pub struct Conn {
    pub r: BufReader<TcpStream>,
    pub w: TcpStream,
}

impl Conn {
    /// Connects to 127.0.0.1:`port` with a 30 s read timeout (a hung server fails the test).
    pub fn try_connect(port: u16) -> std::io::Result<Conn> {
        Conn::try_connect_addr(&format!("127.0.0.1:{port}"))
    }

    pub fn try_connect_addr(addr: &str) -> std::io::Result<Conn> {
        let s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Conn {
            r: BufReader::new(s.try_clone()?),
            w: s,
        })
    }

    pub fn connect(port: u16) -> Conn {
        Conn::try_connect(port).unwrap_or_else(|e| panic!("connect to {port}: {e}"))
    }

    /// Connects and switches to RESP3 when `resp3`.
    pub fn with_proto(port: u16, resp3: bool) -> Conn {
        let mut c = Conn::connect(port);
        if resp3 {
            let r = c.cmd(&["HELLO", "3"]);
            assert!(matches!(r, Reply::Map(_)), "HELLO 3 -> {r:?}");
        }
        c
    }

    /// Sends one command (text arguments).
    pub fn send(&mut self, args: &[&str]) {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.raw_write(&encode(&a));
    }

    /// Writes pre-encoded bytes (binary values, malformed input, pipelines).
    pub fn raw_write(&mut self, b: &[u8]) {
        self.w.write_all(b).expect("write");
    }

    /// Writes `bytes` (a pipeline of `n` requests) from another thread, so that neither
    /// side blocks on a full socket buffer, and reads the `n` replies.
    pub fn pipeline(&mut self, bytes: Vec<u8>, n: usize) -> Vec<Reply> {
        let mut w = self.w.try_clone().expect("clone");
        let writer = std::thread::spawn(move || w.write_all(&bytes));
        let replies = (0..n).map(|_| self.read()).collect();
        writer.join().expect("writer").expect("write");
        replies
    }

    pub fn cmd(&mut self, args: &[&str]) -> Reply {
        self.send(args);
        self.read()
    }

    /// Splits a command line on spaces (arguments in the scripts have no spaces).
    pub fn line(&mut self, line: &str) -> Reply {
        let args: Vec<&str> = line.split_whitespace().collect();
        self.cmd(&args)
    }

    pub fn read(&mut self) -> Reply {
        read_reply(&mut self.r)
    }

    /// One reply as the exact bytes the server sent.
    pub fn read_raw(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        read_raw_reply(&mut self.r, &mut out);
        out
    }

    /// True when the server closed the connection (reads EOF within 10 s).
    pub fn closed(&mut self) -> bool {
        let _ = self.w.set_read_timeout(Some(Duration::from_secs(10)));
        let mut buf = [0u8; 1024];
        loop {
            match self.r.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    }
}

/// The same connection, reads as [`R`].
pub struct Raw(pub Conn);

impl std::ops::Deref for Raw {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        &self.0
    }
}

impl std::ops::DerefMut for Raw {
    fn deref_mut(&mut self) -> &mut Conn {
        &mut self.0
    }
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        Raw(Conn::connect(port))
    }

    /// Writes bytes as they are.
    pub fn send(&mut self, bytes: &[u8]) {
        self.0.raw_write(bytes);
    }

    /// Sends a command and reads one reply.
    pub fn cmd(&mut self, args: &[&str]) -> R {
        self.0.send(args);
        self.read()
    }

    pub fn read_line(&mut self) -> String {
        read_line(&mut self.0.r)
    }

    pub fn read(&mut self) -> R {
        R::from(self.0.read())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Reply {
        read_reply(&mut std::io::Cursor::new(bytes.to_vec()))
    }

    #[test]
    fn encodes_arrays_of_bulk_strings() {
        assert_eq!(
            encode(&[b"SET", b"k", b"a\r\nb"]),
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n".to_vec()
        );
    }

    #[test]
    fn parses_resp2_and_resp3() {
        assert_eq!(parse(b"+OK\r\n"), Reply::Simple("OK".into()));
        assert_eq!(parse(b"-ERR x\r\n"), Reply::Error("ERR x".into()));
        assert_eq!(parse(b":-7\r\n"), Reply::Int(-7));
        assert_eq!(parse(b"$3\r\na\r\n\r\n"), Reply::Bulk(b"a\r\n".to_vec()));
        assert_eq!(parse(b"$-1\r\n"), Reply::Null);
        assert_eq!(parse(b"*-1\r\n"), Reply::NullArray);
        assert_eq!(parse(b"_\r\n"), Reply::Null);
        assert_eq!(parse(b",1.5\r\n"), Reply::Double("1.5".into()));
        assert_eq!(parse(b"#t\r\n"), Reply::Bool(true));
        assert_eq!(
            parse(b"%1\r\n+a\r\n~2\r\n:1\r\n:2\r\n"),
            Reply::Map(vec![(
                Reply::Simple("a".into()),
                Reply::Set(vec![Reply::Int(1), Reply::Int(2)])
            )])
        );
        assert_eq!(parse(b"(123\r\n"), Reply::Other("(123".into()));
        assert_eq!(parse(b""), Reply::Eof);
    }

    #[test]
    fn raw_reads_take_exactly_one_value() {
        let bytes = b">2\r\n$7\r\nmessage\r\n%1\r\n+a\r\n:1\r\n+PONG\r\n".to_vec();
        let mut r = std::io::Cursor::new(bytes);
        let mut out = Vec::new();
        read_raw_reply(&mut r, &mut out);
        assert_eq!(out, b">2\r\n$7\r\nmessage\r\n%1\r\n+a\r\n:1\r\n".to_vec());
        assert_eq!(read_reply(&mut r), Reply::Simple("PONG".into()));
    }

    #[test]
    fn the_compact_view_flattens_aggregates() {
        let r = R::from(parse(b"%1\r\n+a\r\n>1\r\n$1\r\nx\r\n"));
        assert_eq!(
            r,
            R::Agg(
                b'%',
                vec![
                    R::Simple("a".into()),
                    R::Agg(b'>', vec![R::Bulk(b"x".to_vec())])
                ]
            )
        );
        assert_eq!(r.s(), "[a,[x]]");
        assert_eq!(R::from(parse(b"*-1\r\n")), R::Nil);
        assert_eq!(R::from(parse(b",2\r\n")), R::Other(b',', "2".into()));
        assert_eq!(R::from(Reply::Eof), R::Other(0, String::new()));
    }

    #[test]
    fn normalized_sorts_unordered_replies() {
        let a = Reply::Set(vec![Reply::Int(2), Reply::Int(1)]);
        let b = Reply::Set(vec![Reply::Int(1), Reply::Int(2)]);
        assert_eq!(a.normalized(false), b.normalized(false));
    }
}
