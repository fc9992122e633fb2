//! A dummy's memory as the real client sees it: the shared local buffer that stages
//! bytes, `alloc_from_mem_pool` allocations, the ranges the real client has mapped
//! (moved in place) or cannot map (staged), and the real client's segments mapped
//! here (objects there are copied straight from them).

use crate::store::error::StoreResult;
use crate::store::memory::{reserve_for, Mapping, Staging, StagingBuffer};
use crate::store::Pieces;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// Everything a dummy maps or shares.
pub(super) struct SharedMemory {
    /// The local buffer (shared with the real client) that stages bytes.
    staging: Option<StagingBuffer>,
    /// `alloc_from_mem_pool` allocations, by address.
    pool: Mutex<BTreeMap<u64, Mapping>>,
    /// Ranges the real client has mapped: address → length.
    mapped: RwLock<BTreeMap<u64, u64>>,
    /// Ranges registered that the real client cannot map (staged): address → length.
    staged: Mutex<BTreeMap<u64, u64>>,
    /// Whether registering memory that must be staged was warned about.
    warned_staged: AtomicBool,
    /// The real client's segments mapped here: its base address, length, mapping.
    segments: RwLock<Vec<(u64, u64, Mapping)>>,
}

impl SharedMemory {
    /// The memory of a dummy with `staging` as its local buffer.
    pub(super) fn new(staging: Option<StagingBuffer>) -> SharedMemory {
        SharedMemory {
            staging,
            pool: Mutex::new(BTreeMap::new()),
            mapped: RwLock::new(BTreeMap::new()),
            staged: Mutex::new(BTreeMap::new()),
            warned_staged: AtomicBool::new(false),
            segments: RwLock::new(Vec::new()),
        }
    }

    /// The local buffer, if any.
    pub(super) fn staging(&self) -> Option<&StagingBuffer> {
        self.staging.as_ref()
    }

    /// A staging reservation of `len` bytes for `op` of `key`, or -600 saying why.
    pub(super) fn stage(&self, op: &str, key: &str, len: u64) -> StoreResult<Staging<'_>> {
        let what = || {
            format!(
                "dummy client: {op}('{key}') (memory from alloc_from_mem_pool needs no staging)"
            )
        };
        reserve_for(self.staging(), what, len)
    }

    /// Replaces the real client's segments mapped here.
    pub(super) fn set_segments(&self, segments: Vec<(u64, u64, Mapping)>) {
        *self.segments.write() = segments;
    }

    /// This process's address of `[addr, addr + len)` of the real client's segments.
    pub(super) fn in_segment(&self, addr: u64, len: u64) -> Option<u64> {
        let segments = self.segments.read();
        segments.iter().find_map(|(base, n, m)| {
            let end = addr.checked_add(len)?;
            (addr >= *base && end <= base + n).then(|| m.addr() + (addr - base))
        })
    }

    /// The shared file holding `addr` (the local buffer or a pool allocation) and the
    /// offset of `addr` in it.
    pub(super) fn file_of(&self, addr: u64) -> Option<(OwnedFd, u64)> {
        let found = |m: &Mapping| {
            m.contains(addr, 0)
                .then(|| {
                    m.shared_file()?
                        .try_clone()
                        .ok()
                        .map(|f| (f, addr - m.addr()))
                })
                .flatten()
        };
        if let Some(f) = self.staging.as_ref().and_then(|s| found(s.memory())) {
            return Some(f);
        }
        let pool = self.pool.lock();
        let (_, m) = pool.range(..=addr).next_back()?;
        found(m)
    }

    /// Records that the real client has `[addr, addr + len)` mapped.
    pub(super) fn add_mapped(&self, addr: u64, len: u64) {
        self.mapped.write().insert(addr, len);
    }

    /// The ranges the real client has mapped (to map again in a new session).
    pub(super) fn mapped_ranges(&self) -> Vec<(u64, u64)> {
        self.mapped.read().iter().map(|(&a, &l)| (a, l)).collect()
    }

    /// Whether the real client has `[addr, addr + len)` mapped.
    pub(super) fn is_mapped(&self, addr: u64, len: u64) -> bool {
        let mapped = self.mapped.read();
        mapped
            .range(..=addr)
            .next_back()
            .is_some_and(|(&base, &n)| addr.checked_add(len).is_some_and(|end| end <= base + n))
    }

    /// Whether every piece is mapped by the real client.
    pub(super) fn pieces_mapped(&self, pieces: &Pieces) -> bool {
        pieces.iter().all(|&(a, n)| self.is_mapped(a, n))
    }

    /// Whether `addr` was registered already (mapped or staged).
    pub(super) fn is_registered(&self, addr: u64) -> bool {
        self.mapped.read().contains_key(&addr) || self.staged.lock().contains_key(&addr)
    }

    /// Runs `f` with the pool allocation holding all of `[addr, addr + len)`, if any.
    pub(super) fn with_pool_holder<R>(
        &self,
        addr: u64,
        len: u64,
        f: impl FnOnce(&Mapping) -> R,
    ) -> Option<R> {
        let pool = self.pool.lock();
        let holder = pool
            .range(..=addr)
            .next_back()
            .map(|(_, m)| m)
            .filter(|m| m.contains(addr, len))?;
        Some(f(holder))
    }

    /// Registers `[addr, addr + len)` as staged memory, warning once per client.
    pub(super) fn add_staged(&self, addr: u64, len: u64) {
        if !self.warned_staged.swap(true, Ordering::Relaxed) {
            log::warn!(
                "dummy client: register_buffer({addr:#x}, {len}): the real client cannot \
                 map this memory (not from MooncakeHostMemAllocator or \
                 alloc_from_mem_pool); accepted, and its transfers are staged through \
                 the local buffer (one extra copy; said once per client)"
            );
        }
        self.staged.lock().insert(addr, len);
    }

    /// Forgets a staged registration; whether there was one.
    pub(super) fn remove_staged(&self, addr: u64) -> bool {
        self.staged.lock().remove(&addr).is_some()
    }

    /// Forgets a mapped registration; whether there was one.
    pub(super) fn remove_mapped(&self, addr: u64) -> bool {
        self.mapped.write().remove(&addr).is_some()
    }

    /// Keeps a new pool allocation.
    pub(super) fn add_to_pool(&self, m: Mapping) {
        self.pool.lock().insert(m.addr(), m);
    }
}
