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

use crate::wire::disk_tier_api::{
    DiskTierApi, OffloadTaskItem, PromotionAllocation, PromotionTaskItem, StorageObjectMetadata,
};
use crate::wire::master_api::{
    ErrorCode, GetReplicaListResponse, MasterApi, MasterResult, ObjectMeta, PingResponse,
    ReplicaDescriptor, ReplicaType, ReplicateConfig, Segment, StorageConfig, TaskAssignment, Uuid,
    DEFAULT_TENANT,
};
use crate::wire::master_rpcs::{master_rpcs, trait_method};
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

/// One row of the RPC table as the counting wrapper around its handler: the
/// `master_<rpc>_requests_total` / `_failures_total` counters (a batch counts each
/// input; a batch that failed as a whole counts once).
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
                self.log.wait_durable();
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
