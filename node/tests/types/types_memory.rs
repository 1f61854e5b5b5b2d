//! Memory per key of small collections, and per element of one big collection (issue 2),
//! measured against redis-server 7.0 in the same run: INFO used_memory grows by about the same
//! (or less) per key for a small hash, set, intset, sorted set and list, and per element of a
//! 100k-element sorted set, hash, set and list. Ratios, not absolute bytes, so neither the machine's load nor the
//! allocator's state matters; both servers get the same keys and commands.

use tessera_testkit::diff::*;

/// Keys per shape. They share one hash tag, so they sit in one slot's table on tessera (as in
/// redis's single dict): with 50k keys spread over 16384 per-slot tables, the tables' fixed
/// cost would dominate, which 1M keys amortise (scripts/bench-node.sh measures those).
const KEYS: usize = 50_000;
/// Commands written before their replies are read (keeps socket buffers small).
const BATCH: usize = 1000;

fn used_memory_now(c: &mut Conn) -> i64 {
    let info = match c.cmd(&["INFO", "memory"]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO memory: {other:?}"),
    };
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no used_memory in {info}"))
}

/// used_memory once it has stopped moving (three equal reads 50 ms apart, at most ~5 s), so
/// nothing still being freed or built in the background skews a reading.
fn used_memory(c: &mut Conn) -> i64 {
    let mut last = used_memory_now(c);
    let mut same = 0;
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = used_memory_now(c);
        same = if now == last { same + 1 } else { 0 };
        last = now;
        if same == 2 {
            break;
        }
    }
    last
}

/// The command that creates key `k` of `shape`.
fn command(shape: &str, k: &str) -> Vec<String> {
    let args: &[&str] = match shape {
        "hash" => &["HSET", k, "f1", "vvvvvvvv", "f2", "wwwwwwww"],
        "set" => &["SADD", k, "red", "green", "blue"],
        "intset" => &["SADD", k, "1", "2", "3"],
        "zset" => &["ZADD", k, "1", "red", "2", "green", "3", "blue"],
        _ => &["RPUSH", k, "red", "green", "blue"],
    };
    args.iter().map(|s| s.to_string()).collect()
}

/// Bytes of used_memory per key after loading `KEYS` keys of `shape` into an empty server,
/// and the first key's OBJECT ENCODING.
fn per_key(port: u16, shape: &str) -> (i64, String) {
    let mut c = Conn::connect(port);
    assert_eq!(c.cmd(&["FLUSHALL", "SYNC"]), Reply::Simple("OK".into()));
    let before = used_memory(&mut c);
    for start in (0..KEYS).step_by(BATCH) {
        let end = (start + BATCH).min(KEYS);
        for i in start..end {
            let args = command(shape, &format!("{{t}}key:{i:012}"));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            c.send(&args);
        }
        for _ in start..end {
            let r = c.read();
            assert!(matches!(r, Reply::Int(_)), "{shape}: {r:?}");
        }
    }
    let after = used_memory(&mut c);
    let enc = match c.cmd(&["OBJECT", "ENCODING", "{t}key:000000000000"]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("OBJECT ENCODING: {other:?}"),
    };
    assert_eq!(c.cmd(&["FLUSHALL", "SYNC"]), Reply::Simple("OK".into()));
    ((after - before) / KEYS as i64, enc)
}

/// A tessera-node beside `reference`, neither of them saving: no snapshot may start while
/// loading (tessera's default save points would fire).
fn beside(reference: Server) -> (Server, Server) {
    let t = tessera();
    for port in [t.port, reference.port] {
        let ok = Conn::connect(port).cmd(&["CONFIG", "SET", "save", ""]);
        assert_eq!(ok, Reply::Simple("OK".into()));
    }
    (t, reference)
}

/// Measures each `(shape, bound)` with `measure` on tessera and on a reference server (its
/// name and port), and fails naming every shape whose tessera/reference ratio of bytes per
/// `unit` is above its bound, with all the figures. `same_encoding`: OBJECT ENCODING must
/// match too (valkey packs small sets as listpacks, which Redis 7.0 calls hashtable).
fn compare(
    t: u16,
    (name, port): (&str, u16),
    unit: &str,
    shapes: &[(&str, f64)],
    measure: fn(u16, &str) -> (i64, String),
    same_encoding: bool,
) {
    let mut report = Vec::new();
    let mut over = Vec::new();
    for &(shape, bound) in shapes {
        let (tb, tenc) = measure(t, shape);
        let (rb, renc) = measure(port, shape);
        if same_encoding {
            assert_eq!(tenc, renc, "{shape}: OBJECT ENCODING differs");
        }
        assert!(rb > 0, "{shape}: {name} used_memory did not grow");
        let ratio = tb as f64 / rb as f64;
        report.push(format!(
            "{shape}: tessera {tb} B/{unit}, {name} {rb} B/{unit}, {ratio:.2}x"
        ));
        if ratio > bound {
            over.push(format!("{shape} {ratio:.2}x > {bound}"));
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(over.is_empty(), "{over:?}\n{}", report.join("\n"));
}

#[test]
fn small_collections_cost_no_more_per_key_than_redis() {
    let (t, r) = beside(redis());
    // Upper bounds on tessera/redis. Measured here: hash 0.75, set 0.31, intset 0.68, zset
    // 0.85, list 0.44 (issue 23's targets are checked at 1M keys by scripts/bench-node.sh).
    // With the 8-byte len/cap header that packs had before the 1-byte one, each pack's block
    // was 8 bytes bigger: hash 0.81, set 0.34, zset 0.92, list 0.48. A Box per collection
    // around its packed buffer (older still) cost 32 bytes more per hash, set and zset, and
    // an intset on the heap instead of inline in the ThinBuf word is 1.02-1.07: each bound
    // below fails on those.
    let shapes = [
        ("hash", 0.78),
        ("set", 0.33),
        ("intset", 0.9),
        ("zset", 0.88),
        ("list", 0.46),
    ];
    compare(t.port, ("redis", r.port), "key", &shapes, per_key, true);
}

/// Elements in the one big collection of each shape (issue 2, big encodings).
const ELEMENTS: usize = 100_000;
/// Elements per command when filling a big collection.
const PER_CMD: usize = 100;

/// The command adding elements `range` to the big collection of `shape`: members
/// `member:%08d`, zset scores `i`, hash values `v<i>`.
fn big_command(shape: &str, range: std::ops::Range<usize>) -> Vec<String> {
    let (cmd, key) = match shape {
        "zset" => ("ZADD", "big:zset"),
        "hash" => ("HSET", "big:hash"),
        "set" => ("SADD", "big:set"),
        _ => ("RPUSH", "big:list"),
    };
    let mut args = vec![cmd.to_string(), key.to_string()];
    for i in range {
        let member = format!("member:{i:08}");
        match shape {
            "zset" => args.extend([i.to_string(), member]),
            "hash" => args.extend([member, format!("v{i}")]),
            _ => args.push(member),
        }
    }
    args
}

/// Bytes of used_memory per element after building one `ELEMENTS`-element collection of
/// `shape` in an empty server, and its OBJECT ENCODING.
fn per_element(port: u16, shape: &str) -> (i64, String) {
    let mut c = Conn::connect(port);
    assert_eq!(c.cmd(&["FLUSHALL", "SYNC"]), Reply::Simple("OK".into()));
    let before = used_memory(&mut c);
    // 100 commands (10,000 elements) written before their replies are read.
    let batch = 100 * PER_CMD;
    let key = format!("big:{shape}");
    for start in (0..ELEMENTS).step_by(batch) {
        let end = (start + batch).min(ELEMENTS);
        for s in (start..end).step_by(PER_CMD) {
            let args = big_command(shape, s..(s + PER_CMD).min(end));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            c.send(&args);
        }
        for _ in (start..end).step_by(PER_CMD) {
            let r = c.read();
            assert!(matches!(r, Reply::Int(_)), "{shape}: {r:?}");
        }
    }
    let len_cmd = match shape {
        "zset" => "ZCARD",
        "hash" => "HLEN",
        "set" => "SCARD",
        _ => "LLEN",
    };
    assert_eq!(
        c.cmd(&[len_cmd, &key]),
        Reply::Int(ELEMENTS as i64),
        "{shape}"
    );
    let after = used_memory(&mut c);
    let enc = match c.cmd(&["OBJECT", "ENCODING", &key]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("OBJECT ENCODING: {other:?}"),
    };
    assert_eq!(c.cmd(&["FLUSHALL", "SYNC"]), Reply::Simple("OK".into()));
    ((after - before) / ELEMENTS as i64, enc)
}

#[test]
fn big_collections_cost_no_more_per_element_than_redis() {
    let (t, r) = beside(redis());
    // Upper bounds on tessera/redis per element. Measured here (100k elements, stable run to
    // run): zset 73 vs 128 B = 0.57x, hash 51 vs 82 = 0.62x, set 33 vs 80 = 0.41x, list 17 vs
    // 17 = 1.00x. With members as Box<[u8]> (two words) instead of ThinBufs (one), the set
    // was 0.55x and the zset 0.65x; an older big zset (member copied into an IndexedMap beside
    // a skiplist node with a boxed member and a Vec of levels: 4 allocations per element) was
    // ~1.6x and the older big hash (field and value boxed separately) ~1.3x: all fail these
    // bounds.
    let shapes = [("zset", 0.62), ("hash", 0.7), ("set", 0.48), ("list", 1.1)];
    compare(
        t.port,
        ("redis", r.port),
        "element",
        &shapes,
        per_element,
        true,
    );
}

/// Issue 23's memory target for big collections: no more used_memory per element than
/// valkey-server 9 (whose hashtable with embedded keys leads on memory), side by side.
/// (Per key, small collections meet it in `make bench-node`'s shape, 1M keys with 16-byte
/// names over all slots; with this file's 19-byte names in one slot's table they do not:
/// a hash is 104 bytes against valkey's 96, see issue 23's notes.)
#[test]
fn big_collections_cost_no_more_per_element_than_valkey() {
    let (t, v) = beside(Server::valkey(&["--appendonly", "no"]));
    // Measured here, tessera / valkey B/element: zset 73 / 75-76, hash 51 / 54, set 33 /
    // 38-39, list 17 / 17. With members as Box<[u8]> (two words each) instead of ThinBufs the set
    // was 44 and the zset 83: both fail.
    // Lists are the same quicklist of 8 KiB listpacks in both (17 bytes each): their bound
    // allows the one byte that is the figure's resolution.
    let shapes = [("zset", 1.0), ("hash", 1.0), ("set", 1.0), ("list", 1.06)];
    compare(
        t.port,
        ("valkey", v.port),
        "element",
        &shapes,
        per_element,
        false,
    );
}
