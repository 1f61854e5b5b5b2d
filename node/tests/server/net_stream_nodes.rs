//! stream-node-max-entries / stream-node-max-bytes shape a stream's nodes, against
//! redis-server 7.0 (issue 18: unit/type/stream, unit/lazyfree count nodes): XINFO STREAM's
//! radix-tree-keys and what `MAXLEN ~` keeps follow the configured node size.

use tessera_testkit::*;

/// radix-tree-keys (the node count) from XINFO STREAM.
fn nodes(c: &mut Conn, key: &str) -> String {
    match c.cmd(&["XINFO", "STREAM", key]) {
        Reply::Array(v) => {
            let mut it = v.iter();
            while let Some(k) = it.next() {
                let val = it.next();
                if *k == Reply::Bulk(b"radix-tree-keys".to_vec()) {
                    return format!("{val:?}");
                }
            }
            "no radix-tree-keys".into()
        }
        other => format!("{other:?}"),
    }
}

fn node_story(s: &Server) -> Vec<String> {
    let mut c = s.resp();
    let mut out = Vec::new();
    for (entries, bytes) in [("5", "4096"), ("0", "4096"), ("100", "60"), ("3", "0")] {
        let key = format!("s-{entries}-{bytes}");
        out.push(format!(
            "{:?}",
            c.cmd(&[
                "CONFIG",
                "SET",
                "stream-node-max-entries",
                entries,
                "stream-node-max-bytes",
                bytes
            ])
        ));
        for i in 1..=23 {
            c.cmd(&["XADD", &key, &format!("{i}-1"), "field", "value"]);
        }
        out.push(format!("{key}: nodes {}", nodes(&mut c, &key)));
        out.push(format!(
            "{key}: MAXLEN ~ 10 trims {:?}",
            c.cmd(&["XTRIM", &key, "MAXLEN", "~", "10"])
        ));
        out.push(format!("{key}: XLEN {:?}", c.cmd(&["XLEN", &key])));
    }
    // `~` without LIMIT works through at most 100 nodes' worth of entries
    // (unit/type/stream 'XTRIM with ~ is limited'); 0 entries per node: 10000.
    for entries in ["1", "0"] {
        let key = format!("lim-{entries}");
        c.cmd(&["CONFIG", "SET", "stream-node-max-entries", entries]);
        c.cmd(&["CONFIG", "SET", "stream-node-max-bytes", "4096"]);
        for i in 1..=102 {
            c.cmd(&["XADD", &key, &format!("{i}-1"), "x", "v"]);
        }
        out.push(format!(
            "{key}: XTRIM ~ 1 trims {:?}, XLEN {:?}",
            c.cmd(&["XTRIM", &key, "MAXLEN", "~", "1"]),
            c.cmd(&["XLEN", &key])
        ));
    }
    out
}

#[test]
fn stream_node_limits_like_redis() {
    let [r, t] = [Launch::redis(), Launch::tessera()].map(|l| l.args(&["--save", ""]).start());
    let (want, got) = (node_story(&r), node_story(&t));
    assert_eq!(got, want, "tessera (left) vs redis-server (right)");
}
