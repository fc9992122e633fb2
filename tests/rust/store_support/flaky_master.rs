//! A [`MasterApi`] proxy for the store tests: forwards every call to a real master,
//! but can make `Ping` fail (as an unreachable master would), send puts to a dead
//! segment owner (as a master that has not noticed its death yet would), and counts
//! remounts and revokes.

use mooncake::wire::master_api::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Forwards to `inner`; see [`FlakyMaster::fail_pings`].
pub struct FlakyMaster {
    inner: Arc<dyn MasterApi>,
    fail_pings: AtomicBool,
    remounts: AtomicUsize,
    diverted: AtomicUsize,
    revokes: AtomicUsize,
}

/// A TE endpoint nobody listens on.
const DEAD_ENDPOINT: &str = "127.0.0.1:1";

impl FlakyMaster {
    /// A proxy for `inner` that fails nothing yet.
    pub fn new(inner: Arc<dyn MasterApi>) -> FlakyMaster {
        FlakyMaster {
            inner,
            fail_pings: AtomicBool::new(false),
            remounts: AtomicUsize::new(0),
            diverted: AtomicUsize::new(0),
            revokes: AtomicUsize::new(0),
        }
    }

    /// The next `n` objects a PutStart/BatchPutStart starts get their replicas on a
    /// dead endpoint, so their writes fail.
    pub fn divert_puts(&self, n: usize) {
        self.diverted.store(n, Ordering::SeqCst);
    }

    /// How many keys were revoked (single and batch).
    pub fn revokes(&self) -> usize {
        self.revokes.load(Ordering::SeqCst)
    }

    /// Points `descs` at the dead endpoint if a diversion is pending.
    fn divert(&self, mut descs: Vec<ReplicaDescriptor>) -> Vec<ReplicaDescriptor> {
        let take = self
            .diverted
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if take.is_ok() {
            for d in &mut descs {
                if let ReplicaLocation::Memory(b) = &mut d.location {
                    b.transport_endpoint = DEAD_ENDPOINT.to_string();
                }
            }
        }
        descs
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
    fn create_copy_task(&self, k: &str, t: &str, targets: &[String]) -> R<Uuid> {
        self.inner.create_copy_task(k, t, targets)
    }
    fn create_move_task(&self, k: &str, t: &str, s: &str, d: &str) -> R<Uuid> {
        self.inner.create_move_task(k, t, s, d)
    }
    fn query_task(&self, id: Uuid) -> R<QueryTaskResponse> {
        self.inner.query_task(id)
    }
    fn mark_task_to_complete(&self, c: Uuid, r: &TaskCompleteRequest) -> R<()> {
        self.inner.mark_task_to_complete(c, r)
    }
    fn copy_start(&self, c: Uuid, k: &str, t: &str, s: &str, d: &[String]) -> R<CopyStartResponse> {
        self.inner.copy_start(c, k, t, s, d)
    }
    fn copy_end(&self, c: Uuid, k: &str, t: &str) -> R<()> {
        self.inner.copy_end(c, k, t)
    }
    fn copy_revoke(&self, c: Uuid, k: &str, t: &str) -> R<()> {
        self.inner.copy_revoke(c, k, t)
    }
    fn move_start(&self, c: Uuid, k: &str, t: &str, s: &str, d: &str) -> R<MoveStartResponse> {
        self.inner.move_start(c, k, t, s, d)
    }
    fn move_end(&self, c: Uuid, k: &str, t: &str) -> R<()> {
        self.inner.move_end(c, k, t)
    }
    fn move_revoke(&self, c: Uuid, k: &str, t: &str) -> R<()> {
        self.inner.move_revoke(c, k, t)
    }
    fn dynamic_replica_copy_start(
        &self,
        c: Uuid,
        k: &str,
        t: &str,
        s: &str,
        d: &[String],
        lease: Uuid,
        epoch: u64,
    ) -> R<CopyStartResponse> {
        self.inner
            .dynamic_replica_copy_start(c, k, t, s, d, lease, epoch)
    }
    fn dynamic_replica_copy_end(&self, c: Uuid, k: &str, t: &str, l: Uuid, e: u64) -> R<()> {
        self.inner.dynamic_replica_copy_end(c, k, t, l, e)
    }
    fn dynamic_replica_copy_revoke(&self, c: Uuid, k: &str, t: &str, l: Uuid, e: u64) -> R<()> {
        self.inner.dynamic_replica_copy_revoke(c, k, t, l, e)
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
    fn batch_begin_read(&self, k: &[String], t: &str) -> Many<GetReplicaListResponse> {
        self.inner.batch_begin_read(k, t)
    }
    fn batch_end_read(&self, k: &[String], ids: &[u64], t: &str) -> R<()> {
        self.inner.batch_end_read(k, ids, t)
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
        self.inner
            .put_start(c, k, n, cfg, t)
            .map(|d| self.divert(d))
    }
    fn put_end(&self, c: Uuid, m: &ObjectMeta, r: ReplicaType, t: &str) -> R<()> {
        self.inner.put_end(c, m, r, t)
    }
    fn put_revoke(&self, c: Uuid, k: &str, r: ReplicaType, t: &str) -> R<()> {
        self.revokes.fetch_add(1, Ordering::SeqCst);
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
        let each = self.inner.batch_put_start(c, k, n, cfg, t)?;
        Ok(each
            .into_iter()
            .map(|r| r.map(|d| self.divert(d)))
            .collect())
    }
    fn batch_put_end(&self, c: Uuid, m: &[ObjectMeta], r: ReplicaType, t: &str) -> Many<()> {
        self.inner.batch_put_end(c, m, r, t)
    }
    fn batch_put_revoke(&self, c: Uuid, k: &[String], r: ReplicaType, t: &str) -> Many<()> {
        self.revokes.fetch_add(k.len(), Ordering::SeqCst);
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
