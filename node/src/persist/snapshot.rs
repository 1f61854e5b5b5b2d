//! dump.rdb: writing the keyspace stripe by stripe, and loading it back.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use tessera_rdb::{
    encode_entry, encode_string_entry, AtomicRdbFile, AuxInfo, RdbEvent, RdbReader, RdbValue,
    RdbWriter, ReplAux,
};

use super::PersistError;
use crate::db::rdb::{from_rdb, to_rdb};
use crate::db::{Entry, Value, NO_EXPIRE, STRIPES};
use crate::script::function::Policy as FnPolicy;
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
    for (_, m) in d.maps() {
        for (k, e) in m.iter() {
            let at = e.expire_at();
            let exp = (at != NO_EXPIRE).then_some(at as i64);
            out.push((Bytes::copy_from_slice(k), to_rdb(&e.value), exp));
        }
    }
}

/// Encodes the keys of `db` in a stripe the caller has locked as RDB entries appended to
/// `out`, without copying them first (a replication snapshot holds its stripes only for
/// this); returns how many, and how many of them have a TTL. Strings are written from the
/// keyspace's own bytes.
pub fn encode_locked(g: &crate::db::Stripe, db: usize, out: &mut Vec<u8>) -> (u64, u64) {
    let Some(d) = g.db(db) else {
        return (0, 0);
    };
    let (mut n, mut vol) = (0, 0);
    for (_, m) in d.maps() {
        for (k, e) in m.iter() {
            let at = e.expire_at();
            let exp = (at != NO_EXPIRE).then_some(at as i64);
            match &e.value {
                Value::Str(s) => encode_string_entry(out, k, s.as_slice(), exp),
                Value::Buf(b) => encode_string_entry(out, k, b, exp),
                Value::Int(i) => {
                    encode_string_entry(out, k, itoa::Buffer::new().format(*i).as_bytes(), exp)
                }
                v => encode_entry(out, k, &to_rdb(v), exp),
            }
            n += 1;
            vol += u64::from(exp.is_some());
        }
    }
    (n, vol)
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
/// `stop` ends a save that rdb-key-save-delay slows down (its child was killed).
pub fn write_body<W: Write>(
    srv: &Server,
    w: &mut RdbWriter<W>,
    aof_base: bool,
    repl: Option<ReplAux>,
    delay: KeySaveDelay,
    stop: &dyn Fn() -> bool,
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
    // INFO current_save_keys_total / _processed while the save runs.
    let sizes: Vec<(u64, u64)> = (0..srv.ks.databases())
        .map(|db| db_sizes(srv, db))
        .collect();
    let p = &srv.persist;
    p.save_keys_processed.store(0, Ordering::Relaxed);
    for (db, &(n, v)) in sizes.iter().enumerate() {
        if n == 0 {
            continue;
        }
        w.select_db(db as u64, n, v)?;
        for i in 0..STRIPES {
            buf.clear();
            copy_stripe(srv, db, i, now, &mut buf);
            for (k, val, exp) in buf.drain(..) {
                if delay.wait(stop) {
                    return Err(tessera_rdb::RdbError::Io(std::io::Error::new(
                        std::io::ErrorKind::Interrupted,
                        "save stopped",
                    )));
                }
                w.entry(&k, &val, exp)?;
                p.save_keys_processed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(())
}

/// rdb-key-save-delay (a test-only config) as one save sees it: before each key the save
/// writes, it sleeps that many microseconds, as Redis's rdbSaveKeyValuePair does (a
/// negative value sleeps 1 us once in that many keys, on average). Redis's save runs in a
/// child with a frozen copy of the config, so the value is read once when the save starts:
/// setting it back to 0 does not hurry a save already running (Redis's suites set 0 and
/// then kill the slow child, and expect the kill to land on the slow one).
#[derive(Clone, Copy, Debug)]
pub struct KeySaveDelay(i64);

impl KeySaveDelay {
    /// The value at the start of a save.
    pub fn frozen(srv: &Server) -> Self {
        Self(srv.config.read().typed.rdb_key_save_delay)
    }

    /// Waits before one key. True when `stop` ended the wait (the save should end).
    pub fn wait(self, stop: &dyn Fn() -> bool) -> bool {
        let us = self.0;
        if us == 0 {
            return false;
        }
        if us < 0 {
            if rand::random_range(0..us.unsigned_abs()) == 0 {
                std::thread::sleep(std::time::Duration::from_micros(1));
            }
            return false;
        }
        let until = std::time::Instant::now() + std::time::Duration::from_micros(us as u64);
        loop {
            if stop() {
                return true;
            }
            let now = std::time::Instant::now();
            if now >= until {
                return false;
            }
            std::thread::sleep((until - now).min(std::time::Duration::from_millis(10)));
        }
    }
}

/// Writes dump.rdb crash-safely (temp file, fsync, rename). Returns the file size.
/// `repl`: the replication position the data corresponds to (a replica's foreground save).
/// The temp file is `temp-<pid>.rdb`, as Redis's foreground save (SAVE, shutdown) names
/// it; foreground saves take turns for it. `stop` ends the save early (a second SIGINT
/// during the shutdown's save).
pub fn write_rdb(
    srv: &Server,
    path: &Path,
    repl: Option<ReplAux>,
    stop: &dyn Fn() -> bool,
) -> Result<u64, PersistError> {
    let io = |e: tessera_rdb::RdbError| PersistError::Rdb {
        path: path.display().to_string(),
        offset: 0,
        source: e,
    };
    let _turn = srv.persist.foreground_save.lock();
    let name = format!("temp-{}.rdb", std::process::id());
    let mut f = AtomicRdbFile::create_named(path, &name).map_err(io)?;
    let delay = KeySaveDelay::frozen(srv);
    write_body(srv, f.writer(), false, repl, delay, stop).map_err(io)?;
    let n = f.commit().map_err(io)?;
    srv.persist.saves.fetch_add(1, Ordering::Relaxed);
    Ok(n)
}

/// Forks the writer child of a background save (BGSAVE forks before it answers, as Redis,
/// so the child is there to be seen at once). None when it cannot be forked: the save is
/// then written by its thread.
pub fn fork_save_child(srv: &Server, path: &Path) -> Option<super::child::SaveChild> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    // Redis's current_save_keys_total: the keys at fork time.
    let total: u64 = (0..srv.ks.databases()).map(|db| db_sizes(srv, db).0).sum();
    let p = &srv.persist;
    p.save_keys_total.store(total, Ordering::Relaxed);
    p.save_keys_processed.store(0, Ordering::Relaxed);
    match super::child::SaveChild::spawn(&dir, "temp-", ".rdb", KeySaveDelay::frozen(srv)) {
        Ok(c) => {
            p.child_started(c.pid(), c.fork_usec());
            srv.oom.apply_child(srv, c.pid());
            tracing::info!("Background saving started by pid {}", c.pid());
            Some(c)
        }
        Err(e) => {
            tracing::warn!(error = %e, "Can't fork a child for the background save; saving from a thread");
            None
        }
    }
}

/// A background save: the child from [`fork_save_child`] writes `temp-<child pid>.rdb` from
/// the stream this thread serializes ([`super::child`]); killing the child fails the save.
/// Without a child this thread writes the file (`temp-<pid>-<n>.rdb`).
pub fn write_rdb_child(
    srv: &Server,
    path: &Path,
    child: Option<super::child::SaveChild>,
) -> Result<u64, PersistError> {
    let rdb_err = |e: tessera_rdb::RdbError| PersistError::Rdb {
        path: path.display().to_string(),
        offset: 0,
        source: e,
    };
    let io = |e: std::io::Error| PersistError::Io {
        path: path.display().to_string(),
        source: e,
    };
    let Some(mut child) = child else {
        let mut f = AtomicRdbFile::create(path).map_err(rdb_err)?;
        let delay = KeySaveDelay::frozen(srv);
        write_body(srv, f.writer(), false, None, delay, &|| false).map_err(rdb_err)?;
        let n = f.commit().map_err(rdb_err)?;
        srv.persist.saves.fetch_add(1, Ordering::Relaxed);
        return Ok(n);
    };
    let p = &srv.persist;
    let r = (|| {
        let pipe = child
            .take_pipe()
            .ok_or_else(|| io(std::io::Error::other("no pipe to the save's child")))?;
        let mut w = RdbWriter::new(BufWriter::with_capacity(1 << 16, pipe)).map_err(rdb_err)?;
        let delay = child.key_save_delay();
        write_body(srv, &mut w, false, None, delay, &|| child.exited()).map_err(rdb_err)?;
        let out = w.finish().map_err(rdb_err)?;
        // What the child cost, measured while it still holds its copy (rdb_last_cow_size).
        p.note_cow(child.pid(), true);
        drop(out.into_inner().map_err(|e| io(e.into_error()))?);
        Ok(())
    })();
    // From here the pid is not to be signalled: the child is reaped below.
    let _ = p
        .child_pid
        .compare_exchange(child.pid(), 0, Ordering::AcqRel, Ordering::Acquire);
    r?;
    child.wait().map_err(io)?;
    let n = child.commit(path).map_err(io)?;
    p.saves.fetch_add(1, Ordering::Relaxed);
    Ok(n)
}

/// Writes an RDB stream (an AOF base) to a plain writer; returns it after the trailer.
pub fn write_rdb_to<W: Write>(srv: &Server, out: W) -> tessera_rdb::Result<W> {
    let mut w = RdbWriter::new(out)?;
    write_body(srv, &mut w, true, None, KeySaveDelay::frozen(srv), &|| {
        false
    })?;
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
    load_rdb_stream_with(srv, r, name, keep_expired, FnPolicy::Flush)
}

/// [`load_rdb_stream`] with what the stream's function libraries do to the loaded ones
/// (DEBUG RELOAD NOFLUSH [MERGE]: `script::function::load_from_rdb_with`).
pub fn load_rdb_stream_with<R: std::io::Read>(
    srv: &Server,
    r: R,
    name: &str,
    keep_expired: bool,
    fn_policy: FnPolicy,
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
                    srv.repl.load_feed.note(db, &en.key);
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
    let fns = &srv.scripts.functions;
    crate::script::function::load_from_rdb_with(fns, libraries, fn_policy).map_err(|m| {
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
        other => other.log_line(),
    };
    let line =
        format!("Internal error in RDB reading offset {offset}, function at rdb.c:0 -> {reason}");
    tracing::warn!("{line}");
    // Corrupt data (not a file cut short, not a checksum): Redis runs its RDB checker on
    // the file, which reports the same error and then ends the server with its own line.
    // A short file or a bad checksum makes the checker exit before that line.
    if !matches!(e, RdbError::Truncated | RdbError::Checksum { .. }) {
        tracing::warn!("--- RDB ERROR DETECTED ---");
        tracing::warn!("[offset {offset}] {line}");
        tracing::warn!("Terminating server after rdb file reading failure.");
    }
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
    // A master feeds the DELs of the keys it drops as expired into its restored history.
    let _feed = {
        let c = srv.config.read();
        let t = &c.typed;
        srv.repl
            .load_feed
            .arm(t.repl_backlog_size as usize, t.lazyfree_lazy_expire)
    };
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
