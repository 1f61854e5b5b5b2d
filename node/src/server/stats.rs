//! Server counters (INFO stats), the slow log and MONITOR feeds.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use super::clients::{ClientHandle, ClientState};

pub use crate::counter::Counter;

#[derive(Default)]
pub struct Stats {
    pub total_connections: Counter,
    pub total_commands: Counter,
    pub rejected_connections: Counter,
    pub expired_keys: Counter,
    pub evicted_keys: Counter,
    pub keyspace_hits: Counter,
    pub keyspace_misses: Counter,
    pub net_input_bytes: Counter,
    pub net_output_bytes: Counter,
    pub protocol_errors: Counter,
    /// Batches of pipelined requests whose keys were prefetched (server::prefetch).
    pub prefetch_batches: Counter,
    pub unexpected_error_replies: Counter,
    pub dirty: Counter,
    pub pubsub_messages: Counter,
    /// INFO errorstats and `total_error_replies`.
    pub errors: ErrorStats,
    /// Values freed on a background thread (UNLINK, FLUSHALL ASYNC, lazyfree-lazy-*).
    pub lazyfree: LazyFree,
    /// Socket reads / reply flushes of client connections (INFO's total_reads_processed
    /// and total_writes_processed).
    pub reads_processed: Counter,
    pub writes_processed: Counter,
    /// Bytes a master sent its replicas (RDB and command stream), also counted in
    /// `net_output_bytes`.
    pub net_repl_output_bytes: Counter,
    /// Heap in use when the server was built (INFO's used_memory_startup).
    pub startup_memory: StartupMemory,
}

/// The heap in use when it was made: built with the server's [`Stats`], before any
/// client or data exists (Redis's `used_memory_startup`).
pub struct StartupMemory(pub u64);

impl Default for StartupMemory {
    fn default() -> Self {
        StartupMemory(crate::alloc::used_memory())
    }
}

impl Stats {
    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for a in [
            &self.total_connections,
            &self.total_commands,
            &self.rejected_connections,
            &self.expired_keys,
            &self.evicted_keys,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.protocol_errors,
            &self.prefetch_batches,
            &self.unexpected_error_replies,
            &self.pubsub_messages,
            &self.reads_processed,
            &self.writes_processed,
            &self.net_repl_output_bytes,
        ] {
            a.store(0, Ordering::Relaxed);
        }
        self.errors.reset();
        self.lazyfree.counts.freed.store(0, Ordering::Relaxed);
    }
}

/// Above this many allocations a value is freed on the background thread (Redis's
/// LAZYFREE_THRESHOLD).
const LAZYFREE_THRESHOLD: usize = 64;

/// Redis's lazyfreeGetFreeEffort: about how many allocations freeing `v` takes. Packed
/// encodings (listpack, intset, a string) are one; a list counts its nodes; a hash table or
/// skiplist its entries; a stream its rax nodes plus, per group, one and the first group's
/// PEL size.
pub fn free_effort(v: &crate::db::Value) -> usize {
    use crate::db::Value;
    match v {
        Value::List(l) => l.node_count(),
        Value::Set(s) if s.encoding() == "hashtable" => s.len(),
        Value::Hash(h) if h.encoding() == "hashtable" => h.len(),
        Value::ZSet(z) if z.encoding() == "skiplist" => z.len(),
        Value::Stream(st) => {
            let groups = st.groups.len();
            let pel = st.groups.values().next().map_or(0, |g| g.pel.len());
            st.entries
                .rax_nodes()
                .saturating_add(groups.saturating_mul(pel.saturating_add(1)))
        }
        _ => 1,
    }
}

/// A batch of values for the background thread, and how many objects it counts for.
struct Garbage(Box<dyn Send>, u64);

#[derive(Default)]
struct LazyCounts {
    /// Handed over and not yet freed (INFO `lazyfree_pending_objects`).
    pending: AtomicU64,
    /// Freed by the background thread (INFO `lazyfreed_objects`; CONFIG RESETSTAT zeroes it).
    freed: Counter,
}

/// Redis's lazyfree: values whose freeing is work are dropped on one background thread,
/// after the command released its locks, so a big UNLINK or FLUSHALL ASYNC does not stall
/// the keyspace. The thread starts with the first batch and ends with the server.
#[derive(Default)]
pub struct LazyFree {
    counts: Arc<LazyCounts>,
    tx: Mutex<Option<std::sync::mpsc::Sender<Garbage>>>,
}

impl LazyFree {
    /// Frees `v` here, or on the background thread when that is worth it (UNLINK, and the
    /// deletions the lazyfree-lazy-* configs make lazy).
    pub fn free_value(&self, v: crate::db::Value) {
        if free_effort(&v) > LAZYFREE_THRESHOLD {
            self.hand_over(Box::new(v), 1);
        }
    }

    /// Frees `data` on the background thread, counted as `objects` (FLUSHALL / FLUSHDB
    /// ASYNC: every key of the emptied databases).
    pub fn free_all(&self, data: Box<dyn Send>, objects: u64) {
        self.hand_over(data, objects);
    }

    fn hand_over(&self, data: Box<dyn Send>, objects: u64) {
        self.counts.pending.fetch_add(objects, Ordering::Relaxed);
        let mut tx = self.tx.lock();
        if tx.is_none() {
            let (send, recv) = std::sync::mpsc::channel::<Garbage>();
            let counts = self.counts.clone();
            let spawned = std::thread::Builder::new()
                .name("tessera-lazyfree".into())
                .spawn(move || {
                    for Garbage(data, n) in recv {
                        drop(data);
                        counts.pending.fetch_sub(n, Ordering::Relaxed);
                        counts.freed.fetch_add(n, Ordering::Relaxed);
                    }
                });
            match spawned {
                Ok(_) => *tx = Some(send),
                Err(e) => tracing::warn!(error = %e, "no lazyfree thread: freeing inline"),
            }
        }
        let rejected = match tx.as_ref() {
            Some(t) => t.send(Garbage(data, objects)).err().map(|e| e.0),
            None => Some(Garbage(data, objects)),
        };
        drop(tx);
        // No thread to take it: free it here, counted all the same.
        if let Some(Garbage(data, n)) = rejected {
            drop(data);
            self.counts.pending.fetch_sub(n, Ordering::Relaxed);
            self.counts.freed.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// INFO `lazyfree_pending_objects`.
    pub fn pending(&self) -> u64 {
        self.counts.pending.load(Ordering::Relaxed)
    }

    /// INFO `lazyfreed_objects`.
    pub fn freed(&self) -> u64 {
        self.counts.freed.load(Ordering::Relaxed)
    }
}

/// How many distinct error prefixes errorstats keeps before it stops adding new ones
/// (Redis 7.2's bound, #13141; 7.0.15 had none). A script can make up any prefix with
/// `redis.error_reply`, and this table is listed by every INFO: it must stay small.
const ERROR_PREFIXES_MAX: usize = 128;

/// Error replies by prefix (`ERR`, `WRONGTYPE`, ...), as Redis's `server.errors` rax and
/// `stat_total_error_replies`: every error reply a client gets counts once.
#[derive(Default)]
pub struct ErrorStats {
    total: Counter,
    table: Mutex<ErrorTable>,
}

#[derive(Default)]
struct ErrorTable {
    /// Byte order, as a rax iterates.
    by_prefix: std::collections::BTreeMap<Box<[u8]>, u64>,
    /// Set when the table reached [`ERROR_PREFIXES_MAX`]: only CONFIG RESETSTAT clears it.
    disabled: bool,
}

/// The prefix an error reply counts under: its first word when a space ends it within
/// Redis's 32-byte window (counting the `-` the wire adds), else `ERR`.
pub fn error_prefix(msg: &[u8]) -> &[u8] {
    let window = &msg[..msg.len().min(31)];
    match window.iter().position(|&c| c == b' ') {
        Some(0) | None => b"ERR",
        Some(n) => &msg[..n],
    }
}

impl ErrorStats {
    /// Counts one error reply; `msg` is the message without the wire's leading `-`.
    pub fn count(&self, msg: &[u8]) {
        self.total.fetch_add(1, Ordering::Relaxed);
        let prefix = error_prefix(msg);
        let mut t = self.table.lock();
        if t.disabled {
            return;
        }
        if let Some(n) = t.by_prefix.get_mut(prefix) {
            *n += 1;
            return;
        }
        if t.by_prefix.len() >= ERROR_PREFIXES_MAX {
            let names: Vec<String> = t
                .by_prefix
                .keys()
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect();
            tracing::warn!(
                "Errorstats stopped adding new errors because the number of errors reached the limit, may be misuse of lua error_reply, please check INFO ERRORSTATS, this can be re-enabled via CONFIG RESETSTAT."
            );
            tracing::warn!("Current errors code list: {}", names.join(", "));
            t.by_prefix.clear();
            t.by_prefix
                .insert(Box::from(&b"ERRORSTATS_DISABLED"[..]), 1);
            t.disabled = true;
            return;
        }
        t.by_prefix.insert(Box::from(prefix), 1);
    }

    /// `total_error_replies`.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// INFO's `# Errorstats` lines (`errorstat_<PREFIX>:count=<n>`), without the header.
    pub fn info_lines(&self, out: &mut String) {
        use std::fmt::Write;
        for (k, n) in self.table.lock().by_prefix.iter() {
            // Redis's getSafeInfoString: these would break INFO's line format.
            let name: String = String::from_utf8_lossy(k)
                .chars()
                .map(|c| {
                    if matches!(c, '#' | ':' | '\n' | '\r') {
                        '_'
                    } else {
                        c
                    }
                })
                .collect();
            let _ = write!(out, "errorstat_{name}:count={n}\r\n");
        }
    }

    /// CONFIG RESETSTAT: empties the table and lifts the prefix bound.
    pub fn reset(&self) {
        self.total.store(0, Ordering::Relaxed);
        *self.table.lock() = ErrorTable::default();
    }
}

pub struct SlowEntry {
    pub id: u64,
    pub time: u64,
    pub usec: u64,
    pub args: Vec<Bytes>,
    pub addr: String,
    pub name: String,
}

#[derive(Default)]
pub struct SlowLog {
    pub entries: Mutex<VecDeque<SlowEntry>>,
    next_id: AtomicU64,
}

impl SlowLog {
    /// Records the command when it ran at least `slowlog-log-slower-than` (from `cfg`, the
    /// snapshot the caller already holds). `args` gives the arguments as the log shows them
    /// (redacted); it runs only for an entry the log keeps, not for every command.
    pub fn maybe_record<'a, A>(
        &self,
        cfg: &crate::config::Settings,
        client: &ClientHandle,
        args: impl FnOnce() -> A,
        usec: u64,
    ) where
        A: std::ops::Deref<Target = [&'a [u8]]>,
    {
        let (threshold, max) = (cfg.slowlog_log_slower_than, cfg.slowlog_max_len);
        if threshold < 0 || usec < threshold as u64 {
            return;
        }
        let args = args();
        let mut argv: Vec<Bytes> = args
            .iter()
            .take(32)
            .map(|a| {
                if a.len() > 128 {
                    let mut v = a[..128].to_vec();
                    v.extend_from_slice(format!("... ({} more bytes)", a.len() - 128).as_bytes());
                    Bytes::from(v)
                } else {
                    Bytes::copy_from_slice(a)
                }
            })
            .collect();
        if args.len() > 32 {
            argv.truncate(31);
            argv.push(Bytes::from(format!(
                "... ({} more arguments)",
                args.len() - 31
            )));
        }
        let e = SlowEntry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            time: super::now_ms() / 1000,
            usec,
            args: argv,
            addr: client.addr.clone(),
            name: client
                .name
                .lock()
                .as_ref()
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .unwrap_or_default(),
        };
        let mut l = self.entries.lock();
        l.push_front(e);
        while l.len() as u64 > max {
            l.pop_back();
        }
    }
}

/// Clients in MONITOR mode.
#[derive(Default)]
pub struct Monitors {
    list: Mutex<Vec<Arc<ClientHandle>>>,
    count: AtomicUsize,
}

impl Monitors {
    #[inline]
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    pub fn add(&self, h: Arc<ClientHandle>) {
        let mut l = self.list.lock();
        if !l.iter().any(|c| c.id == h.id) {
            l.push(h);
            self.count.store(l.len(), Ordering::Relaxed);
        }
    }

    pub fn remove(&self, id: u64) {
        let mut l = self.list.lock();
        l.retain(|c| c.id != id);
        self.count.store(l.len(), Ordering::Relaxed);
    }

    /// Sends `+<time> [<db> <addr>] "cmd" "arg"...` to every monitor (`unix:<path>` for a
    /// unix socket client, as Redis).
    pub fn feed(&self, cl: &ClientState, args: &[&[u8]]) {
        let h = &cl.handle;
        if h.unix_socket.load(Ordering::Relaxed) {
            let path = h.addr.strip_suffix(":0").unwrap_or(&h.addr);
            self.feed_as(cl, &format!("unix:{path}"), args);
        } else {
            self.feed_as(cl, &h.addr, args);
        }
    }

    /// A command a script ran for `cl`: `[<db> lua]`, the script's db (Redis's
    /// CLIENT_SCRIPT form).
    pub fn feed_script(&self, cl: &ClientState, args: &[&[u8]]) {
        self.feed_as(cl, "lua", args);
    }

    fn feed_as(&self, cl: &ClientState, origin: &str, args: &[&[u8]]) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mut line = format!(
            "+{}.{:06} [{} {}]",
            now.as_secs(),
            now.subsec_micros(),
            cl.db,
            origin
        );
        for a in args {
            line.push(' ');
            repr(&mut line, a);
        }
        line.push_str("\r\n");
        let msg = Bytes::from(line);
        for m in self.list.lock().iter() {
            if m.id != cl.id {
                m.enqueue(msg.clone());
            }
        }
    }
}

/// Start mark for timing one command (commandstats `usec`, the slow log).
///
/// Why not `Instant`: two `clock_gettime` calls per command were ~4% of the CPU of a
/// pipelined GET/SET/INCR run. On x86-64 with an invariant TSC (`constant_tsc` and
/// `nonstop_tsc` in /proc/cpuinfo) this reads the TSC instead (a few ns), calibrated once
/// against the monotonic clock; elsewhere it falls back to `Instant`. Hand-rolled rather
/// than the `quanta` crate: it is these few lines, and it keeps the dependency tree small.
#[derive(Clone, Copy, Debug)]
pub struct CmdTimer(u64);

/// How the process reads the command clock: TSC ticks → µs as `ticks * mult >> 32`.
#[derive(Clone, Copy)]
enum ClockSource {
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Tsc {
        mult: u64,
    },
    Monotonic,
}

fn clock_source() -> ClockSource {
    static SRC: std::sync::OnceLock<ClockSource> = std::sync::OnceLock::new();
    *SRC.get_or_init(calibrate)
}

/// A process-wide origin for the fallback clock.
fn epoch() -> std::time::Instant {
    static E: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *E.get_or_init(std::time::Instant::now)
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn tsc() -> u64 {
    // SAFETY: RDTSC exists on every x86-64 CPU and has no side effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(target_arch = "x86_64")]
fn calibrate() -> ClockSource {
    let invariant = std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| {
            s.lines()
                .find(|l| l.starts_with("flags"))
                .map(|l| {
                    let has = |name: &str| l.split_whitespace().any(|w| w == name);
                    has("constant_tsc") && has("nonstop_tsc")
                })
                .unwrap_or(false)
        })
        .unwrap_or(false);
    if !invariant {
        return ClockSource::Monotonic;
    }
    // 2 ms against the monotonic clock: ~0.1% error, far below a µs-granular stat's needs.
    let t0 = std::time::Instant::now();
    let c0 = tsc();
    let mut t1 = t0;
    while t1.duration_since(t0) < std::time::Duration::from_millis(2) {
        std::hint::spin_loop();
        t1 = std::time::Instant::now();
    }
    let c1 = tsc();
    let ns = t1.duration_since(t0).as_nanos() as u64;
    let ticks = c1.wrapping_sub(c0);
    if ticks < 1000 || ns == 0 {
        return ClockSource::Monotonic;
    }
    // µs per tick in 32.32 fixed point: (ns / 1000) / ticks.
    let mult = ((ns as u128) << 32) / (ticks as u128 * 1000);
    match u64::try_from(mult) {
        Ok(mult) if mult > 0 => ClockSource::Tsc { mult },
        _ => ClockSource::Monotonic,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn calibrate() -> ClockSource {
    ClockSource::Monotonic
}

impl CmdTimer {
    #[inline]
    pub fn start() -> Self {
        match clock_source() {
            #[cfg(target_arch = "x86_64")]
            ClockSource::Tsc { .. } => CmdTimer(tsc()),
            _ => CmdTimer(epoch().elapsed().as_nanos() as u64),
        }
    }

    /// Microseconds since [`CmdTimer::start`].
    #[inline]
    pub fn elapsed_us(self) -> u64 {
        match clock_source() {
            #[cfg(target_arch = "x86_64")]
            ClockSource::Tsc { mult } => {
                let ticks = tsc().saturating_sub(self.0) as u128;
                ((ticks * mult as u128) >> 32) as u64
            }
            _ => (epoch().elapsed().as_nanos() as u64).saturating_sub(self.0) / 1000,
        }
    }
}

/// Appends `bytes` quoted and escaped as Redis's sdscatrepr does (MONITOR, log lines).
pub fn repr(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for &c in bytes {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(c as char),
            _ => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod error_tests {
    use super::{error_prefix, ErrorStats, ERROR_PREFIXES_MAX};

    #[test]
    fn prefix_is_the_first_word_within_redis_window() {
        assert_eq!(error_prefix(b"WRONGTYPE Operation against"), b"WRONGTYPE");
        assert_eq!(error_prefix(b"NOSPACEHERE"), b"ERR");
        assert_eq!(error_prefix(b""), b"ERR");
        let long = [b'A'; 40];
        assert_eq!(error_prefix(&long), b"ERR");
        let mut edge = vec![b'B'; 30];
        edge.extend_from_slice(b" x");
        assert_eq!(error_prefix(&edge), &edge[..30]);
    }

    #[test]
    fn table_stops_growing_at_the_bound_until_reset() {
        let e = ErrorStats::default();
        for i in 0..=ERROR_PREFIXES_MAX {
            e.count(format!("E{i} x").as_bytes());
        }
        let mut s = String::new();
        e.info_lines(&mut s);
        assert_eq!(s, "errorstat_ERRORSTATS_DISABLED:count=1\r\n");
        e.count(b"ERR again");
        assert_eq!(e.total() as usize, ERROR_PREFIXES_MAX + 2);
        e.reset();
        e.count(b"ERR x");
        let mut s = String::new();
        e.info_lines(&mut s);
        assert_eq!(s, "errorstat_ERR:count=1\r\n");
    }
}

#[cfg(test)]
mod timer_tests {
    use super::CmdTimer;

    /// The command clock agrees with the monotonic clock over a sleep (loose bounds: a
    /// loaded machine may oversleep, never undersleep).
    #[test]
    fn cmd_timer_measures_a_sleep() {
        let t = CmdTimer::start();
        let i = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let us = t.elapsed_us();
        let real = i.elapsed().as_micros() as u64;
        assert!(us >= 19_000, "measured {us} us for a 20 ms sleep");
        assert!(
            us <= real + real / 10 + 1000,
            "measured {us} us, real {real} us"
        );
    }
}
