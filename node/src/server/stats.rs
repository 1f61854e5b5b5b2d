//! Server counters (INFO stats), the slow log and MONITOR feeds.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use super::clients::{ClientHandle, ClientState};
use super::Server;

#[derive(Default)]
pub struct Stats {
    pub total_connections: AtomicU64,
    pub total_commands: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub expired_keys: AtomicU64,
    pub evicted_keys: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub unexpected_error_replies: AtomicU64,
    pub dirty: AtomicU64,
    pub pubsub_messages: AtomicU64,
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
            &self.unexpected_error_replies,
            &self.pubsub_messages,
        ] {
            a.store(0, Ordering::Relaxed);
        }
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
    pub fn maybe_record(&self, srv: &Server, cl: &ClientState, args: &[Bytes], usec: u64) {
        let (threshold, max) = {
            let c = srv.config.read();
            (c.int("slowlog-log-slower-than"), c.uint("slowlog-max-len"))
        };
        if threshold < 0 || usec < threshold as u64 {
            return;
        }
        let mut argv: Vec<Bytes> = args
            .iter()
            .take(32)
            .map(|a| {
                if a.len() > 128 {
                    let mut v = a[..128].to_vec();
                    v.extend_from_slice(format!("... ({} more bytes)", a.len() - 128).as_bytes());
                    Bytes::from(v)
                } else {
                    a.clone()
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
            addr: cl.handle.addr.clone(),
            name: cl
                .handle
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

    /// Sends `+<time> [<db> <addr>] "cmd" "arg"...` to every monitor.
    pub fn feed(&self, cl: &ClientState, args: &[Bytes]) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mut line = format!(
            "+{}.{:06} [{} {}]",
            now.as_secs(),
            now.subsec_micros(),
            cl.db,
            cl.handle.addr
        );
        for a in args {
            line.push_str(" \"");
            for &c in a.iter() {
                match c {
                    b'\\' => line.push_str("\\\\"),
                    b'"' => line.push_str("\\\""),
                    b'\n' => line.push_str("\\n"),
                    b'\r' => line.push_str("\\r"),
                    b'\t' => line.push_str("\\t"),
                    0x20..=0x7e => line.push(c as char),
                    _ => line.push_str(&format!("\\x{c:02x}")),
                }
            }
            line.push('"');
        }
        line.push_str("\r\n");
        let msg = Bytes::from(line);
        for m in self.list.lock().iter() {
            if m.id != cl.id {
                let _ = m.tx.send(msg.clone());
                m.queued.fetch_add(msg.len(), Ordering::Relaxed);
            }
        }
    }
}
