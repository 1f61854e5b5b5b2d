//! A server-independent picture of a dataset, so two servers (or one server before and
//! after a restart) can be compared key by key (persistence and replication tests).

/// A server-independent picture of every key: (db, key, type, canonical content, has TTL).
pub type Snapshot = Vec<(u32, Vec<u8>, String, Vec<Vec<u8>>, bool)>;

pub fn snapshot_of(c: &mut redis::Connection, dbs: u32) -> Snapshot {
    let mut out = Vec::new();
    for db in 0..dbs {
        let _: () = redis::cmd("SELECT").arg(db).query(c).expect("select");
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).expect("keys");
        for k in keys {
            let t: String = redis::cmd("TYPE").arg(&k).query(c).expect("type");
            let content: Vec<Vec<u8>> = match t.as_str() {
                // Gone between KEYS and TYPE (expired): skip it.
                "none" => continue,
                "string" => vec![redis::cmd("GET").arg(&k).query(c).expect("get")],
                "list" => redis::cmd("LRANGE")
                    .arg(&k)
                    .arg(0)
                    .arg(-1)
                    .query(c)
                    .expect("lrange"),
                "hash" => {
                    let v: Vec<(Vec<u8>, Vec<u8>)> =
                        redis::cmd("HGETALL").arg(&k).query(c).expect("hgetall");
                    let mut v: Vec<Vec<u8>> = v
                        .into_iter()
                        .map(|(a, b)| [a, b"=".to_vec(), b].concat())
                        .collect();
                    v.sort();
                    v
                }
                "set" => {
                    let mut v: Vec<Vec<u8>> =
                        redis::cmd("SMEMBERS").arg(&k).query(c).expect("smembers");
                    v.sort();
                    v
                }
                "zset" => redis::cmd("ZRANGE")
                    .arg(&k)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(c)
                    .expect("zrange"),
                other => panic!("unexpected type {other}"),
            };
            let ttl: i64 = redis::cmd("PTTL").arg(&k).query(c).expect("pttl");
            out.push((db, k, t, content, ttl > 0));
        }
    }
    out.sort();
    out
}
