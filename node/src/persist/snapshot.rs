//! dump.rdb: writing the keyspace stripe by stripe, and loading it back.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use tessera_rdb::{AtomicRdbFile, AuxInfo, RdbEvent, RdbReader, RdbValue, RdbWriter, ReplAux};

use super::PersistError;
use crate::db::rdb::{from_rdb, to_rdb};
use crate::db::{Entry, NO_EXPIRE, STRIPES};
use crate::server::{now_ms, Server};
use crate::slot::key_hash_slot;

/// One copied key: name, value, absolute expiry in ms.
pub type Copied = (Bytes, RdbValue, Option<i64>);

/// Copies the live keys of `db` in stripe `idx` (holding only that stripe's lock).
pub fn copy_stripe(srv: &Server, db: usize, idx: usize, now: u64, out: &mut Vec<Copied>) {
    let g = srv.ks.lock_stripe(idx);
    copy_locked(&g, db, now, out);
}

/// Copies the keys of `db` in a stripe the caller has locked. Keys whose TTL passed but
/// that were not deleted yet are copied too, as Redis's rdbSaveRio and AOF rewrite do: the
/// loader skips and counts them (INFO rdb_last_load_keys_expired). `_now` is kept for the
/// callers' sake.
pub fn copy_locked(g: &crate::db::Stripe, db: usize, _now: u64, out: &mut Vec<Copied>) {
    let Some(d) = g.db(db) else {
        return;
    };
    for m in d.maps.iter() {
        for (k, e) in m.iter() {
            let at = e.expire_at();
            let exp = (at != NO_EXPIRE).then_some(at as i64);
            out.push((Bytes::copy_from_slice(k.as_slice()), to_rdb(&e.value), exp));
        }
    }
}

/// Keys and keys-with-TTL of `db` (a hint for RESIZEDB; may be stale by the time it's used).
fn db_sizes(srv: &Server, db: usize) -> (u64, u64) {
    let (mut n, mut v) = (0u64, 0u64);
    for i in 0..STRIPES {
        let g = srv.ks.lock_stripe(i);
        if let Some(d) = g.db(db) {
            n += d.len() as u64;
            v += d.volatile_len() as u64;
        }
    }
    (n, v)
}

/// Writes every database to `w` (after the header): aux fields, then each non-empty
/// database. Used by dump.rdb and by the AOF base file (`aof_base`).
pub fn write_body<W: Write>(
    srv: &Server,
    w: &mut RdbWriter<W>,
    aof_base: bool,
    repl: Option<ReplAux>,
) -> tessera_rdb::Result<()> {
    let aux = AuxInfo {
        used_mem: crate::alloc::used_memory(),
        aof_base,
        repl,
        ..AuxInfo::default()
    };
    w.standard_aux(&aux)?;
    // Function libraries come before the databases, as Redis 7.0 writes them.
    for lib in srv.scripts.functions.libraries() {
        w.function(&lib.code)?;
    }
    let now = now_ms();
    let mut buf = Vec::new();
    for db in 0..srv.ks.databases() {
        let (n, v) = db_sizes(srv, db);
        if n == 0 {
            continue;
        }
        w.select_db(db as u64, n, v)?;
        for i in 0..STRIPES {
            buf.clear();
            copy_stripe(srv, db, i, now, &mut buf);
            for (k, val, exp) in buf.drain(..) {
                key_save_delay(srv, &|| false);
                w.entry(&k, &val, exp)?;
            }
        }
    }
    Ok(())
}

/// rdb-key-save-delay (a test-only config): before each key a save writes, sleep that
/// many microseconds, as Redis's rdbSaveKeyValuePair does (a negative value sleeps 1 us
/// once in that many keys, on average). Redis's save runs in a child with a frozen copy of
/// the config, which the suites then kill; here the save is a thread of the server, so the
/// wait is cut short as soon as the config goes back to 0 (or `stop` says so). True when
/// `stop` ended it.
pub fn key_save_delay(srv: &Server, stop: &dyn Fn() -> bool) -> bool {
    let first = srv.config.read().typed.rdb_key_save_delay;
    if first == 0 {
        return false;
    }
    if first < 0 {
        if rand::random_range(0..first.unsigned_abs()) == 0 {
            std::thread::sleep(std::time::Duration::from_micros(1));
        }
        return false;
    }
    let until = std::time::Instant::now() + std::time::Duration::from_micros(first as u64);
    loop {
        if stop() {
            return true;
        }
        let now = std::time::Instant::now();
        if now >= until || srv.config.read().typed.rdb_key_save_delay <= 0 {
            return false;
        }
        std::thread::sleep((until - now).min(std::time::Duration::from_millis(10)));
    }
}

/// Writes dump.rdb crash-safely (temp file, fsync, rename). Returns the file size.
/// `repl`: the replication position the data corresponds to (a replica's foreground save).
pub fn write_rdb(srv: &Server, path: &Path, repl: Option<ReplAux>) -> Result<u64, PersistError> {
    let io = |e: tessera_rdb::RdbError| PersistError::Rdb {
        path: path.display().to_string(),
        offset: 0,
        source: e,
    };
    let mut f = AtomicRdbFile::create(path).map_err(io)?;
    write_body(srv, f.writer(), false, repl).map_err(io)?;
    let n = f.commit().map_err(io)?;
    srv.persist.saves.fetch_add(1, Ordering::Relaxed);
    Ok(n)
}

/// Writes an RDB stream (an AOF base) to a plain writer; returns it after the trailer.
pub fn write_rdb_to<W: Write>(srv: &Server, out: W) -> tessera_rdb::Result<W> {
    let mut w = RdbWriter::new(out)?;
    write_body(srv, &mut w, true, None)?;
    w.finish()
}

/// Inserts one loaded key (skipping expired ones, like a master does). Returns false if
/// the key was skipped.
pub fn insert_loaded(
    srv: &Server,
    db: usize,
    key: &[u8],
    value: RdbValue,
    expire_ms: Option<i64>,
    now: u64,
    lim: &crate::types::Limits,
) -> bool {
    if let Some(at) = expire_ms {
        if at <= now as i64 {
            return false;
        }
    }
    let Some(v) = from_rdb(value, lim) else {
        return false;
    };
    let mut e = Entry::new(v);
    if let Some(at) = expire_ms {
        e.set_expire_at(at as u64);
    }
    e.set_access(srv.new_access(now));
    let slot = key_hash_slot(key);
    let mut g = srv.ks.lock_stripe(crate::db::stripe_of(slot));
    g.insert(db, slot, key, e);
    true
}

/// Loads an RDB stream into the keyspace; returns the number of keys loaded.
///
/// `keep_expired`: an AOF preamble keeps keys whose TTL passed (later commands in the AOF
/// may still touch them; they expire once the node runs), like Redis.
pub fn load_rdb_stream<R: std::io::Read>(
    srv: &Server,
    r: R,
    name: &str,
    keep_expired: bool,
) -> Result<(u64, R, Option<ReplAux>), PersistError> {
    let err = |offset: u64, e| {
        log_load_error(offset, &e);
        PersistError::Rdb {
            path: name.to_string(),
            offset,
            source: e,
        }
    };
    let mut rd = RdbReader::new(r).map_err(|e| err(0, e))?;
    let ndb = srv.ks.databases();
    let now = if keep_expired { 0 } else { now_ms() };
    let lim = srv.type_limits();
    let (mut n, mut expired, mut empty) = (0u64, 0u64, 0u64);
    let (mut repl_id, mut repl_offset, mut stream_db) = (None, None, None);
    let text = |v: &Bytes| std::str::from_utf8(v).ok().map(str::to_string);
    let mut libraries = Vec::new();
    // Read bytes, for commands waiting on a short load (persist::wait_short_load); back
    // to 0 however the load ends.
    struct Progress<'a>(&'a std::sync::atomic::AtomicU64);
    impl Drop for Progress<'_> {
        fn drop(&mut self) {
            self.0.store(0, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let progress = Progress(&srv.persist.load_progress);
    loop {
        let pos = rd.position();
        progress.0.store(pos, std::sync::atomic::Ordering::Relaxed);
        match rd.next_event().map_err(|e| err(pos, e))? {
            None | Some(RdbEvent::End { .. }) => break,
            Some(RdbEvent::Aux { key, value }) => match &key[..] {
                b"repl-id" => repl_id = text(&value),
                b"repl-offset" => repl_offset = text(&value).and_then(|v| v.parse::<i64>().ok()),
                b"repl-stream-db" => stream_db = text(&value).and_then(|v| v.parse::<u64>().ok()),
                _ => {}
            },
            Some(RdbEvent::Function(code)) => libraries.push(code),
            Some(RdbEvent::SelectDb(db)) if db as usize >= ndb => {
                return Err(PersistError::TooManyDbs(ndb));
            }
            Some(RdbEvent::Entry(en)) => {
                let db = en.db as usize;
                if db >= ndb {
                    return Err(PersistError::TooManyDbs(ndb));
                }
                if is_empty_collection(&en.value) {
                    // Redis's RDB_LOAD_ERR_EMPTY_KEY: skipped, the first ten logged.
                    if empty < 10 {
                        tracing::info!(
                            "rdbLoadObject skipping empty key: {}",
                            String::from_utf8_lossy(&en.key)
                        );
                    }
                    empty += 1;
                } else if en.expire_ms.is_some_and(|at| at <= now as i64) {
                    expired += 1;
                } else if insert_loaded(srv, db, &en.key, en.value, en.expire_ms, now, &lim) {
                    n += 1;
                }
                super::debug::key_load_delay(srv);
            }
            Some(_) => {}
        }
    }
    // INFO's rdb_last_load_keys_loaded / _expired, and Redis's closing line.
    srv.persist.last_load_keys.store(n, Ordering::Relaxed);
    srv.persist
        .last_load_keys_expired
        .store(expired, Ordering::Relaxed);
    if empty > 0 {
        tracing::warn!("Done loading RDB, keys loaded: {n}, keys expired: {expired}, empty keys skipped: {empty}.");
    } else {
        tracing::info!("Done loading RDB, keys loaded: {n}, keys expired: {expired}.");
    }
    // The stream's libraries replace the current ones (a replica's full sync; at startup
    // there are none). One that fails stops the load, naming it, as in Redis.
    crate::script::function::load_from_rdb(&srv.scripts.functions, libraries).map_err(|m| {
        PersistError::Io {
            path: name.to_string(),
            source: std::io::Error::other(m),
        }
    })?;
    // All three or nothing, as Redis 7.0 requires before trusting them.
    let repl = match (repl_id, repl_offset, stream_db) {
        (Some(repl_id), Some(repl_offset), Some(stream_db)) if (stream_db as usize) < ndb => {
            Some(ReplAux {
                stream_db,
                repl_id,
                repl_offset,
            })
        }
        _ => None,
    };
    Ok((n, rd.into_inner(), repl))
}

/// A list, set, hash or sorted set without elements (a stream may be empty).
fn is_empty_collection(v: &RdbValue) -> bool {
    match v {
        RdbValue::List(x) | RdbValue::Set(x) => x.is_empty(),
        RdbValue::Hash(x) => x.is_empty(),
        RdbValue::ZSet(x) => x.is_empty(),
        RdbValue::String(_) | RdbValue::Stream(_) => false,
    }
}

/// Redis's log lines for an RDB that cannot be loaded (rdbLoadRio's and rdbReportError's
/// words; the suites look for them in the log).
fn log_load_error(offset: u64, e: &tessera_rdb::RdbError) {
    use tessera_rdb::RdbError;
    let reason = match e {
        RdbError::Checksum { stored, computed } => {
            tracing::warn!(
                "Wrong RDB checksum expected: ({computed:x}) but got ({stored:x}). Aborting now."
            );
            "RDB CRC error".to_string()
        }
        RdbError::Truncated => {
            tracing::warn!("Short read or OOM loading DB. Unrecoverable error, aborting now.");
            "Unexpected EOF reading RDB file".to_string()
        }
        other => other.to_string(),
    };
    tracing::warn!(
        "Internal error in RDB reading offset {offset}, function at rdb.c:0 -> {reason}"
    );
}

/// Loads dump.rdb.
#[tracing::instrument(skip(srv))]
pub fn load_rdb(srv: &Server, path: &Path) -> Result<u64, PersistError> {
    let f = File::open(path).map_err(|e| {
        tracing::warn!(
            "Fatal error loading the DB: {}. Exiting.",
            super::aof::strerror(e.raw_os_error().unwrap_or(libc::EIO))
        );
        PersistError::Io {
            path: path.display().to_string(),
            source: e,
        }
    })?;
    let (n, _, repl) = load_rdb_stream(
        srv,
        BufReader::with_capacity(1 << 20, f),
        &path.display().to_string(),
        false,
    )?;
    *srv.repl.restored.lock() = repl;
    Ok(n)
}

/// A buffered file writer (AOF base files).
pub fn buffered(f: File) -> BufWriter<File> {
    BufWriter::with_capacity(1 << 20, f)
}
