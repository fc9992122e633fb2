//! The master's disk-tier RPCs (spec tiers-events-conductor.md §1.3-1.4, §1.10): a
//! client that keeps objects on its local disk mounts that disk, drains the offload
//! tasks the master queued for it, reports what it wrote, and announces what it drops.
//!
//! A separate trait from [`MasterApi`]: only masters that have a disk tier serve it
//! ([`MasterApi::disk_tier`]); others answer "function not registered", as a master
//! without these handlers does.

#[cfg(doc)]
use super::master_api::MasterApi;
use super::master_api::{MasterResult, ReplicaDescriptor, ReplicaType, Uuid};

/// `OffloadTaskItem`: an object the master asks its owner to copy to disk (also the
/// wire type of `PromotionTaskItem`, which has the same fields).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OffloadTaskItem {
    /// Tenant of the key.
    pub tenant_id: String,
    /// Object key.
    pub key: String,
    /// Value size in bytes.
    pub size: i64,
}

/// `PromotionTaskItem`: an object on disk the master asks its holder to copy back to
/// memory.
pub type PromotionTaskItem = OffloadTaskItem;

/// `StorageObjectMetadata`: where an offloaded object landed. A negative `data_size`
/// reports a failed offload (upstream's NACK).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageObjectMetadata {
    /// Container of the object on the owner's disk (the owner's own numbering).
    pub bucket_id: i64,
    /// Offset in the container.
    pub offset: i64,
    /// Stored key length.
    pub key_size: i64,
    /// Value size; < 0: the offload failed.
    pub data_size: i64,
    /// The owner's offload RPC address (`host:port`), where readers fetch it.
    pub transport_endpoint: String,
}

/// Result of `PromotionAllocStart`: the memory replica to copy the object into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromotionAllocation {
    /// A PROCESSING memory replica.
    pub memory_descriptor: ReplicaDescriptor,
}

/// The disk-tier RPCs of a master (upstream's names in each method's doc).
pub trait DiskTierApi: Send + Sync {
    /// `MountLocalDiskSegment`: `client` keeps objects on its local disk; whether the
    /// master may queue offload tasks for it. Idempotent; -1300 when the master runs
    /// without `--enable_offload`.
    fn mount_local_disk_segment(&self, client: Uuid, enable_offloading: bool) -> MasterResult<()>;
    /// `UnmountLocalDiskSegment`: every replica on `client`'s disk is dropped.
    fn unmount_local_disk_segment(&self, client: Uuid) -> MasterResult<()>;
    /// `OffloadObjectHeartbeat`: drains `client`'s offload tasks (cancelled, and none
    /// returned, when `enable_offloading` is false). -101 for a client whose disk is
    /// not mounted (it mounts again).
    fn offload_object_heartbeat(
        &self,
        client: Uuid,
        enable_offloading: bool,
    ) -> MasterResult<Vec<OffloadTaskItem>>;
    /// `PollRemoveAll`: whether a `RemoveAll` happened since the last poll (the client
    /// then wipes its disk); clears the flag.
    fn poll_remove_all(&self, client: Uuid) -> MasterResult<bool>;
    /// `ReportSsdCapacity`: the bytes `client`'s disk may hold.
    fn report_ssd_capacity(&self, client: Uuid, bytes: i64) -> MasterResult<()>;
    /// `NotifyOffloadSuccess`: `tasks[i]` landed at `metadatas[i]` on `client`'s disk
    /// (or failed, `data_size` < 0). Lengths must match (-600); -101 at the end when
    /// the client's disk is not mounted.
    fn notify_offload_success(
        &self,
        client: Uuid,
        tasks: &[OffloadTaskItem],
        metadatas: &[StorageObjectMetadata],
    ) -> MasterResult<()>;
    /// `PromotionObjectHeartbeat`: drains `client`'s promotion tasks.
    fn promotion_object_heartbeat(&self, client: Uuid) -> MasterResult<Vec<PromotionTaskItem>>;
    /// `PromotionAllocStart`: a memory replica for `key`, which `client` holds on disk.
    fn promotion_alloc_start(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        size: u64,
        preferred_segments: &[String],
    ) -> MasterResult<PromotionAllocation>;
    /// `NotifyPromotionSuccess`: the promoted memory replica is written.
    fn notify_promotion_success(&self, client: Uuid, key: &str, tenant: &str) -> MasterResult<()>;
    /// `NotifyPromotionFailure`: the promotion is abandoned (its buffer is freed).
    fn notify_promotion_failure(&self, client: Uuid, key: &str, tenant: &str) -> MasterResult<()>;
    /// `EvictDiskReplica`: `client` is about to delete `key` from its disk; its replica
    /// of type `kind` (LOCAL_DISK or DISK) goes, and the object with it when it was the
    /// last.
    fn evict_disk_replica(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        kind: ReplicaType,
    ) -> MasterResult<()>;
    /// `BatchEvictDiskReplica`: [`DiskTierApi::evict_disk_replica`] for each key.
    fn batch_evict_disk_replica(
        &self,
        client: Uuid,
        keys: &[String],
        tenant: &str,
        kind: ReplicaType,
    ) -> MasterResult<Vec<MasterResult<()>>>;
}
