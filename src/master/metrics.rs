//! Per-RPC request/failure counters and eviction counters (spec store.md §3.7,
//! `master_<rpc>_requests_total` / `_failures_total`). Plain relaxed atomics: reading
//! them is cheap and never blocks an RPC.

use std::sync::atomic::{AtomicU64, Ordering};

/// The master RPCs, counted by their position in `Method::ALL`.
pub(crate) use crate::wire::coro_rpc::Method as Rpc;

/// How many RPCs are counted.
const RPC_COUNT: usize = Rpc::ALL.len();

/// Upper bounds of upstream's `master_value_size_bytes` buckets (4 KiB to 64 MiB);
/// a last bucket takes the rest.
pub const VALUE_SIZE_BOUNDS: [u64; 7] = [
    4096, 65536, 262_144, 1_048_576, 4_194_304, 16_777_216, 67_108_864,
];

/// Counters of one RPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcMetric {
    /// Upstream method name, e.g. `"PutStart"`.
    pub name: &'static str,
    /// Requests served (a batch call counts once).
    pub requests: u64,
    /// Requests that returned an error (a batch: every item failed, or the call did).
    pub failures: u64,
    /// Batch calls where some items failed and some did not.
    pub partial_successes: u64,
    /// Items of batch calls.
    pub items: u64,
    /// Items of batch calls that failed.
    pub failed_items: u64,
}

/// A snapshot of the master's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterMetrics {
    /// One entry per RPC, in a fixed order.
    pub rpcs: Vec<RpcMetric>,
    /// Eviction runs (triggered by the watermark or an allocation failure).
    pub eviction_runs: u64,
    /// Eviction runs that evicted or released something.
    pub successful_evictions: u64,
    /// Objects evicted in total.
    pub evicted_objects: u64,
    /// Bytes of memory replicas freed by eviction.
    pub evicted_bytes: u64,
    /// Puts whose buffers were discarded (preempted or expired while processing).
    pub put_start_discards: u64,
    /// Discarded puts whose buffers were released.
    pub put_start_releases: u64,
    /// Bytes held by discarded puts not yet released.
    pub discarded_staging_bytes: u64,
    /// PutStart/UpsertStart calls that failed because no replica could be placed
    /// (after making room).
    pub put_start_alloc_failures: u64,
    /// PutStart/UpsertStart calls placed on fewer replicas than asked (best effort).
    pub put_start_partial_allocations: u64,
    /// GetReplicaList calls (and tracked reads), found or not.
    pub gets: u64,
    /// Of those, the ones that returned a replica.
    pub valid_gets: u64,
    /// Valid gets whose first replica was in memory, and their value bytes.
    pub memory_hits: u64,
    /// Value bytes of [`MasterMetrics::memory_hits`].
    pub memory_hit_bytes: u64,
    /// Valid gets whose first replica was on a disk tier.
    pub disk_hits: u64,
    /// Value bytes of [`MasterMetrics::disk_hits`].
    pub disk_hit_bytes: u64,
    /// Objects created by puts per value-size bucket ([`VALUE_SIZE_BOUNDS`], then
    /// larger), not cumulative.
    pub value_sizes: [u64; VALUE_SIZE_BOUNDS.len() + 1],
    /// Sum of the value sizes counted in `value_sizes`.
    pub value_size_sum: u64,
    /// Times a write evicted to make room for itself.
    pub room_evictions: u64,
    /// Offload tasks queued for clients' local disks.
    pub offload_queued: u64,
    /// Disk copies registered from clients' reports.
    pub offloaded: u64,
    /// Objects whose memory replicas were evicted while a disk copy kept them.
    pub evicted_to_disk: u64,
}

impl MasterMetrics {
    /// The counters of RPC `name`, if it is one.
    pub fn rpc(&self, name: &str) -> Option<RpcMetric> {
        self.rpcs.iter().copied().find(|r| r.name == name)
    }
}

/// The live counters.
pub(crate) struct Metrics {
    requests: [AtomicU64; RPC_COUNT],
    failures: [AtomicU64; RPC_COUNT],
    partial_successes: [AtomicU64; RPC_COUNT],
    items: [AtomicU64; RPC_COUNT],
    failed_items: [AtomicU64; RPC_COUNT],
    pub eviction_runs: AtomicU64,
    pub successful_evictions: AtomicU64,
    pub evicted_objects: AtomicU64,
    pub evicted_bytes: AtomicU64,
    pub put_start_discards: AtomicU64,
    pub put_start_releases: AtomicU64,
    pub discarded_staging_bytes: AtomicU64,
    pub put_start_alloc_failures: AtomicU64,
    pub put_start_partial_allocations: AtomicU64,
    pub gets: AtomicU64,
    pub valid_gets: AtomicU64,
    pub memory_hits: AtomicU64,
    pub memory_hit_bytes: AtomicU64,
    pub disk_hits: AtomicU64,
    pub disk_hit_bytes: AtomicU64,
    value_sizes: [AtomicU64; VALUE_SIZE_BOUNDS.len() + 1],
    value_size_sum: AtomicU64,
    pub room_evictions: AtomicU64,
    pub offload_queued: AtomicU64,
    pub offloaded: AtomicU64,
    pub evicted_to_disk: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let zeros = || std::array::from_fn(|_| AtomicU64::new(0));
        Metrics {
            requests: zeros(),
            failures: zeros(),
            partial_successes: zeros(),
            items: zeros(),
            failed_items: zeros(),
            eviction_runs: AtomicU64::new(0),
            successful_evictions: AtomicU64::new(0),
            evicted_objects: AtomicU64::new(0),
            evicted_bytes: AtomicU64::new(0),
            put_start_discards: AtomicU64::new(0),
            put_start_releases: AtomicU64::new(0),
            discarded_staging_bytes: AtomicU64::new(0),
            put_start_alloc_failures: AtomicU64::new(0),
            put_start_partial_allocations: AtomicU64::new(0),
            gets: AtomicU64::new(0),
            valid_gets: AtomicU64::new(0),
            memory_hits: AtomicU64::new(0),
            memory_hit_bytes: AtomicU64::new(0),
            disk_hits: AtomicU64::new(0),
            disk_hit_bytes: AtomicU64::new(0),
            value_sizes: std::array::from_fn(|_| AtomicU64::new(0)),
            value_size_sum: AtomicU64::new(0),
            room_evictions: AtomicU64::new(0),
            offload_queued: AtomicU64::new(0),
            offloaded: AtomicU64::new(0),
            evicted_to_disk: AtomicU64::new(0),
        }
    }
}

impl Metrics {
    /// Counts one request of `rpc`.
    pub fn record(&self, rpc: Rpc, ok: bool) {
        let i = rpc as usize;
        self.requests[i].fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.failures[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts one batch call of `rpc` with `total` items, `failed` of which failed,
    /// as upstream does: a failure when every item failed (an empty batch too), a
    /// partial success when some did.
    pub fn record_batch(&self, rpc: Rpc, total: u64, failed: u64) {
        let i = rpc as usize;
        self.requests[i].fetch_add(1, Ordering::Relaxed);
        self.items[i].fetch_add(total, Ordering::Relaxed);
        self.failed_items[i].fetch_add(failed, Ordering::Relaxed);
        if failed == total {
            self.failures[i].fetch_add(1, Ordering::Relaxed);
        } else if failed > 0 {
            self.partial_successes[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts one GetReplicaList: `served` is the value size and whether the first
    /// replica returned is in memory, when it returned any.
    pub fn record_get(&self, served: Option<(u64, bool)>) {
        self.gets.fetch_add(1, Ordering::Relaxed);
        let Some((size, in_memory)) = served else {
            return;
        };
        self.valid_gets.fetch_add(1, Ordering::Relaxed);
        let (hits, bytes) = if in_memory {
            (&self.memory_hits, &self.memory_hit_bytes)
        } else {
            (&self.disk_hits, &self.disk_hit_bytes)
        };
        hits.fetch_add(1, Ordering::Relaxed);
        bytes.fetch_add(size, Ordering::Relaxed);
    }

    /// Counts the value size of an object a put created.
    pub fn observe_value_size(&self, size: u64) {
        let bucket = VALUE_SIZE_BOUNDS.partition_point(|bound| *bound < size);
        self.value_sizes[bucket].fetch_add(1, Ordering::Relaxed);
        self.value_size_sum.fetch_add(size, Ordering::Relaxed);
    }

    /// A snapshot.
    pub fn snapshot(&self) -> MasterMetrics {
        MasterMetrics {
            rpcs: Rpc::ALL
                .iter()
                .enumerate()
                .map(|(i, rpc)| RpcMetric {
                    name: rpc.name(),
                    requests: self.requests[i].load(Ordering::Relaxed),
                    failures: self.failures[i].load(Ordering::Relaxed),
                    partial_successes: self.partial_successes[i].load(Ordering::Relaxed),
                    items: self.items[i].load(Ordering::Relaxed),
                    failed_items: self.failed_items[i].load(Ordering::Relaxed),
                })
                .collect(),
            eviction_runs: self.eviction_runs.load(Ordering::Relaxed),
            successful_evictions: self.successful_evictions.load(Ordering::Relaxed),
            evicted_objects: self.evicted_objects.load(Ordering::Relaxed),
            evicted_bytes: self.evicted_bytes.load(Ordering::Relaxed),
            put_start_discards: self.put_start_discards.load(Ordering::Relaxed),
            put_start_releases: self.put_start_releases.load(Ordering::Relaxed),
            discarded_staging_bytes: self.discarded_staging_bytes.load(Ordering::Relaxed),
            put_start_alloc_failures: self.put_start_alloc_failures.load(Ordering::Relaxed),
            put_start_partial_allocations: self
                .put_start_partial_allocations
                .load(Ordering::Relaxed),
            gets: self.gets.load(Ordering::Relaxed),
            valid_gets: self.valid_gets.load(Ordering::Relaxed),
            memory_hits: self.memory_hits.load(Ordering::Relaxed),
            memory_hit_bytes: self.memory_hit_bytes.load(Ordering::Relaxed),
            disk_hits: self.disk_hits.load(Ordering::Relaxed),
            disk_hit_bytes: self.disk_hit_bytes.load(Ordering::Relaxed),
            value_sizes: std::array::from_fn(|i| self.value_sizes[i].load(Ordering::Relaxed)),
            value_size_sum: self.value_size_sum.load(Ordering::Relaxed),
            room_evictions: self.room_evictions.load(Ordering::Relaxed),
            offload_queued: self.offload_queued.load(Ordering::Relaxed),
            offloaded: self.offloaded.load(Ordering::Relaxed),
            evicted_to_disk: self.evicted_to_disk.load(Ordering::Relaxed),
        }
    }
}
