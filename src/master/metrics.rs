//! Per-RPC request/failure counters and eviction counters (spec store.md §3.7,
//! `master_<rpc>_requests_total` / `_failures_total`). Plain relaxed atomics: reading
//! them is cheap and never blocks an RPC.

use std::sync::atomic::{AtomicU64, Ordering};

/// The master RPCs, counted by their position in `Method::ALL`.
pub(crate) use crate::wire::coro_rpc::Method as Rpc;

/// How many RPCs are counted.
const RPC_COUNT: usize = Rpc::ALL.len();

/// Counters of one RPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcMetric {
    /// Upstream method name, e.g. `"PutStart"`.
    pub name: &'static str,
    /// Requests served (batch RPCs count one per item).
    pub requests: u64,
    /// Requests (items) that returned an error.
    pub failures: u64,
}

/// A snapshot of the master's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterMetrics {
    /// One entry per RPC, in a fixed order.
    pub rpcs: Vec<RpcMetric>,
    /// Eviction runs (triggered by the watermark or an allocation failure).
    pub eviction_runs: u64,
    /// Objects evicted in total.
    pub evicted_objects: u64,
    /// PutStart/UpsertStart placements that found no space (each retry counts).
    pub alloc_failures: u64,
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
    pub eviction_runs: AtomicU64,
    pub evicted_objects: AtomicU64,
    pub alloc_failures: AtomicU64,
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
            eviction_runs: AtomicU64::new(0),
            evicted_objects: AtomicU64::new(0),
            alloc_failures: AtomicU64::new(0),
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
        self.record_n(rpc, 1, u64::from(!ok));
    }

    /// Counts `total` items of `rpc`, `failed` of which failed.
    pub fn record_n(&self, rpc: Rpc, total: u64, failed: u64) {
        self.requests[rpc as usize].fetch_add(total, Ordering::Relaxed);
        if failed > 0 {
            self.failures[rpc as usize].fetch_add(failed, Ordering::Relaxed);
        }
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
                })
                .collect(),
            eviction_runs: self.eviction_runs.load(Ordering::Relaxed),
            evicted_objects: self.evicted_objects.load(Ordering::Relaxed),
            alloc_failures: self.alloc_failures.load(Ordering::Relaxed),
            room_evictions: self.room_evictions.load(Ordering::Relaxed),
            offload_queued: self.offload_queued.load(Ordering::Relaxed),
            offloaded: self.offloaded.load(Ordering::Relaxed),
            evicted_to_disk: self.evicted_to_disk.load(Ordering::Relaxed),
        }
    }
}
