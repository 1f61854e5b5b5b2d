//! The append-only file in Redis 7's multi-part layout: `<appenddirname>/` holds a manifest,
//! one base file (an RDB, or RESP commands when written by a Redis without preamble) and
//! incremental RESP files.
//!
//! Writing: every propagated write is `write()`n to the current incr file at once, under the
//! command's key locks (a kill -9 loses nothing that reached the kernel); `appendfsync
//! always` fsyncs before the reply goes out (group commit: one fsync covers every write
//! appended so far), `everysec` fsyncs from a background thread once a second.
//!
//! Rewriting (BGREWRITEAOF) without fork: a new incr file is opened and listed in the
//! manifest first; then stripes are copied one at a time. A write goes to the new incr file
//! if it touches a stripe already copied (the new base will not contain it), else to the old
//! incr file (the new base will). Whether the node crashes before or after the new manifest
//! is installed, each write is replayed exactly once. Cross-stripe commands (only possible
//! outside cluster mode) that run mid-rewrite with some stripes copied are replayed on top
//! of a base that may already contain part of their effect.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use tessera_rdb::aof::{
    encode_command, has_rdb_preamble, is_base_name, AofCommandReader, AofFileInfo, AofFileKind,
    AofManifest, AofReadError, MAX_SEQ,
};

use super::{snapshot, PersistError};
use crate::db::STRIPES;
use crate::propagate::{Write, WriteSubscriber};
use crate::server::Server;

/// `appendfsync`, as the config declares it.
pub use crate::config::Appendfsync as Fsync;

/// One open incr file and the database its last command ran in.
struct IncrFile {
    file: File,
    seq: u64,
    db: Option<usize>,
    /// Bytes known to be in the file: a failed write is cut back to this length.
    len: u64,
    /// Encoded commands not written yet because a write failed (redis's `aof_buf` after an
    /// error): written, in order, before anything else once the file accepts writes again.
    pending: Vec<u8>,
}

/// A write to an incr file that did not go through.
struct WriteFailure {
    errno: i32,
    error: std::io::Error,
}

impl IncrFile {
    fn new(file: File, seq: u64) -> IncrFile {
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        IncrFile {
            file,
            seq,
            db: None,
            len,
            pending: Vec::new(),
        }
    }

    /// Encodes `w` (after a `#TS:` annotation when `ts` is given, then a SELECT when its
    /// database differs from the previous command's, as Redis's feedAppendOnlyFile) and
    /// writes it, behind any pending bytes. Returns the bytes that reached the file.
    fn append(
        &mut self,
        scratch: &mut Vec<u8>,
        w: &Write<'_>,
        ts: Option<u64>,
    ) -> Result<u64, WriteFailure> {
        scratch.clear();
        if let Some(ts) = ts {
            tessera_rdb::aof::encode_timestamp_annotation(scratch, ts);
        }
        if self.db != Some(w.db) {
            let db = itoa::Buffer::new().format(w.db).to_string();
            encode_command(scratch, &[b"SELECT".as_slice(), db.as_bytes()]);
            self.db = Some(w.db);
        }
        encode_command(scratch, w.args);
        if self.pending.is_empty() {
            let (n, res) = write_some(&mut self.file, scratch);
            match res {
                Ok(()) => {
                    self.len += n as u64;
                    Ok(n as u64)
                }
                Err(error) => {
                    let kept = self.undo_partial(n);
                    self.pending.extend_from_slice(&scratch[kept..]);
                    Err(failure(error))
                }
            }
        } else {
            self.pending.extend_from_slice(scratch);
            self.flush_pending()
        }
    }

    /// Writes the pending bytes. Ok with the bytes written (0 when none were pending).
    fn flush_pending(&mut self) -> Result<u64, WriteFailure> {
        if self.pending.is_empty() {
            return Ok(0);
        }
        let (n, res) = write_some(&mut self.file, &self.pending);
        match res {
            Ok(()) => {
                self.len += n as u64;
                self.pending.clear();
                Ok(n as u64)
            }
            Err(error) => {
                let kept = self.undo_partial(n);
                self.pending.drain(..kept);
                Err(failure(error))
            }
        }
    }

    /// After a write that stopped after `n` bytes: cuts the file back to its last complete
    /// command, as redis does, so the next attempt appends whole commands. When the cut
    /// fails, the `n` bytes stay (they are the start of the pending command) and are
    /// returned so the caller drops them from what it retries.
    fn undo_partial(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        match self.file.set_len(self.len) {
            Ok(()) => 0,
            Err(e) => {
                tracing::warn!(error = %e, "Could not remove short write from the append-only file; keeping it");
                self.len += n as u64;
                n
            }
        }
    }
}

/// Writes as much of `buf` as the file takes: (bytes written, whether all were).
fn write_some(f: &mut File, buf: &[u8]) -> (usize, std::io::Result<()>) {
    let mut done = 0;
    while done < buf.len() {
        match f.write(&buf[done..]) {
            Ok(0) => return (done, Err(std::io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Err(e)),
        }
    }
    (done, Ok(()))
}

fn failure(error: std::io::Error) -> WriteFailure {
    // A write that took nothing without an OS error (WriteZero) is a full disk to redis.
    let errno = error.raw_os_error().unwrap_or(libc::ENOSPC);
    WriteFailure { errno, error }
}

/// `strerror(errno)`: the text redis puts in its MISCONF reply, without Rust's
/// " (os error N)" suffix.
pub fn strerror(errno: i32) -> String {
    let s = std::io::Error::from_raw_os_error(errno).to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

struct Files {
    dir: PathBuf,
    prefix: String,
    manifest: AofManifest,
    incr: IncrFile,
    /// While a rewrite runs: the incr file that was current when it started.
    old: Option<IncrFile>,
    /// While a rewrite runs: stripes already copied into the new base.
    copied: Vec<bool>,
    /// Incr files no longer current (a failed rewrite's old one) with pending bytes: kept
    /// until the retry writes them.
    stale: Vec<IncrFile>,
    scratch: Vec<u8>,
    /// The AOF was just turned on and its first rewrite runs (Redis's AOF_WAIT_REWRITE):
    /// `incr` is the temp incr file, not in the manifest yet, and writes on stripes not
    /// copied yet are dropped (the new base will hold them).
    waiting: bool,
}

impl Files {
    /// Retries every pending write; true when nothing is pending any more.
    fn flush_all(&mut self, a: &AofState) -> bool {
        let mut clear = true;
        for f in std::iter::once(&mut self.incr)
            .chain(self.old.iter_mut())
            .chain(self.stale.iter_mut())
        {
            match f.flush_pending() {
                Ok(n) => a.count_written(n),
                Err(e) => {
                    a.write_errno.store(e.errno, Ordering::Relaxed);
                    clear = false;
                }
            }
        }
        self.stale.retain(|f| {
            // Written at last: on disk before it is forgotten.
            !f.pending.is_empty() || f.file.sync_data().is_err()
        });
        clear
    }
}

/// AOF state and statistics (INFO persistence).
pub struct AofState {
    on: AtomicBool,
    files: Mutex<Option<Files>>,
    fsync: Mutex<Fsync>,
    /// Bytes appended since start (all files); the group-commit watermark.
    written: AtomicU64,
    /// Serialises fsyncs; holds the watermark already synced.
    synced: Mutex<u64>,
    /// The synced watermark, for connections awaiting their fsync (always).
    synced_tx: tokio::sync::watch::Sender<u64>,
    /// Wakes the fsync thread (always).
    sync_req: Mutex<bool>,
    sync_cv: parking_lot::Condvar,
    pub rewrite_in_progress: AtomicBool,
    pub last_rewrite_ok: AtomicBool,
    pub last_rewrite_time_sec: AtomicI64,
    pub rewrites: AtomicU64,
    /// errno of the write that left bytes pending (0: writes go through). While set, write
    /// commands are refused (redis's aof_last_write_status).
    write_errno: AtomicI32,
    /// errno of the last failed fsync (0 after one succeeds): writes are refused too
    /// (redis's aof_bio_fsync_status).
    fsync_errno: AtomicI32,
    pub current_size: AtomicU64,
    pub base_size: AtomicU64,
    /// A rewrite waits for a running BGSAVE (INFO aof_rewrite_scheduled); the cron starts it.
    pub rewrite_scheduled: AtomicBool,
    /// Tells the running rewrite to stop (Redis kills its rewrite child).
    cancel: AtomicBool,
    /// The running (or last) rewrite thread.
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Serialises turning the AOF on or off with starting a rewrite.
    switch: Mutex<()>,
    /// The server this state belongs to, for CONFIG SET appendonly (`configure` gets only
    /// the config); set by [`attach`] once the server runs.
    server: std::sync::OnceLock<std::sync::Weak<Server>>,
    /// The manifest while the AOF is off, and the last incr sequence number used (Redis
    /// keeps both in memory: a rewrite with the AOF off, or turning it on, goes on from them).
    idle: Mutex<Option<(AofManifest, u64)>>,
    /// The automatic rewrite's back-off after repeated failures (Redis's
    /// aofRewriteLimited): the current delay in minutes, and the unix second it ends at.
    limit_delay_min: AtomicU64,
    limit_until: AtomicU64,
    subscribed: AtomicBool,
    fsync_thread: AtomicBool,
    /// aof-timestamp-enabled, and the second of the last `#TS:` annotation written.
    timestamps: AtomicBool,
    cur_ts: AtomicU64,
    /// Unix seconds the running rewrite started (INFO aof_current_rewrite_time_sec).
    rewrite_started: AtomicU64,
    /// Rewrites failed in a row (INFO aof_rewrites_consecutive_failures).
    pub consecutive_failures: AtomicU64,
}

impl Default for AofState {
    fn default() -> Self {
        AofState {
            on: AtomicBool::new(false),
            files: Mutex::new(None),
            fsync: Mutex::new(Fsync::Everysec),
            written: AtomicU64::new(0),
            synced: Mutex::new(0),
            synced_tx: tokio::sync::watch::Sender::new(0),
            sync_req: Mutex::new(false),
            sync_cv: parking_lot::Condvar::new(),
            rewrite_in_progress: AtomicBool::new(false),
            last_rewrite_ok: AtomicBool::new(true),
            last_rewrite_time_sec: AtomicI64::new(-1),
            rewrites: AtomicU64::new(0),
            write_errno: AtomicI32::new(0),
            fsync_errno: AtomicI32::new(0),
            current_size: AtomicU64::new(0),
            base_size: AtomicU64::new(0),
            rewrite_scheduled: AtomicBool::new(false),
            cancel: AtomicBool::new(false),
            worker: Mutex::new(None),
            switch: Mutex::new(()),
            server: std::sync::OnceLock::new(),
            idle: Mutex::new(None),
            limit_delay_min: AtomicU64::new(0),
            limit_until: AtomicU64::new(0),
            subscribed: AtomicBool::new(false),
            fsync_thread: AtomicBool::new(false),
            timestamps: AtomicBool::new(false),
            cur_ts: AtomicU64::new(0),
            rewrite_started: AtomicU64::new(0),
            consecutive_failures: AtomicU64::new(0),
        }
    }
}

impl AofState {
    pub fn enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Seconds the running rewrite has taken, -1 when none runs.
    pub fn current_rewrite_secs(&self) -> i64 {
        if !self.rewrite_in_progress.load(Ordering::Relaxed) {
            return -1;
        }
        let now = crate::server::now_ms() / 1000;
        now.saturating_sub(self.rewrite_started.load(Ordering::Relaxed)) as i64
    }

    /// INFO's aof_last_write_status: neither a write nor the last fsync failed.
    pub fn last_write_ok(&self) -> bool {
        self.error_errno() == 0
    }

    /// The errno that makes the AOF refuse writes (a pending write's first, then a failed
    /// fsync's), 0 when it takes them. Two relaxed loads: checked before every write command.
    #[inline]
    pub fn error_errno(&self) -> i32 {
        match self.write_errno.load(Ordering::Relaxed) {
            0 => self.fsync_errno.load(Ordering::Relaxed),
            e => e,
        }
    }

    fn count_written(&self, n: u64) {
        if n == 0 {
            return;
        }
        self.written.fetch_add(n, Ordering::AcqRel);
        self.current_size.fetch_add(n, Ordering::Relaxed);
    }

    /// The watermark after every write appended so far: a client that just wrote keeps it
    /// (`ClientState::aof_mark`), and its replies wait for it ([`before_reply`]).
    #[inline]
    pub fn written_mark(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    fn policy(&self) -> Fsync {
        *self.fsync.lock()
    }

    /// The config changed (`Server::config_changed`): `appendfsync` applies from the next
    /// write on, as CONFIG SET appendfsync does in redis; `appendonly` turns the AOF on
    /// (a rewrite starts at once, as Redis's startAppendOnly) or off (stopAppendOnly: the
    /// file is flushed and fsynced, a running rewrite stopped) once the server runs.
    pub fn configure(&self, c: &crate::config::Settings) {
        *self.fsync.lock() = c.appendfsync;
        self.timestamps
            .store(c.aof_timestamp_enabled, Ordering::Relaxed);
        if !c.aof_disable_auto_gc {
            self.delete_history();
        }
        let Some(srv) = self.server.get().and_then(std::sync::Weak::upgrade) else {
            return;
        };
        let _sw = self.switch.lock();
        if c.appendonly == self.enabled() {
            return;
        }
        if c.appendonly {
            start_aof(&srv, false);
        } else {
            stop_aof(&srv);
        }
    }

    /// aof-disable-auto-gc no (Redis's aofDelHistoryFiles): the history files listed in the
    /// manifest are removed and the manifest is written without them.
    fn delete_history(&self) {
        let mut g = self.files.lock();
        let Some(f) = g.as_mut() else {
            return;
        };
        if f.manifest.history.is_empty() {
            return;
        }
        let mut m = f.manifest.clone();
        let gone = std::mem::take(&mut m.history);
        if let Err(e) = write_manifest(&f.dir, &f.prefix, &m) {
            tracing::warn!(error = %e, "Can't persist the AOF manifest without its history files");
            return;
        }
        for i in gone {
            tracing::info!("Removing the history file {} in the background", i.name);
            let _ = std::fs::remove_file(f.dir.join(&i.name));
        }
        f.manifest = m;
    }

    /// CONFIG SET inside MULTI/EXEC, before [`AofState::configure`]: turning the AOF on
    /// schedules its rewrite for the cron instead of starting it within the transaction
    /// (Redis's startAppendOnly when server.in_exec).
    pub fn configure_in_exec(&self, appendonly: bool) {
        let Some(srv) = self.server.get().and_then(std::sync::Weak::upgrade) else {
            return;
        };
        let _sw = self.switch.lock();
        if appendonly && !self.enabled() {
            start_aof(&srv, true);
        }
    }

    /// fsyncs every byte appended so far, unless another thread already did (group commit).
    /// With `appendfsync always` a failed fsync ends the process, as in redis: the replies
    /// waiting for it must never be sent, and the data cannot be rolled back.
    pub fn sync_upto(&self, mark: u64) {
        let mut synced = self.synced.lock();
        if *synced >= mark {
            return;
        }
        let target = self.written.load(Ordering::Acquire);
        let fds: Vec<File> = {
            let g = self.files.lock();
            match g.as_ref() {
                Some(f) => std::iter::once(&f.incr)
                    .chain(f.old.iter())
                    .filter_map(|i| i.file.try_clone().ok())
                    .collect(),
                None => Vec::new(),
            }
        };
        let mut failed = None;
        for f in fds {
            if let Err(e) = f.sync_data() {
                failed = Some(e);
            }
        }
        match failed {
            Some(e) => {
                if self.policy() == Fsync::Always {
                    let msg = format!("Can't persist AOF for fsync error when the AOF fsync policy is 'always': {}. Exiting...", strerror(e.raw_os_error().unwrap_or(libc::EIO)));
                    tracing::error!("{msg}");
                    std::process::exit(1);
                }
                tracing::warn!(error = %e, "Error trying to fsync the append-only file");
                self.fsync_errno
                    .store(e.raw_os_error().unwrap_or(libc::EIO), Ordering::Relaxed);
                // Not synced: the next second tries again.
            }
            None => {
                if self.fsync_errno.swap(0, Ordering::Relaxed) != 0 {
                    tracing::warn!("AOF fsync error looks solved, Redis can write again.");
                }
                *synced = target;
                self.synced_tx.send_replace(target);
            }
        }
    }

    /// Once a second (redis's serverCron): writes what a failed write left pending.
    fn retry_pending(&self) {
        if self.write_errno.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut g = self.files.lock();
        let Some(f) = g.as_mut() else {
            return;
        };
        if f.flush_all(self) {
            self.write_errno.store(0, Ordering::Relaxed);
            tracing::warn!("AOF write error looks solved, Redis can write again.");
        }
    }
}

impl WriteSubscriber for AofState {
    fn feed(&self, w: &Write<'_>) {
        let mut g = self.files.lock();
        let Some(f) = g.as_mut() else {
            return;
        };
        // Mid-rewrite, a write on stripes not copied yet belongs with the old incr file
        // (or nowhere while the AOF is being turned on: the new base will hold it).
        let to_old = !f.copied.is_empty()
            && !w.stripes.is_empty()
            && w.stripes
                .iter()
                .all(|&s| !f.copied.get(s as usize).copied().unwrap_or(false));
        if to_old && f.waiting {
            return;
        }
        let Files {
            incr, old, scratch, ..
        } = f;
        let target = match old.as_mut() {
            Some(o) if to_old => o,
            _ => incr,
        };
        // aof-timestamp-enabled: a `#TS:` line before the first write of each second.
        let ts = self.timestamps.load(Ordering::Relaxed).then(|| {
            let now = crate::server::now_ms() / 1000;
            (self.cur_ts.swap(now, Ordering::Relaxed) < now).then_some(now)
        });
        match target.append(scratch, w, ts.flatten()) {
            Ok(n) => self.count_written(n),
            Err(e) => {
                if self.policy() == Fsync::Always {
                    // The command ran and its reply is waiting for this write: redis
                    // exits rather than acknowledge (or let anyone read) what is not on disk.
                    tracing::error!(error = %e.error, "Error writing to the AOF file");
                    tracing::error!("Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting...");
                    std::process::exit(1);
                }
                if self.write_errno.swap(e.errno, Ordering::Relaxed) == 0 {
                    tracing::warn!(error = %e.error, "Error writing to the AOF file");
                }
            }
        }
    }
}

/// Before a connection writes its replies: with `appendfsync always`, waits (without
/// blocking the I/O thread) until its client's writes are on disk (`mark`: the client's
/// `aof_mark`). The fsync thread syncs whatever was appended by then, so concurrent
/// clients share one fsync.
pub async fn before_reply(srv: &Server, mark: u64) {
    let a = &srv.persist.aof;
    if !a.enabled() {
        return;
    }
    if mark == 0 || *a.fsync.lock() != Fsync::Always {
        return;
    }
    let mut rx = a.synced_tx.subscribe();
    if *rx.borrow_and_update() >= mark {
        return;
    }
    *a.sync_req.lock() = true;
    a.sync_cv.notify_one();
    while *rx.borrow_and_update() < mark {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> PersistError + '_ {
    move |e| PersistError::Io {
        path: path.display().to_string(),
        source: e,
    }
}

/// Writes the manifest crash-safely (temp, fsync, rename, fsync dir).
fn write_manifest(dir: &Path, prefix: &str, m: &AofManifest) -> Result<(), PersistError> {
    let path = dir.join(AofManifest::manifest_name(prefix));
    let tmp = dir.join(format!("temp-{}.manifest", std::process::id()));
    let r = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(m.to_string().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        File::open(dir)?.sync_all()
    })();
    r.map_err(io_err(&path))
}

fn open_append(path: &Path) -> Result<File, PersistError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io_err(path))
}

/// Runs a replayed command through the dispatcher as an internal client.
struct Replayer {
    cl: crate::server::ClientState,
    out: crate::resp::Out,
}

impl Replayer {
    fn new() -> Self {
        let mut cl = crate::server::ClientState::detached(0, 0);
        // Time stands still while replaying (like Redis, which expires nothing while
        // loading): a key is only gone if the AOF says DEL, so commands that found it alive
        // when they first ran find it alive again. Keys past their TTL expire after loading.
        cl.now_ms = 1;
        Replayer {
            cl,
            out: crate::resp::Out::new(false),
        }
    }

    fn run(&mut self, srv: &Arc<Server>, args: &[&[u8]]) {
        self.out.buf.clear();
        match crate::cmd::execute(srv, &mut self.cl, &mut self.out, args) {
            crate::cmd::Outcome::Blocked(_) => {
                tracing::warn!(cmd = %String::from_utf8_lossy(args[0]), "replayed command blocked; skipped")
            }
            _ => {
                if self.out.buf.first() == Some(&b'-') {
                    tracing::debug!(
                        cmd = %String::from_utf8_lossy(args[0]),
                        reply = %String::from_utf8_lossy(&self.out.buf),
                        "replayed command failed"
                    );
                }
            }
        }
    }
}

/// Replays one AOF file (RDB preamble and/or commands). `last`: the truncated-tail rule
/// applies (the file is cut back to its last complete command when aof-load-truncated yes).
fn load_file(
    srv: &Arc<Server>,
    rp: &mut Replayer,
    path: &Path,
    last: bool,
) -> Result<u64, PersistError> {
    let name = path.display().to_string();
    let mut f = File::open(path).map_err(io_err(path))?;
    // An empty file has nothing to replay; judged by its size, as redis does, so that a
    // device standing in for it (a symlink to /dev/full) is not read.
    if f.metadata().map_err(io_err(path))?.len() == 0 {
        return Ok(0);
    }
    let mut head = [0u8; 5];
    let n = f.read(&mut head).map_err(io_err(path))?;
    f.seek(SeekFrom::Start(0)).map_err(io_err(path))?;
    let mut offset = 0u64;
    let mut reader = BufReader::with_capacity(1 << 20, f);
    if has_rdb_preamble(&head[..n]) {
        let counting = CountingReader {
            inner: reader,
            n: 0,
        };
        let (_, back, _) = snapshot::load_rdb_stream(srv, counting, &name, true)?;
        offset = back.n;
        reader = back.inner;
    }
    let mut cr = AofCommandReader::with_offset(reader, offset);
    let mut cmds = 0u64;
    // Redis's log names the file alone; the lines are its own (the suites grep for them).
    let fname = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| name.clone());
    // Where the open MULTI began: a transaction the file does not finish is cut off there.
    let mut multi_at: Option<u64> = None;
    let cut_at = loop {
        let before = cr.offset();
        match cr.next_command() {
            Ok(Some(args)) if args.is_empty() => {}
            Ok(Some(args)) => {
                let cmd = &args[0];
                if crate::cmd::table().get(cmd).is_none() {
                    let cmd = String::from_utf8_lossy(cmd);
                    tracing::warn!("Unknown command '{cmd}' reading the append only file {fname}");
                    return Err(PersistError::AofCorrupt {
                        path: name,
                        offset: before,
                        reason: format!("unknown command '{cmd}'"),
                    });
                }
                if cmd.eq_ignore_ascii_case(b"multi") {
                    multi_at = Some(before);
                } else if cmd.eq_ignore_ascii_case(b"exec") || cmd.eq_ignore_ascii_case(b"discard")
                {
                    multi_at = None;
                }
                rp.run(srv, &crate::cmd::arg_view(&args));
                cmds += 1;
            }
            Ok(None) => match multi_at {
                None => return Ok(cmds),
                Some(at) => {
                    tracing::warn!("Revert incomplete MULTI/EXEC transaction in AOF file {fname}");
                    break at;
                }
            },
            Err(AofReadError::Truncated { valid_up_to }) => break valid_up_to,
            Err(AofReadError::Corrupt { offset, reason }) => {
                tracing::warn!("Bad file format reading the append only file {fname}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>");
                return Err(PersistError::AofCorrupt {
                    path: name,
                    offset,
                    reason: reason.to_string(),
                });
            }
            Err(AofReadError::Io(e)) => {
                tracing::warn!("Unrecoverable error reading the append only file {fname}: {e}");
                return Err(PersistError::Io {
                    path: name,
                    source: e,
                });
            }
        }
    };
    // An unexpected end of file (Redis's uxeof).
    if srv.config.read().typed.aof_load_truncated {
        tracing::warn!("!!! Warning: short read while loading the AOF file {fname}!!!");
        tracing::warn!("!!! Truncating the AOF {fname} at offset {cut_at} !!!");
        let f = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io_err(path))?;
        f.set_len(cut_at).map_err(io_err(path))?;
        f.sync_all().map_err(io_err(path))?;
        tracing::warn!("AOF {fname} loaded anyway because aof-load-truncated is enabled");
        if last {
            return Ok(cmds);
        }
        tracing::warn!("Fatal error: the truncated file is not the last file");
    } else {
        tracing::warn!("Unexpected end of file reading the append only file {fname}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.");
    }
    Err(PersistError::AofTruncated {
        path: name,
        offset: cut_at,
    })
}

/// A reader that counts the bytes it hands out (the RDB preamble's length).
struct CountingReader<R> {
    inner: R,
    n: u64,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n += k as u64;
        Ok(k)
    }
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// At start with `appendonly yes`: loads the AOF if one exists (else dump.rdb), then opens
/// the AOF for appending (creating it with a base of the loaded data when new).
pub fn load_and_open(srv: &Arc<Server>) -> Result<(), PersistError> {
    let (dir, dirname, prefix, fsync) = {
        let c = srv.config.read();
        (
            c.typed.dir.clone(),
            c.typed.appenddirname.clone(),
            c.typed.appendfilename.clone(),
            c.typed.appendfsync,
        )
    };
    // redis checks them when reading its config.
    check_names(&prefix, &dirname)?;
    let root = dir;
    let dir = root.join(&dirname);
    *srv.persist.aof.fsync.lock() = fsync;
    let mpath = dir.join(AofManifest::manifest_name(&prefix));
    upgrade_old_aof(&root, &dir, &dirname, &prefix, &mpath)?;
    if !mpath.exists() {
        let rdb = super::rdb_path(srv);
        if rdb.exists() {
            snapshot::load_rdb(srv, &rdb)?;
        }
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        return create_fresh(srv, dir, prefix);
    }
    let text = std::fs::read_to_string(&mpath).map_err(io_err(&mpath))?;
    let mut manifest = AofManifest::parse(&text).map_err(|source| {
        // The node's log gets redis's report too (the error itself goes to stderr).
        tracing::error!("{source}");
        PersistError::AofManifest {
            path: mpath.display().to_string(),
            source,
        }
    })?;
    let order: Vec<AofFileInfo> = manifest.load_order().cloned().collect();
    // Every file the manifest names must be there before any is loaded (Redis 7.0's
    // getBaseAndIncrAppendOnlyFilesSize; a missing one is fatal, the last incr file too).
    for fi in &order {
        let p = dir.join(&fi.name);
        if let Err(e) = std::fs::metadata(&p) {
            tracing::warn!(
                "Unable to obtain the AOF file {} length. stat: {}",
                fi.name,
                strerror(e.raw_os_error().unwrap_or(libc::ENOENT))
            );
            return Err(PersistError::Io {
                path: p.display().to_string(),
                source: e,
            });
        }
    }
    let mut rp = Replayer::new();
    let mut total = 0;
    for (i, fi) in order.iter().enumerate() {
        let p = dir.join(&fi.name);
        let n = load_file(srv, &mut rp, &p, i + 1 == order.len())?;
        tracing::info!(file = %fi.name, commands = n, "AOF file loaded");
        total += file_len(&p);
    }
    srv.persist.aof.base_size.store(
        manifest
            .base
            .as_ref()
            .map(|b| file_len(&dir.join(&b.name)))
            .unwrap_or(0),
        Ordering::Relaxed,
    );
    srv.persist.aof.current_size.store(total, Ordering::Relaxed);
    // Append to the last incr file, or start one.
    let incr = match manifest.incr.last().cloned() {
        Some(fi) => IncrFile::new(open_append(&dir.join(&fi.name))?, fi.seq),
        None => {
            // Incr files count on their own (Redis's curr_incr_file_seq): the first is 1.
            let seq = next_seq(manifest.incr.iter().map(|i| i.seq).max().unwrap_or(0))?;
            let name = AofManifest::incr_name(&prefix, seq);
            let file = open_append(&dir.join(&name))?;
            manifest.incr.push(AofFileInfo {
                name,
                seq,
                kind: AofFileKind::Incr,
            });
            write_manifest(&dir, &prefix, &manifest)?;
            IncrFile::new(file, seq)
        }
    };
    install(srv, dir, prefix, manifest, incr);
    Ok(())
}

/// A Redis < 7.0 AOF (`appendfilename` in the server dir) is moved into the AOF directory
/// as its base, as Redis 7.0's aofUpgradePrepare: when the directory or its manifest is
/// missing, or the manifest names only that base and the directory lacks it (an upgrade
/// that was interrupted).
fn upgrade_old_aof(
    root: &Path,
    dir: &Path,
    dirname: &str,
    prefix: &str,
    mpath: &Path,
) -> Result<(), PersistError> {
    let old = root.join(prefix);
    if !old.is_file() {
        return Ok(());
    }
    let upgrade = if !dir.is_dir() || !mpath.exists() {
        true
    } else {
        let text = std::fs::read_to_string(mpath).map_err(io_err(mpath))?;
        match AofManifest::parse(&text) {
            Ok(m) => {
                m.incr.is_empty()
                    && m.base.as_ref().is_some_and(|b| b.name == prefix)
                    && !dir.join(prefix).exists()
            }
            // The load reports it.
            Err(_) => false,
        }
    };
    if !upgrade {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        tracing::warn!("Can't open or create append-only dir {dirname}: {e}");
        io_err(dir)(e)
    })?;
    let m = AofManifest {
        base: Some(AofFileInfo {
            name: prefix.to_string(),
            seq: 1,
            kind: AofFileKind::Base,
        }),
        incr: Vec::new(),
        history: Vec::new(),
    };
    write_manifest(dir, prefix, &m)?;
    std::fs::rename(&old, dir.join(prefix)).map_err(|e| {
        tracing::warn!("Error trying to move the old AOF file {prefix} into dir {dirname}: {e}");
        io_err(&old)(e)
    })?;
    tracing::info!("Successfully migrated an old-style AOF file ({prefix}) into the AOF directory ({dirname}).");
    Ok(())
}

/// DEBUG LOADAOF (persist::debug): every byte appended so far is written and fsynced,
/// then the manifest's files are replayed into the dataset (the caller emptied it), in
/// load order, as at start.
pub(super) fn replay_current(srv: &Arc<Server>) -> Result<(), PersistError> {
    let a = &srv.persist.aof;
    let current = {
        let mut g = a.files.lock();
        g.as_mut().map(|f| {
            f.flush_all(a);
            let order: Vec<AofFileInfo> = f.manifest.load_order().cloned().collect();
            (f.dir.clone(), order)
        })
    };
    // With the AOF off, Redis loads the files its manifest names (a rewrite made them),
    // reading the manifest from disk: the incr numbering restarts from what it lists.
    let (dir, order) = match current {
        Some(c) => c,
        None => {
            let (dir, prefix) = aof_location(srv)?;
            a.idle.lock().take();
            let (m, _) = idle_manifest(a, &dir, &prefix)?;
            let order = m.load_order().cloned().collect();
            (dir, order)
        }
    };
    a.sync_upto(a.written_mark());
    let mut rp = Replayer::new();
    for (i, fi) in order.iter().enumerate() {
        let p = dir.join(&fi.name);
        let last = i + 1 == order.len();
        if !p.exists() && last && fi.kind == AofFileKind::Incr {
            continue;
        }
        let n = load_file(srv, &mut rp, &p, last)?;
        tracing::info!(file = %fi.name, commands = n, "AOF file loaded");
    }
    Ok(())
}

fn install(srv: &Arc<Server>, dir: PathBuf, prefix: String, manifest: AofManifest, incr: IncrFile) {
    let a = &srv.persist.aof;
    *a.files.lock() = Some(Files {
        dir,
        prefix,
        manifest,
        incr,
        old: None,
        copied: Vec::new(),
        stale: Vec::new(),
        scratch: Vec::with_capacity(4096),
        waiting: false,
    });
    a.on.store(true, Ordering::Release);
    subscribe_once(srv);
}

/// The AOF's propagation subscriber and fsync thread, once per server (the AOF can be
/// turned off and on again; with it off there are no files and both do nothing).
fn subscribe_once(srv: &Arc<Server>) {
    let a = &srv.persist.aof;
    if !a.subscribed.swap(true, Ordering::AcqRel) {
        srv.persist.prop.subscribe(aof_subscriber(srv));
    }
    if !a.fsync_thread.swap(true, Ordering::AcqRel) {
        start_fsync_thread(srv);
    }
}

/// Lets CONFIG SET appendonly start and stop the AOF of this server (see
/// [`AofState::configure`]). Called once the dataset is loaded.
pub fn attach(srv: &Arc<Server>) {
    let _ = srv.persist.aof.server.set(Arc::downgrade(srv));
}

/// The AOF as a propagation subscriber (shares the server's state).
fn aof_subscriber(srv: &Arc<Server>) -> Arc<dyn WriteSubscriber> {
    struct Sub(Arc<Server>);
    impl WriteSubscriber for Sub {
        fn feed(&self, w: &Write<'_>) {
            self.0.persist.aof.feed(w)
        }
    }
    Arc::new(Sub(srv.clone()))
}

/// everysec: fsync once a second off the I/O threads.
fn start_fsync_thread(srv: &Arc<Server>) {
    let srv = srv.clone();
    let _ = std::thread::Builder::new()
        .name("tessera-aof-fsync".into())
        .spawn(move || loop {
            let a = &srv.persist.aof;
            let requested = {
                let mut req = a.sync_req.lock();
                if !*req {
                    a.sync_cv
                        .wait_for(&mut req, std::time::Duration::from_secs(1));
                }
                std::mem::take(&mut *req)
            };
            if srv.shutting_down.load(Ordering::Relaxed) {
                return;
            }
            // everysec: once a second; always: whenever a connection waits for its fsync.
            let policy = *a.fsync.lock();
            if requested || policy == Fsync::Everysec {
                a.sync_upto(a.written.load(Ordering::Acquire));
            }
        });
}

/// A new AOF: base 1 (the current data, as an RDB), incr 1, manifest.
fn create_fresh(srv: &Arc<Server>, dir: PathBuf, prefix: String) -> Result<(), PersistError> {
    let rdb = srv.config.read().typed.aof_use_rdb_preamble;
    let base_name = AofManifest::base_name(&prefix, 1, rdb);
    let base_path = dir.join(&base_name);
    let size =
        super::aof_base::write_base(srv, &base_path, rdb, &super::aof_base::Hooks::NONE, None)?;
    let incr_name = AofManifest::incr_name(&prefix, 1);
    let file = open_append(&dir.join(&incr_name))?;
    let manifest = AofManifest {
        base: Some(AofFileInfo {
            name: base_name,
            seq: 1,
            kind: AofFileKind::Base,
        }),
        incr: vec![AofFileInfo {
            name: incr_name,
            seq: 1,
            kind: AofFileKind::Incr,
        }],
        history: Vec::new(),
    };
    write_manifest(&dir, &prefix, &manifest)?;
    srv.persist.aof.base_size.store(size, Ordering::Relaxed);
    srv.persist.aof.current_size.store(size, Ordering::Relaxed);
    install(srv, dir, prefix, manifest, IncrFile::new(file, 1));
    Ok(())
}

/// BGREWRITEAOF's replies (Redis 7.0's bgrewriteaofCommand).
pub const REWRITE_STARTED: &str = "Background append only file rewriting started";
pub const REWRITE_SCHEDULED: &str = "Background append only file rewriting scheduled";
pub const REWRITE_RUNNING: &str = "ERR Background append only file rewriting already in progress";
pub const REWRITE_FAILED: &str = "ERR Can't execute an AOF background rewriting. Please check the server logs for more information.";

/// BGREWRITEAOF, as Redis 7.0: refused while a rewrite runs; scheduled while a BGSAVE runs
/// or inside EXEC (`in_exec`; the cron starts it); else started, whatever appendonly says
/// (with the AOF off only a new base and a manifest naming it are written). Ok: the status
/// reply; Err: the error reply.
pub fn bgrewrite_command(srv: &Arc<Server>, in_exec: bool) -> Result<&'static str, &'static str> {
    let a = &srv.persist.aof;
    if a.rewrite_in_progress.load(Ordering::Acquire) {
        return Err(REWRITE_RUNNING);
    }
    if in_exec || srv.persist.bgsave_in_progress.load(Ordering::Acquire) {
        a.rewrite_scheduled.store(true, Ordering::Release);
        return Ok(REWRITE_SCHEDULED);
    }
    bgrewrite(srv).map(|()| REWRITE_STARTED)
}

/// Starts a rewrite thread (BGREWRITEAOF, the cron, a replica after its full sync). Err
/// (an error reply) when one runs or it cannot start.
pub fn bgrewrite(srv: &Arc<Server>) -> Result<(), &'static str> {
    let _sw = srv.persist.aof.switch.lock();
    spawn_rewrite(srv)
}

/// What a rewrite does once its base is written, by the AOF's state when it started.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The AOF is on: the new incr file is listed already, the old incr files go.
    On,
    /// The AOF is being turned on: the temp incr file becomes the next incr file.
    Start,
    /// The AOF is off: only the base is written, and a manifest naming only it.
    Off,
}

struct Plan {
    mode: Mode,
    dir: PathBuf,
    prefix: String,
    base_seq: u64,
    /// On/Start: the new incr file's sequence number; Off: the last one used.
    incr_seq: u64,
    rdb: bool,
    /// Off: the manifest the new one replaces.
    previous: Option<AofManifest>,
    /// aof-disable-auto-gc: replaced files stay, listed as history, until it is turned off.
    keep_history: bool,
}

/// [`bgrewrite`] with `switch` held.
fn spawn_rewrite(srv: &Arc<Server>) -> Result<(), &'static str> {
    let a = &srv.persist.aof;
    if a.rewrite_in_progress
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return Err(REWRITE_RUNNING);
    }
    // The last rewrite's thread has finished (or is returning): reap it.
    if let Some(h) = a.worker.lock().take() {
        let _ = h.join();
    }
    let plan = match prepare(srv) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "Can't rewrite append only file in background");
            a.last_rewrite_ok.store(false, Ordering::Relaxed);
            a.rewrite_in_progress.store(false, Ordering::Release);
            return Err(REWRITE_FAILED);
        }
    };
    a.cancel.store(false, Ordering::Release);
    a.rewrite_scheduled.store(false, Ordering::Release);
    a.rewrite_started
        .store(crate::server::now_ms() / 1000, Ordering::Relaxed);
    let n = a.rewrites.fetch_add(1, Ordering::Relaxed) + 1;
    // As Redis, a child writes the new base (persist::child); a thread when none forks.
    let child = match super::child::SaveChild::spawn(
        &plan.dir,
        "temp-rewriteaof-bg-",
        ".aof",
        super::snapshot::KeySaveDelay::frozen(srv),
    ) {
        Ok(c) => {
            srv.persist.child_started(c.pid(), c.fork_usec());
            srv.oom.apply_child(srv, c.pid());
            tracing::info!(
                "Background append only file rewriting started by pid {}",
                c.pid()
            );
            Some(c)
        }
        Err(e) => {
            tracing::warn!(error = %e, "Can't fork a child for the AOF rewrite");
            tracing::info!("Background append only file rewriting started by thread {n}");
            None
        }
    };
    let srv2 = srv.clone();
    let spawned = std::thread::Builder::new()
        .name("tessera-aofrw".into())
        .spawn(move || {
            let started = Instant::now();
            let r = rewrite(&srv2, plan, child);
            let a = &srv2.persist.aof;
            let cancelled = a.cancel.load(Ordering::Acquire);
            match &r {
                Ok(()) => tracing::info!("Background AOF rewrite finished successfully"),
                Err(_) if cancelled => {}
                Err(e) => {
                    tracing::warn!(error = %e, "Background AOF rewrite terminated with error")
                }
            }
            // Stopped on purpose is no failure (Redis's SIGUSR1 to its child).
            if !cancelled {
                a.last_rewrite_ok.store(r.is_ok(), Ordering::Relaxed);
                if r.is_ok() {
                    a.consecutive_failures.store(0, Ordering::Relaxed);
                } else {
                    a.consecutive_failures.fetch_add(1, Ordering::Relaxed);
                }
            }
            a.last_rewrite_time_sec
                .store(started.elapsed().as_secs() as i64, Ordering::Relaxed);
            a.rewrite_in_progress.store(false, Ordering::Release);
        });
    match spawned {
        Ok(h) => {
            *a.worker.lock() = Some(h);
            Ok(())
        }
        Err(e) => {
            tracing::warn!(error = %e, "Can't start the AOF rewrite thread");
            srv.persist.child_pid.store(0, Ordering::Release);
            undo_rewrite(a);
            a.last_rewrite_ok.store(false, Ordering::Relaxed);
            a.rewrite_in_progress.store(false, Ordering::Release);
            Err(REWRITE_FAILED)
        }
    }
}

/// The sequence number after `seq`, within what the manifest parser accepts.
fn next_seq(seq: u64) -> Result<u64, PersistError> {
    seq.checked_add(1)
        .filter(|&n| n <= MAX_SEQ)
        .ok_or_else(|| PersistError::Io {
            path: "appendonly manifest".into(),
            source: std::io::Error::other("AOF file sequence numbers exhausted"),
        })
}

/// After a failed rewrite the old incr file stays in the manifest: whatever a failed write
/// left pending for it must still reach it (the cron retries), else it is synced now.
fn keep_old(f: &mut Files, old: Option<IncrFile>) {
    let Some(old) = old else {
        return;
    };
    if old.pending.is_empty() {
        let _ = old.file.sync_data();
    } else {
        f.stale.push(old);
    }
}

/// The temp incr file that collects writes while the AOF is being turned on.
fn temp_incr_name(prefix: &str) -> String {
    format!("temp-{prefix}.incr")
}

/// Every AOF file is named after `appendfilename` inside `appenddirname`: bare names only,
/// or the files land (and rewrites delete) outside the AOF directory.
fn check_names(prefix: &str, dirname: &str) -> Result<(), PersistError> {
    if !is_base_name(prefix) {
        return Err(PersistError::BadName(
            "appendfilename can't be a path, just a filename",
        ));
    }
    if !is_base_name(dirname) {
        return Err(PersistError::BadName(
            "appenddirname can't be a path, just a dirname",
        ));
    }
    Ok(())
}

/// The AOF directory and file prefix from the config, created when missing.
fn aof_location(srv: &Server) -> Result<(PathBuf, String), PersistError> {
    let (dir, dirname, prefix) = {
        let c = srv.config.read();
        (
            c.typed.dir.clone(),
            c.typed.appenddirname.clone(),
            c.typed.appendfilename.clone(),
        )
    };
    check_names(&prefix, &dirname)?;
    let dir = dir.join(dirname);
    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    Ok((dir, prefix))
}

/// The manifest while the AOF is off, and the last incr sequence number used: the one kept
/// in memory, else the one on disk (empty when there is none).
fn idle_manifest(
    a: &AofState,
    dir: &Path,
    prefix: &str,
) -> Result<(AofManifest, u64), PersistError> {
    if let Some(kept) = a.idle.lock().clone() {
        return Ok(kept);
    }
    let mpath = dir.join(AofManifest::manifest_name(prefix));
    if !mpath.exists() {
        return Ok((AofManifest::default(), 0));
    }
    let text = std::fs::read_to_string(&mpath).map_err(io_err(&mpath))?;
    let m = AofManifest::parse(&text).map_err(|source| PersistError::AofManifest {
        path: mpath.display().to_string(),
        source,
    })?;
    let last = m.incr.iter().map(|i| i.seq).max().unwrap_or(0);
    Ok((m, last))
}

/// Everything a rewrite sets up before its thread starts (Redis's
/// rewriteAppendOnlyFileBackground before the fork): with the AOF on, the next incr file,
/// listed in the manifest; while turning it on, the temp incr file; with it off, nothing.
fn prepare(srv: &Arc<Server>) -> Result<Plan, PersistError> {
    let a = &srv.persist.aof;
    let (rdb, keep_history) = {
        let c = &srv.config.read().typed;
        (c.aof_use_rdb_preamble, c.aof_disable_auto_gc)
    };
    {
        let mut g = a.files.lock();
        if let Some(f) = g.as_mut() {
            let seq = next_seq(f.incr.seq)?;
            let base_seq = next_seq(f.manifest.base.as_ref().map(|b| b.seq).unwrap_or(0))?;
            let name = AofManifest::incr_name(&f.prefix, seq);
            let file = open_append(&f.dir.join(&name))?;
            let mut m = f.manifest.clone();
            m.incr.push(AofFileInfo {
                name: name.clone(),
                seq,
                kind: AofFileKind::Incr,
            });
            write_manifest(&f.dir, &f.prefix, &m)?;
            tracing::info!("Creating AOF incr file {name} on background rewrite");
            f.manifest = m;
            let old = std::mem::replace(&mut f.incr, IncrFile::new(file, seq));
            f.old = Some(old);
            f.copied = vec![false; STRIPES];
            return Ok(Plan {
                mode: Mode::On,
                dir: f.dir.clone(),
                prefix: f.prefix.clone(),
                base_seq,
                incr_seq: seq,
                rdb,
                previous: None,
                keep_history,
            });
        }
    }
    let (dir, prefix) = aof_location(srv)?;
    let (manifest, last_incr) = idle_manifest(a, &dir, &prefix)?;
    let base_seq = next_seq(manifest.base.as_ref().map(|b| b.seq).unwrap_or(0))?;
    if !a.enabled() {
        return Ok(Plan {
            mode: Mode::Off,
            dir,
            prefix,
            base_seq,
            incr_seq: last_incr,
            rdb,
            previous: Some(manifest),
            keep_history,
        });
    }
    let incr_seq = next_seq(last_incr)?;
    let temp = dir.join(temp_incr_name(&prefix));
    match std::fs::remove_file(&temp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_err(&temp)(e)),
        _ => {}
    }
    let file = open_append(&temp)?;
    tracing::info!(
        "Creating AOF incr file {} on background rewrite",
        temp_incr_name(&prefix)
    );
    *a.files.lock() = Some(Files {
        dir: dir.clone(),
        prefix: prefix.clone(),
        manifest,
        incr: IncrFile::new(file, incr_seq),
        old: None,
        copied: vec![false; STRIPES],
        stale: Vec::new(),
        scratch: Vec::with_capacity(4096),
        waiting: true,
    });
    subscribe_once(srv);
    Ok(Plan {
        mode: Mode::Start,
        dir,
        prefix,
        base_seq,
        incr_seq,
        rdb,
        previous: None,
        keep_history,
    })
}

/// A rewrite that will not finish: with the AOF on, the old incr file stops receiving
/// writes and stays listed; while turning it on, the temp incr file goes and the rewrite
/// is scheduled again (Redis retries until the AOF is on).
fn undo_rewrite(a: &AofState) {
    let mut g = a.files.lock();
    let Some(f) = g.as_mut() else {
        return;
    };
    if f.waiting {
        let name = temp_incr_name(&f.prefix);
        let temp = f.dir.join(&name);
        *g = None;
        // Redis's words (the suites count this line).
        tracing::info!("Removing the temp incr aof file {name} in the background");
        let _ = std::fs::remove_file(temp);
        a.rewrite_scheduled.store(true, Ordering::Release);
        return;
    }
    let old = f.old.take();
    f.copied = Vec::new();
    keep_old(f, old);
}

fn rewrite(
    srv: &Arc<Server>,
    plan: Plan,
    child: Option<super::child::SaveChild>,
) -> Result<(), PersistError> {
    let a = &srv.persist.aof;
    let base_name = AofManifest::base_name(&plan.prefix, plan.base_seq, plan.rdb);
    let base_path = plan.dir.join(&base_name);
    // Each stripe is marked copied while its lock is held (see the module docs).
    let mark = |i: usize| {
        if let Some(f) = a.files.lock().as_mut() {
            if let Some(c) = f.copied.get_mut(i) {
                *c = true;
            }
        }
    };
    let cancelled = || a.cancel.load(Ordering::Acquire);
    let hooks = super::aof_base::Hooks {
        copied: &mark,
        cancelled: &cancelled,
    };
    let size = match super::aof_base::write_base(srv, &base_path, plan.rdb, &hooks, child) {
        Ok(size) if !cancelled() => size,
        Ok(_) => {
            let _ = std::fs::remove_file(&base_path);
            undo_rewrite(a);
            return Err(super::aof_base::cancelled_error());
        }
        Err(e) => {
            undo_rewrite(a);
            return Err(e);
        }
    };
    let base = AofFileInfo {
        name: base_name,
        seq: plan.base_seq,
        kind: AofFileKind::Base,
    };
    let r = match plan.mode {
        Mode::Off => finish_off(a, &plan, base),
        Mode::On | Mode::Start => finish_on(a, &plan, base, size),
    };
    if r.is_err() {
        let _ = std::fs::remove_file(&base_path);
    }
    r
}

/// Installs a rewrite made with the AOF off: the manifest names only the new base (every
/// older file becomes history and is removed), as Redis 7.0.
fn finish_off(a: &AofState, plan: &Plan, base: AofFileInfo) -> Result<(), PersistError> {
    let m = AofManifest {
        base: Some(base),
        incr: Vec::new(),
        history: Vec::new(),
    };
    write_manifest(&plan.dir, &plan.prefix, &m)?;
    if let Some(prev) = &plan.previous {
        for i in prev.load_order().chain(prev.history.iter()) {
            tracing::info!("Removing the history file {} in the background", i.name);
            let _ = std::fs::remove_file(plan.dir.join(&i.name));
        }
    }
    *a.idle.lock() = Some((m, plan.incr_seq));
    Ok(())
}

/// Installs a rewrite made with the AOF on (or being turned on): new base + the incr files
/// from the rewrite's on; older files become history and are removed.
fn finish_on(a: &AofState, plan: &Plan, base: AofFileInfo, size: u64) -> Result<(), PersistError> {
    let mut g = a.files.lock();
    let Some(f) = g.as_mut() else {
        return Err(super::aof_base::cancelled_error());
    };
    // Whatever happens now, the old incr file stops receiving writes.
    let old = f.old.take();
    f.copied = Vec::new();
    let mut current = f.manifest.clone();
    let mut renamed = None;
    if f.waiting {
        // The temp incr file becomes the next incr file.
        let name = AofManifest::incr_name(&plan.prefix, plan.incr_seq);
        let (from, to) = (
            plan.dir.join(temp_incr_name(&plan.prefix)),
            plan.dir.join(&name),
        );
        if let Err(e) = std::fs::rename(&from, &to) {
            drop(g);
            undo_rewrite(a);
            return Err(io_err(&to)(e));
        }
        renamed = Some(to);
        current.incr.push(AofFileInfo {
            name,
            seq: plan.incr_seq,
            kind: AofFileKind::Incr,
        });
    }
    let replaced = |i: &&AofFileInfo| !(i.kind == AofFileKind::Incr && i.seq >= plan.incr_seq);
    let (history, obsolete): (Vec<AofFileInfo>, Vec<String>) = if plan.keep_history {
        // As Redis, each replaced file goes to the head of the history list: the base
        // first, then the incr files.
        let mut h = current.history.clone();
        for i in current.load_order().filter(replaced) {
            let mut x = i.clone();
            x.kind = AofFileKind::History;
            h.insert(0, x);
        }
        (h, Vec::new())
    } else {
        let names = current
            .load_order()
            .chain(current.history.iter())
            .filter(replaced)
            .map(|i| i.name.clone())
            .collect();
        (Vec::new(), names)
    };
    let mut m = AofManifest {
        base: Some(base),
        incr: current
            .incr
            .iter()
            .filter(|i| i.seq >= plan.incr_seq)
            .cloned()
            .collect(),
        history,
    };
    if let Err(e) = write_manifest(&plan.dir, &plan.prefix, &m) {
        if let Some(to) = renamed {
            let _ = std::fs::rename(&to, plan.dir.join(temp_incr_name(&plan.prefix)));
            drop(g);
            undo_rewrite(a);
        } else {
            keep_old(f, old);
        }
        return Err(e);
    }
    // The new base holds what the old incr file (and anything still pending for it) held.
    drop(old);
    for n in obsolete {
        tracing::info!("Removing the history file {n} in the background");
        let _ = std::fs::remove_file(plan.dir.join(n));
    }
    if !plan.keep_history {
        m.history.clear();
    }
    f.manifest = m;
    f.waiting = false;
    a.base_size.store(size, Ordering::Relaxed);
    a.current_size.store(
        size + file_len(
            &plan
                .dir
                .join(AofManifest::incr_name(&plan.prefix, plan.incr_seq)),
        ),
        Ordering::Relaxed,
    );
    Ok(())
}

/// Stops the running rewrite and waits for its thread (Redis's killAppendOnlyChild).
fn kill_rewrite(a: &AofState) {
    let Some(h) = a.worker.lock().take() else {
        return;
    };
    if a.rewrite_in_progress.load(Ordering::Acquire) {
        tracing::info!(
            "Killing running AOF rewrite child: {}",
            a.rewrites.load(Ordering::Relaxed)
        );
        a.cancel.store(true, Ordering::Release);
    }
    let _ = h.join();
    a.cancel.store(false, Ordering::Release);
}

/// CONFIG SET appendonly yes (Redis's startAppendOnly): the AOF counts as on at once and
/// a rewrite starts (scheduled while a BGSAVE runs); writes reach the AOF's new incr file
/// as the rewrite copies their keys. `switch` is held. `in_exec`: inside MULTI/EXEC, the
/// rewrite is scheduled for the cron.
fn start_aof(srv: &Arc<Server>, in_exec: bool) {
    let a = &srv.persist.aof;
    if a.rewrite_in_progress.load(Ordering::Acquire) {
        // A rewrite begun with the AOF off does not collect the writes made since.
        tracing::warn!("AOF was enabled but there is already an AOF rewriting in background. Stopping background AOF and starting a rewrite now.");
        kill_rewrite(a);
    }
    a.on.store(true, Ordering::Release);
    // Earlier write or fsync errors are forgotten, as in Redis.
    a.write_errno.store(0, Ordering::Relaxed);
    a.fsync_errno.store(0, Ordering::Relaxed);
    if srv.persist.bgsave_in_progress.load(Ordering::Acquire) {
        a.rewrite_scheduled.store(true, Ordering::Release);
        tracing::warn!("AOF was enabled but there is already another background operation. An AOF background was scheduled to start when possible.");
        return;
    }
    if in_exec {
        a.rewrite_scheduled.store(true, Ordering::Release);
        tracing::warn!("AOF was enabled during a transaction. An AOF background was scheduled to start when possible.");
        return;
    }
    if spawn_rewrite(srv).is_err() {
        a.on.store(false, Ordering::Release);
        tracing::warn!("Redis needs to enable the AOF but can't trigger a background AOF rewrite operation. Check the above logs for more info about the error.");
    }
}

/// CONFIG SET appendonly no (Redis's stopAppendOnly): what was appended is written and
/// fsynced, the files are closed, a running rewrite is stopped. `switch` is held.
fn stop_aof(srv: &Arc<Server>) {
    let a = &srv.persist.aof;
    kill_rewrite(a);
    if let Some(f) = a.files.lock().as_mut() {
        f.flush_all(a);
    }
    a.sync_upto(a.written_mark());
    let files = a.files.lock().take();
    if let Some(f) = files {
        for x in std::iter::once(&f.incr)
            .chain(f.old.iter())
            .chain(f.stale.iter())
        {
            if let Err(e) = x.file.sync_data() {
                tracing::warn!(error = %e, "Fail to fsync the AOF file");
            }
        }
        if f.waiting {
            let _ = std::fs::remove_file(f.dir.join(temp_incr_name(&f.prefix)));
        } else {
            *a.idle.lock() = Some((f.manifest, f.incr.seq));
        }
    }
    a.on.store(false, Ordering::Release);
    a.rewrite_scheduled.store(false, Ordering::Release);
}

/// Once a second: a scheduled rewrite once no BGSAVE runs, then the automatic rewrite
/// when the AOF grew past the configured percentage.
pub fn cron(srv: &Arc<Server>) {
    let a = &srv.persist.aof;
    if a.enabled() {
        a.retry_pending();
    }
    if a.rewrite_in_progress.load(Ordering::Acquire)
        || srv.persist.bgsave_in_progress.load(Ordering::Acquire)
    {
        return;
    }
    if a.rewrite_scheduled.load(Ordering::Acquire) {
        if let Err(e) = bgrewrite(srv) {
            tracing::warn!(error = e, "scheduled AOF rewrite not started");
        }
        return;
    }
    let installed = a.files.lock().as_ref().is_some_and(|f| !f.waiting);
    if !a.enabled() || !installed {
        return;
    }
    let (pct, min) = {
        let c = &srv.config.read().typed;
        (c.auto_aof_rewrite_percentage, c.auto_aof_rewrite_min_size)
    };
    let cur = a.current_size.load(Ordering::Relaxed);
    let base = a.base_size.load(Ordering::Relaxed).max(1);
    if pct > 0
        && cur > min
        && (cur.saturating_sub(base)) * 100 / base >= pct
        && !rewrite_limited(a, crate::server::now_ms() / 1000)
    {
        tracing::info!(cur, base, "Starting automatic rewriting of AOF");
        let _ = bgrewrite(srv);
    }
}

/// Failures in a row after which the automatic rewrite backs off, and the longest delay.
const LIMIT_THRESHOLD: u64 = 3;
const LIMIT_MAX_MINUTES: u64 = 60;

/// Redis 7.0's aofRewriteLimited: after 3 failed rewrites in a row the automatic rewrite
/// waits 1 minute, then 2, 4... up to an hour between tries (BGREWRITEAOF is not limited).
fn rewrite_limited(a: &AofState, now: u64) -> bool {
    if a.consecutive_failures.load(Ordering::Relaxed) < LIMIT_THRESHOLD {
        a.limit_delay_min.store(0, Ordering::Relaxed);
        a.limit_until.store(0, Ordering::Relaxed);
        return false;
    }
    let until = a.limit_until.load(Ordering::Relaxed);
    if until != 0 {
        if now < until {
            return true;
        }
        a.limit_until.store(0, Ordering::Relaxed);
        return false;
    }
    let delay = match a.limit_delay_min.load(Ordering::Relaxed) {
        0 => 1,
        d => d.saturating_mul(2).min(LIMIT_MAX_MINUTES),
    };
    a.limit_delay_min.store(delay, Ordering::Relaxed);
    a.limit_until
        .store(now.saturating_add(delay * 60), Ordering::Relaxed);
    tracing::warn!("Background AOF rewrite has repeatedly failed and triggered the limit, will retry in {delay} minutes");
    true
}

/// The AOF was just turned on and its first rewrite has not finished (Redis's
/// AOF_WAIT_REWRITE): the files do not hold the dataset yet (a shutdown must not exit).
pub fn writing_initial(srv: &Server) -> bool {
    let a = &srv.persist.aof;
    // No files yet (the rewrite is scheduled behind a BGSAVE) counts too.
    a.enabled() && a.files.lock().as_ref().is_none_or(|f| f.waiting)
}

/// At shutdown: a running rewrite is stopped, then whatever was appended is fsynced.
pub fn flush_on_shutdown(srv: &Server) {
    let a = &srv.persist.aof;
    kill_rewrite(a);
    if a.enabled() {
        a.sync_upto(a.written.load(Ordering::Acquire));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// CONFIG SET appendfsync applies to the very next write, as in redis: the copy the AOF
    /// writer keeps is refreshed by the config-changed hook (it was only refreshed by the
    /// once-a-second cron, so a write right after `CONFIG SET appendfsync always` could be
    /// acknowledged before it was fsynced).
    #[test]
    fn config_set_appendfsync_applies_at_once() {
        let srv = Server::new(Config::default());
        assert_eq!(srv.persist.aof.policy(), Fsync::Everysec);
        for (value, want) in [("always", Fsync::Always), ("no", Fsync::No)] {
            srv.config
                .update(|c| c.set_directive("appendfsync", &[value.to_string()]))
                .unwrap();
            srv.config_changed();
            assert_eq!(
                srv.persist.aof.policy(),
                want,
                "after CONFIG SET appendfsync {value}"
            );
        }
    }

    /// An AOF server for the test: `appendonly yes`, `appendfsync always`, in `dir`.
    fn aof_server(dir: &Path) -> Arc<Server> {
        let srv = Server::new(Config::default());
        let d = dir.display().to_string();
        srv.config
            .update(|c| {
                c.set_directive("dir", &[d])?;
                c.set_directive("appendonly", &["yes".into()])?;
                c.set_directive("appendfsync", &["always".into()])
            })
            .expect("aof config");
        srv.config_changed();
        load_and_open(&srv).expect("aof open");
        srv
    }

    /// `appendfsync always` makes a reply wait for its own client's writes, compared with
    /// its own server's AOF: a write on another server (another client) run on the same
    /// thread just before does not make it wait (it waited for a watermark of the other
    /// server's file, which its own never reaches: forever).
    #[test]
    fn always_waits_for_the_clients_own_writes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (da, db) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&da).expect("dir a");
        std::fs::create_dir_all(&db).expect("dir b");
        let (a, b) = (aof_server(&da), aof_server(&db));
        let mut ca = crate::server::ClientState::detached(1, 0);
        let mut cb = crate::server::ClientState::detached(2, 0);
        let mut out = crate::resp::Out::new(false);
        crate::cmd::execute(&a, &mut ca, &mut out, &[b"SET", b"k", b"v"]);
        crate::cmd::execute(&b, &mut cb, &mut out, &[b"PING"]);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let wait = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                before_reply(&b, cb.aof_mark),
            );
            assert!(wait.await.is_ok(), "b's reply waited for a's AOF");
            let wait = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                before_reply(&a, ca.aof_mark),
            );
            assert!(wait.await.is_ok(), "a's reply never saw its write fsynced");
        });
        assert!(*a.persist.aof.synced.lock() >= a.persist.aof.written.load(Ordering::Acquire));
        a.request_shutdown();
        b.request_shutdown();
    }
}
