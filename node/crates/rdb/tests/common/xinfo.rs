//! Reads a stream back from a live server (XINFO STREAM FULL COUNT 0, XRANGE) into the
//! model, to compare with what our decoder found or what our encoder wrote.

use bytes::Bytes;
use redis::Value;
use tessera_rdb::{RdbStream, RdbStreamConsumer, RdbStreamGroup, StreamId};

/// An XRANGE entry as the redis crate gives it.
type RawEntry = (String, Vec<(Vec<u8>, Vec<u8>)>);

/// Parses `<ms>-<seq>`.
pub fn parse_id(s: &[u8]) -> StreamId {
    let t = std::str::from_utf8(s).expect("utf8 id");
    let (ms, seq) = t.split_once('-').expect("id with a dash");
    StreamId {
        ms: ms.parse().expect("ms"),
        seq: seq.parse().expect("seq"),
    }
}

fn bytes_of(v: &Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b.clone(),
        Value::SimpleString(s) => s.as_bytes().to_vec(),
        Value::Int(i) => i.to_string().into_bytes(),
        other => panic!("expected a string, got {other:?}"),
    }
}

fn int_of(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn array_of(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) => a,
        other => panic!("expected an array, got {other:?}"),
    }
}

/// A flat RESP2 `[k1, v1, k2, v2, ...]` reply, looked up by key.
struct Fields<'a>(&'a [Value]);

impl<'a> Fields<'a> {
    fn new(v: &'a Value) -> Self {
        Fields(array_of(v))
    }
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.0
            .chunks(2)
            .find(|c| bytes_of(&c[0]) == key.as_bytes())
            .map(|c| &c[1])
    }
    fn must(&self, key: &str) -> &'a Value {
        self.get(key)
            .unwrap_or_else(|| panic!("XINFO field {key} missing"))
    }
}

/// The stream at `key` as the server reports it.
pub fn fetch_stream(con: &mut redis::Connection, key: &[u8]) -> RdbStream {
    let info: Value = redis::cmd("XINFO")
        .arg("STREAM")
        .arg(key)
        .arg("FULL")
        .arg("COUNT")
        .arg(0)
        .query(con)
        .expect("XINFO STREAM FULL");
    let f = Fields::new(&info);
    let entries: Vec<(StreamId, Vec<(Bytes, Bytes)>)> = array_of(f.must("entries"))
        .iter()
        .map(|e| {
            let e = array_of(e);
            let kv = array_of(&e[1]);
            let pairs = kv
                .chunks(2)
                .map(|p| (Bytes::from(bytes_of(&p[0])), Bytes::from(bytes_of(&p[1]))))
                .collect();
            (parse_id(&bytes_of(&e[0])), pairs)
        })
        .collect();
    assert_eq!(int_of(f.must("length")) as usize, entries.len());
    let groups = array_of(f.must("groups"))
        .iter()
        .map(|g| {
            let g = Fields::new(g);
            let pel = array_of(g.must("pending"))
                .iter()
                .map(|p| {
                    let p = array_of(p);
                    (
                        parse_id(&bytes_of(&p[0])),
                        int_of(&p[2]) as u64,
                        int_of(&p[3]) as u64,
                    )
                })
                .collect();
            let consumers = array_of(g.must("consumers"))
                .iter()
                .map(|c| {
                    let c = Fields::new(c);
                    RdbStreamConsumer {
                        name: Bytes::from(bytes_of(c.must("name"))),
                        seen_time: int_of(c.must("seen-time")) as u64,
                        active_time: c.get("active-time").map(|v| int_of(v) as u64),
                        pending: array_of(c.must("pending"))
                            .iter()
                            .map(|p| parse_id(&bytes_of(&array_of(p)[0])))
                            .collect(),
                    }
                })
                .collect();
            RdbStreamGroup {
                name: Bytes::from(bytes_of(g.must("name"))),
                last_id: parse_id(&bytes_of(g.must("last-delivered-id"))),
                entries_read: match g.must("entries-read") {
                    Value::Nil => -1,
                    v => int_of(v),
                },
                pel,
                consumers,
            }
        })
        .collect();
    let range: Vec<RawEntry> = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(con)
        .expect("XRANGE");
    let range: Vec<_> = range
        .into_iter()
        .map(|(id, kv)| {
            let kv = kv
                .into_iter()
                .map(|(a, b)| (Bytes::from(a), Bytes::from(b)))
                .collect::<Vec<_>>();
            (parse_id(id.as_bytes()), kv)
        })
        .collect();
    assert_eq!(range, entries, "XRANGE and XINFO STREAM FULL disagree");
    RdbStream {
        entries,
        last_id: parse_id(&bytes_of(f.must("last-generated-id"))),
        first_id: parse_id(&bytes_of(f.must("recorded-first-entry-id"))),
        max_deleted_id: parse_id(&bytes_of(f.must("max-deleted-entry-id"))),
        entries_added: int_of(f.must("entries-added")) as u64,
        groups,
    }
}

/// XPENDING summary and extended form (minus idle times) of every group: a second view of
/// the PELs.
pub fn xpending(con: &mut redis::Connection, key: &[u8], s: &RdbStream) -> Vec<Value> {
    let mut out = Vec::new();
    for g in &s.groups {
        let summary: Value = redis::cmd("XPENDING")
            .arg(key)
            .arg(g.name.as_ref())
            .query(con)
            .expect("XPENDING");
        out.push(summary);
        let ext: Value = redis::cmd("XPENDING")
            .arg(key)
            .arg(g.name.as_ref())
            .arg("-")
            .arg("+")
            .arg(1_000_000)
            .query(con)
            .expect("XPENDING extended");
        // [id, consumer, idle ms, deliveries]: idle depends on the clock, so it is dropped.
        let ext = array_of(&ext)
            .iter()
            .map(|e| {
                let mut e = array_of(e).to_vec();
                e[2] = Value::Nil;
                Value::Array(e)
            })
            .collect();
        out.push(Value::Array(ext));
    }
    out
}
