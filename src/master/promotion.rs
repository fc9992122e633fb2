//! Promotion on hit (spec tiers-events-conductor.md §1.4, `--promotion_on_hit`): reads
//! served only from a disk copy are counted per object; at
//! `--promotion_admission_threshold` the holder of the copy is asked (through its
//! promotion heartbeat) to copy the object back to memory, which it does with
//! `PromotionAllocStart` (a PROCESSING memory replica), a transfer, and
//! `NotifyPromotionSuccess` / `NotifyPromotionFailure`.
//!
//! Upstream's promotion counters (`master_promotion_*`) follow each promotion: a read
//! below the threshold is rejected for its frequency, one while memory is above the
//! eviction watermark for the watermark, one whose holder's queue is full for the
//! cap; an admitted promotion is in flight until it completes, fails, is cancelled
//! (the object changed under it) or expires (not ended within
//! `--put_start_release_timeout_sec`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::local_disk::{Enqueued, ObjectKey};
use super::object::Object;
use super::offload::DiskTier;
use super::replica::Replica;
use super::tables::Tables;
use crate::wire::disk_tier_api::{PromotionAllocation, PromotionTaskItem};
use crate::wire::master_api::{ErrorCode, MasterResult, ReplicaStatus, ReplicateConfig, Uuid};

/// Objects whose disk-only reads are counted at most (the counts start over beyond).
const MAX_COUNTED: usize = 100_000;

/// Reads of disk-only objects, counted towards promotion.
#[derive(Default)]
struct HitCounts(Mutex<HashMap<ObjectKey, u64>>);

impl HitCounts {
    /// Counts one read of `key`; whether it reached `threshold` (the count then
    /// starts over).
    fn hit(&self, key: ObjectKey, threshold: u64) -> bool {
        let mut counts = self.0.lock();
        if counts.len() >= MAX_COUNTED && !counts.contains_key(&key) {
            counts.clear();
        }
        let n = counts.entry(key.clone()).or_insert(0);
        *n += 1;
        if *n >= threshold {
            counts.remove(&key);
            return true;
        }
        false
    }
}

/// Upstream's promotion counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PromotionMetrics {
    /// Promotions queued for the holder of a disk copy.
    pub admitted: u64,
    /// Admitted and not ended yet.
    pub in_flight: u64,
    /// Promotions whose memory replica became readable, and their bytes.
    pub completed: u64,
    /// Value bytes of the completed promotions.
    pub completed_bytes: u64,
    /// Promotions the holder reported failed.
    pub failed: u64,
    /// Promotions reported done for an object that had changed meanwhile.
    pub cancelled: u64,
    /// Promotions not ended within the put release timeout.
    pub expired: u64,
    /// Disk-only reads below the admission threshold.
    pub rejected_frequency: u64,
    /// Reads at the threshold while memory was above the eviction watermark.
    pub rejected_watermark: u64,
    /// Reads at the threshold whose holder's queue was full.
    pub rejected_cap: u64,
}

/// The live counters behind [`PromotionMetrics`] (`in_flight` is the map's size).
#[derive(Default)]
struct Counters {
    admitted: AtomicU64,
    completed: AtomicU64,
    completed_bytes: AtomicU64,
    failed: AtomicU64,
    cancelled: AtomicU64,
    expired: AtomicU64,
    rejected_frequency: AtomicU64,
    rejected_watermark: AtomicU64,
    rejected_cap: AtomicU64,
}

/// How an admitted promotion ended.
enum Ending {
    Completed(u64),
    Failed,
    Cancelled,
}

/// Promotion on hit: the disk-only reads counted, and the promotions in progress.
pub(super) struct Promotions {
    t: Arc<Tables>,
    disk: Arc<DiskTier>,
    hits: HitCounts,
    /// Admitted promotions not ended yet, with when they were admitted (service
    /// clock). Taken under a shard lock, never the other way round.
    in_flight: Mutex<HashMap<ObjectKey, u64>>,
    counters: Counters,
}

impl Promotions {
    /// No read counted yet.
    pub fn new(t: Arc<Tables>, disk: Arc<DiskTier>) -> Promotions {
        Promotions {
            t,
            disk,
            hits: HitCounts::default(),
            in_flight: Mutex::new(HashMap::new()),
            counters: Counters::default(),
        }
    }

    /// The promotion counters (promotions past the release timeout expire first).
    pub(super) fn metrics(&self) -> PromotionMetrics {
        self.expire();
        let c = &self.counters;
        let read = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PromotionMetrics {
            admitted: read(&c.admitted),
            in_flight: self.in_flight.lock().len() as u64,
            completed: read(&c.completed),
            completed_bytes: read(&c.completed_bytes),
            failed: read(&c.failed),
            cancelled: read(&c.cancelled),
            expired: read(&c.expired),
            rejected_frequency: read(&c.rejected_frequency),
            rejected_watermark: read(&c.rejected_watermark),
            rejected_cap: read(&c.rejected_cap),
        }
    }

    /// Counts the promotions admitted longer ago than the release timeout (their
    /// buffers are reclaimed by then) as expired.
    fn expire(&self) {
        let now = self.t.now();
        let limit = self.t.release_ns;
        let mut in_flight = self.in_flight.lock();
        let before = in_flight.len();
        in_flight.retain(|_, admitted| now.saturating_sub(*admitted) <= limit);
        let expired = (before - in_flight.len()) as u64;
        self.counters.expired.fetch_add(expired, Ordering::Relaxed);
    }

    /// Ends the admitted promotion of (tenant, key), if there is one.
    fn end(&self, tenant: &str, key: &str, ending: Ending) {
        let key = (tenant.to_string(), key.to_string());
        if self.in_flight.lock().remove(&key).is_none() {
            return;
        }
        let c = &self.counters;
        match ending {
            Ending::Completed(bytes) => {
                c.completed.fetch_add(1, Ordering::Relaxed);
                c.completed_bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            Ending::Failed => {
                c.failed.fetch_add(1, Ordering::Relaxed);
            }
            Ending::Cancelled => {
                c.cancelled.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A read of `o` was served: when only its disk copies could serve it and
    /// promotion is on, counts it and, at the threshold, queues a promotion task for
    /// the holder of its first copy. Called under `o`'s shard lock.
    pub(super) fn note_read_for_promotion(&self, tenant: &str, key: &str, o: &Object) {
        if !self.t.config.promotion_on_hit || !o.replicas.is_empty() {
            return;
        }
        let Some(copy) = o.disk_replicas().iter().find(|r| r.is_readable()) else {
            return;
        };
        let threshold = self.t.config.promotion_admission_threshold;
        let key = (tenant.to_string(), key.to_string());
        if !self.hits.hit(key.clone(), threshold) {
            self.counters
                .rejected_frequency
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.t.segments.used_ratio() >= self.t.config.eviction_high_watermark_ratio {
            self.counters
                .rejected_watermark
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        let now = self.t.now();
        let mut in_flight = self.in_flight.lock();
        if let Some(admitted) = in_flight.get(&key) {
            if now.saturating_sub(*admitted) <= self.t.release_ns {
                return;
            }
            in_flight.remove(&key);
            self.counters.expired.fetch_add(1, Ordering::Relaxed);
        }
        let task = PromotionTaskItem {
            tenant_id: key.0.clone(),
            key: key.1.clone(),
            size: i64::try_from(o.size()).unwrap_or(i64::MAX),
        };
        match self
            .disk
            .local_disks
            .enqueue_promotion(copy.disk.client, task)
        {
            Enqueued::Queued => {
                in_flight.insert(key, now);
                self.counters.admitted.fetch_add(1, Ordering::Relaxed);
            }
            Enqueued::Full => {
                self.counters.rejected_cap.fetch_add(1, Ordering::Relaxed);
            }
            Enqueued::AlreadyQueued | Enqueued::NotMounted => {}
        }
    }

    /// `PromotionAllocStart`: a PROCESSING memory replica for `key`, which `client`
    /// holds on disk and nobody holds in memory.
    pub(super) fn promotion_start(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        size: u64,
        preferred_segments: &[String],
    ) -> MasterResult<PromotionAllocation> {
        let tenant = self.t.write_tenant(tenant)?;
        let now = self.t.now();
        let mut shard = self.t.objects.lock_key(tenant, key);
        let o = shard.existing_mut(tenant, key)?;
        if !o.replicas.is_empty() {
            return Err(ErrorCode::OBJECT_ALREADY_EXISTS);
        }
        if size != o.size() {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        if !o.disk_replicas().iter().any(|r| r.disk.client == client) {
            return Err(ErrorCode::REPLICA_NOT_FOUND);
        }
        let config = ReplicateConfig {
            replica_num: 1,
            preferred_segments: preferred_segments.to_vec(),
            ..ReplicateConfig::default()
        };
        let replicas = self.t.allocate_replicas(client, key, size, &config)?;
        let Some(descriptor) = replicas.first().map(|r| r.descriptor(size)) else {
            return Err(ErrorCode::NO_AVAILABLE_HANDLE);
        };
        // A write in progress from now on: zombie cleanup frees the buffer if the
        // holder never finishes.
        o.client = client;
        o.put_start = now;
        o.replicas = replicas;
        Ok(PromotionAllocation {
            memory_descriptor: descriptor,
        })
    }

    /// `NotifyPromotionSuccess` (`done`) or `NotifyPromotionFailure`: the promoting
    /// replica becomes readable, or is freed.
    pub(super) fn promotion_end(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        done: bool,
    ) -> MasterResult<()> {
        let tenant = self.t.read_tenant(tenant)?;
        let mut shard = self.t.objects.lock_key(tenant, key);
        let o = match shard.existing_mut(tenant, key) {
            Ok(o) if o.client == client && o.any_processing() => o,
            Ok(_) => {
                self.end(tenant, key, Ending::Cancelled);
                return Err(ErrorCode::INVALID_WRITE);
            }
            Err(e) => {
                self.end(tenant, key, Ending::Cancelled);
                return Err(e);
            }
        };
        if done {
            for r in o.replicas.iter_mut() {
                if r.status == ReplicaStatus::Processing && r.seg.is_alive() {
                    r.status = ReplicaStatus::Complete;
                }
            }
            let ending = if o.has_complete_memory() {
                Ending::Completed(o.size())
            } else {
                Ending::Cancelled
            };
            self.end(tenant, key, ending);
            return Ok(());
        }
        let bufs = o.take_replicas(|r: &Replica| r.status == ReplicaStatus::Processing);
        drop(shard);
        self.t.segments.release(bufs);
        self.end(tenant, key, Ending::Failed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_reach_the_threshold_then_start_over() {
        let counts = HitCounts::default();
        let k = || ("t".to_string(), "k".to_string());
        assert!(!counts.hit(k(), 2));
        assert!(counts.hit(k(), 2));
        assert!(!counts.hit(k(), 2));
        assert!(counts.hit(k(), 1));
    }
}
