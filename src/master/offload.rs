//! The disk tier on the master's side (spec tiers-events-conductor.md §1.3, §1.4,
//! §1.10): clients mount their local disks, drain the offload tasks queued for them,
//! and report the copies they wrote, which become LOCAL_DISK replicas.
//!
//! When a copy is asked for: as soon as an object is written (`--enable_offload`), or
//! when eviction picks it (`--offload_on_evict`). Either way an object whose owner
//! takes offload tasks keeps its memory replica until its disk copy has landed (the
//! task pins it, see `eviction`), so no acknowledged object is lost on its way down —
//! unlike upstream, whose pin can come too late. A task remembers the write it was
//! queued for (its put's start time): a report for an object written again since is
//! ignored, so a copy of an old value never becomes a replica of a new one.
//!
//! Beyond upstream, a report for an object no task was queued for (an owner
//! re-registering what is on its disk after a restart) is taken only when the object
//! already has a disk copy of the same size on the reporter's host (the restarted
//! owner's old self, whose copy it then takes over): a file left behind by a removed
//! key could otherwise be added to a new value of that key.

use super::kv_events::Medium;
use super::local_disk::{DiskRef, DiskReplica, LocalDisks, ObjectKey};
use super::object::Object;
use super::tables::Tables;
use crate::host::addr::parse_host_port;
use crate::wire::disk_tier_api::{OffloadTaskItem, StorageObjectMetadata};
use crate::wire::master_api::{ErrorCode, MasterResult, ReplicaStatus, ReplicaType, Uuid};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The host part of an offload RPC address.
fn host_of(endpoint: &str) -> String {
    parse_host_port(endpoint, 0).0
}

/// The disk tier: clients' local disks, the offload tasks queued for them, and this
/// eviction run's offload budget.
pub(super) struct DiskTier {
    t: Arc<Tables>,
    /// Clients' local disks and the offload tasks queued for them.
    pub(super) local_disks: LocalDisks,
    /// Offload tasks the current eviction run may still queue.
    offload_budget: AtomicU64,
}

impl DiskTier {
    /// No disk mounted yet; the budget is filled by [`DiskTier::refill_offload_budget`].
    pub fn new(t: Arc<Tables>) -> DiskTier {
        DiskTier {
            local_disks: LocalDisks::new(
                t.config.offloading_queue_limit,
                t.config.promotion_queue_limit,
            ),
            t,
            offload_budget: AtomicU64::new(0),
        }
    }

    /// UNABLE_OFFLOAD unless `--enable_offload`.
    pub(super) fn check_offload_enabled(&self) -> MasterResult<()> {
        if self.t.config.enable_offload {
            Ok(())
        } else {
            Err(ErrorCode::UNABLE_OFFLOAD)
        }
    }

    /// Asks the owner of `o`'s first complete memory replica for a disk copy; whether
    /// it was queued (the owner takes offload tasks and its queue has room). Called
    /// under `o`'s shard lock.
    pub(super) fn queue_offload(&self, tenant: &str, key: &str, o: &mut Object) -> bool {
        if o.offload_pending() || !o.disk_replicas().is_empty() {
            return false;
        }
        let Some(owner) = o
            .replicas
            .iter()
            .find(|r| r.status == ReplicaStatus::Complete && r.seg.is_usable())
            .map(|r| r.seg.client)
        else {
            return false;
        };
        let task = OffloadTaskItem {
            tenant_id: tenant.to_string(),
            key: key.to_string(),
            size: i64::try_from(o.size()).unwrap_or(i64::MAX),
        };
        if !self.local_disks.enqueue(owner, task, o.put_start) {
            return false;
        }
        o.set_offload_pending(true);
        self.t
            .metrics
            .offload_queued
            .fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Offload tasks one eviction run may queue: `offload_cap_ratio` of the queue
    /// limit, at least one.
    pub(super) fn offload_cap(&self) -> u64 {
        let cap = self.t.config.offload_cap_ratio * self.t.config.offloading_queue_limit as f64;
        (cap as u64).max(1)
    }

    /// A new eviction run may queue [`DiskTier::offload_cap`] tasks.
    pub(super) fn refill_offload_budget(&self) {
        self.offload_budget
            .store(self.offload_cap(), Ordering::Relaxed);
    }

    /// Takes one task from this run's budget; false when it is spent.
    pub(super) fn take_offload_budget(&self) -> bool {
        self.offload_budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Gives back a task taken from the budget and not queued.
    pub(super) fn return_offload_budget(&self) {
        self.offload_budget.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the owner of `o`'s first readable memory replica takes offload tasks.
    pub(super) fn owner_offloads(&self, o: &Object) -> bool {
        o.replicas
            .iter()
            .find(|r| r.is_readable())
            .is_some_and(|r| self.local_disks.offloading(r.seg.client))
    }

    /// The objects in `keys` no longer wait for a disk copy.
    pub(super) fn release_offload_pins(&self, keys: Vec<ObjectKey>) {
        for (tenant, key) in keys {
            let mut shard = self.t.objects.lock_key(&tenant, &key);
            if let Some(o) = shard.get_for_lease(&tenant, &key) {
                o.set_offload_pending(false);
            }
        }
    }

    /// Unmounts `client`'s disk, if mounted: its replicas go (objects left with none
    /// are erased) and objects waiting for it are released.
    pub(super) fn unmount_local_disk(&self, client: Uuid) -> bool {
        let Some(pending) = self.local_disks.unmount(client) else {
            return false;
        };
        self.release_offload_pins(pending);
        self.t.sweep_dead_replicas();
        log::info!("client_id={client}: local disk unmounted");
        true
    }

    /// Registers one reported copy; whether it became (or updated) a replica.
    pub(super) fn register_copy(
        &self,
        client: Uuid,
        task: &OffloadTaskItem,
        meta: &StorageObjectMetadata,
        disk: Option<&DiskRef>,
    ) -> bool {
        let Ok(tenant) = self.t.read_tenant(&task.tenant_id) else {
            return false;
        };
        let key: ObjectKey = (tenant.to_string(), task.key.clone());
        let queued_for = self.local_disks.settle(client, &key);
        let (tenant, name) = (&key.0, &key.1);
        let mut shard = self.t.objects.lock_key(tenant, name);
        let Some(o) = shard.get_for_lease(tenant, name) else {
            return false;
        };
        if queued_for.is_some() {
            o.set_offload_pending(false);
        }
        let Some(disk) = disk else { return false };
        let Ok(size) = u64::try_from(meta.data_size) else {
            return false; // the owner could not write it
        };
        if size != o.size() || queued_for.is_some_and(|put| put != o.put_start) {
            return false; // a copy of another value
        }
        let host = host_of(&meta.transport_endpoint);
        let mine = o
            .disk_replicas()
            .iter()
            .position(|r| r.disk.client == client);
        // A re-registration is vouched for by the copy its old self left on this host,
        // which it takes over (readers are not sent to the old, dead address).
        let old_self = o
            .disk_replicas()
            .iter()
            .position(|r| r.size == size && host_of(&r.endpoint) == host);
        if queued_for.is_none() && mine.is_none() && old_self.is_none() {
            return false; // nothing vouches for this file
        }
        let o = shard.get_mut(tenant, name).expect("looked up above");
        let endpoint: Box<str> = meta.transport_endpoint.as_str().into();
        match (mine, old_self.filter(|_| queued_for.is_none())) {
            (Some(i), _) => o.update_disk_replicas(|d| {
                d[i].size = size;
                d[i].endpoint = endpoint;
            }),
            (None, Some(i)) => o.update_disk_replicas(|d| {
                d[i].disk = disk.clone();
                d[i].endpoint = endpoint;
            }),
            (None, None) => o.add_disk_replica(DiskReplica {
                id: self.t.next_replica_id(),
                disk: disk.clone(),
                size,
                endpoint,
            }),
        }
        true
    }

    /// Drops `client`'s copy of (tenant, key) of type `kind`; erases the object when it
    /// was its last replica.
    pub(super) fn evict_disk_copy(
        &self,
        client: Uuid,
        key: &str,
        tenant: &str,
        kind: ReplicaType,
    ) -> MasterResult<()> {
        match kind {
            ReplicaType::LocalDisk | ReplicaType::Disk => {}
            _ => return Err(ErrorCode::INVALID_PARAMS),
        }
        let tenant = self.t.read_tenant(tenant)?;
        let mut shard = self.t.objects.lock_key(tenant, key);
        let o = shard.existing_mut(tenant, key)?;
        // No shared-file-system (DISK) replicas here.
        if kind == ReplicaType::Disk || o.drop_disk_replicas(|r| r.disk.client == client) == 0 {
            return Err(ErrorCode::REPLICA_NOT_FOUND);
        }
        let group = o.group_id().to_string();
        if shard.remove_if_empty(tenant, key) {
            self.t.kv_events.removed(key, Medium::Disk, tenant, &group);
        }
        Ok(())
    }
}
