//! A background thread that waits between rounds and stops at once when asked: the
//! shape of the master's eviction and client-liveness threads, a store client's
//! heartbeat and its disk tier.

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::io;
use std::thread::JoinHandle;
use std::time::Duration;

/// What the thread waits on between rounds.
pub struct StopSignal(Receiver<()>);

impl StopSignal {
    /// Waits `period`; `false` as soon as the thread is asked to stop (mid-wait too).
    pub fn wait(&self, period: Duration) -> bool {
        matches!(self.0.recv_timeout(period), Err(RecvTimeoutError::Timeout))
    }
}

/// A running thread; [`stop`](Self::stop), or dropping it, asks it to stop and joins it.
pub struct StoppableThread {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl StoppableThread {
    /// Runs `body` on a thread called `name`; `body` returns once its signal's
    /// [`wait`](StopSignal::wait) answers `false`.
    pub fn spawn(
        name: &str,
        body: impl FnOnce(StopSignal) + Send + 'static,
    ) -> io::Result<StoppableThread> {
        let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(StopSignal(stopped)))?;
        Ok(StoppableThread {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Asks the thread to stop and waits for the round in progress to finish (unless
    /// called from that thread itself, which then stops after its round); idempotent.
    pub fn stop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for StoppableThread {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_stop_ends_a_long_wait_and_joins() {
        let rounds = Arc::new(AtomicUsize::new(0));
        let r = rounds.clone();
        let mut t = StoppableThread::spawn("t", move |signal| {
            while signal.wait(Duration::from_secs(3600)) {
                r.fetch_add(1, Ordering::SeqCst);
            }
        })
        .unwrap();
        t.stop();
        t.stop();
        assert_eq!(rounds.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_thread_may_stop_itself() {
        let slot: Arc<Mutex<Option<StoppableThread>>> = Arc::new(Mutex::new(None));
        let (done_tx, done) = crossbeam_channel::bounded(1);
        let s = slot.clone();
        let mut guard = slot.lock();
        *guard = Some(
            StoppableThread::spawn("t", move |signal| {
                // The last owner goes away from inside: no self-join, the loop ends.
                let me = s.lock().take();
                drop(me);
                let _ = done_tx.send(signal.wait(Duration::from_secs(3600)));
            })
            .unwrap(),
        );
        drop(guard);
        assert!(!done.recv().unwrap());
    }
}
