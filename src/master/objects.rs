//! The object table (spec store.md §2.1): 1024 shards of `parking_lot::Mutex`, each a
//! map tenant -> key -> [`Object`], keyed by hash(tenant, key); plus a group index
//! (tenant, group id) -> member keys used to lease and evict groups together.
//!
//! Lock order: a shard lock may be held while taking the segment table's or the group
//! index's lock, never the other way round, and never two shard locks at once.
//!
//! Replication: every change made through a [`ShardGuard`] (insert, remove, `get_mut`,
//! `retain`) is recorded in the master's replication log when the guard is released,
//! still under the shard lock, as the object's whole new state (or its removal); lease
//! and read-tracking updates (`get_for_lease`) are not replicated.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, MutexGuard};

use super::ha::changelog::ReplicationLog;
use super::ha::record::{DiskReplicaState, ObjectState, Record, ReplicaState};
use super::local_disk::DiskReplica;
use super::segments::{Buffer, SegRef};
use crate::wire::master_api::{
    ErrorCode, ReplicaDescriptor, ReplicaLocation, ReplicaStatus, SoftPinAction, Uuid,
};

/// Number of shards.
pub(crate) const NUM_SHARDS: usize = 1024;

/// One memory replica: its buffer's fields are inline so that a replica is 40 bytes.
#[derive(Debug, Clone)]
pub(crate) struct Replica {
    /// Global replica id.
    pub id: u64,
    /// The mount its buffer lives in.
    pub seg: SegRef,
    /// Buffer address.
    pub addr: u64,
    /// Buffer size.
    pub size: u64,
    /// The allocator's block index of the buffer.
    pub block: u32,
    /// PROCESSING or COMPLETE.
    pub status: ReplicaStatus,
}

impl Replica {
    /// A replica on `buf`.
    pub fn new(id: u64, status: ReplicaStatus, buf: Buffer) -> Replica {
        Replica {
            id,
            seg: buf.seg,
            addr: buf.addr,
            size: buf.size,
            block: buf.block,
            status,
        }
    }

    /// Whether it can be read: complete, its segment still mounted and its owner
    /// reachable.
    pub fn is_readable(&self) -> bool {
        self.status == ReplicaStatus::Complete && self.seg.is_usable()
    }

    /// The wire descriptor.
    pub fn descriptor(&self) -> ReplicaDescriptor {
        ReplicaDescriptor {
            id: self.id,
            location: ReplicaLocation::Memory(self.seg.descriptor(self.addr, self.size)),
            status: self.status,
        }
    }

    /// A handle to its buffer.
    pub fn buffer(&self) -> Buffer {
        Buffer {
            seg: self.seg.clone(),
            addr: self.addr,
            size: self.size,
            block: self.block,
        }
    }

    /// Its buffer.
    pub fn into_buffer(self) -> Buffer {
        Buffer {
            seg: self.seg,
            addr: self.addr,
            size: self.size,
            block: self.block,
        }
    }
}

/// An object's replicas, a slice of [`Replica`]: a single replica (the common case) is
/// stored inline, more on the heap.
#[derive(Debug, Clone)]
pub(crate) struct Replicas(ReplicasRepr);

#[derive(Debug, Clone)]
enum ReplicasRepr {
    One(Replica),
    Many(Vec<Replica>),
}

impl Default for Replicas {
    fn default() -> Replicas {
        Replicas(ReplicasRepr::Many(Vec::new()))
    }
}

impl Replicas {
    fn from_vec(mut v: Vec<Replica>) -> Replicas {
        match v.len() {
            0 => Replicas::default(),
            1 => Replicas(ReplicasRepr::One(v.pop().expect("one replica"))),
            _ => Replicas(ReplicasRepr::Many(v)),
        }
    }

    /// Keeps the replicas for which `keep` returns true, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(&Replica) -> bool) {
        match &mut self.0 {
            ReplicasRepr::One(r) => {
                if !keep(r) {
                    *self = Replicas::default();
                }
            }
            ReplicasRepr::Many(v) => {
                v.retain(|r| keep(r));
                if v.len() <= 1 {
                    *self = Replicas::from_vec(std::mem::take(v));
                }
            }
        }
    }
}

impl std::ops::Deref for Replicas {
    type Target = [Replica];

    fn deref(&self) -> &[Replica] {
        match &self.0 {
            ReplicasRepr::One(r) => std::slice::from_ref(r),
            ReplicasRepr::Many(v) => v,
        }
    }
}

impl std::ops::DerefMut for Replicas {
    fn deref_mut(&mut self) -> &mut [Replica] {
        match &mut self.0 {
            ReplicasRepr::One(r) => std::slice::from_mut(r),
            ReplicasRepr::Many(v) => v,
        }
    }
}

impl FromIterator<Replica> for Replicas {
    fn from_iter<I: IntoIterator<Item = Replica>>(iter: I) -> Replicas {
        Replicas::from_vec(iter.into_iter().collect())
    }
}

impl IntoIterator for Replicas {
    type Item = Replica;
    type IntoIter = std::iter::Chain<std::option::IntoIter<Replica>, std::vec::IntoIter<Replica>>;

    fn into_iter(self) -> Self::IntoIter {
        match self.0 {
            ReplicasRepr::One(r) => Some(r).into_iter().chain(Vec::new()),
            ReplicasRepr::Many(v) => None.into_iter().chain(v),
        }
    }
}

/// A soft-pin request waiting for the object's first COMPLETE replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PendingPin {
    /// What to do.
    pub action: SoftPinAction,
    /// TTL for `Enable` (0 = no pin).
    pub ttl_ns: u64,
}

/// The attributes most objects do not have, boxed behind one pointer (absent while all
/// are unset).
#[derive(Debug, Clone, Default)]
struct Extra {
    soft_pin: Option<u64>,
    pending_pin: Option<PendingPin>,
    checksum: Option<u64>,
    group_id: Box<str>,
    hard_pin: bool,
    /// Copies on clients' local disks.
    disk: Vec<DiskReplica>,
    /// Queued to (or being written by) its owner for a disk copy: its memory replica
    /// stays until that is done.
    offload_pending: bool,
}

impl Extra {
    fn is_unset(&self) -> bool {
        self.soft_pin.is_none()
            && self.pending_pin.is_none()
            && self.checksum.is_none()
            && self.group_id.is_empty()
            && !self.hard_pin
            && self.disk.is_empty()
            && !self.offload_pending
    }
}

/// Object metadata. Times are nanoseconds on the service clock; a lease of 0 is "never
/// read" (evicted first). Pins, the group, the checksum and a pending soft-pin action
/// are set on few objects and live in a separate box (see the accessors).
#[derive(Debug, Clone)]
pub(crate) struct Object {
    /// Writer of the current put.
    pub client: Uuid,
    /// When the current put started.
    pub put_start: u64,
    /// The value size (low 48 bits) and the number of tracked reads in flight (high
    /// 16 bits, see [`Object::begin_read`]): one word, so tracking costs no memory.
    size_reads: u64,
    /// Read lease deadline.
    pub lease_timeout: u64,
    /// Replicas.
    pub replicas: Replicas,
    extra: Option<Box<Extra>>,
}

/// Bits of [`Object::size_reads`] holding the size: the largest object is 256 TiB - 1.
const SIZE_BITS: u32 = 48;
/// The largest object size.
pub(crate) const MAX_OBJECT_SIZE: u64 = (1 << SIZE_BITS) - 1;

impl Object {
    /// A new object; `pending_pin` is applied when the first replica completes.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: Uuid,
        put_start: u64,
        size: u64,
        replicas: Replicas,
        hard_pin: bool,
        soft_pin: Option<u64>,
        pending_pin: PendingPin,
        group_id: &str,
    ) -> Object {
        let mut o = Object {
            client,
            put_start,
            lease_timeout: 0,
            replicas,
            extra: None,
            size_reads: size.min(MAX_OBJECT_SIZE),
        };
        let extra = Extra {
            soft_pin,
            pending_pin: None,
            checksum: None,
            group_id: group_id.into(),
            hard_pin,
            disk: Vec::new(),
            offload_pending: false,
        };
        if !extra.is_unset() {
            o.extra = Some(Box::new(extra));
        }
        o.set_pending_pin(Some(pending_pin));
        o
    }

    /// Applies `f` to the extra attributes, dropping the box when all end up unset.
    fn update_extra(&mut self, f: impl FnOnce(&mut Extra)) {
        let e = self.extra.get_or_insert_with(Box::default);
        f(e);
        if e.is_unset() {
            self.extra = None;
        }
    }

    /// Never evicted.
    pub fn hard_pin(&self) -> bool {
        self.extra.as_ref().is_some_and(|e| e.hard_pin)
    }

    /// Soft-pin deadline.
    pub fn soft_pin(&self) -> Option<u64> {
        self.extra.as_ref().and_then(|e| e.soft_pin)
    }

    /// Checksum given at PutEnd.
    pub fn checksum(&self) -> Option<u64> {
        self.extra.as_ref().and_then(|e| e.checksum)
    }

    /// Sets the checksum.
    pub fn set_checksum(&mut self, checksum: Option<u64>) {
        if checksum.is_some() || self.extra.is_some() {
            self.update_extra(|e| e.checksum = checksum);
        }
    }

    /// Group id ("" when none).
    pub fn group_id(&self) -> &str {
        self.extra.as_ref().map_or("", |e| &e.group_id)
    }

    /// The soft-pin action waiting for the put to complete.
    pub fn pending_pin(&self) -> Option<PendingPin> {
        self.extra.as_ref().and_then(|e| e.pending_pin)
    }

    /// Its copies on clients' local disks.
    pub fn disk_replicas(&self) -> &[DiskReplica] {
        self.extra.as_ref().map_or(&[], |e| &e.disk)
    }

    /// Adds a disk copy.
    pub fn add_disk_replica(&mut self, r: DiskReplica) {
        self.update_extra(|e| e.disk.push(r));
    }

    /// Applies `f` to the disk copies (which it may change, add or remove).
    pub fn update_disk_replicas(&mut self, f: impl FnOnce(&mut Vec<DiskReplica>)) {
        if self.extra.is_some() {
            self.update_extra(|e| f(&mut e.disk));
        }
    }

    /// Removes the disk copies matching `pred`; how many.
    pub fn drop_disk_replicas(&mut self, pred: impl Fn(&DiskReplica) -> bool) -> usize {
        let mut n = 0;
        self.update_disk_replicas(|disk| {
            let before = disk.len();
            disk.retain(|r| !pred(r));
            n = before - disk.len();
        });
        n
    }

    /// Whether its owner was asked for a disk copy that has not landed yet.
    pub fn offload_pending(&self) -> bool {
        self.extra.as_ref().is_some_and(|e| e.offload_pending)
    }

    /// Sets or clears [`Object::offload_pending`].
    pub fn set_offload_pending(&mut self, pending: bool) {
        if pending || self.extra.is_some() {
            self.update_extra(|e| e.offload_pending = pending);
        }
    }

    /// The replicated form of this object at service time `now`.
    pub fn state(&self, now: u64) -> ObjectState {
        ObjectState {
            client: self.client,
            age_ns: now.saturating_sub(self.put_start),
            size: self.size(),
            replicas: self
                .replicas
                .iter()
                .map(|r| ReplicaState {
                    id: r.id,
                    segment: r.seg.segment.id,
                    addr: r.addr,
                    size: r.size,
                    status: r.status,
                })
                .collect(),
            hard_pin: self.hard_pin(),
            soft_pin_left_ns: self.soft_pin().map(|d| d.saturating_sub(now)),
            pending_pin: self.pending_pin().map(|p| (p.action, p.ttl_ns)),
            checksum: self.checksum(),
            group_id: self.group_id().to_string(),
            disk_replicas: self
                .disk_replicas()
                .iter()
                .map(|r| DiskReplicaState {
                    id: r.id,
                    client: r.disk.client,
                    size: r.size,
                    endpoint: r.endpoint.to_string(),
                })
                .collect(),
        }
    }

    /// An object restored from its replicated `state` at service time `now`, on
    /// `replicas` (those whose buffers could be re-established); its disk copies are
    /// added by the caller.
    pub fn from_state(state: &ObjectState, replicas: Replicas, now: u64) -> Object {
        let pending = state.pending_pin.map_or(
            PendingPin {
                action: SoftPinAction::Preserve,
                ttl_ns: 0,
            },
            |(action, ttl_ns)| PendingPin { action, ttl_ns },
        );
        let mut o = Object::new(
            state.client,
            now.saturating_sub(state.age_ns).max(1),
            state.size,
            replicas,
            state.hard_pin,
            state.soft_pin_left_ns.map(|left| now.saturating_add(left)),
            pending,
            &state.group_id,
        );
        o.set_checksum(state.checksum);
        o
    }

    /// Sets (or clears) the soft-pin action to apply when the put completes.
    pub fn set_pending_pin(&mut self, pin: Option<PendingPin>) {
        // `Preserve` does nothing when applied: the same as no pending action.
        let pin = pin.filter(|p| p.action != SoftPinAction::Preserve);
        if pin.is_some() || self.extra.is_some() {
            self.update_extra(|e| e.pending_pin = pin);
        }
    }

    /// Whether some replica, in memory or on disk, is readable.
    pub fn has_readable(&self) -> bool {
        self.has_readable_memory() || self.disk_replicas().iter().any(DiskReplica::is_readable)
    }

    /// Whether some memory replica is readable.
    pub fn has_readable_memory(&self) -> bool {
        self.replicas.iter().any(Replica::is_readable)
    }

    /// Whether a complete value exists: a COMPLETE memory replica or a disk copy.
    pub fn has_complete(&self) -> bool {
        self.replicas
            .iter()
            .any(|r| r.status == ReplicaStatus::Complete)
            || !self.disk_replicas().is_empty()
    }

    /// Whether it has no replica at all, in memory or on disk.
    pub fn is_empty(&self) -> bool {
        self.replicas.is_empty() && self.disk_replicas().is_empty()
    }

    /// Whether some replica is still being written.
    pub fn any_processing(&self) -> bool {
        self.replicas
            .iter()
            .any(|r| r.status == ReplicaStatus::Processing)
    }

    /// Whether every replica is COMPLETE.
    pub fn all_complete(&self) -> bool {
        self.replicas
            .iter()
            .all(|r| r.status == ReplicaStatus::Complete)
    }

    /// The value size.
    pub fn size(&self) -> u64 {
        self.size_reads & MAX_OBJECT_SIZE
    }

    /// Whether the read lease has run out (tracked reads aside: see [`Object::held`]).
    pub fn lease_expired(&self, now: u64) -> bool {
        now >= self.lease_timeout
    }

    /// Whether a lease or a tracked read in flight holds the object: then it may be
    /// neither evicted nor removed without force. `ttl` is the lease TTL, which also
    /// bounds a tracked read whose reader never ended it.
    pub fn held(&self, now: u64, ttl: u64) -> bool {
        !self.lease_expired(now) || self.being_read(now, ttl)
    }

    fn reads(&self) -> u64 {
        self.size_reads >> SIZE_BITS
    }

    fn set_reads(&mut self, n: u64) {
        self.size_reads = (n << SIZE_BITS) | self.size();
    }

    /// Whether a tracked read is in flight: begun, not ended, and begun less than
    /// `ttl` ago (the latest read's start is in `lease_timeout`).
    fn being_read(&self, now: u64, ttl: u64) -> bool {
        self.reads() > 0 && now < self.lease_timeout.saturating_add(ttl)
    }

    /// A tracked read begins: the object is held until the reader ends it (or `ttl`
    /// passes, should the reader die). Unlike a lease it holds the object only while
    /// the read runs; the access still counts for the eviction order (`lease_timeout`
    /// becomes at least `now`). False (nothing changed) when 65535 reads are already
    /// in flight: the caller leases instead.
    pub fn begin_read(&mut self, now: u64, ttl: u64) -> bool {
        let reads = if self.being_read(now, ttl) {
            self.reads()
        } else {
            0
        };
        if reads == u64::from(u16::MAX) {
            return false;
        }
        self.set_reads(reads + 1);
        self.lease_timeout = self.lease_timeout.max(now);
        true
    }

    /// A tracked read of this object ended.
    pub fn end_read(&mut self) {
        let reads = self.reads();
        self.set_reads(reads.saturating_sub(1));
    }

    /// Whether replica `id` is one of this object's.
    pub fn has_replica(&self, id: u64) -> bool {
        self.replicas.iter().any(|r| r.id == id) || self.disk_replicas().iter().any(|r| r.id == id)
    }

    /// Whether an unexpired soft pin is set.
    pub fn soft_pinned(&self, now: u64) -> bool {
        self.soft_pin().is_some_and(|d| now < d)
    }

    /// Extends the read lease to at least `now + ttl`.
    pub fn grant_lease(&mut self, now: u64, ttl: u64) {
        self.lease_timeout = self.lease_timeout.max(now.saturating_add(ttl));
    }

    /// Why nothing can be read: -704 when no replica is left on a mounted segment of a
    /// reachable owner (the object is as good as gone), -703 while a write is still in
    /// progress.
    pub fn unreadable_error(&self) -> ErrorCode {
        if self.replicas.iter().any(|r| r.seg.is_usable()) {
            ErrorCode::REPLICA_IS_NOT_READY
        } else {
            ErrorCode::OBJECT_NOT_FOUND
        }
    }

    /// Descriptors of readable replicas: memory first, then disk copies.
    pub fn readable_descriptors(&self) -> Vec<ReplicaDescriptor> {
        let memory = self.replicas.iter().filter(|r| r.is_readable());
        let disk = self.disk_replicas().iter().filter(|r| r.is_readable());
        memory
            .map(Replica::descriptor)
            .chain(disk.map(DiskReplica::descriptor))
            .collect()
    }

    /// Applies the pending soft-pin action (when the first replica completes).
    pub fn commit_pending_pin(&mut self, now: u64) {
        if self.extra.is_none() {
            return;
        }
        self.update_extra(|e| {
            if e.soft_pin.is_some_and(|d| now >= d) {
                e.soft_pin = None;
            }
            let Some(p) = e.pending_pin.take() else {
                return;
            };
            match p.action {
                SoftPinAction::Preserve => {}
                SoftPinAction::Enable if p.ttl_ns == 0 => e.soft_pin = None,
                SoftPinAction::Enable => e.soft_pin = Some(now.saturating_add(p.ttl_ns)),
                SoftPinAction::Disable => e.soft_pin = None,
            }
        });
    }

    /// Removes the replicas matching `pred` and returns their buffers.
    pub fn take_replicas(&mut self, pred: impl Fn(&Replica) -> bool) -> Vec<Buffer> {
        let mut out = Vec::new();
        self.replicas.retain(|r| {
            if pred(r) {
                out.push(r.buffer());
                false
            } else {
                true
            }
        });
        out
    }
}

/// One shard: tenant -> key -> object. Objects are boxed: the maps' buckets (half of
/// them empty right after a resize) then cost 24 bytes each, not an object's size.
#[derive(Default)]
pub(crate) struct Shard {
    tenants: HashMap<String, HashMap<Box<str>, Box<Object>>>,
}

/// (tenant, group id) -> member keys.
type GroupIndex = HashMap<(String, String), HashSet<Box<str>>>;

/// The sharded table.
pub(crate) struct ObjectTable {
    shards: Vec<Mutex<Shard>>,
    count: AtomicUsize,
    groups: Mutex<GroupIndex>,
    log: Arc<ReplicationLog>,
    /// The service clock's origin (object times are nanoseconds since).
    start: Instant,
}

impl ObjectTable {
    /// An empty table recording its changes in `log`; object times count from `start`.
    pub fn new(log: Arc<ReplicationLog>, start: Instant) -> ObjectTable {
        ObjectTable {
            shards: (0..NUM_SHARDS)
                .map(|_| Mutex::new(Shard::default()))
                .collect(),
            count: AtomicUsize::new(0),
            groups: Mutex::new(HashMap::new()),
            log,
            start,
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// Appends every object's state to the replication log (a full dump), shard by
    /// shard under each shard's lock.
    pub fn dump(&self) {
        for i in 0..NUM_SHARDS {
            let shard = self.lock(i);
            let now = self.now();
            shard.for_each(|t, k, o| {
                self.log.append(&Record::Object {
                    tenant: t.to_string(),
                    key: k.to_string(),
                    state: o.state(now),
                });
            });
        }
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Shard of (tenant, key).
    pub fn shard_of(tenant: &str, key: &str) -> usize {
        let mut h = DefaultHasher::new();
        tenant.hash(&mut h);
        key.hash(&mut h);
        (h.finish() % NUM_SHARDS as u64) as usize
    }

    /// Locks shard `idx`.
    pub fn lock(&self, idx: usize) -> ShardGuard<'_> {
        ShardGuard {
            table: self,
            shard: self.shards[idx % NUM_SHARDS].lock(),
            changed: Vec::new(),
        }
    }

    /// Locks the shard of (tenant, key).
    pub fn lock_key(&self, tenant: &str, key: &str) -> ShardGuard<'_> {
        self.lock(Self::shard_of(tenant, key))
    }

    /// Keys of group `group` in `tenant` (a snapshot).
    pub fn group_members(&self, tenant: &str, group: &str) -> Vec<String> {
        let groups = self.groups.lock();
        groups
            .get(&(tenant.to_string(), group.to_string()))
            .map(|s| s.iter().map(|k| k.to_string()).collect())
            .unwrap_or_default()
    }

    fn group_add(&self, tenant: &str, group: &str, key: &str) {
        if group.is_empty() {
            return;
        }
        self.groups
            .lock()
            .entry((tenant.to_string(), group.to_string()))
            .or_default()
            .insert(key.into());
    }

    fn group_remove(&self, tenant: &str, group: &str, key: &str) {
        if group.is_empty() {
            return;
        }
        let mut groups = self.groups.lock();
        let gk = (tenant.to_string(), group.to_string());
        if let Some(set) = groups.get_mut(&gk) {
            set.remove(key);
            if set.is_empty() {
                groups.remove(&gk);
            }
        }
    }
}

/// A locked shard; every insertion and removal goes through it so the object count and
/// the group index stay exact.
pub(crate) struct ShardGuard<'a> {
    table: &'a ObjectTable,
    shard: MutexGuard<'a, Shard>,
    /// Keys changed under this guard, recorded when it is released.
    changed: Vec<(String, String)>,
}

/// What identifies an object's replica set and their states (a change of it is
/// replicated).
fn fingerprint(o: &Object) -> (usize, u64) {
    let h = o.replicas.iter().fold(0u64, |h, r| {
        h.wrapping_mul(31)
            .wrapping_add(r.id)
            .wrapping_mul(7)
            .wrapping_add(r.status as u64)
    });
    let h = o
        .disk_replicas()
        .iter()
        .fold(h, |h, r| h.wrapping_mul(31).wrapping_add(r.id));
    (o.replicas.len() + o.disk_replicas().len(), h)
}

impl ShardGuard<'_> {
    fn mark_changed(&mut self, tenant: &str, key: &str) {
        if self.table.log.is_active() {
            self.changed.push((tenant.to_string(), key.to_string()));
        }
    }

    /// The object at (tenant, key).
    pub fn get(&self, tenant: &str, key: &str) -> Option<&Object> {
        self.shard.tenants.get(tenant)?.get(key).map(|o| &**o)
    }

    /// The object at (tenant, key), mutably; the change is replicated.
    pub fn get_mut(&mut self, tenant: &str, key: &str) -> Option<&mut Object> {
        self.mark_changed(tenant, key);
        self.get_for_lease(tenant, key)
    }

    /// The object at (tenant, key), mutably, for changes that are not replicated:
    /// leases and read tracking (a new leader grants fresh leases to everything).
    pub fn get_for_lease(&mut self, tenant: &str, key: &str) -> Option<&mut Object> {
        self.shard
            .tenants
            .get_mut(tenant)?
            .get_mut(key)
            .map(|o| &mut **o)
    }

    /// Inserts a new object (the caller checked the key is free).
    pub fn insert(&mut self, tenant: &str, key: &str, obj: Object) {
        self.mark_changed(tenant, key);
        self.table.group_add(tenant, obj.group_id(), key);
        let old = self
            .shard
            .tenants
            .entry(tenant.to_string())
            .or_default()
            .insert(key.into(), Box::new(obj));
        match old {
            Some(o) => self.table.group_remove(tenant, o.group_id(), key),
            None => {
                self.table.count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Removes and returns the object at (tenant, key).
    pub fn remove(&mut self, tenant: &str, key: &str) -> Option<Object> {
        self.mark_changed(tenant, key);
        let map = self.shard.tenants.get_mut(tenant)?;
        let obj = map.remove(key)?;
        if map.is_empty() {
            self.shard.tenants.remove(tenant);
        }
        self.table.count.fetch_sub(1, Ordering::Relaxed);
        self.table.group_remove(tenant, obj.group_id(), key);
        Some(*obj)
    }

    /// Removes the object if it has no replica left (in memory or on disk); returns
    /// whether it did.
    pub fn remove_if_empty(&mut self, tenant: &str, key: &str) -> bool {
        if self.get(tenant, key).is_some_and(Object::is_empty) {
            self.remove(tenant, key);
            true
        } else {
            false
        }
    }

    /// Visits every object of `tenant` (all tenants when `None`); `f` returns `false`
    /// to erase the object, whose remaining replica buffers are appended to `freed`.
    pub fn retain(
        &mut self,
        tenant: Option<&str>,
        mut f: impl FnMut(&str, &str, &mut Object) -> bool,
        freed: &mut Vec<Buffer>,
    ) -> usize {
        let table = self.table;
        let logging = table.log.is_active();
        let mut removed = 0;
        let mut groups_gone: Vec<(String, String, String)> = Vec::new();
        let changed = &mut self.changed;
        self.shard.tenants.retain(|t, map| {
            if tenant.is_some_and(|want| want != t) {
                return true;
            }
            map.retain(|k, obj| {
                let before = logging.then(|| fingerprint(obj));
                let keep = f(t, k, obj);
                if before.is_some_and(|b| !keep || b != fingerprint(obj)) {
                    changed.push((t.clone(), k.to_string()));
                }
                if keep {
                    return true;
                }
                freed.extend(
                    std::mem::take(&mut obj.replicas)
                        .into_iter()
                        .map(Replica::into_buffer),
                );
                if !obj.group_id().is_empty() {
                    groups_gone.push((t.clone(), obj.group_id().to_string(), k.to_string()));
                }
                removed += 1;
                false
            });
            !map.is_empty()
        });
        table.count.fetch_sub(removed, Ordering::Relaxed);
        for (t, g, k) in groups_gone {
            table.group_remove(&t, &g, &k);
        }
        removed
    }

    /// Visits every object read-only.
    pub fn for_each(&self, mut f: impl FnMut(&str, &str, &Object)) {
        for (t, map) in &self.shard.tenants {
            for (k, obj) in map {
                f(t, k, obj);
            }
        }
    }
}

impl Drop for ShardGuard<'_> {
    /// Records the new state of every changed key, still under the shard lock, so the
    /// log holds each key's changes in the order they were made.
    fn drop(&mut self) {
        if self.changed.is_empty() {
            return;
        }
        let mut changed = std::mem::take(&mut self.changed);
        changed.sort_unstable();
        changed.dedup();
        let now = self.table.now();
        for (tenant, key) in changed {
            let rec = match self.get(&tenant, &key) {
                Some(o) => Record::Object {
                    state: o.state(now),
                    tenant,
                    key,
                },
                None => Record::Removed { tenant, key },
            };
            self.table.log.append(&rec);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    /// The per-object footprint this layout is built for: a bucket of 24 bytes (boxed
    /// key and object) and an 88-byte object (a 96-byte malloc chunk) with one inline
    /// replica.
    #[test]
    fn layout_sizes() {
        assert_eq!(size_of::<Replica>(), 40);
        assert_eq!(size_of::<Replicas>(), 40);
        assert!(size_of::<Object>() <= 88, "{}", size_of::<Object>());
        assert_eq!(size_of::<(Box<str>, Box<Object>)>(), 24);
    }

    fn buffers(n: usize) -> (super::super::segments::Segments, Vec<Buffer>) {
        use crate::wire::master_api::Segment;
        let segs = super::super::segments::Segments::new(false);
        let seg = Segment {
            id: Uuid {
                first: 1,
                second: 2,
            },
            name: "seg".into(),
            base: 0x1000,
            size: 1 << 20,
            ..Default::default()
        };
        segs.mount(&seg, Uuid::default()).unwrap();
        let bufs = segs.with_view(|v| (0..n).map(|_| v.try_alloc("seg", 64, 0).unwrap()).collect());
        (segs, bufs)
    }

    fn ids(r: &Replicas) -> Vec<u64> {
        r.iter().map(|r| r.id).collect()
    }

    #[test]
    fn replicas_inline_and_vector() {
        let (_segs, bufs) = buffers(3);
        let make = |n: usize| -> Replicas {
            bufs[..n]
                .iter()
                .enumerate()
                .map(|(i, b)| Replica::new(i as u64, ReplicaStatus::Processing, b.clone()))
                .collect()
        };
        let empty = make(0);
        assert!(empty.is_empty());
        let mut one = make(1);
        assert_eq!(ids(&one), [0]);
        one[0].status = ReplicaStatus::Complete;
        assert_eq!(one.iter().next().unwrap().status, ReplicaStatus::Complete);
        one.retain(|_| true);
        assert_eq!(ids(&one), [0]);
        one.retain(|_| false);
        assert!(one.is_empty());

        let mut three = make(3);
        assert_eq!(ids(&three), [0, 1, 2]);
        three.retain(|r| r.id != 1);
        assert_eq!(ids(&three), [0, 2]);
        let back: Vec<u64> = three.clone().into_iter().map(|r| r.id).collect();
        assert_eq!(back, [0, 2]);
        three.retain(|r| r.id == 2);
        assert!(matches!(three.0, ReplicasRepr::One(_)));
        assert_eq!(ids(&three), [2]);
        let buf = three.into_iter().next().unwrap().into_buffer();
        assert_eq!((buf.addr, buf.block), (bufs[2].addr, bufs[2].block));

        let mut o = Object::new(
            Uuid::default(),
            1,
            64,
            make(2),
            false,
            None,
            PendingPin {
                action: SoftPinAction::Preserve,
                ttl_ns: 0,
            },
            "",
        );
        let taken = o.take_replicas(|r| r.id == 0);
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].addr, bufs[0].addr);
        assert_eq!(ids(&o.replicas), [1]);
    }

    #[test]
    fn rare_attributes_box_only_while_set() {
        let pin = |action, ttl_ns| PendingPin { action, ttl_ns };
        let new = |hard, soft, p, g: &str| {
            Object::new(
                Uuid::default(),
                1,
                64,
                Replicas::default(),
                hard,
                soft,
                p,
                g,
            )
        };
        let mut o = new(false, None, pin(SoftPinAction::Preserve, 0), "");
        assert!(o.extra.is_none());
        assert_eq!(
            (o.hard_pin(), o.soft_pin(), o.checksum(), o.group_id()),
            (false, None, None, "")
        );
        o.set_checksum(None);
        o.set_pending_pin(None);
        o.commit_pending_pin(5);
        assert!(o.extra.is_none());
        o.set_checksum(Some(7));
        assert_eq!(o.checksum(), Some(7));
        o.set_checksum(None);
        assert!(o.extra.is_none());

        // Enable: pinned from the first completion on, for the TTL.
        let mut o = new(false, None, pin(SoftPinAction::Enable, 10), "");
        assert!(o.extra.is_some() && o.soft_pin().is_none());
        o.commit_pending_pin(100);
        assert_eq!(o.soft_pin(), Some(110));
        assert!(o.soft_pinned(109) && !o.soft_pinned(110));
        // Expired at the next commit: dropped, and the box with it.
        o.set_pending_pin(Some(pin(SoftPinAction::Preserve, 0)));
        o.commit_pending_pin(200);
        assert_eq!(o.soft_pin(), None);
        assert!(o.extra.is_none());
        // Disable and Enable(0) clear a live pin; Preserve keeps it.
        for (action, kept) in [
            (SoftPinAction::Disable, None),
            (SoftPinAction::Enable, None),
            (SoftPinAction::Preserve, Some(500)),
        ] {
            let mut o = new(false, Some(500), pin(action, 0), "");
            o.commit_pending_pin(300);
            assert_eq!(o.soft_pin(), kept, "{action:?}");
            assert_eq!(o.extra.is_some(), kept.is_some());
        }
        let mut o = new(true, None, pin(SoftPinAction::Disable, 0), "g");
        o.set_pending_pin(None);
        o.commit_pending_pin(1);
        assert!(o.hard_pin());
        assert_eq!(o.group_id(), "g");
    }
}
