//! Mounted segments (spec store.md §2.1, §2.4): indexed by id, name and owning client,
//! one [`RangeAllocator`] per mounted segment, mount/remount/unmount idempotent.
//!
//! Every mount gets a fresh [`SegInfo`] shared by the buffers allocated in it; unmounting
//! flips its `alive` flag, so replicas on a gone segment become unreadable at once and
//! freeing their buffers is a no-op (the allocator is gone with the mount).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::allocator::RangeAllocator;
use super::ha::changelog::ReplicationLog;
use super::ha::record::Record;
use crate::wire::master_api::{BufferDescriptor, ErrorCode, MasterResult, Segment, Uuid};

/// Cachelib's slab size: with `--memory_allocator=cachelib` segments must be aligned to it.
pub(crate) const CACHELIB_SLAB_SIZE: u64 = 1 << 24;

/// One mount of a segment, shared by every buffer allocated in it.
#[derive(Debug)]
pub(crate) struct SegInfo {
    /// Unique per mount (a remount of the same id gets a new one).
    pub mount_id: u64,
    /// The segment as the client described it.
    pub segment: Segment,
    /// The client that mounted it.
    pub client: Uuid,
    alive: AtomicBool,
    /// False while its owner's connections are gone (see `clients`): no allocations,
    /// and its replicas are not handed to readers.
    reachable: AtomicBool,
}

impl SegInfo {
    /// Whether the segment is still mounted.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Whether it is mounted and its owner is thought reachable: only then are its
    /// replicas read and written.
    pub fn is_usable(&self) -> bool {
        self.is_alive() && self.reachable.load(Ordering::Acquire)
    }

    /// The endpoint readers reach the segment at.
    pub fn endpoint(&self) -> &str {
        if self.segment.te_endpoint.is_empty() {
            &self.segment.name
        } else {
            &self.segment.te_endpoint
        }
    }

    /// The transport protocol reported in descriptors.
    pub fn protocol(&self) -> &str {
        if self.segment.protocol.is_empty() {
            "tcp"
        } else {
            &self.segment.protocol
        }
    }

    /// The wire descriptor of a buffer of `size` bytes at `addr` in this mount.
    pub fn descriptor(&self, addr: u64, size: u64) -> BufferDescriptor {
        BufferDescriptor {
            size,
            buffer_address: addr,
            protocol: self.protocol().to_string(),
            transport_endpoint: self.endpoint().to_string(),
        }
    }
}

/// Shared handle to a mount.
pub(crate) type SegRef = Arc<SegInfo>;

/// One allocated buffer in a mounted segment.
#[derive(Debug, Clone)]
pub(crate) struct Buffer {
    /// The mount it lives in.
    pub seg: SegRef,
    /// Absolute address in the owner's process.
    pub addr: u64,
    /// Size in bytes.
    pub size: u64,
    /// The allocator's block index (freeing needs it with `addr`).
    pub block: u32,
}

/// What placement needs from the segment table (held locked while placing).
pub(crate) trait AllocView {
    /// Names of segments that can take allocations.
    fn names(&self) -> &[String];
    /// Allocates `size` bytes on segment `name` (trying its mounts from `start`).
    fn try_alloc(&mut self, name: &str, size: u64, start: usize) -> Option<Buffer>;
    /// Free bytes / capacity of segment `name`.
    fn free_ratio(&self, name: &str) -> f64;
    /// Names of segments whose host id is `host_id`, sorted.
    fn host_segments(&self, host_id: &str) -> Vec<String>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MountState {
    Ok,
    /// Gracefully unmounting: no new allocations, unmounted at the deadline (ns).
    Draining(u64),
}

struct Mounted {
    info: SegRef,
    alloc: RangeAllocator,
    state: MountState,
}

#[derive(Default)]
struct Inner {
    next_mount_id: u64,
    mounts: HashMap<u64, Mounted>,
    by_id: HashMap<Uuid, u64>,
    /// Names with at least one allocatable mount, in mount order (swap-removed).
    names: Vec<String>,
    by_name: HashMap<String, Vec<u64>>,
    by_client: HashMap<Uuid, Vec<Uuid>>,
}

/// A read-only summary of one mounted segment (for the admin service).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentSummary {
    /// Segment id.
    pub id: Uuid,
    /// Segment name.
    pub name: String,
    /// Owning client.
    pub client: Uuid,
    /// Base address.
    pub base: u64,
    /// Size in bytes.
    pub size: u64,
    /// Bytes allocated.
    pub used: u64,
    /// Whether it is being gracefully unmounted.
    pub draining: bool,
    /// Transfer Engine endpoint.
    pub te_endpoint: String,
    /// Transport protocol.
    pub protocol: String,
}

/// One segment name's load (see [`Segments::loads`]).
#[derive(Debug, Clone)]
pub(crate) struct SegmentLoad {
    /// The segment name.
    pub name: String,
    /// The host id its client reported.
    pub host_id: String,
    /// Bytes of its allocators.
    pub capacity: u64,
    /// Bytes allocated.
    pub used: u64,
    /// Whether it takes allocations now.
    pub allocatable: bool,
}

/// What [`Segments::named`] says of a segment name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NamedSegment {
    /// Whether it takes allocations (mounted, not draining, owner reachable).
    pub allocatable: bool,
    /// The client that mounted it.
    pub client: Uuid,
}

/// The segment table.
pub(crate) struct Segments {
    inner: Mutex<Inner>,
    capacity: AtomicU64,
    allocated: AtomicU64,
    cachelib: bool,
    /// Mounts and unmounts are recorded here, under the table's lock.
    log: Arc<ReplicationLog>,
}

impl Segments {
    /// An empty table; `cachelib` enforces cachelib's slab alignment on mounts.
    #[cfg(test)]
    pub fn new(cachelib: bool) -> Segments {
        Segments::with_log(cachelib, Arc::new(ReplicationLog::new(Default::default())))
    }

    /// An empty table recording mounts and unmounts in `log`.
    pub fn with_log(cachelib: bool, log: Arc<ReplicationLog>) -> Segments {
        Segments {
            inner: Mutex::new(Inner::default()),
            capacity: AtomicU64::new(0),
            allocated: AtomicU64::new(0),
            cachelib,
            log,
        }
    }

    /// Appends every mounted segment to the replication log (part of a full dump).
    pub fn dump(&self) {
        let inner = self.inner.lock();
        for m in inner.mounts.values() {
            self.log.append(&Record::Mount {
                segment: m.info.segment.clone(),
                client: m.info.client,
            });
        }
    }

    /// Total bytes of mounted segments.
    pub fn total_capacity(&self) -> u64 {
        self.capacity.load(Ordering::Relaxed)
    }

    /// Bytes allocated across mounted segments.
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated.load(Ordering::Relaxed)
    }

    /// The allocated fraction of the mounted capacity (0 with nothing mounted).
    pub fn used_ratio(&self) -> f64 {
        let cap = self.total_capacity();
        if cap == 0 {
            0.0
        } else {
            self.allocated_bytes() as f64 / cap as f64
        }
    }

    /// Mounts `segment` for `client`. An id that is already mounted is OK (idempotent);
    /// -1010 if it is being unmounted; -600 for a zero base/size or a misaligned
    /// cachelib segment.
    pub fn mount(&self, segment: &Segment, client: Uuid) -> MasterResult<()> {
        if segment.base == 0
            || segment.size == 0
            || segment.base.checked_add(segment.size).is_none()
        {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        if self.cachelib
            && (segment.base % CACHELIB_SLAB_SIZE != 0 || segment.size % CACHELIB_SLAB_SIZE != 0)
        {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        let mut inner = self.inner.lock();
        if let Some(mid) = inner.by_id.get(&segment.id) {
            return match inner.mounts.get(mid).map(|m| m.state) {
                Some(MountState::Draining(_)) => Err(ErrorCode(-1010)),
                _ => Ok(()),
            };
        }
        inner.next_mount_id += 1;
        let mount_id = inner.next_mount_id;
        let info = Arc::new(SegInfo {
            mount_id,
            segment: segment.clone(),
            client,
            alive: AtomicBool::new(true),
            reachable: AtomicBool::new(true),
        });
        let alloc = RangeAllocator::new(segment.base, segment.size);
        inner.mounts.insert(
            mount_id,
            Mounted {
                info,
                alloc,
                state: MountState::Ok,
            },
        );
        inner.by_id.insert(segment.id, mount_id);
        inner.add_name(&segment.name, mount_id);
        inner.by_client.entry(client).or_default().push(segment.id);
        self.capacity.fetch_add(segment.size, Ordering::Relaxed);
        self.log.append(&Record::Mount {
            segment: segment.clone(),
            client,
        });
        Ok(())
    }

    /// Mounts `segment` for `client` with the buffers `ranges` (address, size)
    /// already allocated in it (restoring a replicated state). Returns the buffer of
    /// each range, `None` for one that overlaps another or leaves the segment.
    pub fn mount_restored(
        &self,
        segment: &Segment,
        client: Uuid,
        ranges: &[(u64, u64)],
    ) -> MasterResult<Vec<Option<Buffer>>> {
        self.mount(segment, client)?;
        let mut inner = self.inner.lock();
        let mid = *inner
            .by_id
            .get(&segment.id)
            .ok_or(ErrorCode::INVALID_PARAMS)?;
        let m = inner
            .mounts
            .get_mut(&mid)
            .ok_or(ErrorCode::INVALID_PARAMS)?;
        let (alloc, blocks) = RangeAllocator::with_allocations(segment.base, segment.size, ranges);
        let before = m.alloc.used();
        m.alloc = alloc;
        let after = m.alloc.used();
        self.allocated.fetch_add(after, Ordering::Relaxed);
        self.allocated.fetch_sub(before, Ordering::Relaxed);
        let info = m.info.clone();
        Ok(ranges
            .iter()
            .zip(blocks)
            .map(|(&(addr, size), block)| {
                block.map(|block| Buffer {
                    seg: info.clone(),
                    addr,
                    size,
                    block,
                })
            })
            .collect())
    }

    /// `ReMountSegment`'s pre-check: -600 when an already mounted id belongs to another
    /// client or differs from what is mounted.
    pub fn validate_remount(&self, segment: &Segment, client: Uuid) -> MasterResult<()> {
        let inner = self.inner.lock();
        let Some(mid) = inner.by_id.get(&segment.id) else {
            return Ok(());
        };
        match inner.mounts.get(mid) {
            Some(m) if m.info.client == client && m.info.segment == *segment => Ok(()),
            _ => Err(ErrorCode::INVALID_PARAMS),
        }
    }

    /// Unmounts segment `id` (any client); returns the mount, now dead, if there was one.
    pub fn unmount(&self, id: Uuid) -> Option<SegRef> {
        let mut inner = self.inner.lock();
        let mid = inner.by_id.get(&id).copied()?;
        self.remove_mount(&mut inner, mid)
    }

    /// Unmounts every segment of `client`; returns the dead mounts.
    pub fn unmount_client(&self, client: Uuid) -> Vec<SegRef> {
        let mut inner = self.inner.lock();
        let ids = inner.by_client.get(&client).cloned().unwrap_or_default();
        let mids: Vec<u64> = ids
            .iter()
            .filter_map(|id| inner.by_id.get(id).copied())
            .collect();
        mids.into_iter()
            .filter_map(|mid| self.remove_mount(&mut inner, mid))
            .collect()
    }

    /// Starts a graceful unmount of `id` owned by `client`, due at `deadline` (ns):
    /// no new allocations from now on. -101 if the client has no segment, -600 if it
    /// does not own `id`.
    pub fn begin_graceful_unmount(
        &self,
        id: Uuid,
        client: Uuid,
        deadline: u64,
    ) -> MasterResult<()> {
        let mut inner = self.inner.lock();
        let owned = match inner.by_client.get(&client) {
            None => return Err(ErrorCode::SEGMENT_NOT_FOUND),
            Some(ids) => ids.contains(&id),
        };
        if !owned {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        let Some(mid) = inner.by_id.get(&id).copied() else {
            return Ok(());
        };
        let (name, state) = match inner.mounts.get(&mid) {
            Some(m) => (m.info.segment.name.clone(), m.state),
            None => return Ok(()),
        };
        if state == MountState::Ok {
            inner.remove_name(&name, mid);
            if let Some(m) = inner.mounts.get_mut(&mid) {
                m.state = MountState::Draining(deadline);
            }
        }
        Ok(())
    }

    /// Marks every segment of `client` reachable or not; an unreachable segment takes
    /// no allocations and its replicas are not read. Returns how many changed.
    pub fn set_client_reachable(&self, client: Uuid, reachable: bool) -> usize {
        let mut inner = self.inner.lock();
        let mids: Vec<u64> = inner
            .by_client
            .get(&client)
            .into_iter()
            .flatten()
            .filter_map(|id| inner.by_id.get(id).copied())
            .collect();
        let mut changed = 0;
        for mid in mids {
            let Some(m) = inner.mounts.get(&mid) else {
                continue;
            };
            if m.info.reachable.swap(reachable, Ordering::AcqRel) == reachable {
                continue;
            }
            changed += 1;
            if m.state == MountState::Ok {
                let name = m.info.segment.name.clone();
                if reachable {
                    inner.add_name(&name, mid);
                } else {
                    inner.remove_name(&name, mid);
                }
            }
        }
        changed
    }

    /// The segment mounted under `name`, if any: whether it takes allocations now (not
    /// draining, its owner reachable) and the client that mounted it.
    pub fn named(&self, name: &str) -> Option<NamedSegment> {
        let inner = self.inner.lock();
        if let Some(m) = inner
            .by_name
            .get(name)
            .and_then(|mids| mids.first())
            .and_then(|mid| inner.mounts.get(mid))
        {
            return Some(NamedSegment {
                allocatable: true,
                client: m.info.client,
            });
        }
        inner
            .mounts
            .values()
            .find(|m| m.info.segment.name == name)
            .map(|m| NamedSegment {
                allocatable: false,
                client: m.info.client,
            })
    }

    /// Allocates `size` bytes on the segment named `name`; -101 when no mount of it
    /// takes allocations, -200 when none has room.
    pub fn allocate_on(&self, name: &str, size: u64) -> MasterResult<Buffer> {
        self.with_view(|view| {
            if !view.names().iter().any(|n| n == name) {
                return Err(ErrorCode::SEGMENT_NOT_FOUND);
            }
            view.try_alloc(name, size, 0)
                .ok_or(ErrorCode::NO_AVAILABLE_HANDLE)
        })
    }

    /// Ids of gracefully unmounting segments whose deadline has passed.
    pub fn due_graceful(&self, now: u64) -> Vec<Uuid> {
        let inner = self.inner.lock();
        inner
            .mounts
            .values()
            .filter(|m| matches!(m.state, MountState::Draining(d) if d <= now))
            .map(|m| m.info.segment.id)
            .collect()
    }

    /// Whether some allocatable mount is at least `len` bytes large (so evicting could
    /// ever make room for a buffer of `len`).
    pub fn could_ever_fit(&self, len: u64) -> bool {
        let inner = self.inner.lock();
        inner
            .names
            .iter()
            .filter_map(|n| inner.by_name.get(n))
            .flatten()
            .filter_map(|mid| inner.mounts.get(mid))
            .any(|m| m.alloc.capacity() >= len)
    }

    /// Segments currently mounted by `client`.
    pub fn client_segments(&self, client: Uuid) -> Vec<Segment> {
        let inner = self.inner.lock();
        let Some(ids) = inner.by_client.get(&client) else {
            return Vec::new();
        };
        ids.iter()
            .filter_map(|id| inner.by_id.get(id))
            .filter_map(|mid| inner.mounts.get(mid))
            .map(|m| m.info.segment.clone())
            .collect()
    }

    /// Frees `buffers` (no-op for buffers of unmounted segments).
    pub fn release<I: IntoIterator<Item = Buffer>>(&self, buffers: I) {
        let mut iter = buffers.into_iter().peekable();
        if iter.peek().is_none() {
            return;
        }
        let mut inner = self.inner.lock();
        for b in iter {
            if !b.seg.is_alive() {
                continue;
            }
            if let Some(m) = inner.mounts.get_mut(&b.seg.mount_id) {
                if let Some(n) = m.alloc.free(b.addr, b.block) {
                    self.allocated.fetch_sub(n, Ordering::Relaxed);
                }
            }
        }
    }

    /// Runs `f` with exclusive access to the allocators (placement).
    pub fn with_view<R>(&self, f: impl FnOnce(&mut dyn AllocView) -> R) -> R {
        let mut inner = self.inner.lock();
        let mut view = View {
            inner: &mut inner,
            allocated: &self.allocated,
        };
        f(&mut view)
    }

    /// Per segment name, what dynamic replication places by: its host id, its
    /// capacity and bytes in use (over all its mounts), and whether it takes
    /// allocations now.
    pub fn loads(&self) -> Vec<SegmentLoad> {
        let inner = self.inner.lock();
        let mut by_name: HashMap<&str, SegmentLoad> = HashMap::new();
        for m in inner.mounts.values() {
            let name = m.info.segment.name.as_str();
            let e = by_name.entry(name).or_insert_with(|| SegmentLoad {
                name: name.to_string(),
                host_id: m.info.segment.host_id.clone(),
                capacity: 0,
                used: 0,
                allocatable: inner.by_name.contains_key(name),
            });
            e.capacity = e.capacity.saturating_add(m.alloc.capacity());
            e.used = e.used.saturating_add(m.alloc.used());
        }
        by_name.into_values().collect()
    }

    /// Summaries of every mounted segment.
    pub fn summary(&self) -> Vec<SegmentSummary> {
        let inner = self.inner.lock();
        let mut out: Vec<SegmentSummary> = inner
            .mounts
            .values()
            .map(|m| SegmentSummary {
                id: m.info.segment.id,
                name: m.info.segment.name.clone(),
                client: m.info.client,
                base: m.info.segment.base,
                size: m.info.segment.size,
                used: m.alloc.used(),
                draining: m.state != MountState::Ok,
                te_endpoint: m.info.segment.te_endpoint.clone(),
                protocol: m.info.segment.protocol.clone(),
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name).then(a.base.cmp(&b.base)));
        out
    }

    fn remove_mount(&self, inner: &mut Inner, mid: u64) -> Option<SegRef> {
        let m = inner.mounts.remove(&mid)?;
        let seg = &m.info.segment;
        inner.by_id.remove(&seg.id);
        if m.state == MountState::Ok {
            inner.remove_name(&seg.name, mid);
        }
        if let Some(ids) = inner.by_client.get_mut(&m.info.client) {
            ids.retain(|id| *id != seg.id);
            if ids.is_empty() {
                inner.by_client.remove(&m.info.client);
            }
        }
        m.info.alive.store(false, Ordering::Release);
        self.log.append(&Record::Unmount { id: seg.id });
        self.capacity.fetch_sub(seg.size, Ordering::Relaxed);
        self.allocated.fetch_sub(m.alloc.used(), Ordering::Relaxed);
        Some(m.info)
    }
}

impl Inner {
    fn add_name(&mut self, name: &str, mid: u64) {
        let list = self.by_name.entry(name.to_string()).or_default();
        if list.is_empty() {
            self.names.push(name.to_string());
        }
        list.push(mid);
    }

    fn remove_name(&mut self, name: &str, mid: u64) {
        let Some(list) = self.by_name.get_mut(name) else {
            return;
        };
        list.retain(|m| *m != mid);
        if list.is_empty() {
            self.by_name.remove(name);
            if let Some(pos) = self.names.iter().position(|n| n == name) {
                self.names.swap_remove(pos);
            }
        }
    }
}

struct View<'a> {
    inner: &'a mut Inner,
    allocated: &'a AtomicU64,
}

impl AllocView for View<'_> {
    fn names(&self) -> &[String] {
        &self.inner.names
    }

    fn try_alloc(&mut self, name: &str, size: u64, start: usize) -> Option<Buffer> {
        let mids = self.inner.by_name.get(name)?.clone();
        let n = mids.len();
        for i in 0..n {
            let mid = mids[(start + i) % n];
            let Some(m) = self.inner.mounts.get_mut(&mid) else {
                continue;
            };
            if let Some(a) = m.alloc.allocate(size) {
                self.allocated.fetch_add(size, Ordering::Relaxed);
                return Some(Buffer {
                    seg: m.info.clone(),
                    addr: a.addr,
                    size,
                    block: a.block,
                });
            }
        }
        None
    }

    fn free_ratio(&self, name: &str) -> f64 {
        let Some(mids) = self.inner.by_name.get(name) else {
            return 0.0;
        };
        let (mut cap, mut free) = (0u64, 0u64);
        for m in mids.iter().filter_map(|mid| self.inner.mounts.get(mid)) {
            cap += m.alloc.capacity();
            free += m.alloc.capacity() - m.alloc.used();
        }
        if cap == 0 {
            0.0
        } else {
            free as f64 / cap as f64
        }
    }

    fn host_segments(&self, host_id: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .inner
            .names
            .iter()
            .filter(|n| {
                self.inner.by_name.get(*n).is_some_and(|mids| {
                    mids.iter()
                        .filter_map(|mid| self.inner.mounts.get(mid))
                        .any(|m| m.info.segment.host_id == host_id)
                })
            })
            .cloned()
            .collect();
        out.sort();
        out
    }
}
