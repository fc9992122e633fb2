//! Removal (spec store.md §1.3 remove rows, §3.1): Remove, RemoveByRegex, RemoveAll,
//! BatchRemove and BatchReplicaClear. An active lease blocks a non-forced removal; an
//! object still being written is never removed, forced or not. Of these, only Remove
//! announces a KV event (`removed`), as upstream's master does.

use super::objects::NUM_SHARDS;
use super::read::compile_regex;
use super::replica::Replica;
use super::write::Writes;
use crate::wire::master_api::{ErrorCode, MasterResult, ReplicaStatus, Uuid, DEFAULT_TENANT};

impl Writes {
    /// `Remove`: -704 missing, -706 leased and not forced, -703 still being written.
    /// With `announce`, a removal is published as a KV event.
    pub(super) fn remove_one(
        &self,
        key: &str,
        force: bool,
        tenant: &str,
        announce: bool,
    ) -> MasterResult<()> {
        let tenant = self.t.read_tenant(tenant)?;
        let now = self.t.now();
        let mut shard = self.t.objects.lock_key(tenant, key);
        let o = shard.get(tenant, key).ok_or(ErrorCode::OBJECT_NOT_FOUND)?;
        if !force && o.held(now, self.t.lease_ns) {
            return Err(ErrorCode::OBJECT_HAS_LEASE);
        }
        if !o.all_complete() {
            return Err(ErrorCode::REPLICA_IS_NOT_READY);
        }
        let removed = shard.remove(tenant, key);
        if let (true, Some(o)) = (announce, &removed) {
            self.t.announce_removed(tenant, key, o.group_id());
        }
        drop(shard);
        if let Some(o) = removed {
            self.t.segments.release(o.into_buffers());
        }
        Ok(())
    }

    /// Removes every complete object of `tenant` whose key satisfies `matches` and
    /// whose lease has expired (or `force`); returns the count.
    /// (`None`: every tenant.)
    fn remove_where(
        &self,
        tenant: Option<&str>,
        force: bool,
        matches: impl Fn(&str) -> bool,
    ) -> i64 {
        let now = self.t.now();
        let ttl = self.t.lease_ns;
        let mut count = 0usize;
        let mut freed = Vec::new();
        for i in 0..NUM_SHARDS {
            let mut shard = self.t.objects.lock(i);
            count += shard.retain(
                tenant,
                |_, k, o| !(matches(k) && (force || !o.held(now, ttl)) && o.all_complete()),
                &mut freed,
            );
            drop(shard);
            if freed.len() >= 4096 {
                self.t.segments.release(std::mem::take(&mut freed));
            }
        }
        self.t.segments.release(freed);
        count as i64
    }

    /// `RemoveByRegex`: substring match; -600 for an invalid pattern.
    pub(super) fn remove_by_regex_impl(
        &self,
        pattern: &str,
        force: bool,
        tenant: &str,
    ) -> MasterResult<i64> {
        let re = compile_regex(pattern)?;
        let tenant = self.t.read_tenant(tenant)?;
        Ok(self.remove_where(Some(tenant), force, |k| re.is_match(k)))
    }

    /// `RemoveAll`: hard-pinned objects included. When no disk copy is left, every
    /// local disk is told to wipe itself (at its next `PollRemoveAll`); a disk copy of
    /// a leased object that stayed keeps its disk intact. With multi-tenancy, `""`
    /// removes every tenant's objects and an invalid tenant nothing (0), as upstream.
    pub(super) fn remove_all_impl(&self, force: bool, tenant: &str) -> i64 {
        let scope = if self.t.tenants.enabled() && tenant.is_empty() {
            None
        } else {
            match self.t.read_tenant(tenant) {
                Ok(t) => Some(t),
                Err(_) => return 0,
            }
        };
        let removed = self.remove_where(scope, force, |_| true);
        if self.disk.local_disks.len() > 0 && !self.any_disk_copies() {
            self.disk.local_disks.request_remove_all();
        }
        removed
    }

    /// Whether some object has a disk copy.
    fn any_disk_copies(&self) -> bool {
        (0..NUM_SHARDS).any(|i| {
            let mut found = false;
            self.t.objects.lock(i).for_each(|_, _, o| {
                found |= !o.disk_replicas().is_empty();
            });
            found
        })
    }

    /// `BatchReplicaClear`: for each key written by `client` whose lease has expired,
    /// drops its COMPLETE replicas on `segment_name` (every replica, when the name is
    /// empty and the object is complete); returns the keys cleared.
    pub(super) fn batch_replica_clear_impl(
        &self,
        keys: &[String],
        client: Uuid,
        segment_name: &str,
    ) -> Vec<String> {
        let tenant = DEFAULT_TENANT;
        let now = self.t.now();
        let mut cleared = Vec::new();
        for key in keys {
            if key.is_empty() {
                continue;
            }
            let mut shard = self.t.objects.lock_key(tenant, key);
            let Some(o) = shard.get_mut(tenant, key) else {
                continue;
            };
            if o.client != client || o.held(now, self.t.lease_ns) {
                continue;
            }
            let bufs = if segment_name.is_empty() {
                if !o.all_complete() {
                    continue;
                }
                o.drop_disk_replicas(|_| true);
                o.take_replicas(|_| true)
            } else {
                let on_segment = |r: &Replica| {
                    r.status == ReplicaStatus::Complete && r.seg.segment.name == segment_name
                };
                if !o.replicas.iter().any(on_segment) {
                    continue;
                }
                o.take_replicas(on_segment)
            };
            shard.remove_if_empty(tenant, key);
            drop(shard);
            self.t.segments.release(bufs);
            cleared.push(key.clone());
        }
        cleared
    }
}
