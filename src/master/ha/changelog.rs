//! The replication log: records of the master's changes, numbered in the order they
//! were made, kept until every follower (a standby's stream, the snapshot writer) has
//! taken them. Nothing is recorded while no follower is attached.
//!
//! Durability: a thread that appended records remembers the last one's number, and
//! [`ReplicationLog::wait_durable`] (called before an RPC answers) waits until every
//! follower that is in sync has acknowledged it. A follower that does not acknowledge
//! within the sync timeout is cut off (it resynchronises from a full dump), so one
//! stuck standby cannot stall the master.

use super::record::Record;
use parking_lot::{Condvar, Mutex};
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

thread_local! {
    /// Number of the last record this thread appended and has not waited for.
    static UNACKED: Cell<u64> = const { Cell::new(0) };
}

/// Numbered, encoded records.
pub(crate) type Batch = Vec<(u64, Arc<[u8]>)>;

struct Follower {
    id: u64,
    /// Next number to hand out.
    next: u64,
    /// Highest number acknowledged.
    acked: u64,
    /// Acknowledgements count for durability once this one is acknowledged (the end
    /// of the follower's full dump); `u64::MAX` until the dump is queued.
    in_sync_from: u64,
    /// Cut off: its thread must close the stream.
    cut: bool,
}

#[derive(Default)]
struct Inner {
    next_seq: u64,
    /// Records from number `front` on.
    queue: VecDeque<(u64, Arc<[u8]>)>,
    followers: Vec<Follower>,
    next_follower: u64,
}

/// The log. One per master service.
pub(crate) struct ReplicationLog {
    active: AtomicBool,
    inner: Mutex<Inner>,
    changed: Condvar,
    sync_timeout: Duration,
}

/// A follower's handle; detaches on drop.
pub(crate) struct FollowerHandle {
    log: Arc<ReplicationLog>,
    id: u64,
}

impl ReplicationLog {
    /// An empty log; followers that do not acknowledge within `sync_timeout` are cut.
    pub fn new(sync_timeout: Duration) -> ReplicationLog {
        ReplicationLog {
            active: AtomicBool::new(false),
            inner: Mutex::new(Inner {
                next_seq: 1,
                ..Inner::default()
            }),
            changed: Condvar::new(),
            sync_timeout,
        }
    }

    /// Whether changes are being recorded (some follower is attached).
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Appends `rec` when active; the calling thread will wait for it in
    /// [`ReplicationLog::wait_durable`].
    pub fn append(&self, rec: &Record) {
        if !self.is_active() {
            return;
        }
        let bytes: Arc<[u8]> = rec.encode().into();
        let mut inner = self.inner.lock();
        if inner.followers.is_empty() {
            return;
        }
        let seq = inner.next_seq;
        inner.next_seq += 1;
        inner.queue.push_back((seq, bytes));
        drop(inner);
        UNACKED.with(|c| c.set(seq));
        self.changed.notify_all();
    }

    /// Waits until every in-sync follower has acknowledged the last record this
    /// thread appended (no-op when it appended none); laggards are cut off.
    pub fn wait_durable(&self) {
        let seq = UNACKED.with(|c| c.replace(0));
        if seq == 0 {
            return;
        }
        let deadline = Instant::now() + self.sync_timeout;
        let mut inner = self.inner.lock();
        loop {
            let waiting = inner
                .followers
                .iter()
                .any(|f| !f.cut && f.in_sync_from <= seq && f.acked < seq);
            if !waiting {
                return;
            }
            if self.changed.wait_until(&mut inner, deadline).timed_out() {
                for f in inner.followers.iter_mut() {
                    if !f.cut && f.in_sync_from <= seq && f.acked < seq {
                        log::error!(
                            "master ha: follower {} did not acknowledge within {:?}; cut off",
                            f.id,
                            self.sync_timeout
                        );
                        f.cut = true;
                    }
                }
                self.changed.notify_all();
                return;
            }
        }
    }

    /// Attaches a follower: it receives every record appended from now on. The caller
    /// then appends a full dump and calls [`FollowerHandle::dump_queued`].
    pub fn attach(self: &Arc<Self>) -> FollowerHandle {
        let mut inner = self.inner.lock();
        inner.next_follower += 1;
        let id = inner.next_follower;
        let next = inner.next_seq;
        inner.followers.push(Follower {
            id,
            next,
            acked: next - 1,
            in_sync_from: u64::MAX,
            cut: false,
        });
        self.active.store(true, Ordering::Release);
        FollowerHandle {
            log: self.clone(),
            id,
        }
    }

    fn detach(&self, id: u64) {
        let mut inner = self.inner.lock();
        inner.followers.retain(|f| f.id != id);
        if inner.followers.is_empty() {
            self.active.store(false, Ordering::Release);
            inner.queue.clear();
        } else {
            trim(&mut inner);
        }
        drop(inner);
        self.changed.notify_all();
    }
}

/// Drops the records every follower has taken.
fn trim(inner: &mut Inner) {
    let taken = inner
        .followers
        .iter()
        .map(|f| f.next)
        .min()
        .unwrap_or(u64::MAX);
    while inner.queue.front().is_some_and(|(s, _)| *s < taken) {
        inner.queue.pop_front();
    }
}

impl FollowerHandle {
    /// Marks the end of this follower's full dump: the number of the last record
    /// appended so far (its acknowledgement makes the follower in sync).
    pub fn dump_queued(&self) {
        let mut inner = self.log.inner.lock();
        let last = inner.next_seq - 1;
        if let Some(f) = inner.followers.iter_mut().find(|f| f.id == self.id) {
            f.in_sync_from = last;
        }
    }

    /// The next records for this follower (at most `max`), waiting up to `wait` for
    /// some; `None` once it has been cut off.
    pub fn next_batch(&self, max: usize, wait: Duration) -> Option<Batch> {
        let deadline = Instant::now() + wait;
        let mut inner = self.log.inner.lock();
        loop {
            let f = inner.followers.iter().find(|f| f.id == self.id)?;
            if f.cut {
                return None;
            }
            let next = f.next;
            let front = inner.queue.front().map_or(inner.next_seq, |(s, _)| *s);
            let start = usize::try_from(next.saturating_sub(front)).unwrap_or(usize::MAX);
            if start < inner.queue.len() {
                let batch: Batch = inner.queue.iter().skip(start).take(max).cloned().collect();
                let taken = batch.last().map_or(next, |(s, _)| s + 1);
                if let Some(f) = inner.followers.iter_mut().find(|f| f.id == self.id) {
                    f.next = taken;
                }
                trim(&mut inner);
                return Some(batch);
            }
            if self
                .log
                .changed
                .wait_until(&mut inner, deadline)
                .timed_out()
            {
                return Some(Vec::new());
            }
        }
    }

    /// Records everything up to `seq` as safely held by this follower.
    pub fn ack(&self, seq: u64) {
        let mut inner = self.log.inner.lock();
        if let Some(f) = inner.followers.iter_mut().find(|f| f.id == self.id) {
            f.acked = f.acked.max(seq);
        }
        drop(inner);
        self.log.changed.notify_all();
    }

    /// Whether this follower has acknowledged its whole dump.
    #[cfg(test)]
    pub fn in_sync(&self) -> bool {
        let inner = self.log.inner.lock();
        inner
            .followers
            .iter()
            .any(|f| f.id == self.id && f.acked >= f.in_sync_from)
    }
}

impl Drop for FollowerHandle {
    fn drop(&mut self) {
        self.log.detach(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(key: &str) -> Record {
        Record::Removed {
            tenant: "default".into(),
            key: key.into(),
        }
    }

    #[test]
    fn nothing_is_recorded_without_followers() {
        let log = Arc::new(ReplicationLog::new(Duration::from_secs(1)));
        log.append(&rec("a"));
        assert!(!log.is_active());
        let f = log.attach();
        log.append(&rec("b"));
        let batch = f.next_batch(10, Duration::ZERO).unwrap();
        assert_eq!(batch.len(), 1);
        assert_eq!(Record::decode(&batch[0].1), Some(rec("b")));
        drop(f);
        assert!(!log.is_active());
    }

    #[test]
    fn writers_wait_for_in_sync_followers_and_cut_laggards() {
        let log = Arc::new(ReplicationLog::new(Duration::from_millis(200)));
        let f = log.attach();
        f.dump_queued();
        // In sync from the start (an empty dump); a writer waits for the ack.
        let (tx, rx) = crossbeam_channel::bounded(1);
        let writer_log = log.clone();
        let writer = std::thread::spawn(move || {
            writer_log.append(&rec("x"));
            writer_log.wait_durable();
            tx.send(()).unwrap();
        });
        let batch = loop {
            let b = f.next_batch(10, Duration::from_secs(5)).unwrap();
            if !b.is_empty() {
                break b;
            }
        };
        f.ack(batch[0].0);
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
        writer.join().unwrap();
        // Nobody acknowledges now: the writer returns after the timeout and the
        // follower is cut off.
        log.append(&rec("y"));
        log.wait_durable();
        assert!(f.next_batch(10, Duration::ZERO).is_none());
    }

    #[test]
    fn followers_still_dumping_do_not_hold_writers() {
        let log = Arc::new(ReplicationLog::new(Duration::from_secs(30)));
        let f = log.attach();
        log.append(&rec("dump"));
        log.wait_durable();
        f.dump_queued();
        assert!(!f.in_sync());
        f.ack(1);
        assert!(f.in_sync());
    }
}
