//! A connection's queue of out-of-band messages (pub/sub, MONITOR, tracking invalidations,
//! the wake-up of CLIENT KILL): many senders, one receiver, the connection's task.
//!
//! Hand-rolled rather than `tokio::sync::mpsc` for two costs that channel has and this one
//! does not, both paid by every connection although few ever get a message:
//! - tokio's unbounded channel allocates its first block of 32 slots when it is created,
//!   about 1.5 KB with the channel itself for each of 5000 idle connections; this queue
//!   allocates nothing until a message comes.
//! - its `recv` registers the task's waker each time it is polled, and the connection polls
//!   it on every turn of its loop: about 6% of a GET's user CPU. Here a poll that finds the
//!   queue empty and its waker still registered is two loads.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use parking_lot::Mutex;

#[derive(Default)]
pub struct Mailbox {
    inner: Mutex<Inner>,
    /// Set with every message, cleared when the receiver takes them: the receiver's check
    /// without the lock.
    pending: AtomicBool,
    /// A waker is registered (`Inner::waker` is Some): a sender will wake the receiver.
    /// Cleared by the sender that takes it.
    armed: AtomicBool,
}

#[derive(Default)]
struct Inner {
    queue: VecDeque<Bytes>,
    waker: Option<Waker>,
    /// The receiver is gone: sends fail and give their message back.
    closed: bool,
}

impl Mailbox {
    /// Queues `msg` and wakes the receiver; gives it back once the receiver has closed.
    pub fn send(&self, msg: Bytes) -> Result<(), Bytes> {
        let waker = {
            let mut inner = self.inner.lock();
            if inner.closed {
                return Err(msg);
            }
            inner.queue.push_back(msg);
            self.pending.store(true, Ordering::Release);
            let w = inner.waker.take();
            if w.is_some() {
                self.armed.store(false, Ordering::Release);
            }
            w
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// Ready once a message is queued. `last` is the receiver's copy of the waker it
    /// registered: while that waker is still registered and wakes this task, the poll takes
    /// no lock. A sender that takes the waker clears `armed` before it wakes, so a poll that
    /// saw `armed` set is woken.
    #[inline]
    pub fn poll_ready(&self, cx: &mut Context<'_>, last: &mut Option<Waker>) -> Poll<()> {
        if self.pending.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        if self.armed.load(Ordering::Acquire)
            && last.as_ref().is_some_and(|w| w.will_wake(cx.waker()))
        {
            return Poll::Pending;
        }
        self.register(cx, last)
    }

    /// [`Self::poll_ready`] without a registration that still holds: under the lock.
    #[cold]
    fn register(&self, cx: &mut Context<'_>, last: &mut Option<Waker>) -> Poll<()> {
        let mut inner = self.inner.lock();
        if !inner.queue.is_empty() {
            return Poll::Ready(());
        }
        let w = match last {
            Some(w) if w.will_wake(cx.waker()) => w.clone(),
            _ => {
                let w = cx.waker().clone();
                *last = Some(w.clone());
                w
            }
        };
        inner.waker = Some(w);
        self.armed.store(true, Ordering::Release);
        Poll::Pending
    }

    /// Takes every queued message, oldest first, into `f`.
    pub fn drain(&self, mut f: impl FnMut(Bytes)) {
        if !self.pending.load(Ordering::Acquire) {
            return;
        }
        let queue = {
            let mut inner = self.inner.lock();
            self.pending.store(false, Ordering::Relaxed);
            std::mem::take(&mut inner.queue)
        };
        for m in queue {
            f(m);
        }
    }

    /// The receiver is done: later sends fail. Returns what was still queued.
    pub fn close(&self) -> VecDeque<Bytes> {
        let mut inner = self.inner.lock();
        inner.closed = true;
        inner.waker = None;
        self.armed.store(false, Ordering::Relaxed);
        self.pending.store(false, Ordering::Relaxed);
        std::mem::take(&mut inner.queue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counting() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    #[test]
    fn a_send_after_a_drain_still_wakes() {
        let mb = Mailbox::default();
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let mut last = None;
        assert!(mb.poll_ready(&mut cx, &mut last).is_pending());
        mb.send(Bytes::from_static(b"a")).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        // The send consumed the waker; the receiver drains without polling first (the
        // batch path), then waits again: the next send must wake it.
        let mut got = Vec::new();
        mb.drain(|m| got.push(m));
        assert_eq!(got, vec![Bytes::from_static(b"a")]);
        assert!(mb.poll_ready(&mut cx, &mut last).is_pending());
        mb.send(Bytes::from_static(b"b")).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert!(mb.poll_ready(&mut cx, &mut last).is_ready());
    }

    #[test]
    fn a_repeated_poll_keeps_one_registration() {
        let mb = Mailbox::default();
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let mut last = None;
        for _ in 0..3 {
            assert!(mb.poll_ready(&mut cx, &mut last).is_pending());
        }
        mb.send(Bytes::new()).unwrap();
        mb.send(Bytes::new()).unwrap();
        // Woken once: the second send found no waker.
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        let mut n = 0;
        mb.drain(|_| n += 1);
        assert_eq!(n, 2);
    }

    #[test]
    fn a_new_waker_is_registered() {
        let mb = Mailbox::default();
        let (first, w1) = counting();
        let (second, w2) = counting();
        let mut last = None;
        assert!(mb
            .poll_ready(&mut Context::from_waker(&w1), &mut last)
            .is_pending());
        assert!(mb
            .poll_ready(&mut Context::from_waker(&w2), &mut last)
            .is_pending());
        mb.send(Bytes::new()).unwrap();
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn sends_fail_after_close() {
        let mb = Mailbox::default();
        mb.send(Bytes::from_static(b"x")).unwrap();
        assert_eq!(mb.close().len(), 1);
        assert_eq!(
            mb.send(Bytes::from_static(b"y")),
            Err(Bytes::from_static(b"y"))
        );
        let mut n = 0;
        mb.drain(|_| n += 1);
        assert_eq!(n, 0);
    }

    #[test]
    fn senders_on_other_threads_always_wake() {
        // Many rounds of: the receiver waits, another thread sends. A lost wake-up would
        // leave a round waiting forever (the test would hang, then fail by timeout).
        let mb = Arc::new(Mailbox::default());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut last = None;
            for round in 0..2000u32 {
                let tx = mb.clone();
                let t = std::thread::spawn(move || {
                    tx.send(Bytes::copy_from_slice(&round.to_le_bytes()))
                        .unwrap();
                });
                let wait = std::future::poll_fn(|cx| mb.poll_ready(cx, &mut last));
                tokio::time::timeout(std::time::Duration::from_secs(10), wait)
                    .await
                    .expect("a send did not wake the receiver");
                let mut got = Vec::new();
                mb.drain(|m| got.push(m));
                assert_eq!(got.len(), 1);
                t.join().unwrap();
            }
        });
    }
}
