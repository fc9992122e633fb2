//! The tables every sub-service of the master reads: the configuration and its
//! timings, the clock, the object table, the mounted segments, the replication log,
//! the KV-event publisher and the counters. Each sub-service holds an `Arc` of them
//! and owns only its own data.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::config::{MasterConfig, MemoryAllocator};
use super::ha::changelog::ReplicationLog;
use super::kv_events::{KvEvents, Medium};
use super::metrics::Metrics;
use super::objects::{ObjectTable, NUM_SHARDS};
use super::segments::Segments;
use super::tenants::Tenants;
use crate::wire::master_api::MasterResult;

/// `d` in nanoseconds, saturated.
pub(super) fn dur_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `d` in milliseconds, saturated.
fn dur_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The shared tables and settings of one master.
pub(super) struct Tables {
    /// The configuration in use.
    pub config: MasterConfig,
    /// The clock's origin.
    start: Instant,
    /// The sharded object table.
    pub objects: ObjectTable,
    /// Tenants: names checked, charges, quotas.
    pub tenants: Tenants,
    /// The mounted segments and their allocators.
    pub segments: Segments,
    /// Changes replicated to standbys and the snapshot (see `ha`).
    pub log: Arc<ReplicationLog>,
    /// The HA view version `Ping` reports (the etcd revision of the leader's election).
    pub view_version: AtomicI64,
    /// Until when (ns on [`Tables::now`]'s clock) requests are answered: `u64::MAX`
    /// unless an HA leader's lease bounds it.
    serve_until: AtomicU64,
    /// Where `stored` / `removed` events go (disabled unless the binary started one).
    pub kv_events: Arc<KvEvents>,
    /// The per-RPC and eviction counters.
    pub metrics: Metrics,
    /// Set by an allocation that found no room, cleared by an eviction run.
    pub need_eviction: AtomicBool,
    /// The next replica id handed out.
    next_replica_id: AtomicU64,
    /// `default_kv_lease_ttl` (ns).
    pub lease_ns: u64,
    /// `default_kv_lease_ttl` (ms), as readers are told.
    pub lease_ms: u64,
    /// `put_start_discard_timeout_sec` (ns): when a stale put may be preempted.
    pub discard_ns: u64,
    /// `put_start_release_timeout_sec` (ns): when a stale put's buffers are freed.
    pub release_ns: u64,
    /// `client_ttl` (ns).
    pub client_ttl_ns: u64,
    /// `default_kv_soft_pin_ttl` (ms).
    pub default_pin_ms: u64,
    /// `max_kv_soft_pin_ttl` (ms).
    pub max_pin_ms: u64,
}

impl Tables {
    /// Empty tables for `config`, announcing to `kv_events`.
    pub fn new(config: MasterConfig, kv_events: Arc<KvEvents>) -> Tables {
        let start = Instant::now();
        let log = Arc::new(ReplicationLog::new(config.ha_sync_timeout));
        let tenants = Tenants::new(&config);
        let charges = tenants.enabled().then(|| tenants.charges.clone());
        Tables {
            objects: ObjectTable::new(log.clone(), charges, start),
            tenants,
            segments: Segments::with_log(
                config.memory_allocator == MemoryAllocator::Cachelib,
                log.clone(),
            ),
            log,
            view_version: AtomicI64::new(config.view_version),
            serve_until: AtomicU64::new(u64::MAX),
            kv_events,
            metrics: Metrics::default(),
            need_eviction: AtomicBool::new(false),
            next_replica_id: AtomicU64::new(1),
            lease_ns: dur_ns(config.default_kv_lease_ttl),
            lease_ms: dur_ms(config.default_kv_lease_ttl),
            discard_ns: dur_ns(config.put_start_discard_timeout_sec),
            release_ns: dur_ns(config.put_start_release_timeout_sec),
            client_ttl_ns: dur_ns(config.client_ttl),
            default_pin_ms: dur_ms(config.default_kv_soft_pin_ttl),
            max_pin_ms: dur_ms(config.max_kv_soft_pin_ttl),
            start,
            config,
        }
    }

    /// Nanoseconds since the service started (lease 0 = never read).
    pub fn now(&self) -> u64 {
        dur_ns(self.start.elapsed()).max(1)
    }

    /// Answers requests only until `until` (see `MasterService::serve_until`).
    pub fn serve_until(&self, until: Instant) {
        let ns = dur_ns(until.saturating_duration_since(self.start));
        self.serve_until.store(ns, Ordering::SeqCst);
    }

    /// Whether requests are answered now.
    pub fn is_serving(&self) -> bool {
        let until = self.serve_until.load(Ordering::SeqCst);
        // Without a lease (no HA) there is no clock to read.
        until == u64::MAX || self.now() < until
    }

    /// The tenant a read or an end applies to (see [`Tenants::read`]).
    pub fn read_tenant<'a>(&self, tenant: &'a str) -> MasterResult<&'a str> {
        self.tenants.read(tenant)
    }

    /// The tenant a start applies to (see [`Tenants::write`]).
    pub fn write_tenant<'a>(&self, tenant: &'a str) -> MasterResult<&'a str> {
        self.tenants.write(tenant)
    }

    /// A fresh replica id.
    pub fn next_replica_id(&self) -> u64 {
        self.next_replica_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Makes every id up to `max_id` taken (after a restore).
    pub fn replica_ids_above(&self, max_id: u64) {
        self.next_replica_id
            .fetch_max(max_id + 1, Ordering::Relaxed);
    }

    /// Publishes that (tenant, key) is gone; called under its shard lock, so a key's
    /// events keep the order of its changes. Every replica this master holds is a
    /// memory replica, so the medium is `cpu` (upstream's `MediumForMetadata`, which
    /// also says `cpu` for an object left with no replica at all).
    pub fn announce_removed(&self, tenant: &str, key: &str, group: &str) {
        self.kv_events.removed(key, Medium::Cpu, tenant, group);
    }

    /// Drops every replica whose segment or disk is no longer mounted; objects left
    /// without replicas are erased (upstream `ClearInvalidHandles`).
    pub fn sweep_dead_replicas(&self) {
        let mut freed = Vec::new();
        for i in 0..NUM_SHARDS {
            let mut shard = self.objects.lock(i);
            shard.retain(
                None,
                |_, _, obj| {
                    if obj.replicas.iter().any(|r| !r.seg.is_alive()) {
                        obj.replicas.retain(|r| r.seg.is_alive());
                    }
                    if obj.disk_replicas().iter().any(|r| !r.disk.is_alive()) {
                        obj.drop_disk_replicas(|r| !r.disk.is_alive());
                    }
                    !obj.is_empty()
                },
                &mut freed,
            );
        }
        // Replicas of erased objects on live segments (none here by construction, but
        // keep the accounting exact).
        self.segments.release(freed);
    }
}
