//! Adaptive busy polling of an I/O thread (`busy-poll-usec`).
//!
//! A thread that sleeps in epoll_wait between requests must be woken by the kernel for the
//! next one, and the client's send pays for that wake-up (on a VM an inter-processor
//! interrupt: most of the client's time at pipeline depth 1 on loopback). While requests
//! arrive less than `busy-poll-usec` apart, the thread instead keeps polling its sockets
//! without sleeping, so the next request finds it running. It never polls longer than that
//! past the last request, and it only starts when the recent gaps between requests were
//! shorter than the window: at lower request rates the thread sleeps exactly as before, so
//! the CPU spent polling is the idle time between requests that were about to arrive anyway.
//!
//! Activity is counted per thread (connections stay on their thread), so neither side
//! touches shared memory. Tokio has no busy-poll mode of its own; a task that keeps yielding
//! makes the current-thread runtime poll its I/O driver with a zero timeout instead of
//! parking, which is exactly a busy poll.

use std::cell::Cell;
use std::future::poll_fn;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use super::Server;

// Per-thread by nature (each I/O thread polls for its own connections), not contracts.
thread_local! {
    /// Read batches this thread's connections received.
    static ACTIVITY: Cell<u64> = const { Cell::new(0) };
    /// The poller's waker while it sleeps, taken by the next activity.
    static SLEEPING: Cell<Option<Waker>> = const { Cell::new(None) };
}

/// Polling keeps a CPU busy: with fewer CPUs than I/O threads plus one (counting a
/// container's CPU quota, which `available_parallelism` reads from the cgroup) a polling
/// thread would take the CPU its own clients or the node's other threads need, or spend the
/// pod's quota and get throttled for the rest of the period. Then it stays off.
/// Decides it for `srv` (its `spin_allowed`) once its I/O threads are counted.
pub fn allow_for_threads(srv: &Server, io_threads: usize, window_us: u64) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let allow = cpus > io_threads;
    srv.spin_allowed.store(allow, Ordering::Relaxed);
    if !allow && window_us > 0 {
        tracing::info!(
            cpus,
            io_threads,
            "busy polling off: it needs more CPUs than I/O threads"
        );
    }
}

/// The polling window in effect (`busy-poll-usec` from the config snapshot), if any.
fn current_window(srv: &Server) -> Option<Duration> {
    let us = srv.config.read().typed.busy_poll_usec;
    (us > 0 && srv.spin_allowed.load(Ordering::Relaxed)).then(|| Duration::from_micros(us))
}

/// Called by a connection for every read that brought data.
#[inline]
pub fn activity() {
    ACTIVITY.with(|a| a.set(a.get().wrapping_add(1)));
    if let Some(w) = SLEEPING.with(Cell::take) {
        w.wake();
    }
}

fn activity_count() -> u64 {
    ACTIVITY.with(Cell::get)
}

/// Waits (without polling) until this thread's connections read something.
async fn next_activity() {
    let seen = activity_count();
    poll_fn(|cx| {
        if activity_count() != seen {
            Poll::Ready(())
        } else {
            SLEEPING.with(|s| s.set(Some(cx.waker().clone())));
            Poll::Pending
        }
    })
    .await
}

/// The gap estimate: an average of recent idle gaps, each counted up to this many windows
/// so that one long pause does not keep polling off for long once requests come fast again.
const GAP_CAP_WINDOWS: u32 = 8;

/// Moving average of the idle gaps between bursts of activity, weight 1/8 for the newest.
#[derive(Debug, Clone, Copy)]
struct GapAverage {
    ns: u64,
}

impl GapAverage {
    /// Starts as if the thread had been idle: polling begins only after short gaps are seen.
    fn idle(window: Duration) -> GapAverage {
        GapAverage {
            ns: (window * GAP_CAP_WINDOWS).as_nanos() as u64,
        }
    }

    fn add(&mut self, gap: Duration, window: Duration) {
        let capped = gap.min(window * GAP_CAP_WINDOWS).as_nanos() as u64;
        self.ns = self.ns - self.ns / 8 + capped / 8;
    }

    /// Polling pays off when the next request is expected within the window.
    fn worth_polling(&self, window: Duration) -> bool {
        self.ns < window.as_nanos() as u64
    }
}

/// Runs on each I/O thread's runtime for the life of the thread.
pub async fn run(srv: Arc<Server>) {
    if !srv.spin_allowed.load(Ordering::Relaxed) {
        // Decided once at startup: no setting can turn polling on here.
        return;
    }
    let mut window = current_window(&srv).unwrap_or_default();
    let mut gaps = GapAverage::idle(window);
    // When this thread's connections last read something.
    let mut idle_since = Instant::now();
    loop {
        if window.is_zero() {
            // Off: no wake-up per request; look at the setting again now and then.
            tokio::time::sleep(Duration::from_millis(100)).await;
        } else {
            next_activity().await;
        }
        let w = current_window(&srv).unwrap_or_default();
        if w != window {
            window = w;
            gaps = GapAverage::idle(window);
        }
        let now = Instant::now();
        gaps.add(now.duration_since(idle_since), window);
        idle_since = now;
        if window.is_zero() || !gaps.worth_polling(window) {
            continue;
        }
        // Poll until a whole window passes without activity; the gap then goes on from
        // the last activity.
        let mut seen = activity_count();
        loop {
            // The runtime does not park while this polls, and parking is when the replies
            // its connections hold go out (conn::flush_held): they go out here instead,
            // after the connections that ran before this task in the tick.
            super::conn::flush_held(&srv);
            tokio::task::yield_now().await;
            let now = Instant::now();
            let a = activity_count();
            if a != seen {
                seen = a;
                idle_since = now;
            } else if now.duration_since(idle_since) >= window {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polling_starts_after_short_gaps_and_stops_after_long_ones() {
        let w = Duration::from_micros(50);
        let mut g = GapAverage::idle(w);
        assert!(!g.worth_polling(w), "an idle thread does not poll");
        let mut n = 0;
        while !g.worth_polling(w) {
            g.add(Duration::from_micros(5), w);
            n += 1;
            assert!(n < 100, "short gaps never enabled polling");
        }
        // One long pause (seconds) is capped: polling resumes after a few short gaps.
        g.add(Duration::from_secs(3), w);
        let mut m = 0;
        while !g.worth_polling(w) {
            g.add(Duration::from_micros(5), w);
            m += 1;
        }
        assert!(m <= 20, "{m} short gaps to resume after one long pause");
        // Steady gaps longer than the window turn it off.
        for _ in 0..40 {
            g.add(Duration::from_micros(200), w);
        }
        assert!(!g.worth_polling(w));
    }
}
