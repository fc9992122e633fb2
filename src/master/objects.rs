//! The object table (spec store.md §2.1): 1024 shards of `parking_lot::Mutex`, each a
//! map tenant -> key -> [`Object`], keyed by hash(tenant, key); plus a group index
//! (tenant, group id) -> member keys used to lease and evict groups together.
//!
//! Lock order: a shard lock may be held while taking the segment table's or the group
//! index's lock, never the other way round, and never two shard locks at once.
//!
//! Tenant charges: with multi-tenancy, every change made through a [`ShardGuard`] moves
//! its tenant's charge (see `tenants`) by the difference it made, when the guard is
//! released.
//!
//! Census: every change made through a [`ShardGuard`] moves the table's
//! [`CensusCounts`] by the classes it changed: `get_mut` notes the object's classes
//! and the guard's next structural change (or its release) compares.
//!
//! Replication: every change made through a [`ShardGuard`] (insert, remove, `get_mut`,
//! `retain`) is recorded in the master's replication log when the guard is released,
//! still under the shard lock, as the object's whole new state (or its removal); lease
//! and read-tracking updates (`get_for_lease`) are not replicated.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, MutexGuard};

use super::census::{Census, CensusCounts, CensusSnapshot};
use super::entries::Entries;
use super::ha::changelog::ReplicationLog;
use super::ha::record::Record;
use super::object::Object;
use super::segments::Buffer;
use super::tenants::{charge_of, Charges};
use crate::wire::master_api::{ErrorCode, MasterResult};

/// Number of shards.
pub(crate) const NUM_SHARDS: usize = 1024;

/// One shard: tenant -> key -> object, each object and its key in one allocation (see
/// `entries`).
#[derive(Default)]
pub(crate) struct Shard {
    tenants: foldhash::HashMap<String, Entries>,
}

/// (tenant, group id) -> member keys.
type GroupIndex = HashMap<(String, String), HashSet<Box<str>>>;

/// The sharded table.
pub(crate) struct ObjectTable {
    shards: Vec<Mutex<Shard>>,
    count: AtomicUsize,
    groups: Mutex<GroupIndex>,
    log: Arc<ReplicationLog>,
    /// With multi-tenancy: what each tenant's objects take, moved on every change.
    charges: Option<Arc<Charges>>,
    /// The service clock's origin (object times are nanoseconds since).
    start: Instant,
    /// Objects per census class.
    census: CensusCounts,
    /// Picks a key's shard (foldhash, seeded at random per process: keys come from
    /// clients, and SipHash took a tenth of the master's time).
    shard_hash: foldhash::fast::RandomState,
}

impl ObjectTable {
    /// An empty table recording its changes in `log` (and in `charges`, when given);
    /// object times count from `start`.
    pub fn new(
        log: Arc<ReplicationLog>,
        charges: Option<Arc<Charges>>,
        start: Instant,
    ) -> ObjectTable {
        ObjectTable {
            shards: (0..NUM_SHARDS)
                .map(|_| Mutex::new(Shard::default()))
                .collect(),
            count: AtomicUsize::new(0),
            groups: Mutex::new(HashMap::new()),
            log,
            charges,
            start,
            census: CensusCounts::default(),
            shard_hash: foldhash::fast::RandomState::default(),
        }
    }

    /// Objects soft-pinned, with a COMPLETE memory replica, with a disk copy.
    pub fn census(&self) -> CensusSnapshot {
        self.census.snapshot()
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
    fn shard_of(&self, tenant: &str, key: &str) -> usize {
        (self.shard_hash.hash_one((tenant, key)) % NUM_SHARDS as u64) as usize
    }

    /// Locks shard `idx`.
    pub fn lock(&self, idx: usize) -> ShardGuard<'_> {
        ShardGuard {
            table: self,
            shard: self.shards[idx % NUM_SHARDS].lock(),
            changed: Vec::new(),
            charged: Vec::new(),
            noted: None,
        }
    }

    /// Locks the shard of (tenant, key).
    pub fn lock_key(&self, tenant: &str, key: &str) -> ShardGuard<'_> {
        self.lock(self.shard_of(tenant, key))
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
    /// With multi-tenancy: each key changed under this guard and what it charged
    /// before; the difference is charged when the guard is released.
    charged: Vec<(String, String, u64)>,
    /// The object last handed out by `get_mut` and its census classes then; settled
    /// (see [`ShardGuard::settle_census`]) before any insertion or removal and on
    /// release, while the object is still in the shard.
    noted: Option<(NonNull<Object>, Census)>,
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
        if self.table.charges.is_some()
            && !self.charged.iter().any(|(t, k, _)| t == tenant && k == key)
        {
            let before = self.get(tenant, key).map_or(0, charge_of);
            self.charged
                .push((tenant.to_string(), key.to_string(), before));
        }
    }

    /// The object at (tenant, key).
    pub fn get(&self, tenant: &str, key: &str) -> Option<&Object> {
        self.shard.tenants.get(tenant)?.get(key)
    }

    /// The object at (tenant, key), mutably; the change is replicated.
    pub fn get_mut(&mut self, tenant: &str, key: &str) -> Option<&mut Object> {
        self.mark_changed(tenant, key);
        self.settle_census();
        let o = self.shard.tenants.get_mut(tenant)?.get_mut(key)?;
        self.noted = Some((NonNull::from(&mut *o), Census::of(o)));
        Some(o)
    }

    /// Moves the table's census by what was changed in the object last handed out
    /// by `get_mut`.
    fn settle_census(&mut self) {
        if let Some((o, before)) = self.noted.take() {
            // SAFETY: `o` points into an entry's allocation in this locked shard: it
            // was handed out by `get_mut`, whose borrow has ended, and every method
            // that borrows an object mutably again, removes or replaces one (and the
            // guard's release) settles first, so the entry is still in the shard and
            // nothing borrowed it since. Moving entries' pointers between buckets
            // does not move the object.
            let after = Census::of(unsafe { o.as_ref() });
            self.table.census.apply(before, after);
        }
    }

    /// [`ShardGuard::get_mut`], a missing object being `OBJECT_NOT_FOUND`.
    pub fn existing_mut(&mut self, tenant: &str, key: &str) -> MasterResult<&mut Object> {
        self.get_mut(tenant, key).ok_or(ErrorCode::OBJECT_NOT_FOUND)
    }

    /// The object at (tenant, key), mutably, for changes that are not replicated:
    /// leases and read tracking (a new leader grants fresh leases to everything).
    pub fn get_for_lease(&mut self, tenant: &str, key: &str) -> Option<&mut Object> {
        // A fresh mutable borrow of an object invalidates pointers taken before it.
        self.settle_census();
        self.shard.tenants.get_mut(tenant)?.get_mut(key)
    }

    /// Inserts a new object (the caller checked the key is free).
    pub fn insert(&mut self, tenant: &str, key: &str, obj: Object) {
        self.mark_changed(tenant, key);
        self.settle_census();
        self.table.census.apply(Census::default(), Census::of(&obj));
        self.table.group_add(tenant, obj.group_id(), key);
        let old = match self.shard.tenants.get_mut(tenant) {
            Some(entries) => entries.insert(key, obj),
            None => {
                let mut entries = Entries::default();
                entries.insert(key, obj);
                self.shard.tenants.insert(tenant.to_string(), entries);
                None
            }
        };
        match old {
            Some(o) => {
                self.table.census.apply(Census::of(&o), Census::default());
                self.table.group_remove(tenant, o.group_id(), key);
            }
            None => {
                self.table.count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Removes and returns the object at (tenant, key).
    pub fn remove(&mut self, tenant: &str, key: &str) -> Option<Object> {
        self.mark_changed(tenant, key);
        self.settle_census();
        let map = self.shard.tenants.get_mut(tenant)?;
        let obj = map.remove(key)?;
        self.table.census.apply(Census::of(&obj), Census::default());
        if map.is_empty() {
            self.shard.tenants.remove(tenant);
        }
        self.table.count.fetch_sub(1, Ordering::Relaxed);
        self.table.group_remove(tenant, obj.group_id(), key);
        Some(obj)
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
        self.settle_census();
        let table = self.table;
        let logging = table.log.is_active();
        let charges = table.charges.as_deref();
        let mut removed = 0;
        let mut groups_gone: Vec<(String, String, String)> = Vec::new();
        let changed = &mut self.changed;
        self.shard.tenants.retain(|t, map| {
            if tenant.is_some_and(|want| want != t) {
                return true;
            }
            map.retain(|k, obj| {
                let before = logging.then(|| fingerprint(obj));
                let charged = charges.map(|_| charge_of(obj));
                let census = Census::of(obj);
                let keep = f(t, k, obj);
                table.census.apply(
                    census,
                    if keep {
                        Census::of(obj)
                    } else {
                        Census::default()
                    },
                );
                if before.is_some_and(|b| !keep || b != fingerprint(obj)) {
                    changed.push((t.clone(), k.to_string()));
                }
                if let (Some(c), Some(b)) = (charges, charged) {
                    c.apply(t, b, if keep { charge_of(obj) } else { 0 });
                }
                if keep {
                    return true;
                }
                freed.extend(obj.take_replicas(|_| true));
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
            for (k, obj) in map.iter() {
                f(t, k, obj);
            }
        }
    }
}

impl Drop for ShardGuard<'_> {
    /// Records the new state of every changed key, still under the shard lock, so the
    /// log holds each key's changes in the order they were made.
    fn drop(&mut self) {
        self.settle_census();
        if let Some(charges) = self.table.charges.as_deref() {
            for (tenant, key, before) in std::mem::take(&mut self.charged) {
                let after = self.get(&tenant, &key).map_or(0, charge_of);
                charges.apply(&tenant, before, after);
            }
        }
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
