//! The base file of a rewritten AOF: an RDB (aof-use-rdb-preamble yes) or RESP commands
//! that rebuild every key (no), copied stripe by stripe.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use bytes::Bytes;
use tessera_rdb::aof::encode_command;
use tessera_rdb::{RdbValue, RdbWriter};

use super::{snapshot, PersistError};
use crate::db::STRIPES;
use crate::server::Server;

/// Elements per RPUSH/SADD/HSET/ZADD command in a RESP base (Redis's AOF_REWRITE_ITEMS_PER_CMD).
const ITEMS_PER_CMD: usize = 64;

enum Sink {
    Rdb(RdbWriter<BufWriter<File>>),
    Resp {
        out: BufWriter<File>,
        db: Option<usize>,
        buf: Vec<u8>,
    },
}

/// Appends the commands that rebuild one key (an AOF rewrite's, and the snapshot of an
/// atomic slot migration, which Valkey sends in the same form).
pub fn key_commands(buf: &mut Vec<u8>, key: &Bytes, v: &RdbValue, exp: Option<i64>) {
    let k = key.as_ref();
    match v {
        RdbValue::String(s) => encode_command(buf, &[b"SET".as_slice(), k, s]),
        RdbValue::List(items) => {
            for c in items.chunks(ITEMS_PER_CMD) {
                let mut a: Vec<&[u8]> = vec![b"RPUSH", k];
                a.extend(c.iter().map(|x| x.as_ref()));
                encode_command(buf, &a);
            }
        }
        RdbValue::Set(items) => {
            for c in items.chunks(ITEMS_PER_CMD) {
                let mut a: Vec<&[u8]> = vec![b"SADD", k];
                a.extend(c.iter().map(|x| x.as_ref()));
                encode_command(buf, &a);
            }
        }
        RdbValue::Hash(pairs) => {
            for c in pairs.chunks(ITEMS_PER_CMD) {
                let mut a: Vec<&[u8]> = vec![b"HSET", k];
                for (f, x) in c {
                    a.push(f);
                    a.push(x);
                }
                encode_command(buf, &a);
            }
        }
        RdbValue::ZSet(pairs) => {
            for c in pairs.chunks(ITEMS_PER_CMD) {
                // Rust's f64 Display is the shortest text that parses back to the same value.
                let scores: Vec<String> = c
                    .iter()
                    .map(|(_, s)| match *s {
                        x if x == f64::INFINITY => "inf".to_string(),
                        x if x == f64::NEG_INFINITY => "-inf".to_string(),
                        x => format!("{x}"),
                    })
                    .collect();
                let mut a: Vec<&[u8]> = vec![b"ZADD", k];
                for ((m, _), s) in c.iter().zip(&scores) {
                    a.push(s.as_bytes());
                    a.push(m);
                }
                encode_command(buf, &a);
            }
        }
        RdbValue::Stream(st) => stream_commands(buf, k, st),
    }
    if let Some(at) = exp {
        let at = at.to_string();
        encode_command(buf, &[b"PEXPIREAT".as_slice(), k, at.as_bytes()]);
    }
}

/// What a rewrite is told while it writes a base file.
pub struct Hooks<'a> {
    /// Called with stripe `i` still locked, right after its keys were copied.
    pub copied: &'a dyn Fn(usize),
    /// True once the rewrite must stop (CONFIG SET appendonly no: Redis kills its child).
    pub cancelled: &'a dyn Fn() -> bool,
}

impl Hooks<'_> {
    /// No stripe tracking, never cancelled (the base written at start).
    pub const NONE: Hooks<'static> = Hooks {
        copied: &|_| {},
        cancelled: &|| false,
    };
}

/// The error of a rewrite stopped by [`Hooks::cancelled`].
pub fn cancelled_error() -> PersistError {
    PersistError::Io {
        path: "AOF rewrite".into(),
        source: std::io::Error::new(std::io::ErrorKind::Interrupted, "rewrite cancelled"),
    }
}

/// Writes a base file via a temp file, fsync and rename. Returns the file size.
/// With `child` (a background rewrite's, see [`super::child`]) the child writes the temp
/// file from the stream, as Redis's rewrite child does; its death fails the rewrite.
pub fn write_base(
    srv: &Server,
    path: &Path,
    rdb: bool,
    hooks: &Hooks<'_>,
    child: Option<super::child::SaveChild>,
) -> Result<u64, PersistError> {
    if let Some(child) = child {
        return write_via_child(srv, path, rdb, hooks, child);
    }
    let tmp = path.with_extension("tmp");
    let io = |e: std::io::Error| PersistError::Io {
        path: tmp.display().to_string(),
        source: e,
    };
    let r = File::create(&tmp)
        .map_err(io)
        .and_then(|f| {
            let delay = snapshot::KeySaveDelay::frozen(srv);
            write_inner(srv, f, &tmp, rdb, hooks, delay, &|| false)
        })
        .and_then(|f| {
            f.sync_all().map_err(io)?;
            let n = f.metadata().map(|m| m.len()).unwrap_or(0);
            std::fs::rename(&tmp, path).map_err(|e| PersistError::Io {
                path: path.display().to_string(),
                source: e,
            })?;
            Ok(n)
        });
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// [`write_base`] through the rewrite's child.
fn write_via_child(
    srv: &Server,
    path: &Path,
    rdb: bool,
    hooks: &Hooks<'_>,
    mut child: super::child::SaveChild,
) -> Result<u64, PersistError> {
    let io = |e: std::io::Error| PersistError::Io {
        path: path.display().to_string(),
        source: e,
    };
    let pipe = child
        .take_pipe()
        .ok_or_else(|| io(std::io::Error::other("no pipe to the rewrite's child")))?;
    let tmp = child.temp_path().to_path_buf();
    let delay = child.key_save_delay();
    let r = write_inner(srv, pipe, &tmp, rdb, hooks, delay, &|| child.exited());
    srv.persist.note_cow(child.pid(), false);
    let _ = srv.persist.child_pid.compare_exchange(
        child.pid(),
        0,
        std::sync::atomic::Ordering::AcqRel,
        std::sync::atomic::Ordering::Acquire,
    );
    drop(r?);
    child.wait().map_err(io)?;
    child.commit(path).map_err(io)
}

/// Writes the base into `f` and returns it, flushed. `died`: the child that writes the
/// file is gone (checked while rdb-key-save-delay slows the rewrite).
fn write_inner(
    srv: &Server,
    f: File,
    tmp: &Path,
    rdb: bool,
    hooks: &Hooks<'_>,
    delay: snapshot::KeySaveDelay,
    died: &dyn Fn() -> bool,
) -> Result<File, PersistError> {
    let rdb_err = |e| PersistError::Rdb {
        path: tmp.display().to_string(),
        offset: 0,
        source: e,
    };
    let io = |e: std::io::Error| PersistError::Io {
        path: tmp.display().to_string(),
        source: e,
    };
    let stop = || (hooks.cancelled)() || died();
    let mut sink = if rdb {
        let mut w = RdbWriter::new(snapshot::buffered(f)).map_err(rdb_err)?;
        w.standard_aux(&tessera_rdb::AuxInfo {
            aof_base: true,
            ..Default::default()
        })
        .map_err(rdb_err)?;
        Sink::Rdb(w)
    } else {
        let mut buf = Vec::with_capacity(64 * 1024);
        // aof-timestamp-enabled: a RESP base starts with the time of the rewrite.
        if srv.config.read().typed.aof_timestamp_enabled {
            tessera_rdb::aof::encode_timestamp_annotation(&mut buf, crate::server::now_ms() / 1000);
        }
        Sink::Resp {
            out: snapshot::buffered(f),
            db: None,
            buf,
        }
    };
    // Function libraries first: FUNCTION2 records in an RDB base, FUNCTION LOAD commands in
    // a RESP one (Redis 7.0's rewriteFunctions).
    for lib in srv.scripts.functions.libraries() {
        match &mut sink {
            Sink::Rdb(w) => w.function(&lib.code).map_err(rdb_err)?,
            Sink::Resp { buf, .. } => {
                encode_command(buf, &[b"FUNCTION".as_slice(), b"LOAD", &lib.code])
            }
        }
    }
    let now = crate::server::now_ms();
    let ndb = srv.ks.databases();
    let mut per_db: Vec<Vec<snapshot::Copied>> = (0..ndb).map(|_| Vec::new()).collect();
    for i in 0..STRIPES {
        if (hooks.cancelled)() {
            return Err(cancelled_error());
        }
        {
            let guard = srv.ks.lock_stripe(i);
            for (db, out) in per_db.iter_mut().enumerate() {
                snapshot::copy_locked(&guard, db, now, out);
            }
            (hooks.copied)(i);
        }
        for (db, items) in per_db.iter_mut().enumerate() {
            if items.is_empty() {
                continue;
            }
            match &mut sink {
                Sink::Rdb(w) => {
                    let vol = items.iter().filter(|x| x.2.is_some()).count() as u64;
                    w.select_db(db as u64, items.len() as u64, vol)
                        .map_err(rdb_err)?;
                    for (k, v, e) in items.drain(..) {
                        if delay.wait(&stop) {
                            return Err(cancelled_error());
                        }
                        w.entry(&k, &v, e).map_err(rdb_err)?;
                    }
                }
                Sink::Resp { out, db: cur, buf } => {
                    if *cur != Some(db) {
                        let d = db.to_string();
                        encode_command(buf, &[b"SELECT".as_slice(), d.as_bytes()]);
                        *cur = Some(db);
                    }
                    for (k, v, e) in items.drain(..) {
                        if delay.wait(&stop) {
                            return Err(cancelled_error());
                        }
                        key_commands(buf, &k, &v, e);
                        if buf.len() > 32 * 1024 {
                            out.write_all(buf).map_err(io)?;
                            buf.clear();
                        }
                    }
                }
            }
        }
    }
    let out = match sink {
        Sink::Rdb(w) => w.finish().map_err(rdb_err)?,
        Sink::Resp { mut out, buf, .. } => {
            out.write_all(&buf).map_err(io)?;
            out
        }
    };
    out.into_inner().map_err(|e| io(e.into_error()))
}

/// The commands that rebuild a stream, as Redis 7.0's rewriteStreamObject: its entries
/// (an empty stream is created by an XADD trimmed away at once), XSETID for the last ID and
/// counters, then each group, its pending entries re-assigned by XCLAIM ... FORCE, and
/// consumers that have none by XGROUP CREATECONSUMER.
fn stream_commands(buf: &mut Vec<u8>, k: &[u8], st: &tessera_rdb::RdbStream) {
    let id = tessera_rdb::StreamId::to_string;
    if st.entries.is_empty() {
        // Always 0-1, as Redis: the last ID may be 0-0, which XADD refuses (XSETID follows).
        encode_command(
            buf,
            &[b"XADD".as_slice(), k, b"MAXLEN", b"0", b"0-1", b"x", b"y"],
        );
    }
    for (eid, fields) in &st.entries {
        let eid = id(eid);
        let mut a: Vec<&[u8]> = vec![b"XADD", k, eid.as_bytes()];
        for (f, v) in fields {
            a.push(f);
            a.push(v);
        }
        encode_command(buf, &a);
    }
    let (last, added, maxdel) = (
        id(&st.last_id),
        st.entries_added.to_string(),
        id(&st.max_deleted_id),
    );
    encode_command(
        buf,
        &[
            b"XSETID".as_slice(),
            k,
            last.as_bytes(),
            b"ENTRIESADDED",
            added.as_bytes(),
            b"MAXDELETEDID",
            maxdel.as_bytes(),
        ],
    );
    for g in &st.groups {
        let (glast, read) = (id(&g.last_id), g.entries_read.to_string());
        encode_command(
            buf,
            &[
                b"XGROUP".as_slice(),
                b"CREATE",
                k,
                &g.name,
                glast.as_bytes(),
                b"ENTRIESREAD",
                read.as_bytes(),
            ],
        );
        for c in &g.consumers {
            if c.pending.is_empty() {
                encode_command(
                    buf,
                    &[b"XGROUP".as_slice(), b"CREATECONSUMER", k, &g.name, &c.name],
                );
            }
            for pid in &c.pending {
                // The group PEL is in ascending ID order.
                let Ok(at) = g.pel.binary_search_by(|(p, _, _)| p.cmp(pid)) else {
                    continue;
                };
                let (_, time, count) = g.pel[at];
                let (pid, time, count) = (id(pid), time.to_string(), count.to_string());
                encode_command(
                    buf,
                    &[
                        b"XCLAIM".as_slice(),
                        k,
                        &g.name,
                        &c.name,
                        b"0",
                        pid.as_bytes(),
                        b"TIME",
                        time.as_bytes(),
                        b"RETRYCOUNT",
                        count.as_bytes(),
                        b"JUSTID",
                        b"FORCE",
                    ],
                );
            }
        }
    }
}
