//! Making room for a write: the pool is a cache, so a put that finds no space evicts
//! (by the eviction policy) and succeeds; it fails with NO_AVAILABLE_HANDLE only when
//! nothing at all can be evicted or the value can never fit.
//!
//! Upstream only flags the background eviction thread and fails the put, so puts into
//! a full pool fail while the thread catches up (spec store.md §2.2, §2.5). Here the
//! writer evicts synchronously, outside every shard lock: it takes candidates from a
//! queue in eviction order (not hard-pinned, lease expired, oldest lease first;
//! soft-pinned ones last and only if `--allow_evict_soft_pinned_objects`), evicts
//! until the freed bytes reach a goal, and retries. The goal doubles on each retry, so
//! a fragmented segment still yields a contiguous range after a few rounds. The queue
//! is one census of the table, refilled only when used up, so a run of puts into a full
//! pool costs one scan, not one per put; every candidate is re-checked under its shard
//! lock when evicted (a read since the census leases it and it is skipped). Writers
//! that need room at the same time take turns, and one that waited retries its
//! placement before evicting more.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use super::eviction::{Candidate, Census, Eviction};
use crate::wire::master_api::{ErrorCode, MasterResult};

/// Retries of one write; with the doubling goal this covers any pool size.
const MAX_ROUNDS: u32 = 48;

/// Candidates kept from one census (the oldest); more are counted again when used up.
const QUEUE_MAX: usize = 16_384;

/// Eviction candidates in order, and whether each may be soft-pinned.
#[derive(Default)]
struct RoomQueue {
    queue: VecDeque<(Candidate, bool)>,
    /// Bumped whenever room was made: a writer that waited for its turn retries its
    /// placement first if room was made meanwhile.
    epoch: u64,
}

impl RoomQueue {
    fn refill(&mut self, census: Census) {
        self.queue.clear();
        self.queue
            .extend(census.no_pin.into_iter().map(|c| (c, false)));
        self.queue
            .extend(census.soft.into_iter().map(|c| (c, true)));
        self.queue.truncate(QUEUE_MAX);
    }
}

/// Making room for writes: evicts through `eviction`, one writer at a time.
pub(super) struct Room {
    eviction: Arc<Eviction>,
    queue: Mutex<RoomQueue>,
}

impl Room {
    /// An empty queue (the first writer that needs room counts the table).
    pub fn new(eviction: Arc<Eviction>) -> Room {
        Room {
            eviction,
            queue: Mutex::new(RoomQueue::default()),
        }
    }

    /// Runs `attempt` (a write that allocates `len` bytes per replica) and, each time
    /// it fails for want of space, makes room and runs it again. `attempt` must leave
    /// nothing half done when it fails with NO_AVAILABLE_HANDLE.
    pub(super) fn with_room<T>(
        &self,
        len: u64,
        mut attempt: impl FnMut() -> MasterResult<T>,
    ) -> MasterResult<T> {
        let mut goal = len.max(1);
        for _ in 0..MAX_ROUNDS {
            let epoch = self.queue.lock().epoch;
            match attempt() {
                Err(ErrorCode::NO_AVAILABLE_HANDLE) => {}
                other => return other,
            }
            if !self.make_room(len, goal, epoch) {
                return Err(ErrorCode::NO_AVAILABLE_HANDLE);
            }
            goal = goal.saturating_mul(2);
        }
        attempt()
    }

    /// Evicts until `goal` bytes are freed; false when nothing could be evicted (or
    /// `len` exceeds every segment). Returns true at once if room was made since
    /// `seen_epoch`.
    fn make_room(&self, len: u64, goal: u64, seen_epoch: u64) -> bool {
        if !self.eviction.t.segments.could_ever_fit(len) {
            return false;
        }
        let mut room = self.queue.lock();
        if room.epoch != seen_epoch {
            return true;
        }
        let now = self.eviction.t.now();
        let mut freed = 0u64;
        let mut evicted = 0u64;
        let mut refilled = false;
        while freed < goal {
            let Some((c, soft)) = room.queue.pop_front() else {
                if refilled {
                    break;
                }
                room.refill(self.eviction.census(now));
                refilled = true;
                continue;
            };
            let n = self.eviction.try_evict(&c, soft, now);
            if n > 0 {
                evicted += n as u64;
                freed = freed.saturating_add(c.bytes);
            }
        }
        let released = self.eviction.release_expired_discarded(now);
        if evicted == 0 && released == 0 {
            return false;
        }
        self.eviction
            .t
            .metrics
            .room_evictions
            .fetch_add(1, Ordering::Relaxed);
        room.epoch = room.epoch.wrapping_add(1);
        log::debug!(
            "action=make_room, len={len}, goal={goal}, evicted_count={evicted}, freed={freed}"
        );
        true
    }
}
