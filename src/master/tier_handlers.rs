//! The disk-tier RPCs as served, before counting (spec tiers-events-conductor.md
//! §1.3, §1.4, §1.10): each one checks `--enable_offload`, then hands its work to the
//! disk tier (`offload`) or to promotion (`promotion`). The counting [`DiskTierApi`]
//! wrappers around them are made from the RPC table in `mod.rs`.
//!
//! [`DiskTierApi`]: crate::wire::disk_tier_api::DiskTierApi

use super::rpc_handlers::each;
use super::{DiskTierHandlers, MasterService};
use crate::wire::disk_tier_api::{
    OffloadTaskItem, PromotionAllocation, PromotionTaskItem, StorageObjectMetadata,
};
use crate::wire::master_api::{ErrorCode, MasterResult, ReplicaType, Uuid};
use std::sync::atomic::Ordering;

/// Handlers that check `--enable_offload`, then pass their arguments on unchanged:
/// a row `rpc(args) -> T => path` answers `self.path(args)`.
macro_rules! offload_checked {
    ($($rpc:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $($path:ident).+;)+) => {
        $(fn $rpc(&self, $($arg: $ty),*) -> MasterResult<$ret> {
            self.disk
                .check_offload_enabled()
                .and_then(|()| self.$($path).+($($arg),*))
        })+
    };
}

impl DiskTierHandlers for MasterService {
    offload_checked! {
        poll_remove_all(client: Uuid) -> bool => disk.local_disks.poll_remove_all;
        report_ssd_capacity(client: Uuid, bytes: i64) -> () => disk.local_disks.set_capacity;
        promotion_alloc_start(
            client: Uuid, key: &str, tenant: &str, size: u64, preferred_segments: &[String]
        ) -> PromotionAllocation => promotions.promotion_start;
        evict_disk_replica(
            client: Uuid, key: &str, tenant: &str, kind: ReplicaType
        ) -> () => disk.evict_disk_copy;
    }

    fn mount_local_disk_segment(&self, client: Uuid, enable_offloading: bool) -> MasterResult<()> {
        self.disk.check_offload_enabled().map(|()| {
            self.disk.local_disks.mount(client, enable_offloading);
            self.liveness
                .clients
                .touch(client, self.t.now(), self.t.client_ttl_ns);
            log::info!("client_id={client}: local disk mounted (offloading {enable_offloading})");
        })
    }

    fn unmount_local_disk_segment(&self, client: Uuid) -> MasterResult<()> {
        self.disk.check_offload_enabled().map(|()| {
            self.disk.unmount_local_disk(client);
        })
    }

    fn offload_object_heartbeat(
        &self,
        client: Uuid,
        enable_offloading: bool,
    ) -> MasterResult<Vec<OffloadTaskItem>> {
        self.disk.check_offload_enabled().and_then(|()| {
            let (tasks, cancelled) = self.disk.local_disks.drain(client, enable_offloading)?;
            self.disk.release_offload_pins(cancelled);
            Ok(tasks)
        })
    }

    fn notify_offload_success(
        &self,
        client: Uuid,
        tasks: &[OffloadTaskItem],
        metadatas: &[StorageObjectMetadata],
    ) -> MasterResult<()> {
        self.disk.check_offload_enabled().and_then(|()| {
            if tasks.len() != metadatas.len() {
                return Err(ErrorCode::INVALID_PARAMS);
            }
            let disk = self.disk.local_disks.get(client);
            let mut added = 0u64;
            for (task, meta) in tasks.iter().zip(metadatas) {
                if self.disk.register_copy(client, task, meta, disk.as_ref()) {
                    added += 1;
                }
            }
            self.t.metrics.offloaded.fetch_add(added, Ordering::Relaxed);
            disk.map(|_| ()).ok_or(ErrorCode::SEGMENT_NOT_FOUND)
        })
    }

    fn promotion_object_heartbeat(&self, client: Uuid) -> MasterResult<Vec<PromotionTaskItem>> {
        let max = usize::try_from(self.t.config.promotion_max_per_heartbeat).unwrap_or(usize::MAX);
        self.disk
            .check_offload_enabled()
            .and_then(|()| self.disk.local_disks.drain_promotions(client, max))
    }

    fn notify_promotion_success(&self, client: Uuid, key: &str, tenant: &str) -> MasterResult<()> {
        self.disk
            .check_offload_enabled()
            .and_then(|()| self.promotions.promotion_end(client, key, tenant, true))
    }

    fn notify_promotion_failure(&self, client: Uuid, key: &str, tenant: &str) -> MasterResult<()> {
        self.disk
            .check_offload_enabled()
            .and_then(|()| self.promotions.promotion_end(client, key, tenant, false))
    }

    fn batch_evict_disk_replica(
        &self,
        client: Uuid,
        keys: &[String],
        tenant: &str,
        kind: ReplicaType,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        self.disk.check_offload_enabled()?;
        each(keys, |k| self.disk.evict_disk_copy(client, k, tenant, kind))
    }
}
