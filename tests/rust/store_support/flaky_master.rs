//! A [`MasterApi`] proxy for the store tests: forwards every call to a real master,
//! but can make `Ping` fail (as an unreachable master would) and counts remounts.

use mooncake::wire::master_api::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Forwards to `inner`; see [`FlakyMaster::fail_pings`].
pub struct FlakyMaster {
    inner: Arc<dyn MasterApi>,
    fail_pings: AtomicBool,
    remounts: AtomicUsize,
}

impl FlakyMaster {
    /// A proxy for `inner` that fails nothing yet.
    pub fn new(inner: Arc<dyn MasterApi>) -> FlakyMaster {
        FlakyMaster {
            inner,
            fail_pings: AtomicBool::new(false),
            remounts: AtomicUsize::new(0),
        }
    }

    /// While set, every `Ping` fails with `RPC_FAIL`.
    pub fn fail_pings(&self, fail: bool) {
        self.fail_pings.store(fail, Ordering::SeqCst);
    }

    /// How many `ReMountSegment` calls went through.
    pub fn remounts(&self) -> usize {
        self.remounts.load(Ordering::SeqCst)
    }
}

type R<T> = MasterResult<T>;
type Many<T> = MasterResult<Vec<MasterResult<T>>>;

impl MasterApi for FlakyMaster {
    fn service_ready(&self) -> R<String> {
        self.inner.service_ready()
    }
    fn get_storage_config(&self) -> R<StorageConfig> {
        self.inner.get_storage_config()
    }
    fn get_fsdir(&self) -> R<String> {
        self.inner.get_fsdir()
    }
    fn mount_segment(&self, s: &Segment, c: Uuid) -> R<()> {
        self.inner.mount_segment(s, c)
    }
    fn remount_segment(&self, s: &[Segment], c: Uuid) -> R<()> {
        self.remounts.fetch_add(1, Ordering::SeqCst);
        self.inner.remount_segment(s, c)
    }
    fn unmount_segment(&self, id: Uuid, c: Uuid) -> R<()> {
        self.inner.unmount_segment(id, c)
    }
    fn graceful_unmount_segment(&self, id: Uuid, c: Uuid, ms: u64) -> R<()> {
        self.inner.graceful_unmount_segment(id, c, ms)
    }
    fn ping(&self, c: Uuid) -> R<PingResponse> {
        if self.fail_pings.load(Ordering::SeqCst) {
            return Err(ErrorCode::RPC_FAIL);
        }
        self.inner.ping(c)
    }
    fn fetch_tasks(&self, c: Uuid, n: u64) -> R<Vec<TaskAssignment>> {
        self.inner.fetch_tasks(c, n)
    }
    fn exist_key(&self, k: &str, t: &str) -> R<bool> {
        self.inner.exist_key(k, t)
    }
    fn batch_exist_key(&self, k: &[String], t: &str) -> Many<bool> {
        self.inner.batch_exist_key(k, t)
    }
    fn get_replica_list(&self, k: &str, t: &str) -> R<GetReplicaListResponse> {
        self.inner.get_replica_list(k, t)
    }
    fn batch_get_replica_list(&self, k: &[String], t: &str) -> Many<GetReplicaListResponse> {
        self.inner.batch_get_replica_list(k, t)
    }
    fn get_replica_list_by_regex(
        &self,
        r: &str,
        t: &str,
    ) -> R<Vec<(String, Vec<ReplicaDescriptor>)>> {
        self.inner.get_replica_list_by_regex(r, t)
    }
    fn put_start(
        &self,
        c: Uuid,
        k: &str,
        n: u64,
        cfg: &ReplicateConfig,
        t: &str,
    ) -> R<Vec<ReplicaDescriptor>> {
        self.inner.put_start(c, k, n, cfg, t)
    }
    fn put_end(&self, c: Uuid, m: &ObjectMeta, r: ReplicaType, t: &str) -> R<()> {
        self.inner.put_end(c, m, r, t)
    }
    fn put_revoke(&self, c: Uuid, k: &str, r: ReplicaType, t: &str) -> R<()> {
        self.inner.put_revoke(c, k, r, t)
    }
    fn batch_put_start(
        &self,
        c: Uuid,
        k: &[String],
        n: &[u64],
        cfg: &ReplicateConfig,
        t: &str,
    ) -> Many<Vec<ReplicaDescriptor>> {
        self.inner.batch_put_start(c, k, n, cfg, t)
    }
    fn batch_put_end(&self, c: Uuid, m: &[ObjectMeta], r: ReplicaType, t: &str) -> Many<()> {
        self.inner.batch_put_end(c, m, r, t)
    }
    fn batch_put_revoke(&self, c: Uuid, k: &[String], r: ReplicaType, t: &str) -> Many<()> {
        self.inner.batch_put_revoke(c, k, r, t)
    }
    fn upsert_start(
        &self,
        c: Uuid,
        k: &str,
        n: u64,
        cfg: &ReplicateConfig,
        t: &str,
    ) -> R<Vec<ReplicaDescriptor>> {
        self.inner.upsert_start(c, k, n, cfg, t)
    }
    fn upsert_end(&self, c: Uuid, m: &ObjectMeta, r: ReplicaType, t: &str) -> R<()> {
        self.inner.upsert_end(c, m, r, t)
    }
    fn upsert_revoke(&self, c: Uuid, k: &str, r: ReplicaType, t: &str) -> R<()> {
        self.inner.upsert_revoke(c, k, r, t)
    }
    fn batch_upsert_start(
        &self,
        c: Uuid,
        k: &[String],
        n: &[u64],
        cfg: &ReplicateConfig,
        t: &str,
    ) -> Many<Vec<ReplicaDescriptor>> {
        self.inner.batch_upsert_start(c, k, n, cfg, t)
    }
    fn batch_upsert_end(&self, c: Uuid, m: &[ObjectMeta], t: &str) -> Many<()> {
        self.inner.batch_upsert_end(c, m, t)
    }
    fn batch_upsert_revoke(&self, c: Uuid, k: &[String], t: &str) -> Many<()> {
        self.inner.batch_upsert_revoke(c, k, t)
    }
    fn remove(&self, k: &str, force: bool, t: &str) -> R<()> {
        self.inner.remove(k, force, t)
    }
    fn remove_by_regex(&self, r: &str, force: bool, t: &str) -> R<i64> {
        self.inner.remove_by_regex(r, force, t)
    }
    fn remove_all(&self, force: bool, t: &str) -> R<i64> {
        self.inner.remove_all(force, t)
    }
    fn batch_remove(&self, k: &[String], force: bool, t: &str) -> Many<()> {
        self.inner.batch_remove(k, force, t)
    }
    fn batch_query_ip(&self, c: &[Uuid]) -> R<Vec<(Uuid, Vec<String>)>> {
        self.inner.batch_query_ip(c)
    }
    fn batch_replica_clear(&self, k: &[String], c: Uuid, s: &str) -> R<Vec<String>> {
        self.inner.batch_replica_clear(k, c, s)
    }
}
