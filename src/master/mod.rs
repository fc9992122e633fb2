//! Mooncake Store's master (spec store.md §2, §3.1): metadata and allocation only, never
//! on the data path. [`MasterService`] implements [`MasterApi`] in process; the RPC
//! server and the admin HTTP service are thin adapters around it.
//!
//! Inside: a sharded object table (`objects`), the mounted segments with one range
//! allocator each (`segments`, [`allocator`]), replica placement (`placement`),
//! client liveness (`clients`), eviction (`eviction`), and the disk tier: clients'
//! local disks (`local_disk`), offload (`offload`) and promotion (`promotion`). Two background threads,
//! holding only a `Weak` handle: eviction every `eviction_interval` (10 ms) and the
//! client monitor every `client_monitor_interval` (1 s).

pub mod admin;
pub mod allocator;
mod clients;
pub mod config;
mod eviction;
pub mod ha;
pub mod kv_events;
mod local_disk;
mod metrics;
mod objects;
mod offload;
mod placement;
mod promotion;
mod read;
mod remove;
mod room;
pub mod rpc_server;
mod segments;
mod write;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::runtime::stoppable::StoppableThread;
use parking_lot::Mutex;

pub use config::{AllocationStrategy, MasterConfig, MemoryAllocator, MASTER_CONFIG_FLAGS};
pub use local_disk::LocalDiskSummary;
pub use metrics::{MasterMetrics, RpcMetric};
pub use segments::SegmentSummary;

use crate::wire::disk_tier_api::DiskTierApi;
use crate::wire::master_api::{
    ClientStatus, ErrorCode, GetReplicaListResponse, MasterApi, MasterResult, ObjectMeta,
    PingResponse, ReplicaDescriptor, ReplicaType, ReplicateConfig, Segment, StorageConfig,
    TaskAssignment, Uuid, DEFAULT_TENANT, SERVICE_VERSION,
};
use kv_events::KvEvents;
use metrics::{Metrics, Rpc};
use objects::ObjectTable;
use segments::{Buffer, Segments};

/// A background job: thread name, period, tick.
type Job = (&'static str, Duration, fn(&MasterService));

fn dur_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn dur_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The master service: thread-safe, no networking. Create it with
/// [`MasterService::new`]; the background threads stop on [`MasterService::shutdown`]
/// or when the last handle is dropped.
pub struct MasterService {
    config: MasterConfig,
    start: Instant,
    objects: ObjectTable,
    segments: Segments,
    /// Clients' local disks and the offload tasks queued for them.
    local_disks: local_disk::LocalDisks,
    /// Disk-only reads counted towards promotion.
    promotion_hits: promotion::HitCounts,
    clients: clients::Clients,
    discarded: Mutex<Vec<(Vec<Buffer>, u64)>>,
    need_eviction: AtomicBool,
    room: Mutex<room::RoomQueue>,
    evict_backoff_until: AtomicU64,
    /// Offload tasks the current eviction run may still queue.
    offload_budget: AtomicU64,
    last_discard: AtomicU64,
    next_replica_id: AtomicU64,
    /// Changes replicated to standbys and the snapshot (see `ha`).
    log: Arc<ha::changelog::ReplicationLog>,
    /// The HA view version `Ping` reports (the etcd revision of the leader's election).
    view_version: AtomicI64,
    /// Until when (ns on [`MasterService::now`]'s clock) requests are answered:
    /// `u64::MAX` unless an HA leader's lease bounds it ([`MasterService::serve_until`]).
    serve_until: AtomicU64,
    /// Where `stored` / `removed` events go (disabled unless the binary started one).
    kv_events: Arc<KvEvents>,
    metrics: Metrics,
    lease_ns: u64,
    lease_ms: u64,
    discard_ns: u64,
    release_ns: u64,
    client_ttl_ns: u64,
    default_pin_ms: u64,
    max_pin_ms: u64,
    threads: Mutex<Vec<StoppableThread>>,
}

impl MasterService {
    /// Builds the service and starts its eviction and client-liveness threads. An
    /// inconsistent `config` (see [`MasterConfig::validate`]) is logged and used as is.
    pub fn new(config: MasterConfig) -> Arc<MasterService> {
        MasterService::with_kv_events(config, Arc::new(KvEvents::disabled()))
    }

    /// [`MasterService::new`], announcing stored and removed objects to `kv_events`.
    pub fn with_kv_events(config: MasterConfig, kv_events: Arc<KvEvents>) -> Arc<MasterService> {
        if let Err(e) = config.validate() {
            log::warn!("master config: {e}");
        }
        let start = Instant::now();
        let log = Arc::new(ha::changelog::ReplicationLog::new(config.ha_sync_timeout));
        let svc = Arc::new(MasterService {
            objects: ObjectTable::new(log.clone(), start),
            segments: Segments::with_log(
                config.memory_allocator == MemoryAllocator::Cachelib,
                log.clone(),
            ),
            log,
            local_disks: local_disk::LocalDisks::new(
                config.offloading_queue_limit,
                config.promotion_queue_limit,
            ),
            promotion_hits: promotion::HitCounts::default(),
            clients: clients::Clients::new(),
            discarded: Mutex::new(Vec::new()),
            need_eviction: AtomicBool::new(false),
            room: Mutex::new(room::RoomQueue::default()),
            evict_backoff_until: AtomicU64::new(0),
            offload_budget: AtomicU64::new(0),
            last_discard: AtomicU64::new(0),
            next_replica_id: AtomicU64::new(1),
            view_version: AtomicI64::new(config.view_version),
            serve_until: AtomicU64::new(u64::MAX),
            kv_events,
            metrics: Metrics::default(),
            lease_ns: dur_ns(config.default_kv_lease_ttl),
            lease_ms: dur_ms(config.default_kv_lease_ttl),
            discard_ns: dur_ns(config.put_start_discard_timeout_sec),
            release_ns: dur_ns(config.put_start_release_timeout_sec),
            client_ttl_ns: dur_ns(config.client_ttl),
            default_pin_ms: dur_ms(config.default_kv_soft_pin_ttl),
            max_pin_ms: dur_ms(config.max_kv_soft_pin_ttl),
            start,
            threads: Mutex::new(Vec::new()),
            config,
        });
        let mut threads = Vec::new();
        let jobs: [Job; 2] = [
            (
                "mc-master-evict",
                svc.config.eviction_interval,
                MasterService::eviction_tick,
            ),
            (
                "mc-master-clients",
                svc.config.client_monitor_interval,
                MasterService::client_monitor_tick,
            ),
        ];
        for (name, period, tick) in jobs {
            let weak: Weak<MasterService> = Arc::downgrade(&svc);
            let period = period.max(Duration::from_millis(1));
            let spawned = StoppableThread::spawn(name, move |signal| {
                while signal.wait(period) {
                    let Some(svc) = weak.upgrade() else { break };
                    tick(&svc);
                }
            });
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => log::error!("cannot start master thread {name}: {e}"),
            }
        }
        svc.refill_offload_budget();
        *svc.threads.lock() = threads;
        svc
    }

    /// Stops and joins the background threads (idempotent). RPCs keep working, but
    /// nothing is evicted and no client expires afterwards.
    pub fn shutdown(&self) {
        let threads = std::mem::take(&mut *self.threads.lock());
        for mut t in threads {
            t.stop();
        }
    }

    /// Sets the view version `Ping` reports (a new HA leader's election revision).
    pub fn set_view_version(&self, version: i64) {
        self.view_version.store(version, Ordering::Relaxed);
    }

    /// The configuration in use.
    pub fn config(&self) -> &MasterConfig {
        &self.config
    }

    /// The KV-event publisher this service announces to.
    pub fn kv_events(&self) -> &KvEvents {
        &self.kv_events
    }

    /// Every mounted segment: name, base, size and bytes in use.
    pub fn segments_summary(&self) -> Vec<SegmentSummary> {
        self.segments.summary()
    }

    /// Every mounted local disk, with its offload queue.
    pub fn local_disks_summary(&self) -> Vec<LocalDiskSummary> {
        self.local_disks.summaries()
    }

    /// Clients marked OK by a remount and not expired since.
    pub fn active_clients(&self) -> usize {
        self.clients.ok_count()
    }

    /// Total bytes of mounted segments.
    pub fn total_capacity(&self) -> u64 {
        self.segments.total_capacity()
    }

    /// Bytes allocated in mounted segments (including parked zombie buffers).
    pub fn allocated_bytes(&self) -> u64 {
        self.segments.allocated_bytes()
    }

    /// A snapshot of the per-RPC and eviction counters.
    pub fn metrics(&self) -> MasterMetrics {
        self.metrics.snapshot()
    }

    /// Runs one eviction pass now with target fraction `ratio` (lower bound half of
    /// it), whatever the watermark says. For tests and admin use.
    pub fn evict_now(&self, ratio: f64) {
        let r = ratio.clamp(0.0, 1.0);
        self.batch_evict(r, r * 0.5, self.now());
    }

    /// Nanoseconds since the service started (lease 0 = never read).
    fn now(&self) -> u64 {
        dur_ns(self.start.elapsed()).max(1)
    }

    /// Answers requests only until `until` (on the monotonic clock, which runs on while
    /// the process is stopped): an HA leader's fence, moved on by each lease renewal,
    /// so a leader paused past its lease answers nothing once it resumes. A time
    /// already past refuses every request from now on.
    pub fn serve_until(&self, until: Instant) {
        let ns = dur_ns(until.saturating_duration_since(self.start));
        self.serve_until.store(ns, Ordering::SeqCst);
    }

    /// Whether requests are answered now (see [`MasterService::serve_until`]).
    pub fn is_serving(&self) -> bool {
        self.now() < self.serve_until.load(Ordering::SeqCst)
    }

    /// The tenant a request applies to: `default` unless multi-tenancy is on.
    fn tenant<'a>(&self, tenant: &'a str) -> &'a str {
        if !self.config.enable_multi_tenants || tenant.is_empty() {
            DEFAULT_TENANT
        } else {
            tenant
        }
    }

    fn counted<T>(&self, rpc: Rpc, r: MasterResult<T>) -> MasterResult<T> {
        self.metrics.record(rpc, r.is_ok());
        r
    }

    fn counted_batch<T>(
        &self,
        rpc: Rpc,
        v: Vec<MasterResult<T>>,
    ) -> MasterResult<Vec<MasterResult<T>>> {
        let failed = v.iter().filter(|r| r.is_err()).count() as u64;
        self.metrics.record_n(rpc, v.len() as u64, failed);
        Ok(v)
    }
}

impl Drop for MasterService {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl rpc_server::ConnectionEvents for MasterService {
    fn client_connected(&self, client: Uuid) {
        MasterService::client_connected(self, client);
    }

    fn client_disconnected(&self, client: Uuid, peer_gone: bool) {
        MasterService::client_disconnected(self, client, peer_gone);
    }
}

impl MasterApi for MasterService {
    /// Waits until what this thread's requests changed is held by every standby in
    /// sync and the snapshot (see `ha::changelog`).
    fn before_reply(&self) {
        self.log.wait_durable();
    }

    fn serving(&self) -> bool {
        self.is_serving()
    }

    fn disk_tier(&self) -> Option<&dyn DiskTierApi> {
        Some(self)
    }

    fn service_ready(&self) -> MasterResult<String> {
        self.counted(Rpc::ServiceReady, Ok(SERVICE_VERSION.to_string()))
    }

    fn get_storage_config(&self) -> MasterResult<StorageConfig> {
        let cfg = StorageConfig {
            fsdir: String::new(),
            enable_disk_eviction: true,
            quota_bytes: 0,
        };
        self.counted(Rpc::GetStorageConfig, Ok(cfg))
    }

    fn get_fsdir(&self) -> MasterResult<String> {
        self.counted(Rpc::GetFsdir, Ok(String::new()))
    }

    fn mount_segment(&self, segment: &Segment, client: Uuid) -> MasterResult<()> {
        self.clients.touch(client, self.now(), self.client_ttl_ns);
        let r = self.segments.mount(segment, client);
        self.counted(Rpc::MountSegment, r)
    }

    fn remount_segment(&self, segments: &[Segment], client: Uuid) -> MasterResult<()> {
        let r = (|| {
            // Start (or restart) the client's liveness clock, as a mount does: a client
            // that remounts and dies before its next ping must still expire.
            self.clients.touch(client, self.now(), self.client_ttl_ns);
            for s in segments {
                self.segments.validate_remount(s, client)?;
            }
            for s in segments {
                match self.segments.mount(s, client) {
                    Ok(()) | Err(ErrorCode::INVALID_PARAMS) => {}
                    Err(e) => return Err(e),
                }
            }
            self.clients.mark_ok(client);
            Ok(())
        })();
        self.counted(Rpc::ReMountSegment, r)
    }

    fn unmount_segment(&self, segment_id: Uuid, _client: Uuid) -> MasterResult<()> {
        if self.segments.unmount(segment_id).is_some() {
            self.sweep_dead_replicas();
        }
        self.counted(Rpc::UnmountSegment, Ok(()))
    }

    fn graceful_unmount_segment(
        &self,
        segment_id: Uuid,
        client: Uuid,
        grace_ms: u64,
    ) -> MasterResult<()> {
        let deadline = self
            .now()
            .saturating_add(grace_ms.saturating_mul(1_000_000));
        let r = self
            .segments
            .begin_graceful_unmount(segment_id, client, deadline);
        self.counted(Rpc::GracefulUnmountSegment, r)
    }

    fn ping(&self, client: Uuid) -> MasterResult<PingResponse> {
        let status: ClientStatus = self.clients.ping(client, self.now(), self.client_ttl_ns);
        let r = PingResponse {
            view_version_id: self.view_version.load(Ordering::Relaxed),
            client_status: status,
        };
        self.counted(Rpc::Ping, Ok(r))
    }

    fn fetch_tasks(&self, _client: Uuid, _batch_size: u64) -> MasterResult<Vec<TaskAssignment>> {
        self.counted(Rpc::FetchTasks, Ok(Vec::new()))
    }

    fn exist_key(&self, key: &str, tenant: &str) -> MasterResult<bool> {
        let r = self.exist_one(key, tenant);
        self.counted(Rpc::ExistKey, r)
    }

    fn batch_exist_key(
        &self,
        keys: &[String],
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<bool>>> {
        let v = keys.iter().map(|k| self.exist_one(k, tenant)).collect();
        self.counted_batch(Rpc::BatchExistKey, v)
    }

    fn get_replica_list(&self, key: &str, tenant: &str) -> MasterResult<GetReplicaListResponse> {
        let r = self.get_replica_list_one(key, tenant);
        self.counted(Rpc::GetReplicaList, r)
    }

    fn batch_get_replica_list(
        &self,
        keys: &[String],
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<GetReplicaListResponse>>> {
        let v = keys
            .iter()
            .map(|k| self.get_replica_list_one(k, tenant))
            .collect();
        self.counted_batch(Rpc::BatchGetReplicaList, v)
    }

    fn get_replica_list_by_regex(
        &self,
        regex: &str,
        tenant: &str,
    ) -> MasterResult<Vec<(String, Vec<ReplicaDescriptor>)>> {
        let r = self.get_replica_list_by_regex_impl(regex, tenant);
        self.counted(Rpc::GetReplicaListByRegex, r)
    }

    fn batch_begin_read(
        &self,
        keys: &[String],
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<GetReplicaListResponse>>> {
        let v = keys
            .iter()
            .map(|k| self.begin_read_one(k, tenant))
            .collect();
        self.counted_batch(Rpc::BatchBeginRead, v)
    }

    fn batch_end_read(
        &self,
        keys: &[String],
        replica_ids: &[u64],
        tenant: &str,
    ) -> MasterResult<()> {
        let r = if keys.len() == replica_ids.len() {
            for (k, id) in keys.iter().zip(replica_ids) {
                self.end_read_one(k, *id, tenant);
            }
            Ok(())
        } else {
            Err(ErrorCode::INVALID_PARAMS)
        };
        self.counted(Rpc::BatchEndRead, r)
    }

    fn put_start(
        &self,
        client: Uuid,
        key: &str,
        len: u64,
        config: &ReplicateConfig,
        tenant: &str,
    ) -> MasterResult<Vec<ReplicaDescriptor>> {
        let r = self.put_start_one(client, key, len, config, tenant);
        self.counted(Rpc::PutStart, r)
    }

    fn put_end(
        &self,
        client: Uuid,
        meta: &ObjectMeta,
        kind: ReplicaType,
        tenant: &str,
    ) -> MasterResult<()> {
        let r = self.put_end_one(client, meta, kind, tenant);
        self.counted(Rpc::PutEnd, r)
    }

    fn put_revoke(
        &self,
        client: Uuid,
        key: &str,
        kind: ReplicaType,
        tenant: &str,
    ) -> MasterResult<()> {
        let r = self.put_revoke_one(client, key, kind, tenant);
        self.counted(Rpc::PutRevoke, r)
    }

    fn batch_put_start(
        &self,
        client: Uuid,
        keys: &[String],
        lens: &[u64],
        config: &ReplicateConfig,
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<Vec<ReplicaDescriptor>>>> {
        let v = self.batch_start(keys, lens, config, false, |k, l, c| {
            self.put_start_one(client, k, l, c, tenant)
        });
        self.counted_batch(Rpc::BatchPutStart, v)
    }

    fn batch_put_end(
        &self,
        client: Uuid,
        metas: &[ObjectMeta],
        kind: ReplicaType,
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        let v = metas
            .iter()
            .map(|m| self.put_end_one(client, m, kind, tenant))
            .collect();
        self.counted_batch(Rpc::BatchPutEnd, v)
    }

    fn batch_put_revoke(
        &self,
        client: Uuid,
        keys: &[String],
        kind: ReplicaType,
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        let v = keys
            .iter()
            .map(|k| self.put_revoke_one(client, k, kind, tenant))
            .collect();
        self.counted_batch(Rpc::BatchPutRevoke, v)
    }

    fn upsert_start(
        &self,
        client: Uuid,
        key: &str,
        len: u64,
        config: &ReplicateConfig,
        tenant: &str,
    ) -> MasterResult<Vec<ReplicaDescriptor>> {
        let r = self.upsert_start_one(client, key, len, config, tenant);
        self.counted(Rpc::UpsertStart, r)
    }

    fn upsert_end(
        &self,
        client: Uuid,
        meta: &ObjectMeta,
        kind: ReplicaType,
        tenant: &str,
    ) -> MasterResult<()> {
        let r = self.put_end_one(client, meta, kind, tenant);
        self.counted(Rpc::UpsertEnd, r)
    }

    fn upsert_revoke(
        &self,
        client: Uuid,
        key: &str,
        kind: ReplicaType,
        tenant: &str,
    ) -> MasterResult<()> {
        let r = self.put_revoke_one(client, key, kind, tenant);
        self.counted(Rpc::UpsertRevoke, r)
    }

    fn batch_upsert_start(
        &self,
        client: Uuid,
        keys: &[String],
        lens: &[u64],
        config: &ReplicateConfig,
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<Vec<ReplicaDescriptor>>>> {
        let v = self.batch_start(keys, lens, config, true, |k, l, c| {
            self.upsert_start_one(client, k, l, c, tenant)
        });
        self.counted_batch(Rpc::BatchUpsertStart, v)
    }

    fn batch_upsert_end(
        &self,
        client: Uuid,
        metas: &[ObjectMeta],
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        let v = metas
            .iter()
            .map(|m| self.put_end_one(client, m, ReplicaType::All, tenant))
            .collect();
        self.counted_batch(Rpc::BatchUpsertEnd, v)
    }

    fn batch_upsert_revoke(
        &self,
        client: Uuid,
        keys: &[String],
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        let v = keys
            .iter()
            .map(|k| self.put_revoke_one(client, k, ReplicaType::All, tenant))
            .collect();
        self.counted_batch(Rpc::BatchUpsertRevoke, v)
    }

    fn remove(&self, key: &str, force: bool, tenant: &str) -> MasterResult<()> {
        let r = self.remove_one(key, force, tenant, true);
        self.counted(Rpc::Remove, r)
    }

    fn remove_by_regex(&self, regex: &str, force: bool, tenant: &str) -> MasterResult<i64> {
        let r = self.remove_by_regex_impl(regex, force, tenant);
        self.counted(Rpc::RemoveByRegex, r)
    }

    fn remove_all(&self, force: bool, tenant: &str) -> MasterResult<i64> {
        let n = self.remove_all_impl(force, tenant);
        self.counted(Rpc::RemoveAll, Ok(n))
    }

    fn batch_remove(
        &self,
        keys: &[String],
        force: bool,
        tenant: &str,
    ) -> MasterResult<Vec<MasterResult<()>>> {
        // Upstream's BatchRemove announces nothing (spec tiers-events-conductor.md §2.5).
        let v = keys
            .iter()
            .map(|k| self.remove_one(k, force, tenant, false))
            .collect();
        self.counted_batch(Rpc::BatchRemove, v)
    }

    fn batch_query_ip(&self, clients: &[Uuid]) -> MasterResult<Vec<(Uuid, Vec<String>)>> {
        let v = self.batch_query_ip_impl(clients);
        self.counted(Rpc::BatchQueryIp, Ok(v))
    }

    fn batch_replica_clear(
        &self,
        keys: &[String],
        client: Uuid,
        segment_name: &str,
    ) -> MasterResult<Vec<String>> {
        let v = self.batch_replica_clear_impl(keys, client, segment_name);
        self.counted(Rpc::BatchReplicaClear, Ok(v))
    }
}
