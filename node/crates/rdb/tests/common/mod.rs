//! Shared helpers for the integration tests: a redis-server process guard, reading a key back
//! from a live server into an `RdbValue`, and value normalisation for comparisons.
#![allow(dead_code)]

pub mod gen;
pub mod raw;
pub mod xinfo;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tessera_rdb::RdbValue;

/// A reference program from PATH (Debian's redis-server and redis-tools, `make deps`); a
/// missing one fails the test, saying how to install it.
fn reference(cell: &'static OnceLock<String>, name: &str) -> &'static str {
    cell.get_or_init(|| {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .map(|d| d.join(name))
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("{name} not found on PATH: run `make deps`"))
            .display()
            .to_string()
    })
}

pub fn redis_server() -> &'static str {
    static CELL: OnceLock<String> = OnceLock::new();
    reference(&CELL, "redis-server")
}

pub fn redis_check_rdb() -> &'static str {
    static CELL: OnceLock<String> = OnceLock::new();
    reference(&CELL, "redis-check-rdb")
}

/// The rdb crate's test port range is 31500-31999.
const PORT_BASE: u16 = 31500;
const PORT_SPAN: u16 = 500;
static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

fn candidate_port() -> u16 {
    let n = NEXT_PORT.fetch_add(1, Ordering::Relaxed);
    PORT_BASE + ((std::process::id() as u16).wrapping_mul(7).wrapping_add(n) % PORT_SPAN)
}

fn port_is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// A redis-server child, killed (and reaped) on drop.
pub struct RedisServer {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RedisServer {
    /// Starts redis-server 7.0 with no save points in `dir`, loading `dbfilename` if present.
    /// Deep payload sanitisation is on, so malformed encodings we write would be caught.
    pub fn start(dir: &Path, dbfilename: &str) -> RedisServer {
        Self::start_with(Path::new(redis_server()), dir, dbfilename)
    }

    /// Same as [`RedisServer::start`] with another server binary (valkey-server).
    pub fn start_with(bin: &Path, dir: &Path, dbfilename: &str) -> RedisServer {
        Self::start_args(bin, dir, dbfilename, &[])
    }

    /// Starts `bin` with the standard test options plus `extra` directives.
    pub fn start_args(bin: &Path, dir: &Path, dbfilename: &str, extra: &[&str]) -> RedisServer {
        for _attempt in 0..20 {
            let port = candidate_port();
            if !port_is_free(port) {
                continue;
            }
            let child = Command::new(bin)
                .args(["--port", &port.to_string()])
                .args(["--bind", "127.0.0.1"])
                .args(["--save", ""])
                .args(["--appendonly", "no"])
                .args(["--dir", &dir.display().to_string()])
                .args(["--dbfilename", dbfilename])
                .args(["--sanitize-dump-payload", "yes"])
                .args(["--logfile", &dir.join("redis.log").display().to_string()])
                .args(extra)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            let mut server = RedisServer {
                child,
                port,
                dir: dir.to_path_buf(),
            };
            if server.wait_ready() {
                return server;
            }
        }
        let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
        panic!("could not start {}; log:\n{log}", bin.display());
    }

    /// Polls PING until the server answers and has finished loading (generous: 30 s).
    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if let Ok(mut con) = self.try_connection() {
                if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    fn try_connection(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?.get_connection()
    }

    pub fn connection(&self) -> redis::Connection {
        self.try_connection().expect("connect to redis-server")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }
}

/// valkey-server 9.1: $VALKEY_SERVER, the repo's .tools/bin, or PATH.
pub fn valkey_server() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("VALKEY_SERVER") {
        return Some(PathBuf::from(p));
    }
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../.tools/bin/valkey-server");
    if tools.exists() {
        return Some(tools);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("valkey-server"))
            .find(|p| p.exists())
    })
}

/// Reads `key` from a live server into the value model, using TYPE and the read commands.
pub fn fetch_value(con: &mut redis::Connection, key: &[u8]) -> Option<RdbValue> {
    let ty: String = redis::cmd("TYPE").arg(key).query(con).expect("TYPE");
    let b = |v: Vec<Vec<u8>>| v.into_iter().map(Bytes::from).collect::<Vec<_>>();
    Some(match ty.as_str() {
        "none" => return None,
        "string" => {
            let v: Vec<u8> = redis::cmd("GET").arg(key).query(con).expect("GET");
            RdbValue::String(Bytes::from(v))
        }
        "list" => RdbValue::List(b(redis::cmd("LRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .query(con)
            .expect("LRANGE"))),
        "set" => RdbValue::Set(b(redis::cmd("SMEMBERS")
            .arg(key)
            .query(con)
            .expect("SMEMBERS"))),
        "hash" => {
            let flat = b(redis::cmd("HGETALL").arg(key).query(con).expect("HGETALL"));
            RdbValue::Hash(
                flat.chunks(2)
                    .map(|c| (c[0].clone(), c[1].clone()))
                    .collect(),
            )
        }
        "zset" => {
            let flat = b(redis::cmd("ZRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query(con)
                .expect("ZRANGE"));
            RdbValue::ZSet(
                flat.chunks(2)
                    .map(|c| {
                        let s = std::str::from_utf8(&c[1]).expect("utf8 score");
                        (c[0].clone(), s.parse::<f64>().expect("score"))
                    })
                    .collect(),
            )
        }
        "stream" => RdbValue::Stream(Box::new(xinfo::fetch_stream(con, key))),
        other => panic!("unexpected type {other}"),
    })
}

/// Canonical form for comparisons: sets and hashes sorted, zsets sorted by member.
pub fn normalize(v: &RdbValue) -> RdbValue {
    match v {
        RdbValue::Set(m) => {
            let mut m = m.clone();
            m.sort();
            RdbValue::Set(m)
        }
        RdbValue::Hash(p) => {
            let mut p = p.clone();
            p.sort_by(|a, b| a.0.cmp(&b.0));
            RdbValue::Hash(p)
        }
        RdbValue::ZSet(p) => {
            let mut p = p.clone();
            p.sort_by(|a, b| a.0.cmp(&b.0));
            RdbValue::ZSet(p)
        }
        other => other.clone(),
    }
}

pub fn bs(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// A dataset covering every type in compact and large encodings, with edge-case elements.
/// Returns (key, value, expire_ms).
pub fn sample_dataset(far_future_ms: i64) -> Vec<(Bytes, RdbValue, Option<i64>)> {
    let mut d = Vec::new();
    let s = |k: &str, v: RdbValue| (bs(k), v, None);
    d.push(s("str:small", RdbValue::String(bs("hello"))));
    d.push(s("str:empty", RdbValue::String(bs(""))));
    d.push(s("str:int8", RdbValue::String(bs("-100"))));
    d.push(s("str:int16", RdbValue::String(bs("30000"))));
    d.push(s("str:int32", RdbValue::String(bs("-2000000000"))));
    d.push(s("str:int64", RdbValue::String(bs("9223372036854775807"))));
    d.push(s("str:notint", RdbValue::String(bs("007"))));
    d.push(s("str:lzf", RdbValue::String(bs(&"abcdefgh".repeat(200)))));
    let noisy: Vec<u8> = (0..3000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    d.push(s("str:binary", RdbValue::String(Bytes::from(noisy))));
    d.push(s(
        "list:small",
        RdbValue::List(vec![bs("a"), bs("1"), bs("-5000"), bs("b")]),
    ));
    let big_list: Vec<Bytes> = (0..3000)
        .map(|i| {
            if i % 3 == 0 {
                Bytes::from(i.to_string())
            } else {
                Bytes::from(format!("element-{i}-{}", "x".repeat(i % 90)))
            }
        })
        .chain([Bytes::from(vec![b'z'; 10000]), bs("tail")])
        .collect();
    d.push(s("list:big", RdbValue::List(big_list)));
    let ints: Vec<Bytes> = [
        0i64,
        1,
        -1,
        127,
        128,
        -4096,
        4095,
        32767,
        -32768,
        8388607,
        -8388608,
        2147483647,
        -2147483648,
        i64::MAX,
        i64::MIN,
    ]
    .iter()
    .map(|v| Bytes::from(v.to_string()))
    .collect();
    d.push(s("list:ints", RdbValue::List(ints.clone())));
    d.push(s("set:intset", RdbValue::Set(ints.clone())));
    d.push(s(
        "set:strings",
        RdbValue::Set(vec![bs("x"), bs("y"), bs("12a")]),
    ));
    d.push(s(
        "set:bigints",
        RdbValue::Set((0..600).map(|i| Bytes::from((i * 7).to_string())).collect()),
    ));
    d.push(s(
        "hash:small",
        RdbValue::Hash(vec![
            (bs("f1"), bs("v1")),
            (bs("n"), bs("42")),
            (bs("neg"), bs("-70000")),
        ]),
    ));
    d.push(s(
        "hash:medium",
        RdbValue::Hash(
            (0..300)
                .map(|i| (Bytes::from(format!("f{i}")), Bytes::from(i.to_string())))
                .collect(),
        ),
    ));
    d.push(s(
        "hash:bigvalue",
        RdbValue::Hash(vec![
            (bs("f"), Bytes::from(vec![b'q'; 100])),
            (bs("g"), bs("1")),
        ]),
    ));
    d.push(s(
        "hash:many",
        RdbValue::Hash(
            (0..600)
                .map(|i| {
                    (
                        Bytes::from(format!("field{i}")),
                        Bytes::from(format!("value{i}")),
                    )
                })
                .collect(),
        ),
    ));
    d.push(s(
        "zset:small",
        RdbValue::ZSet(vec![
            (bs("a"), 1.0),
            (bs("b"), -2.5),
            (bs("c"), f64::INFINITY),
            (bs("d"), f64::NEG_INFINITY),
            (bs("e"), 0.1),
            (bs("f"), 1e300),
            (bs("g"), 123456789.0),
        ]),
    ));
    d.push(s(
        "zset:big",
        RdbValue::ZSet(
            (0..400)
                .map(|i| (Bytes::from(format!("m{i}")), i as f64 / 3.0))
                .collect(),
        ),
    ));
    // A stream with a group (no consumers: their seen times come from the server's clock).
    let id = |ms, seq| tessera_rdb::StreamId { ms, seq };
    d.push(s(
        "stream:small",
        RdbValue::Stream(Box::new(tessera_rdb::RdbStream {
            entries: vec![
                (id(1, 1), vec![(bs("a"), bs("1")), (bs("b"), bs("x"))]),
                (id(1, 2), vec![(bs("a"), bs("-5000")), (bs("b"), bs(""))]),
                (id(2, 0), vec![(bs("other"), bs(&"z".repeat(100)))]),
            ],
            last_id: id(7, 3),
            first_id: id(1, 1),
            max_deleted_id: id(0, 0),
            entries_added: 5,
            groups: vec![tessera_rdb::RdbStreamGroup {
                name: bs("g"),
                last_id: id(1, 1),
                entries_read: 1,
                pel: vec![],
                consumers: vec![],
            }],
        })),
    ));
    d.push((
        bs("exp:str"),
        RdbValue::String(bs("soon")),
        Some(far_future_ms),
    ));
    d.push((
        bs("exp:hash"),
        RdbValue::Hash(vec![(bs("a"), bs("b"))]),
        Some(far_future_ms + 12345),
    ));
    d
}

/// Writes a key into a live server with plain commands.
pub fn populate(con: &mut redis::Connection, key: &[u8], v: &RdbValue, expire_ms: Option<i64>) {
    match v {
        RdbValue::String(s) => redis::cmd("SET").arg(key).arg(s.as_ref()).query::<()>(con),
        RdbValue::List(items) => {
            let mut c = redis::cmd("RPUSH");
            c.arg(key);
            for i in items {
                c.arg(i.as_ref());
            }
            c.query::<()>(con)
        }
        RdbValue::Set(items) => {
            let mut c = redis::cmd("SADD");
            c.arg(key);
            for i in items {
                c.arg(i.as_ref());
            }
            c.query::<()>(con)
        }
        RdbValue::Hash(p) => {
            let mut c = redis::cmd("HSET");
            c.arg(key);
            for (f, v) in p {
                c.arg(f.as_ref()).arg(v.as_ref());
            }
            c.query::<()>(con)
        }
        RdbValue::ZSet(p) => {
            let mut c = redis::cmd("ZADD");
            c.arg(key);
            for (m, s) in p {
                let score = if s.is_infinite() {
                    if *s > 0.0 {
                        "+inf".to_string()
                    } else {
                        "-inf".to_string()
                    }
                } else {
                    format!("{s:e}")
                };
                c.arg(score).arg(m.as_ref());
            }
            c.query::<()>(con)
        }
        RdbValue::Stream(s) => populate_stream(con, key, s),
    }
    .expect("populate");
    if let Some(ms) = expire_ms {
        redis::cmd("PEXPIREAT")
            .arg(key)
            .arg(ms)
            .query::<()>(con)
            .expect("PEXPIREAT");
    }
}

/// PEXPIRETIME of a key (-1 when it has none).
pub fn pexpiretime(con: &mut redis::Connection, key: &[u8]) -> i64 {
    redis::cmd("PEXPIRETIME")
        .arg(key)
        .query(con)
        .expect("PEXPIRETIME")
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `<ms>-<seq>` text of an ID.
pub fn id_text(id: tessera_rdb::StreamId) -> String {
    id.to_string()
}

/// Writes a stream with XADD / XSETID / XGROUP (group PELs cannot be made by commands with
/// given delivery times, so they must be empty here).
fn populate_stream(
    con: &mut redis::Connection,
    key: &[u8],
    s: &tessera_rdb::RdbStream,
) -> redis::RedisResult<()> {
    for (id, fields) in &s.entries {
        let mut c = redis::cmd("XADD");
        c.arg(key).arg(id_text(*id));
        for (f, v) in fields {
            c.arg(f.as_ref()).arg(v.as_ref());
        }
        c.query::<()>(con)?;
    }
    redis::cmd("XSETID")
        .arg(key)
        .arg(id_text(s.last_id))
        .arg("ENTRIESADDED")
        .arg(s.entries_added)
        .arg("MAXDELETEDID")
        .arg(id_text(s.max_deleted_id))
        .query::<()>(con)?;
    for g in &s.groups {
        assert!(g.pel.is_empty(), "populate cannot recreate a PEL");
        let mut c = redis::cmd("XGROUP");
        c.arg("CREATE")
            .arg(key)
            .arg(g.name.as_ref())
            .arg(id_text(g.last_id));
        if g.entries_read >= 0 {
            c.arg("ENTRIESREAD").arg(g.entries_read);
        }
        c.query::<()>(con)?;
        for cons in &g.consumers {
            redis::cmd("XGROUP")
                .arg("CREATECONSUMER")
                .arg(key)
                .arg(g.name.as_ref())
                .arg(cons.name.as_ref())
                .query::<()>(con)?;
        }
    }
    Ok(())
}
