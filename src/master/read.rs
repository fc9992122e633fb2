//! The read path (spec store.md §2.3, §2.5 leases): ExistKey, GetReplicaList (+ batch
//! and by-regex), which grant read leases, and the lease-free admin queries.

use std::sync::Arc;

use super::config::DynamicMode;
use super::heat::Heat;
use super::kv_events::payload::{EventKind, PendingEvent};
use super::kv_events::Medium;
use super::object::Object;
use super::objects::NUM_SHARDS;
use super::promotion::Promotions;
use super::tables::Tables;
use crate::wire::master_api::{
    ErrorCode, GetReplicaListResponse, MasterResult, ReplicaDescriptor, ReplicaLocation,
    DEFAULT_TENANT,
};

/// Compiles `pattern` for substring search (ECMAScript `regex_search` semantics);
/// an invalid pattern is -600.
pub(super) fn compile_regex(pattern: &str) -> MasterResult<regex::Regex> {
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 24)
        .build()
        .map_err(|_| ErrorCode::INVALID_PARAMS)
}

/// The read path: leases and tracked reads over the object table; disk-only reads
/// are counted towards promotion.
pub(super) struct Reads {
    t: Arc<Tables>,
    promotions: Arc<Promotions>,
    /// Read heat, for dynamic replication.
    heat: Arc<Heat>,
}

impl Reads {
    /// The read path over `t`.
    pub fn new(t: Arc<Tables>, promotions: Arc<Promotions>, heat: Arc<Heat>) -> Reads {
        Reads {
            t,
            promotions,
            heat,
        }
    }

    /// Grants the read lease to `o`; returns the group whose other members must be
    /// refreshed too (when the object's own lease was running low).
    fn lease(&self, o: &mut Object, now: u64) -> Option<String> {
        let ttl = self.t.lease_ns;
        let refresh_group =
            !o.group_id().is_empty() && o.lease_timeout <= now.saturating_add(ttl / 2);
        o.grant_lease(now, ttl);
        refresh_group.then(|| o.group_id().to_string())
    }

    /// Extends the lease of every member of `group` (none of their shard locks held).
    fn lease_group(&self, tenant: &str, group: &str, now: u64) {
        for m in self.t.objects.group_members(tenant, group) {
            let mut shard = self.t.objects.lock_key(tenant, &m);
            if let Some(o) = shard.get_for_lease(tenant, &m) {
                o.grant_lease(now, self.t.lease_ns);
            }
        }
    }

    /// `ExistKey`: true only with a readable replica; grants a lease then.
    pub(super) fn exist_one(&self, key: &str, tenant: &str) -> MasterResult<bool> {
        let tenant = self.t.read_tenant(tenant)?;
        let now = self.t.now();
        let mut shard = self.t.objects.lock_key(tenant, key);
        let Some(o) = shard.get_for_lease(tenant, key) else {
            return Ok(false);
        };
        if !o.has_readable() {
            return Ok(false);
        }
        let group = self.lease(o, now);
        drop(shard);
        if let Some(g) = group {
            self.lease_group(tenant, &g, now);
        }
        Ok(true)
    }

    /// The readable replicas of `key`: -704 unknown, -703 nothing readable yet.
    ///
    /// Untracked (`GetReplicaList`), the object gets a read lease. Tracked
    /// (`BatchBeginRead`, an extension of this master, for a client that ends its
    /// reads with `BatchEndRead`): instead of a lease of `default_kv_lease_ttl`, the
    /// object is held only until the read ends (at most for that long), so objects
    /// read once do not block eviction for seconds. Grouped objects get the ordinary
    /// lease (a group is held together).
    pub(super) fn replica_list(
        &self,
        key: &str,
        tenant: &str,
        tracked: bool,
    ) -> MasterResult<GetReplicaListResponse> {
        let listed = self.list_replicas(key, tenant, tracked);
        self.t
            .metrics
            .record_get(listed.as_ref().ok().map(|(r, size)| {
                let in_memory = r
                    .replicas
                    .first()
                    .is_some_and(|d| matches!(d.location, ReplicaLocation::Memory(_)));
                (*size, in_memory)
            }));
        listed.map(|(r, _)| r)
    }

    /// [`Reads::replica_list`] before counting it; with the object's size.
    fn list_replicas(
        &self,
        key: &str,
        tenant: &str,
        tracked: bool,
    ) -> MasterResult<(GetReplicaListResponse, u64)> {
        let tenant = self.t.read_tenant(tenant)?;
        let now = self.t.now();
        let mut shard = self.t.objects.lock_key(tenant, key);
        let o = shard
            .get_for_lease(tenant, key)
            .ok_or(ErrorCode::OBJECT_NOT_FOUND)?;
        let replicas = o.readable_descriptors();
        if replicas.is_empty() {
            return Err(o.unreadable_error());
        }
        self.promotions.note_read_for_promotion(tenant, key, o);
        if self.heat.mode() != DynamicMode::Off {
            let memory = o.replicas.iter().filter(|r| r.is_readable()).count();
            self.heat.note_read(tenant, key, memory, now);
        }
        let checksum = o.checksum();
        let size = o.size();
        let tracking = tracked && o.group_id().is_empty() && o.begin_read(now, self.t.lease_ns);
        let group = if tracking { None } else { self.lease(o, now) };
        drop(shard);
        if let Some(g) = group {
            self.lease_group(tenant, &g, now);
        }
        Ok((
            GetReplicaListResponse {
                replicas,
                lease_ttl_ms: self.t.lease_ms,
                checksum,
            },
            size,
        ))
    }

    /// `BatchEndRead`: the read of `key` begun with `BatchBeginRead` is over.
    /// `replica_id` (any replica the read was given) ties it to that version of the
    /// object: a late end for an object removed and written again is ignored.
    pub(super) fn end_read_one(&self, key: &str, replica_id: u64, tenant: &str) {
        let Ok(tenant) = self.t.read_tenant(tenant) else {
            return;
        };
        let mut shard = self.t.objects.lock_key(tenant, key);
        if let Some(o) = shard.get_for_lease(tenant, key) {
            if o.has_replica(replica_id) {
                o.end_read();
            }
        }
    }

    /// `GetReplicaListByRegex`: readable replicas of every key the pattern matches
    /// (substring search), granting leases; -600 for an invalid pattern.
    pub(super) fn get_replica_list_by_regex_impl(
        &self,
        pattern: &str,
        tenant: &str,
    ) -> MasterResult<Vec<(String, Vec<ReplicaDescriptor>)>> {
        let re = compile_regex(pattern)?;
        let tenant = self.t.read_tenant(tenant)?;
        let now = self.t.now();
        let mut out = Vec::new();
        let mut groups = Vec::new();
        for i in 0..NUM_SHARDS {
            let mut shard = self.t.objects.lock(i);
            let mut matched = Vec::new();
            shard.for_each(|t, k, o| {
                if t == tenant && re.is_match(k) && o.has_readable() {
                    matched.push(k.to_string());
                }
            });
            for k in matched {
                if let Some(o) = shard.get_for_lease(tenant, &k) {
                    let descs = o.readable_descriptors();
                    if let Some(g) = self.lease(o, now) {
                        groups.push(g);
                    }
                    out.push((k, descs));
                }
            }
        }
        groups.sort();
        groups.dedup();
        for g in groups {
            self.lease_group(tenant, &g, now);
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Admin `query_key`: the readable replicas of `key` in the default tenant, without
    /// granting a lease. -704 unknown, -703 nothing readable yet.
    pub(super) fn query_key(&self, key: &str) -> MasterResult<Vec<ReplicaDescriptor>> {
        let tenant = DEFAULT_TENANT;
        let shard = self.t.objects.lock_key(tenant, key);
        let o = shard.get(tenant, key).ok_or(ErrorCode::OBJECT_NOT_FOUND)?;
        let descs = o.readable_descriptors();
        if descs.is_empty() {
            return Err(o.unreadable_error());
        }
        Ok(descs)
    }

    /// Admin `get_all_keys`: every key of the `default` tenant (every key without
    /// multi-tenancy), sorted, as upstream.
    pub(super) fn all_keys(&self) -> Vec<String> {
        let mut keys = Vec::with_capacity(self.t.objects.len());
        for i in 0..NUM_SHARDS {
            self.t.objects.lock(i).for_each(|t, k, _| {
                if t == DEFAULT_TENANT {
                    keys.push(k.to_string());
                }
            });
        }
        keys.sort();
        keys
    }

    /// A `stored` event for every object with a complete value (a memory replica
    /// makes it `cpu`, disk copies alone `disk`), for an HA term's KV-event resync.
    pub(super) fn stored_events(&self) -> Vec<PendingEvent> {
        let mut events = Vec::new();
        for i in 0..NUM_SHARDS {
            self.t.objects.lock(i).for_each(|tenant, key, o| {
                if !o.has_complete() {
                    return;
                }
                events.push(PendingEvent {
                    kind: EventKind::Stored,
                    key: key.to_string(),
                    medium: if o.has_complete_memory() {
                        Medium::Cpu
                    } else {
                        Medium::Disk
                    },
                    tenant: tenant.to_string(),
                    group: o.group_id().to_string(),
                });
            });
        }
        events
    }

    /// Number of objects (all states, all tenants).
    pub(super) fn key_count(&self) -> usize {
        self.t.objects.len()
    }
}
