//! The object table (spec store.md §2.1): 1024 shards of `parking_lot::Mutex`, each a
//! map tenant -> key -> [`Object`], keyed by hash(tenant, key); plus a group index
//! (tenant, group id) -> member keys used to lease and evict groups together.
//!
//! Lock order: a shard lock may be held while taking the segment table's or the group
//! index's lock, never the other way round, and never two shard locks at once.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::{Mutex, MutexGuard};

use super::segments::Buffer;
use crate::wire::master_api::{
    ErrorCode, ReplicaDescriptor, ReplicaLocation, ReplicaStatus, SoftPinAction, Uuid,
};

/// Number of shards.
pub(crate) const NUM_SHARDS: usize = 1024;

/// One memory replica.
#[derive(Debug, Clone)]
pub(crate) struct Replica {
    /// Global replica id.
    pub id: u64,
    /// PROCESSING or COMPLETE.
    pub status: ReplicaStatus,
    /// Its buffer.
    pub buf: Buffer,
}

impl Replica {
    /// Whether it can be read: complete and its segment still mounted.
    pub fn is_readable(&self) -> bool {
        self.status == ReplicaStatus::Complete && self.buf.seg.is_alive()
    }

    /// The wire descriptor.
    pub fn descriptor(&self) -> ReplicaDescriptor {
        ReplicaDescriptor {
            id: self.id,
            location: ReplicaLocation::Memory(self.buf.descriptor()),
            status: self.status,
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

/// Object metadata. Times are nanoseconds on the service clock; a lease of 0 is "never
/// read" (evicted first).
#[derive(Debug, Clone)]
pub(crate) struct Object {
    /// Writer of the current put.
    pub client: Uuid,
    /// When the current put started.
    pub put_start: u64,
    /// Value size.
    pub size: u64,
    /// Checksum given at PutEnd.
    pub checksum: Option<u64>,
    /// Read lease deadline.
    pub lease_timeout: u64,
    /// Soft-pin deadline.
    pub soft_pin: Option<u64>,
    /// Soft-pin action to apply when the put completes.
    pub pending_pin: Option<PendingPin>,
    /// Never evicted.
    pub hard_pin: bool,
    /// Group id ("" when none).
    pub group_id: String,
    /// Replicas.
    pub replicas: Vec<Replica>,
}

impl Object {
    /// Whether some replica is readable.
    pub fn has_readable(&self) -> bool {
        self.replicas.iter().any(Replica::is_readable)
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

    /// Whether the read lease has run out.
    pub fn lease_expired(&self, now: u64) -> bool {
        now >= self.lease_timeout
    }

    /// Whether an unexpired soft pin is set.
    pub fn soft_pinned(&self, now: u64) -> bool {
        self.soft_pin.is_some_and(|d| now < d)
    }

    /// Extends the read lease to at least `now + ttl`.
    pub fn grant_lease(&mut self, now: u64, ttl: u64) {
        self.lease_timeout = self.lease_timeout.max(now.saturating_add(ttl));
    }

    /// Why nothing can be read: -704 when no replica is left on a mounted segment
    /// (the object is as good as gone), -703 while a write is still in progress.
    pub fn unreadable_error(&self) -> ErrorCode {
        if self.replicas.iter().any(|r| r.buf.seg.is_alive()) {
            ErrorCode::REPLICA_IS_NOT_READY
        } else {
            ErrorCode::OBJECT_NOT_FOUND
        }
    }

    /// Descriptors of readable replicas.
    pub fn readable_descriptors(&self) -> Vec<ReplicaDescriptor> {
        self.replicas
            .iter()
            .filter(|r| r.is_readable())
            .map(Replica::descriptor)
            .collect()
    }

    /// Applies the pending soft-pin action (when the first replica completes).
    pub fn commit_pending_pin(&mut self, now: u64) {
        if self.soft_pin.is_some_and(|d| now >= d) {
            self.soft_pin = None;
        }
        let Some(p) = self.pending_pin.take() else {
            return;
        };
        match p.action {
            SoftPinAction::Preserve => {}
            SoftPinAction::Enable if p.ttl_ns == 0 => self.soft_pin = None,
            SoftPinAction::Enable => self.soft_pin = Some(now.saturating_add(p.ttl_ns)),
            SoftPinAction::Disable => self.soft_pin = None,
        }
    }

    /// Removes the replicas matching `pred` and returns their buffers.
    pub fn take_replicas(&mut self, pred: impl Fn(&Replica) -> bool) -> Vec<Buffer> {
        let mut out = Vec::new();
        self.replicas.retain(|r| {
            if pred(r) {
                out.push(r.buf.clone());
                false
            } else {
                true
            }
        });
        out
    }
}

/// One shard: tenant -> key -> object.
#[derive(Default)]
pub(crate) struct Shard {
    tenants: HashMap<String, HashMap<String, Object>>,
}

/// The sharded table.
pub(crate) struct ObjectTable {
    shards: Vec<Mutex<Shard>>,
    count: AtomicUsize,
    groups: Mutex<HashMap<(String, String), HashSet<String>>>,
}

impl ObjectTable {
    /// An empty table.
    pub fn new() -> ObjectTable {
        ObjectTable {
            shards: (0..NUM_SHARDS)
                .map(|_| Mutex::new(Shard::default()))
                .collect(),
            count: AtomicUsize::new(0),
            groups: Mutex::new(HashMap::new()),
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
            .map(|s| s.iter().cloned().collect())
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
            .insert(key.to_string());
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
}

impl ShardGuard<'_> {
    /// The object at (tenant, key).
    pub fn get(&self, tenant: &str, key: &str) -> Option<&Object> {
        self.shard.tenants.get(tenant)?.get(key)
    }

    /// The object at (tenant, key), mutably.
    pub fn get_mut(&mut self, tenant: &str, key: &str) -> Option<&mut Object> {
        self.shard.tenants.get_mut(tenant)?.get_mut(key)
    }

    /// Inserts a new object (the caller checked the key is free).
    pub fn insert(&mut self, tenant: &str, key: &str, obj: Object) {
        self.table.group_add(tenant, &obj.group_id, key);
        let old = self
            .shard
            .tenants
            .entry(tenant.to_string())
            .or_default()
            .insert(key.to_string(), obj);
        match old {
            Some(o) => self.table.group_remove(tenant, &o.group_id, key),
            None => {
                self.table.count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Removes and returns the object at (tenant, key).
    pub fn remove(&mut self, tenant: &str, key: &str) -> Option<Object> {
        let map = self.shard.tenants.get_mut(tenant)?;
        let obj = map.remove(key)?;
        if map.is_empty() {
            self.shard.tenants.remove(tenant);
        }
        self.table.count.fetch_sub(1, Ordering::Relaxed);
        self.table.group_remove(tenant, &obj.group_id, key);
        Some(obj)
    }

    /// Removes the object if it has no replica left; returns whether it did.
    pub fn remove_if_empty(&mut self, tenant: &str, key: &str) -> bool {
        if self.get(tenant, key).is_some_and(|o| o.replicas.is_empty()) {
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
        let mut removed = 0;
        let mut groups_gone: Vec<(String, String, String)> = Vec::new();
        self.shard.tenants.retain(|t, map| {
            if tenant.is_some_and(|want| want != t) {
                return true;
            }
            map.retain(|k, obj| {
                if f(t, k, obj) {
                    return true;
                }
                freed.extend(obj.replicas.drain(..).map(|r| r.buf));
                if !obj.group_id.is_empty() {
                    groups_gone.push((t.clone(), std::mem::take(&mut obj.group_id), k.clone()));
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
