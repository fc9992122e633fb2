//! From enqueued events to numbered, encoded batches, without threads or sockets: the
//! bounded queue (the oldest event dropped on overflow), the sequence numbers (one
//! consumed per published batch and per dropped event, so a consumer sees the loss as
//! a gap), the event ids, the key filter and the counters. An HA leader's term starts
//! with [`Pipeline::start_term`]: the term's own range of sequence numbers, and its
//! resync (`cleared`, then `stored` for every object) ahead of anything else.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Condvar, Mutex};

use super::payload::{encode_batch, EventKind, Numbered, PendingEvent, Shape};
use crate::wire::kv_key_hash::seq_hash;

/// Most events in one published batch (upstream's `kMaxBatchSize`).
pub const MAX_BATCH: usize = 64;

/// The publisher's counters, as `/kv_events/status` shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KvEventStats {
    /// Batches sent.
    pub published_batches: u64,
    /// Events in the batches sent.
    pub published_events: u64,
    /// Events dropped from a full queue.
    pub dropped_events: u64,
    /// Events whose key is not a hash (published with `object_key`, or skipped).
    pub skipped_unparsed_keys: u64,
}

/// A batch ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// Its sequence number.
    pub seq: u64,
    /// The msgpack payload.
    pub payload: Vec<u8>,
    /// How many events it holds.
    pub events: u64,
}

#[derive(Default)]
struct Queue {
    events: VecDeque<PendingEvent>,
    /// A term's resync, published before `events` and outside the queue's bound.
    resync: VecDeque<PendingEvent>,
    stopping: bool,
}

/// The queue and numbering of one publisher.
pub struct Pipeline {
    shape: Shape,
    /// Events held at most (0: no bound).
    capacity: usize,
    queue: Mutex<Queue>,
    ready: Condvar,
    next_seq: AtomicU64,
    next_event_id: AtomicU64,
    published_batches: AtomicU64,
    published_events: AtomicU64,
    dropped_events: AtomicU64,
    skipped_unparsed_keys: AtomicU64,
}

impl Pipeline {
    /// An empty pipeline shaping events with `shape`, holding at most `capacity`
    /// events (0: unbounded). Sequence numbers and event ids start at 1.
    pub fn new(shape: Shape, capacity: usize) -> Pipeline {
        Pipeline {
            shape,
            capacity,
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            next_seq: AtomicU64::new(1),
            next_event_id: AtomicU64::new(1),
            published_batches: AtomicU64::new(0),
            published_events: AtomicU64::new(0),
            dropped_events: AtomicU64::new(0),
            skipped_unparsed_keys: AtomicU64::new(0),
        }
    }

    /// Queues `event` without blocking; a full queue drops its oldest event, which
    /// consumes a sequence number. Once stopped, events are ignored.
    pub fn enqueue(&self, event: PendingEvent) {
        let mut q = self.queue.lock();
        if q.stopping {
            return;
        }
        if self.capacity > 0 && q.events.len() >= self.capacity {
            q.events.pop_front();
            self.dropped_events.fetch_add(1, Ordering::Relaxed);
            self.next_seq.fetch_add(1, Ordering::Relaxed);
        }
        q.events.push_back(event);
        drop(q);
        self.ready.notify_one();
    }

    /// Starts an HA leader's term: the events still queued are dropped (another leader
    /// may have served since they happened), the term's batches are numbered from
    /// `first_seq` on (never lower than before), and `cleared` followed by `objects`
    /// (the leader's state, as `stored` events) go out before anything queued later.
    /// The resync is not bounded by the queue's capacity: it is the object table once.
    pub fn start_term(&self, first_seq: u64, objects: Vec<PendingEvent>) {
        let mut q = self.queue.lock();
        if q.stopping {
            return;
        }
        let stale = q.events.len() + q.resync.len();
        self.dropped_events
            .fetch_add(stale as u64, Ordering::Relaxed);
        q.events.clear();
        q.resync.clear();
        self.next_seq.fetch_max(first_seq, Ordering::Relaxed);
        q.resync.push_back(PendingEvent::cleared());
        q.resync.extend(objects);
        drop(q);
        self.ready.notify_one();
    }

    /// Up to [`MAX_BATCH`] events, oldest first (a term's resync before the rest);
    /// waits for one unless stopping. Empty once stopped and drained.
    pub fn next_batch(&self) -> Vec<PendingEvent> {
        let mut q = self.queue.lock();
        while q.events.is_empty() && q.resync.is_empty() && !q.stopping {
            self.ready.wait(&mut q);
        }
        if !q.resync.is_empty() {
            let n = q.resync.len().min(MAX_BATCH);
            return q.resync.drain(..n).collect();
        }
        let n = q.events.len().min(MAX_BATCH);
        q.events.drain(..n).collect()
    }

    /// Wakes the consumer for good: [`Pipeline::next_batch`] returns what is left,
    /// then nothing.
    pub fn stop(&self) {
        self.queue.lock().stopping = true;
        self.ready.notify_all();
    }

    /// Numbers and encodes `batch` at `timestamp_ms`. An event whose key is not a
    /// hash counts in `skipped_unparsed_keys`, and is left out when `object_key` is
    /// not written or the key is empty (it would name nothing). `None` when nothing
    /// is left: no sequence number is used then.
    pub fn prepare(&self, batch: &[PendingEvent], timestamp_ms: i64) -> Option<Prepared> {
        let mut numbered = Vec::with_capacity(batch.len());
        for event in batch {
            let hash = seq_hash(&event.key);
            if hash.is_none() && event.kind != EventKind::Cleared {
                self.skipped_unparsed_keys.fetch_add(1, Ordering::Relaxed);
                if !self.shape.object_key || event.key.is_empty() {
                    continue;
                }
            }
            numbered.push(Numbered {
                event,
                id: self.next_event_id.fetch_add(1, Ordering::Relaxed),
                hash,
            });
        }
        if numbered.is_empty() {
            return None;
        }
        Some(Prepared {
            payload: encode_batch(timestamp_ms, &numbered, &self.shape),
            seq: self.next_seq.fetch_add(1, Ordering::Relaxed),
            events: numbered.len() as u64,
        })
    }

    /// Counts a batch of `events` as sent.
    pub fn record_sent(&self, events: u64) {
        self.published_batches.fetch_add(1, Ordering::Relaxed);
        self.published_events.fetch_add(events, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn stats(&self) -> KvEventStats {
        KvEventStats {
            published_batches: self.published_batches.load(Ordering::Relaxed),
            published_events: self.published_events.load(Ordering::Relaxed),
            dropped_events: self.dropped_events.load(Ordering::Relaxed),
            skipped_unparsed_keys: self.skipped_unparsed_keys.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::payload::{EventKind, Medium};
    use super::*;

    fn pipeline(capacity: usize, object_key: bool) -> Pipeline {
        Pipeline::new(
            Shape {
                backend_id: "b".into(),
                legacy: true,
                object_key,
            },
            capacity,
        )
    }

    fn ev(key: &str) -> PendingEvent {
        PendingEvent {
            kind: EventKind::Stored,
            key: key.into(),
            medium: Medium::Cpu,
            tenant: "default".into(),
            group: String::new(),
        }
    }

    fn keys(batch: &[PendingEvent]) -> Vec<&str> {
        batch.iter().map(|e| e.key.as_str()).collect()
    }

    #[test]
    fn overflow_drops_the_oldest_and_leaves_a_sequence_gap() {
        let p = pipeline(2, true);
        p.enqueue(ev("1"));
        let first = p.prepare(&p.next_batch(), 0).unwrap();
        assert_eq!(first.seq, 1);
        p.record_sent(first.events);
        for k in ["2", "3", "4", "5", "6"] {
            p.enqueue(ev(k));
        }
        let batch = p.next_batch();
        assert_eq!(keys(&batch), ["5", "6"], "the newest are kept");
        let next = p.prepare(&batch, 0).unwrap();
        // Three events were dropped: sequence numbers 2, 3 and 4 are the gap.
        assert_eq!(next.seq, 5);
        assert_eq!(next.events, 2);
        p.record_sent(next.events);
        assert_eq!(
            p.stats(),
            KvEventStats {
                published_batches: 2,
                published_events: 3,
                dropped_events: 3,
                skipped_unparsed_keys: 0,
            }
        );
    }

    #[test]
    fn unbounded_batches_of_64_and_drain_after_stop() {
        let p = pipeline(0, true);
        for i in 0..130 {
            p.enqueue(ev(&i.to_string()));
        }
        p.stop();
        assert_eq!(p.next_batch().len(), 64);
        assert_eq!(p.next_batch().len(), 64);
        assert_eq!(keys(&p.next_batch()), ["128", "129"]);
        assert!(p.next_batch().is_empty());
        p.enqueue(ev("late"));
        assert!(p.next_batch().is_empty());
        assert_eq!(p.stats().dropped_events, 0);
    }

    #[test]
    fn unparsed_keys_are_counted_and_skipped_without_object_key() {
        let with = pipeline(0, true);
        let batch = [ev("abc"), ev(""), ev("0x10")];
        let prepared = with.prepare(&batch, 0).unwrap();
        // "abc" is published (with its key), "" is not; both are counted.
        assert_eq!(prepared.events, 2);
        assert_eq!(with.stats().skipped_unparsed_keys, 2);

        let without = pipeline(0, false);
        assert_eq!(without.prepare(&[ev("abc"), ev("")], 0), None);
        assert_eq!(without.stats().skipped_unparsed_keys, 2);
        // Skipped events use no event id or sequence number.
        let p = without.prepare(&[ev("abc"), ev("7")], 0).unwrap();
        assert_eq!((p.seq, p.events), (1, 1));
        assert!(p.payload.windows(10).any(|w| w == b"\xa8event_id\x01"));
    }

    #[test]
    fn a_term_drops_what_is_queued_and_resyncs_first_beyond_the_bound() {
        let p = pipeline(2, false);
        p.enqueue(ev("1"));
        p.enqueue(ev("2"));
        let objects: Vec<PendingEvent> = (10..80).map(|i| ev(&i.to_string())).collect();
        p.start_term(7 << 32 | 1, objects);
        let first = p.next_batch();
        assert_eq!(first.len(), 64);
        assert_eq!(first[0].kind, EventKind::Cleared);
        assert_eq!(keys(&first[1..3]), ["10", "11"]);
        let prepared = p.prepare(&first, 0).unwrap();
        assert_eq!(prepared.seq, 7 << 32 | 1);
        assert_eq!(prepared.events, 64, "cleared is published without a key");
        // Queued while the resync is out, beyond the capacity of 2: the oldest goes
        // (a gap of one), the resync stays whole.
        for k in ["100", "101", "102"] {
            p.enqueue(ev(k));
        }
        let rest = p.next_batch();
        assert_eq!(rest.len(), 7);
        assert_eq!(keys(&rest)[..2], ["73", "74"]);
        assert_eq!(p.prepare(&rest, 0).unwrap().seq, 7 << 32 | 3);
        assert_eq!(keys(&p.next_batch()), ["101", "102"]);
        // The two stale events and the one pushed out of the full queue.
        assert_eq!(p.stats().dropped_events, 3);
        assert_eq!(p.stats().skipped_unparsed_keys, 0);
        // A later term never numbers lower.
        p.start_term(3, Vec::new());
        assert!(p.prepare(&p.next_batch(), 0).unwrap().seq > 7 << 32 | 2);
    }
}
