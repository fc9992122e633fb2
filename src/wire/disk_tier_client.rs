//! The disk-tier RPCs over a [`MasterRpcClient`] connection.

use super::codec::rpc;
use super::disk_tier_api::*;
use super::master_api::{MasterResult, ReplicaType, Uuid};
use super::rpc_client::MasterRpcClient;

impl DiskTierApi for MasterRpcClient {
    fn mount_local_disk_segment(&self, client: Uuid, enable_offloading: bool) -> MasterResult<()> {
        self.expect::<rpc::MountLocalDiskSegment, _>(&(client, enable_offloading))
    }
    fn unmount_local_disk_segment(&self, client: Uuid) -> MasterResult<()> {
        self.expect::<rpc::UnmountLocalDiskSegment, _>(&(client,))
    }
    fn offload_object_heartbeat(
        &self,
        client: Uuid,
        enable_offloading: bool,
    ) -> MasterResult<Vec<OffloadTaskItem>> {
        self.expect::<rpc::OffloadObjectHeartbeat, _>(&(client, enable_offloading))
    }
    fn poll_remove_all(&self, client: Uuid) -> MasterResult<bool> {
        self.expect::<rpc::PollRemoveAll, _>(&(client,))
    }
    fn report_ssd_capacity(&self, client: Uuid, bytes: i64) -> MasterResult<()> {
        self.expect::<rpc::ReportSsdCapacity, _>(&(client, bytes))
    }
    fn notify_offload_success(
        &self,
        client: Uuid,
        tasks: &[OffloadTaskItem],
        metadatas: &[StorageObjectMetadata],
    ) -> MasterResult<()> {
        self.expect::<rpc::NotifyOffloadSuccess, _>(&(client, tasks.to_vec(), metadatas.to_vec()))
    }
    fn promotion_object_heartbeat(&self, client: Uuid) -> MasterResult<Vec<PromotionTaskItem>> {
        self.expect::<rpc::PromotionObjectHeartbeat, _>(&(client,))
    }
    fn promotion_alloc_start(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        size: u64,
        preferred_segments: &[String],
    ) -> MasterResult<PromotionAllocation> {
        let args = (
            client,
            key.to_string(),
            tenant.to_string(),
            size,
            preferred_segments.to_vec(),
        );
        self.expect::<rpc::PromotionAllocStart, _>(&args)
    }
    fn notify_promotion_success(&self, client: Uuid, key: &str, tenant: &str) -> MasterResult<()> {
        self.expect::<rpc::NotifyPromotionSuccess, _>(&(client, key.into(), tenant.into()))
    }
    fn notify_promotion_failure(&self, client: Uuid, key: &str, tenant: &str) -> MasterResult<()> {
        self.expect::<rpc::NotifyPromotionFailure, _>(&(client, key.into(), tenant.into()))
    }
    fn evict_disk_replica(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        kind: ReplicaType,
    ) -> MasterResult<()> {
        self.expect::<rpc::EvictDiskReplica, _>(&(client, key.into(), tenant.into(), kind))
    }
    fn batch_evict_disk_replica(
        &self,
        client: Uuid,
        keys: &[String],
        tenant: &str,
        kind: ReplicaType,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        let args = (client, keys.to_vec(), tenant.to_string(), kind);
        self.batch::<rpc::BatchEvictDiskReplica, _>(keys.len(), &args)
    }
}
