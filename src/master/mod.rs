//! Mooncake Store's master (spec store.md §2, §3.1): metadata and allocation only, never
//! on the data path. [`MasterService`] implements [`MasterApi`] in process; the RPC
//! server and the admin HTTP service are thin adapters around it.
//!
//! Inside: the shared tables (`tables`: configuration, clock, the sharded object table
//! `objects`, the mounted segments with one range allocator each `segments` and
//! [`allocator`], the replication log, counters), allocation (`allocate`, `placement`),
//! and the sub-services over them, each owning its data in its file: client liveness
//! (`clients`), eviction (`eviction`) and room for writes (`room`), the disk tier
//! (clients' local disks `local_disk`, offload `offload`, promotion `promotion`), reads
//! (`read`), writes and removals (`write`, `remove`), and HA state (`ha::state`). This
//! file composes them; the RPC handlers (`rpc_handlers`, `tier_handlers`) call them.
//! Two background threads, holding only a `Weak` handle: eviction every
//! `eviction_interval` (10 ms) and the client monitor every `client_monitor_interval`
//! (1 s).

pub mod admin;
pub mod admin_runtime;
mod allocate;
pub mod allocator;
mod census;
mod clients;
pub mod config;
mod copies;
mod entries;
mod entry_memory;
mod eviction;
pub mod ha;
mod heat;
pub mod kv_events;
mod leases;
mod local_disk;
pub mod metadata_cleanup;
mod metrics;
mod object;
mod objects;
mod offload;
mod placement;
mod promotion;
mod read;
mod remove;
mod replica;
mod room;
mod rpc_handlers;
pub mod rpc_server;
mod segments;
mod tables;
mod tasks;
pub mod tenant_policy;
mod tenants;
mod tier_handlers;
mod write;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::runtime::stoppable::StoppableThread;
use parking_lot::Mutex;

pub use census::CensusSnapshot;
pub use config::{AllocationStrategy, MasterConfig, MemoryAllocator, MASTER_CONFIG_FLAGS};
pub use local_disk::LocalDiskSummary;
pub use metrics::{MasterMetrics, RpcMetric};
pub use promotion::PromotionMetrics;
pub use segments::SegmentSummary;

use crate::wire::disk_tier_api::{
    DiskTierApi, OffloadTaskItem, PromotionAllocation, PromotionTaskItem, StorageObjectMetadata,
};
use crate::wire::master_api::{
    CopyStartResponse, ErrorCode, GetReplicaListResponse, MasterApi, MasterResult,
    MoveStartResponse, ObjectMeta, PingResponse, QueryTaskResponse, ReplicaDescriptor, ReplicaType,
    ReplicateConfig, Segment, StorageConfig, TaskAssignment, TaskCompleteRequest, Uuid,
};
use crate::wire::master_rpcs::{master_rpcs, trait_method};
use clients::Liveness;
use copies::Copies;
use eviction::Eviction;
use ha::changelog::FollowerHandle;
use ha::mirror::Mirror;
use kv_events::KvEvents;
use metrics::Rpc;
use offload::DiskTier;
use promotion::Promotions;
use read::Reads;
use room::Room;
use tables::Tables;
use write::Writes;

pub use tenants::TenantSnapshot;

/// How often hot keys become copy tasks (upstream's admission thread waits 100 ms);
/// task timeouts are checked once a second (upstream: every 30 s).
const TASK_SWEEP_PERIOD: Duration = Duration::from_millis(100);

/// A background job: thread name, period, tick.
type Job = (&'static str, Duration, fn(&MasterService));

/// The master service: thread-safe, no networking. Create it with
/// [`MasterService::new`]; the background threads stop on [`MasterService::shutdown`]
/// or when the last handle is dropped. It composes the sub-services, each of which
/// owns its data and reads the shared tables.
pub struct MasterService {
    /// The shared tables: configuration, clock, objects, segments, log, counters.
    t: Arc<Tables>,
    /// Clients' local disks, offload tasks and the offload budget.
    disk: Arc<DiskTier>,
    /// Disk-only reads counted towards promotion, and promotions.
    promotions: Arc<Promotions>,
    /// Client liveness.
    liveness: Liveness,
    /// Eviction and zombie cleanup.
    eviction: Arc<Eviction>,
    /// The read path.
    reads: Reads,
    /// The write path and removals.
    writes: Writes,
    /// Copy and move tasks, and the copies they run.
    copies: Copies,
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
        let t = Arc::new(Tables::new(config, kv_events));
        let disk = Arc::new(DiskTier::new(t.clone()));
        let promotions = Arc::new(Promotions::new(t.clone(), disk.clone()));
        let eviction = Arc::new(Eviction::new(t.clone(), disk.clone()));
        let room = Arc::new(Room::new(eviction.clone()));
        let heat = Arc::new(heat::Heat::new(&t.config));
        let svc = Arc::new(MasterService {
            liveness: Liveness::new(t.clone(), disk.clone()),
            reads: Reads::new(t.clone(), promotions.clone(), heat.clone()),
            writes: Writes::new(t.clone(), eviction.clone(), room, disk.clone()),
            copies: Copies::new(
                t.clone(),
                eviction.clone(),
                tasks::Tasks::new(tasks::TaskLimits::of(&t.config)),
                heat,
            ),
            t,
            disk,
            promotions,
            eviction,
            threads: Mutex::new(Vec::new()),
        });
        let mut threads = Vec::new();
        let jobs: [Job; 3] = [
            (
                "mc-master-evict",
                svc.t.config.eviction_interval,
                MasterService::eviction_tick,
            ),
            (
                "mc-master-clients",
                svc.t.config.client_monitor_interval,
                MasterService::client_monitor_tick,
            ),
            (
                "mc-master-tasks",
                TASK_SWEEP_PERIOD,
                MasterService::task_tick,
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
        svc.disk.refill_offload_budget();
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

    /// One tick of the eviction thread.
    fn eviction_tick(&self) {
        self.eviction.tick();
    }

    /// One pass over the copy and move tasks: timeouts, history, stale copy locks.
    fn task_tick(&self) {
        self.copies.tick();
    }

    /// One pass of the client monitor.
    fn client_monitor_tick(&self) {
        self.liveness.monitor_tick();
    }

    /// Sets the view version `Ping` reports (a new HA leader's election revision).
    pub fn set_view_version(&self, version: i64) {
        self.t.view_version.store(version, Ordering::Relaxed);
    }

    /// The configuration in use.
    pub fn config(&self) -> &MasterConfig {
        &self.t.config
    }

    /// The KV-event publisher this service announces to.
    pub fn kv_events(&self) -> &KvEvents {
        &self.t.kv_events
    }

    /// Every mounted segment: name, base, size and bytes in use.
    pub fn segments_summary(&self) -> Vec<SegmentSummary> {
        self.t.segments.summary()
    }

    /// Every mounted local disk, with its offload queue.
    pub fn local_disks_summary(&self) -> Vec<LocalDiskSummary> {
        self.disk.local_disks.summaries()
    }

    /// Removes each expired client's Transfer Engine metadata with `cleanup`
    /// (`--enable_metadata_cleanup_on_timeout`); only the first call has an effect.
    pub fn set_metadata_cleanup(&self, cleanup: Arc<metadata_cleanup::MetadataCleanup>) {
        if self.liveness.metadata_cleanup.set(cleanup).is_err() {
            log::warn!("master: metadata cleanup was already set; keeping the first");
        }
    }

    /// Clients marked OK by a remount and not expired since.
    pub fn active_clients(&self) -> usize {
        self.liveness.clients.ok_count()
    }

    /// Total bytes of mounted segments.
    pub fn total_capacity(&self) -> u64 {
        self.t.segments.total_capacity()
    }

    /// Bytes allocated in mounted segments (including parked zombie buffers).
    pub fn allocated_bytes(&self) -> u64 {
        self.t.segments.allocated_bytes()
    }

    /// Every tenant with a quota policy or a charge; -1011 without multi-tenancy.
    pub fn tenant_quota_snapshots(&self) -> MasterResult<Vec<TenantSnapshot>> {
        if !self.t.tenants.enabled() {
            return Err(tenants::UNAVAILABLE_IN_CURRENT_MODE);
        }
        Ok(self.t.tenants.snapshots(self.t.segments.total_capacity()))
    }

    /// One tenant's quota and charge (see `tenants::Tenants::snapshot`).
    pub fn tenant_quota_snapshot(&self, tenant: &str) -> MasterResult<TenantSnapshot> {
        self.t
            .tenants
            .snapshot(tenant, self.t.segments.total_capacity())
    }

    /// Sets a tenant's requested quota, saving the policy first.
    pub fn set_tenant_quota(&self, tenant: &str, bytes: u64) -> MasterResult<TenantSnapshot> {
        self.t
            .tenants
            .set_quota(tenant, bytes, self.t.segments.total_capacity())
    }

    /// Deletes a tenant's quota policy: -1702 while it still holds objects.
    pub fn delete_tenant_quota(&self, tenant: &str) -> MasterResult<()> {
        self.t.tenants.delete_quota(tenant, || {
            (0..objects::NUM_SHARDS).any(|i| {
                let mut found = false;
                self.t
                    .objects
                    .lock(i)
                    .for_each(|t, _, _| found |= t == tenant);
                found
            })
        })
    }

    /// Starts refused for quota, per tenant.
    pub fn tenant_quota_rejects(&self) -> std::collections::BTreeMap<String, u64> {
        self.t.tenants.rejects()
    }

    /// Bytes evicted to make room within quotas, per tenant.
    pub fn tenant_quota_evicted(&self) -> std::collections::BTreeMap<String, u64> {
        self.t.tenants.evicted()
    }

    /// A snapshot of the per-RPC and eviction counters.
    pub fn metrics(&self) -> MasterMetrics {
        self.t.metrics.snapshot()
    }

    /// Upstream's promotion counters.
    pub fn promotion_metrics(&self) -> PromotionMetrics {
        self.promotions.metrics()
    }

    /// How many objects are soft-pinned, have a COMPLETE memory replica, have a
    /// disk copy.
    pub fn census(&self) -> CensusSnapshot {
        self.t.objects.census()
    }

    /// Runs one eviction pass now with target fraction `ratio` (lower bound half of
    /// it), whatever the watermark says. For tests and admin use.
    pub fn evict_now(&self, ratio: f64) {
        let r = ratio.clamp(0.0, 1.0);
        self.eviction.batch_evict(r, r * 0.5, self.t.now());
    }

    /// Answers requests only until `until` (on the monotonic clock, which runs on while
    /// the process is stopped): an HA leader's fence, moved on by each lease renewal,
    /// so a leader paused past its lease answers nothing once it resumes. A time
    /// already past refuses every request from now on.
    pub fn serve_until(&self, until: Instant) {
        self.t.serve_until(until);
    }

    /// Whether requests are answered now (see [`MasterService::serve_until`]).
    pub fn is_serving(&self) -> bool {
        self.t.is_serving()
    }

    /// Admin `query_key`: the readable replicas of `key` in the default tenant, without
    /// granting a lease. -704 unknown, -703 nothing readable yet.
    pub fn query_key(&self, key: &str) -> MasterResult<Vec<ReplicaDescriptor>> {
        self.reads.query_key(key)
    }

    /// Admin `get_all_keys`: every key of the `default` tenant (every key without
    /// multi-tenancy), sorted, as upstream.
    pub fn all_keys(&self) -> Vec<String> {
        self.reads.all_keys()
    }

    /// Starts an HA term of view `view_version` on the KV-event stream: its own range
    /// of sequence numbers, then `cleared` and a `stored` event for every object held
    /// (see `kv_events`). Called before the term serves anything.
    pub fn announce_term(&self, view_version: i64) {
        let events = &self.t.kv_events;
        if events.enabled() {
            events.start_term(view_version, self.reads.stored_events());
        }
    }

    /// Number of objects (all states, all tenants).
    pub fn key_count(&self) -> usize {
        self.reads.key_count()
    }

    /// A connection of the RPC server carries `client` (it pinged or mounted over it):
    /// a lost client is reachable again.
    pub fn client_connected(&self, client: Uuid) {
        self.liveness.client_connected(client);
    }

    /// A connection that carried `client` ended (`peer_gone`: closed or reset by the
    /// peer, not by this master). When it was the client's last, its segments take no
    /// allocations and serve no reads until it pings again, and it expires after
    /// `DISCONNECT_GRACE` (3 s) unless it does.
    pub fn client_disconnected(&self, client: Uuid, peer_gone: bool) {
        self.liveness.client_disconnected(client, peer_gone);
    }

    /// Attaches a follower: it receives a full dump of segments and objects, then
    /// every change (see `ha::state`).
    pub(crate) fn attach_follower(&self) -> FollowerHandle {
        ha::state::attach_follower(&self.t)
    }

    /// Loads `mirror` into this (empty) service: its segments mounted with the
    /// replicas' buffers allocated where they were, every object with its replicas
    /// (disk copies on their clients' disks, mounted again until those clients expire),
    /// a fresh read lease on each, and the segment owners' liveness clocks started
    /// with `client_ttl` plus `RESTORED_CLIENT_GRACE` (30 s) to find this master.
    /// Replicas whose buffer overlaps another or lies outside its segment are dropped
    /// (an object left with none is not restored). Returns the number of objects.
    pub fn restore(&self, mirror: &Mirror) -> usize {
        ha::state::restore(
            &self.t,
            &self.liveness.clients,
            &self.disk.local_disks,
            mirror,
        )
    }

    fn counted<T>(&self, rpc: Rpc, r: MasterResult<T>) -> MasterResult<T> {
        self.t.metrics.record(rpc, r.is_ok());
        r
    }

    fn counted_batch<T>(
        &self,
        rpc: Rpc,
        v: Vec<MasterResult<T>>,
    ) -> MasterResult<Vec<MasterResult<T>>> {
        let failed = v.iter().filter(|r| r.is_err()).count() as u64;
        self.t.metrics.record_batch(rpc, v.len() as u64, failed);
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

/// One row of the RPC table as the counting wrapper around its handler: the
/// `master_<rpc>_requests_total` / `_failures_total` counters (a batch call counts
/// once, with its items in `_items_total` / `_failed_items_total`; a batch that failed
/// as a whole counts as one failure).
macro_rules! counted_row {
    ($handlers:ident, { $(#[$doc:meta])* $m:ident: $args:ty => $wret:ty;
       [$kind:ident $($count:ident)? $(, $default:ident)?]
       fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; }) => {
        fn $name(&self $(, $arg: $ty)*) -> $ret {
            let r = <Self as $handlers>::$name(self $(, $arg)*);
            counted_row!(@$kind self, $m, r)
        }
    };
    (@batch $self:ident, $m:ident, $r:ident) => {
        match $r {
            Ok(v) => $self.counted_batch(Rpc::$m, v),
            Err(e) => $self.counted(Rpc::$m, Err(e)),
        }
    };
    (@$kind:ident $self:ident, $m:ident, $r:ident) => {
        $self.counted(Rpc::$m, $r)
    };
}

/// The service's half of the RPC table: the handler traits (the RPCs as served,
/// implemented in `rpc_handlers` and `offload`) and the counting [`MasterApi`] and
/// [`DiskTierApi`] around them.
macro_rules! counted_api {
    (all [$($all:tt)*] master [$($master:tt)*] tier [$($tier:tt)*]) => {
        /// The master RPCs as served, before counting.
        trait MasterHandlers {
            $(trait_method!($master);)*
        }

        /// The disk-tier RPCs as served, before counting.
        trait DiskTierHandlers {
            $(trait_method!($tier);)*
        }

        impl MasterApi for MasterService {
            /// Waits until what this thread's requests changed is held by every standby
            /// in sync and the snapshot (see `ha::changelog`).
            fn before_reply(&self) {
                self.t.log.wait_durable();
            }

            fn serving(&self) -> bool {
                self.is_serving()
            }

            fn disk_tier(&self) -> Option<&dyn DiskTierApi> {
                Some(self)
            }

            $(counted_row!(MasterHandlers, $master);)*
        }

        impl DiskTierApi for MasterService {
            $(counted_row!(DiskTierHandlers, $tier);)*
        }
    };
}

master_rpcs!(counted_api);
