//! Promotion on hit (spec tiers-events-conductor.md §1.4, `--promotion_on_hit`): reads
//! served only from a disk copy are counted per object; at
//! `--promotion_admission_threshold` the holder of the copy is asked (through its
//! promotion heartbeat) to copy the object back to memory, which it does with
//! `PromotionAllocStart` (a PROCESSING memory replica), a transfer, and
//! `NotifyPromotionSuccess` / `NotifyPromotionFailure`.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::local_disk::ObjectKey;
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

/// Promotion on hit: the disk-only reads counted, and the promotions in progress.
pub(super) struct Promotions {
    t: Arc<Tables>,
    disk: Arc<DiskTier>,
    hits: HitCounts,
}

impl Promotions {
    /// No read counted yet.
    pub fn new(t: Arc<Tables>, disk: Arc<DiskTier>) -> Promotions {
        Promotions {
            t,
            disk,
            hits: HitCounts::default(),
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
        if self
            .hits
            .hit((tenant.to_string(), key.to_string()), threshold)
        {
            let task = PromotionTaskItem {
                tenant_id: tenant.to_string(),
                key: key.to_string(),
                size: i64::try_from(o.size()).unwrap_or(i64::MAX),
            };
            self.disk
                .local_disks
                .enqueue_promotion(copy.disk.client, task);
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
        let Some(descriptor) = replicas.first().map(Replica::descriptor) else {
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
        let o = shard.existing_mut(tenant, key)?;
        if o.client != client || !o.any_processing() {
            return Err(ErrorCode::INVALID_WRITE);
        }
        if done {
            for r in o.replicas.iter_mut() {
                if r.status == ReplicaStatus::Processing && r.seg.is_alive() {
                    r.status = ReplicaStatus::Complete;
                }
            }
            return Ok(());
        }
        let bufs = o.take_replicas(|r: &Replica| r.status == ReplicaStatus::Processing);
        drop(shard);
        self.t.segments.release(bufs);
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
