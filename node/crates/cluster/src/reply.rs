//! A small RESP value type for CLUSTER command replies (the node converts it to its own).

/// A RESP reply. `Map` is a RESP3 map; in RESP2 it is sent as a flat array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Ok,
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    /// RESP3 verbatim string of format "txt" (CLUSTER INFO / NODES); a bulk string in RESP2.
    Verbatim(String),
    Nil,
    Array(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
}

impl Reply {
    pub fn err(s: impl Into<String>) -> Reply {
        Reply::Error(s.into())
    }
    pub fn bulk(s: impl AsRef<[u8]>) -> Reply {
        Reply::Bulk(s.as_ref().to_vec())
    }
    /// RESP2 encoding (maps flattened), handy for tests and simple hosts.
    pub fn to_resp2(&self, out: &mut Vec<u8>) {
        match self {
            Reply::Ok => out.extend_from_slice(b"+OK\r\n"),
            Reply::Simple(s) => {
                out.push(b'+');
                out.extend_from_slice(s.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Error(s) => {
                out.push(b'-');
                out.extend_from_slice(s.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Int(i) => out.extend_from_slice(format!(":{i}\r\n").as_bytes()),
            Reply::Bulk(b) => {
                out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Verbatim(s) => Reply::Bulk(s.as_bytes().to_vec()).to_resp2(out),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::Array(v) => {
                out.extend_from_slice(format!("*{}\r\n", v.len()).as_bytes());
                for r in v {
                    r.to_resp2(out);
                }
            }
            Reply::Map(v) => {
                out.extend_from_slice(format!("*{}\r\n", v.len() * 2).as_bytes());
                for (k, r) in v {
                    k.to_resp2(out);
                    r.to_resp2(out);
                }
            }
        }
    }
}
