//! Writes a `tessera_cluster::Reply` into the node's RESP output buffer.

use tessera_cluster::Reply;

use crate::resp::Out;

/// Encodes `r` for the client's protocol (maps and verbatim strings degrade in RESP2).
pub fn write(out: &mut Out, r: &Reply) {
    match r {
        Reply::Ok => out.ok(),
        Reply::Simple(s) => out.simple(s),
        Reply::Error(e) => out.error(e),
        Reply::Int(i) => out.int(*i),
        Reply::Bulk(b) => out.bulk(b),
        Reply::Verbatim(s) => out.verbatim(s.as_bytes(), "txt"),
        Reply::Nil => out.null(),
        Reply::Array(v) => {
            out.array(v.len());
            for x in v {
                write(out, x);
            }
        }
        Reply::Map(v) => {
            out.map(v.len());
            for (k, x) in v {
                write(out, k);
                write(out, x);
            }
        }
    }
}
