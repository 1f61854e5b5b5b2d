//! Latency tracking as Redis 7.0 keeps it: a per-command latency histogram
//! (`latency-tracking`, INFO latencystats, LATENCY HISTOGRAM) and the latency monitor's
//! event samples (`latency-monitor-threshold`, LATENCY LATEST / HISTORY / RESET / GRAPH /
//! DOCTOR).
//!
//! Redis uses an HDR histogram with two significant digits. Here each command keeps
//! log-linear buckets of whole microseconds (exact below 16 µs, 16 sub-buckets per power of
//! two above, so within about 6%), sharded per thread like [`crate::counter::Counter`] so
//! that recording is a plain load and store on the command's hot path. Reported values are
//! converted as Redis's histogram reports them (nanoseconds, rounded up to the HDR
//! bucket's highest equivalent value), so a 3 µs GET shows as `p50=3.007` in both.
//! Hand-rolled because the `hdrhistogram` crate's recording takes `&mut self`: a
//! histogram shared by the I/O threads would need a lock per command.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use parking_lot::Mutex;

use crate::counter::{my_shard, OWNED, SHARDS};
use crate::server::Server;

/// Exact buckets for 0..16 µs, then 16 per power of two up to 2^20 µs (> 1 s).
const EXACT: usize = 16;
const SUB: usize = 16;
const BUCKETS: usize = EXACT + (20 - 4 + 1) * SUB;
/// Redis clamps recorded durations to 1 s.
const MAX_US: u64 = 1_000_000;

fn bucket(us: u64) -> usize {
    let us = us.min(MAX_US);
    if us < EXACT as u64 {
        return us as usize;
    }
    let e = 63 - us.leading_zeros() as usize; // >= 4
    let sub = ((us >> (e - 4)) & (SUB as u64 - 1)) as usize;
    EXACT + (e - 4) * SUB + sub
}

/// The highest µs value bucket `i` holds.
fn bucket_high(i: usize) -> u64 {
    if i < EXACT {
        return i as u64;
    }
    let e = (i - EXACT) / SUB + 4;
    let sub = ((i - EXACT) % SUB) as u64;
    ((SUB as u64 + sub + 1) << (e - 4)) - 1
}

/// What Redis's HDR histogram (two significant digits) reports for `ns`: the highest value
/// of the HDR bucket that holds it.
fn hdr_highest_equivalent(ns: u64) -> u64 {
    if ns < 256 {
        return ns;
    }
    let res = 1u64 << (63 - ns.leading_zeros() - 7);
    ns | (res - 1)
}

type Buckets = [AtomicU64; BUCKETS];

/// One command's latency histogram (see the module doc).
#[derive(Default)]
pub struct Histogram {
    shards: [OnceLock<Box<Buckets>>; SHARDS],
}

impl Histogram {
    /// Records one call of `us` microseconds.
    #[inline]
    pub fn record(&self, us: u64) {
        let i = my_shard();
        let b = self.shards[i].get_or_init(|| Box::new([const { AtomicU64::new(0) }; BUCKETS]));
        let c = &b[bucket(us)];
        if i < OWNED {
            // Only this thread writes its shard.
            c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        } else {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts per bucket, summed over the threads.
    fn counts(&self) -> Option<[u64; BUCKETS]> {
        let mut out = [0u64; BUCKETS];
        let mut any = false;
        for s in self.shards.iter().filter_map(|s| s.get()) {
            any = true;
            for (o, c) in out.iter_mut().zip(s.iter()) {
                *o += c.load(Ordering::Relaxed);
            }
        }
        (any && out.iter().any(|&c| c > 0)).then_some(out)
    }

    /// Forgets every sample (CONFIG RESETSTAT). A call recorded by another thread at this
    /// very moment may survive the reset.
    pub fn reset(&self) {
        for s in self.shards.iter().filter_map(|s| s.get()) {
            for c in s.iter() {
                c.store(0, Ordering::Relaxed);
            }
        }
    }

    /// A snapshot for the report functions; None when nothing was recorded.
    pub fn snapshot(&self) -> Option<Snapshot> {
        self.counts().map(|counts| Snapshot { counts })
    }
}

/// A histogram's counts at one moment.
pub struct Snapshot {
    counts: [u64; BUCKETS],
}

impl Snapshot {
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// LATENCY HISTOGRAM's `histogram_usec`: (bucket bound in µs, cumulative calls) for the
    /// power-of-two buckets from 1024 ns on whose count grows, as Redis's
    /// `fillCommandCDF` prints them.
    pub fn cdf(&self) -> Vec<(u64, u64)> {
        let total = self.total();
        let mut out = Vec::new();
        let mut prev = 0;
        let mut bound_ns = 1024u64;
        while prev < total && bound_ns < (1 << 40) {
            // Samples are whole µs: those at or under the bound.
            let limit_us = bound_ns / 1000;
            let cum: u64 = self
                .counts
                .iter()
                .enumerate()
                .filter(|(i, _)| bucket_high(*i) <= limit_us)
                .map(|(_, c)| c)
                .sum();
            let cum = if bound_ns >= MAX_US * 1000 {
                total
            } else {
                cum
            };
            if cum > prev {
                out.push((hdr_highest_equivalent(bound_ns) / 1000, cum));
                prev = cum;
            }
            bound_ns *= 2;
        }
        out
    }

    /// The latency (µs, as Redis prints it) under which `p` percent of the calls ran.
    pub fn percentile(&self, p: f64) -> f64 {
        let total = self.total();
        let want = (((p / 100.0) * total as f64) + 0.5).floor().max(1.0) as u64;
        let mut cum = 0;
        for (i, c) in self.counts.iter().enumerate() {
            cum += c;
            if cum >= want {
                return hdr_highest_equivalent(bucket_high(i) * 1000) as f64 / 1000.0;
            }
        }
        0.0
    }
}

/// Whether the latency monitor is on (`latency-monitor-threshold` set).
pub fn monitoring(srv: &Server) -> bool {
    srv.config.read().typed.latency_monitor_threshold > 0
}

/// Samples kept per event (Redis's LATENCY_TS_LEN).
const HISTORY_LEN: usize = 160;

#[derive(Default)]
struct Event {
    /// (unix seconds, ms), oldest first.
    samples: VecDeque<(u64, u64)>,
    max: u64,
}

/// The latency monitor's events (LATENCY LATEST / HISTORY / RESET / GRAPH / DOCTOR): a
/// server's own, in [`Server::latency`].
#[derive(Default)]
pub struct Events(Mutex<BTreeMap<&'static str, Event>>);

impl Events {
    /// Redis's latencyAddSampleIfNeeded: records `ms` for `event` when the monitor is on
    /// and `ms` reaches `latency-monitor-threshold` (from `cfg`, the snapshot the caller
    /// holds).
    #[inline]
    pub fn add_sample_if_needed(
        &self,
        cfg: &crate::config::Settings,
        event: &'static str,
        ms: u64,
    ) {
        let t = cfg.latency_monitor_threshold;
        if t == 0 || ms < t {
            return;
        }
        let now = crate::server::now_ms() / 1000;
        let mut ev = self.0.lock();
        let e = ev.entry(event).or_default();
        e.max = e.max.max(ms);
        // Samples within one second fold into the worst of them, as in Redis.
        match e.samples.back_mut() {
            Some(last) if last.0 == now => last.1 = last.1.max(ms),
            _ => {
                if e.samples.len() == HISTORY_LEN {
                    e.samples.pop_front();
                }
                e.samples.push_back((now, ms));
            }
        }
    }

    /// LATENCY LATEST: (event, time of the latest sample, its ms, the all-time max ms).
    pub fn latest(&self) -> Vec<(&'static str, u64, u64, u64)> {
        self.0
            .lock()
            .iter()
            .filter_map(|(n, e)| e.samples.back().map(|&(t, ms)| (*n, t, ms, e.max)))
            .collect()
    }

    /// LATENCY HISTORY: the event's (time, ms) samples, oldest first.
    pub fn history(&self, event: &str) -> Vec<(u64, u64)> {
        self.0
            .lock()
            .get(event)
            .map(|e| e.samples.iter().copied().collect())
            .unwrap_or_default()
    }

    /// LATENCY RESET: forgets the named events (every event when none is named); how many
    /// there were.
    pub fn reset(&self, names: &[&str]) -> usize {
        let mut ev = self.0.lock();
        if names.is_empty() {
            let n = ev.len();
            ev.clear();
            return n;
        }
        names.iter().filter(|n| ev.remove(**n).is_some()).count()
    }

    /// One event's samples and statistics, for GRAPH and DOCTOR.
    pub fn summary(&self, event: &str) -> Option<Summary> {
        let ev = self.0.lock();
        let e = ev.get(event)?;
        let samples: Vec<(u64, u64)> = e.samples.iter().copied().collect();
        let n = samples.len().max(1) as f64;
        let avg = samples.iter().map(|s| s.1 as f64).sum::<f64>() / n;
        let mad = samples
            .iter()
            .map(|s| (s.1 as f64 - avg).abs())
            .sum::<f64>()
            / n;
        let period = match (samples.first(), samples.last()) {
            (Some(a), Some(b)) => b.0.saturating_sub(a.0),
            _ => 0,
        };
        Some(Summary {
            max: e.max,
            min: samples.iter().map(|s| s.1).min().unwrap_or(0),
            avg,
            mad,
            period,
            samples,
        })
    }

    /// The names of the events with samples.
    pub fn event_names(&self) -> Vec<&'static str> {
        self.0.lock().keys().copied().collect()
    }
}

/// (samples, all-time max, min, average, mean deviation, seconds between the first and
/// the last sample) of one event, for GRAPH and DOCTOR.
pub struct Summary {
    pub samples: Vec<(u64, u64)>,
    pub max: u64,
    pub min: u64,
    pub avg: f64,
    pub mad: f64,
    pub period: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_their_values() {
        for us in [
            0, 1, 15, 16, 17, 31, 32, 100, 999, 1000, 65_535, 999_999, MAX_US,
        ] {
            let b = bucket(us);
            assert!(b < BUCKETS, "{us}");
            assert!(bucket_high(b) >= us, "{us} in {b}");
            if b > 0 {
                assert!(bucket_high(b - 1) < us, "{us} in {b}");
            }
        }
        assert_eq!(bucket(5_000_000), bucket(MAX_US));
    }

    #[test]
    fn reports_as_redis_prints_them() {
        // redis-server 7.0 printed p50=3.007 for a 3 µs GET and 8.031 for an 8 µs SET.
        assert_eq!(hdr_highest_equivalent(3000), 3007);
        assert_eq!(hdr_highest_equivalent(8000), 8031);
        let h = Histogram::default();
        for us in [2, 3, 3] {
            h.record(us);
        }
        let s = h.snapshot().expect("samples");
        assert_eq!(s.total(), 3);
        assert_eq!(s.percentile(50.0), 3.007);
        // LATENCY HISTOGRAM of redis for 2 µs, 3 µs, 3 µs: {2: 1, 4: 3}.
        assert_eq!(s.cdf(), vec![(2, 1), (4, 3)]);
        h.reset();
        assert!(h.snapshot().is_none());
    }
}
