//! The write path (spec store.md §2.2): PutStart/PutEnd/PutRevoke and the Upsert
//! variants, single and batched.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::config::{MemoryAllocator, CACHELIB_MAX_OBJECT_SIZE};
use super::eviction::Eviction;
use super::kv_events::Medium;
use super::object::{Object, PendingPin, MAX_OBJECT_SIZE};
use super::objects::ShardGuard;
use super::offload::DiskTier;
use super::replica::{Replica, Replicas};
use super::room::Room;
use super::segments::{Buffer, Segments};
use super::tables::Tables;
use super::tenants::{Reservation, TENANT_QUOTA_EXCEEDED};
use crate::wire::master_api::{
    ErrorCode, MasterResult, ObjectMeta, ReplicaDescriptor, ReplicaStatus, ReplicaType,
    ReplicateConfig, SoftPinAction, Uuid,
};

/// `DFS_SERVICE_UNAVAILABLE`: DFS replicas are not supported by this master.
const DFS_SERVICE_UNAVAILABLE: ErrorCode = ErrorCode(-1601);

/// Evictions of a tenant's own objects a start over its quota may run before it is
/// refused (upstream's `kMaxTenantQuotaEvictionRetries`).
const QUOTA_EVICTIONS: u32 = 2;

/// How a write ends.
#[derive(Debug, Clone, Copy)]
pub(super) enum WriteEnd<'a> {
    /// `PutEnd` / `UpsertEnd`: the object's replicas are written (with its checksum,
    /// if any).
    Written(&'a ObjectMeta),
    /// `PutRevoke` / `UpsertRevoke` of this key: the writer gives up.
    Revoked(&'a str),
}

impl<'a> WriteEnd<'a> {
    /// The key whose write ends.
    fn key(self) -> &'a str {
        match self {
            WriteEnd::Written(meta) => &meta.key,
            WriteEnd::Revoked(key) => key,
        }
    }
}

/// What a validated Start request carries into allocation.
struct StartArgs {
    pin: PendingPin,
    group: String,
}

/// One attempt of a Start request, as its placement sees it.
struct Start<'a> {
    client: Uuid,
    /// The tenant as the tables name it.
    tenant: &'a str,
    key: &'a str,
    len: u64,
    c: &'a ReplicateConfig,
    /// When the attempt began.
    now: u64,
    /// What the request's checks made of it.
    args: &'a StartArgs,
}

/// Per-key results of a batch Start.
pub(super) type StartResults = Vec<MasterResult<Vec<ReplicaDescriptor>>>;

/// The write path and removals (`remove`): no data of its own; it makes room through
/// eviction and asks the disk tier for copies of what it completes.
pub(super) struct Writes {
    pub(super) t: Arc<Tables>,
    eviction: Arc<Eviction>,
    room: Arc<Room>,
    pub(super) disk: Arc<DiskTier>,
}

impl Writes {
    /// The write path over `t`.
    pub fn new(
        t: Arc<Tables>,
        eviction: Arc<Eviction>,
        room: Arc<Room>,
        disk: Arc<DiskTier>,
    ) -> Writes {
        Writes {
            t,
            eviction,
            room,
            disk,
        }
    }

    /// Upstream's PutStart/UpsertStart argument checks.
    fn check_start(&self, key: &str, len: u64, c: &ReplicateConfig) -> MasterResult<StartArgs> {
        if (c.replica_num == 0 && c.nof_replica_num == 0 && c.dfs_replica_num == 0)
            || key.is_empty()
            || len == 0
        {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        if c.dfs_replica_num > 1 || (c.dfs_replica_num > 0 && c.replica_num == 0) {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        if c.dfs_replica_num > 0 {
            return Err(DFS_SERVICE_UNAVAILABLE);
        }
        if c.nof_replica_num > 0 {
            // No NVMe-oF pool here (upstream without USE_NOF).
            return Err(ErrorCode::INVALID_PARAMS);
        }
        if len > MAX_OBJECT_SIZE {
            // Larger than any segment can be.
            return Err(ErrorCode::NO_AVAILABLE_HANDLE);
        }
        if self.t.config.memory_allocator == MemoryAllocator::Cachelib
            && len > CACHELIB_MAX_OBJECT_SIZE
        {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        let pin = match c.soft_pin_action {
            SoftPinAction::Preserve | SoftPinAction::Disable => {
                if c.soft_pin_ttl_ms.is_some() {
                    return Err(ErrorCode::INVALID_PARAMS);
                }
                PendingPin {
                    action: c.soft_pin_action,
                    ttl_ns: 0,
                }
            }
            SoftPinAction::Enable => {
                let ttl_ms = c.soft_pin_ttl_ms.unwrap_or(self.t.default_pin_ms);
                if ttl_ms > self.t.max_pin_ms {
                    return Err(ErrorCode::INVALID_PARAMS);
                }
                PendingPin {
                    action: SoftPinAction::Enable,
                    ttl_ns: ttl_ms.saturating_mul(1_000_000),
                }
            }
        };
        let group = match &c.group_ids {
            None => String::new(),
            Some(g) if g.len() == 1 => g[0].clone(),
            Some(_) => return Err(ErrorCode::INVALID_PARAMS),
        };
        Ok(StartArgs { pin, group })
    }

    /// Inserts a fresh PROCESSING object for `s` on `replicas`; returns its
    /// descriptors.
    fn insert_allocated(
        &self,
        shard: &mut ShardGuard<'_>,
        s: &Start<'_>,
        hard_pin: bool,
        args: &StartArgs,
        soft_pin: Option<u64>,
        replicas: Replicas,
    ) -> MasterResult<Vec<ReplicaDescriptor>> {
        let descs = replicas.iter().map(|r| r.descriptor(s.len)).collect();
        self.t.metrics.observe_value_size(s.len);
        shard.insert(
            s.tenant,
            s.key,
            Object::new(
                s.client,
                s.now,
                s.len,
                replicas,
                hard_pin,
                soft_pin,
                args.pin,
                &args.group,
            ),
        );
        Ok(descs)
    }

    /// `PutStart`, or `UpsertStart` when `upsert`: checks the request, then evicts to
    /// make room when the pool is full (see `room`).
    pub(super) fn start_one(
        &self,
        upsert: bool,
        client: Uuid,
        key: &str,
        len: u64,
        c: &ReplicateConfig,
        tenant: &str,
    ) -> MasterResult<Vec<ReplicaDescriptor>> {
        let args = self
            .check_start(key, len, c)
            .inspect_err(|e| self.count_alloc_failure(*e))?;
        let tenant = self.t.write_tenant(tenant)?;
        let _reservation = self.admit(upsert, tenant, key, len, c)?;
        self.room
            .with_room(len, || {
                let s = Start {
                    client,
                    tenant,
                    key,
                    len,
                    c,
                    now: self.t.now(),
                    args: &args,
                };
                let mut shard = self.t.objects.lock_key(s.tenant, key);
                drop_dead_replicas(
                    &self.t.segments,
                    &mut shard,
                    s.tenant,
                    key,
                    s.now,
                    self.t.lease_ns,
                );
                if upsert {
                    self.upsert_start_attempt(&s, shard)
                } else {
                    self.put_start_attempt(&s, shard)
                }
            })
            .inspect_err(|e| self.count_alloc_failure(*e))
    }

    /// Counts a start that found no room for its replicas (upstream's
    /// `master_put_start_alloc_failures_total`).
    fn count_alloc_failure(&self, e: ErrorCode) {
        if e == ErrorCode::NO_AVAILABLE_HANDLE {
            self.t
                .metrics
                .put_start_alloc_failures
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Admits a start's memory bytes (`len` per replica) within `tenant`'s quota,
    /// evicting the tenant's own objects up to twice when it is exceeded (an upsert
    /// rewriting a value of the same size in place takes nothing new); -1700 then,
    /// counted, or -1701 without a policy. Always admitted without multi-tenancy.
    fn admit(
        &self,
        upsert: bool,
        tenant: &str,
        key: &str,
        len: u64,
        c: &ReplicateConfig,
    ) -> MasterResult<Reservation<'_>> {
        let tenants = &self.t.tenants;
        let in_place = upsert
            && tenants.enabled()
            && self
                .t
                .objects
                .lock_key(tenant, key)
                .get(tenant, key)
                .is_some_and(|o| o.size() == len && !o.replicas.is_empty());
        let bytes = if in_place {
            0
        } else {
            len.saturating_mul(c.replica_num)
        };
        let mut evictions = 0;
        loop {
            match tenants.admit(tenant, bytes, self.t.segments.total_capacity()) {
                Ok(r) => return Ok(r),
                Err((TENANT_QUOTA_EXCEEDED, deficit)) if evictions < QUOTA_EVICTIONS => {
                    evictions += 1;
                    self.eviction.evict_tenant(tenant, deficit);
                }
                Err((e, _)) => {
                    if e == TENANT_QUOTA_EXCEEDED {
                        tenants.note_reject(tenant);
                    }
                    return Err(e);
                }
            }
        }
    }

    /// One placement attempt of `PutStart`, on the key's locked `shard`.
    fn put_start_attempt(
        &self,
        s: &Start<'_>,
        mut shard: ShardGuard<'_>,
    ) -> MasterResult<Vec<ReplicaDescriptor>> {
        if let Some(o) = shard.get_mut(s.tenant, s.key) {
            if o.has_complete() || o.put_start.saturating_add(self.t.discard_ns) >= s.now {
                return Err(ErrorCode::OBJECT_ALREADY_EXISTS);
            }
            // Preempt the stale put: its buffers may still be written by the dead
            // writer, so they are parked until the release timeout.
            let release_at = o.put_start.saturating_add(self.t.release_ns);
            let mut bufs = o.take_replicas(|_| true);
            if let Some(old) = shard.remove(s.tenant, s.key) {
                bufs.extend(old.into_buffers());
            }
            self.eviction.discard(bufs, release_at);
        }
        let replicas = self.t.allocate_replicas(s.client, s.key, s.len, s.c)?;
        self.insert_allocated(&mut shard, s, s.c.with_hard_pin, s.args, None, replicas)
    }

    /// `PutEnd` / `UpsertEnd` and `PutRevoke` / `UpsertRevoke`: `client`, the writer of
    /// the key, ends the write of its `kind` replicas as `end` says.
    pub(super) fn end_one(
        &self,
        client: Uuid,
        kind: ReplicaType,
        tenant: &str,
        end: WriteEnd<'_>,
    ) -> MasterResult<()> {
        let key = end.key();
        let tenant = self.t.read_tenant(tenant)?;
        let now = self.t.now();
        let mut shard = self.t.objects.lock_key(tenant, key);
        let o = shard.existing_mut(tenant, key)?;
        if o.client != client {
            return Err(ErrorCode::ILLEGAL_CLIENT);
        }
        match end {
            WriteEnd::Written(meta) => self.complete(o, tenant, meta, kind, now),
            WriteEnd::Revoked(_) => {
                let bufs = revoke(o, kind)?;
                shard.remove_if_empty(tenant, key);
                drop(shard);
                self.t.segments.release(bufs);
                Ok(())
            }
        }
    }

    /// Marks `o`'s PROCESSING `kind` replicas written. Each end that completes a write
    /// is announced as a KV `stored` event (a repeated end, which changes nothing, is
    /// not).
    fn complete(
        &self,
        o: &mut Object,
        tenant: &str,
        meta: &ObjectMeta,
        kind: ReplicaType,
        now: u64,
    ) -> MasterResult<()> {
        let memory = matches!(kind, ReplicaType::Memory | ReplicaType::All);
        let target = |r: &Replica| memory && r.seg.is_alive();
        if !o.any_processing() {
            let mut targets = o.replicas.iter().filter(|r| target(r)).peekable();
            let has_target = targets.peek().is_some();
            if has_target && targets.all(|r| r.status == ReplicaStatus::Complete) {
                return Ok(());
            }
            return Err(ErrorCode::INVALID_WRITE);
        }
        let had_complete = o
            .replicas
            .iter()
            .any(|r| r.status == ReplicaStatus::Complete);
        for r in o.replicas.iter_mut() {
            if r.status == ReplicaStatus::Processing && target(r) {
                r.status = ReplicaStatus::Complete;
            }
        }
        let has_complete = o
            .replicas
            .iter()
            .any(|r| r.status == ReplicaStatus::Complete);
        if !had_complete && has_complete {
            o.commit_pending_pin(now);
        }
        if meta.checksum.is_some()
            || matches!(
                kind,
                ReplicaType::All | ReplicaType::Memory | ReplicaType::NofSsd
            )
        {
            o.set_checksum(meta.checksum);
        }
        o.grant_lease(now, 0);
        self.t
            .kv_events
            .stored(&meta.key, Medium::for_put_end(kind), tenant, o.group_id());
        if self.t.config.enable_offload && !self.t.config.offload_on_evict && o.all_complete() {
            self.disk.queue_offload(tenant, &meta.key, o);
        }
        Ok(())
    }

    /// One placement attempt of `UpsertStart`: insert, or replace (in place when the
    /// size is unchanged), on the key's locked `shard`. When the new size does not
    /// fit, the existing complete value is left as it was.
    fn upsert_start_attempt(
        &self,
        s: &Start<'_>,
        mut shard: ShardGuard<'_>,
    ) -> MasterResult<Vec<ReplicaDescriptor>> {
        let release_at = s.now.saturating_add(self.t.release_ns);
        let mut kept_pin = None;
        if let Some(o) = shard.get_mut(s.tenant, s.key) {
            if s.c.group_ids.is_some() && o.group_id() != s.args.group {
                return Err(ErrorCode::INVALID_PARAMS);
            }
            if o.any_processing() {
                // Preempt an in-flight put/upsert at once.
                let bufs = o.take_replicas(|r| r.status == ReplicaStatus::Processing);
                o.set_pending_pin(None);
                let complete = o
                    .replicas
                    .iter()
                    .any(|r| r.status == ReplicaStatus::Complete);
                if !complete {
                    kept_pin = o.soft_pin().filter(|d| *d > s.now);
                }
                self.eviction.discard(bufs, release_at);
                if !complete {
                    if let Some(old) = shard.remove(s.tenant, s.key) {
                        self.eviction.discard(old.into_buffers(), release_at);
                    }
                }
            }
        }
        let Some(o) = shard.get_mut(s.tenant, s.key) else {
            let replicas = self.t.allocate_replicas(s.client, s.key, s.len, s.c)?;
            return self.insert_allocated(
                &mut shard,
                s,
                s.c.with_hard_pin,
                s.args,
                kept_pin,
                replicas,
            );
        };
        if o.size() == s.len && !o.replicas.is_empty() {
            // Same size: rewrite in place; unreadable until UpsertEnd. Disk copies
            // hold the old value: they go, and a copy being written is ignored when
            // reported (its put changed).
            o.drop_disk_replicas(|_| true);
            o.set_offload_pending(false);
            o.client = s.client;
            o.put_start = s.now;
            for r in o.replicas.iter_mut() {
                if r.status == ReplicaStatus::Complete {
                    r.status = ReplicaStatus::Processing;
                }
            }
            o.set_pending_pin(Some(s.args.pin));
            return Ok(o.descriptors());
        }
        // Different size: allocate afresh, keeping the pins and the group, then park
        // the old buffers (readers may still hold them).
        let mut merged = s.c.clone();
        merged.with_hard_pin = s.c.with_hard_pin || o.hard_pin();
        let pin = o.soft_pin().filter(|d| *d > s.now);
        let args = StartArgs {
            pin: s.args.pin,
            group: o.group_id().to_string(),
        };
        let replicas = self.t.allocate_replicas(s.client, s.key, s.len, &merged)?;
        if let Some(old) = shard.remove(s.tenant, s.key) {
            self.eviction.discard(old.into_buffers(), release_at);
        }
        self.insert_allocated(&mut shard, s, merged.with_hard_pin, &args, pin, replicas)
    }

    /// `BatchPutStart`, or `BatchUpsertStart` when `upsert`: [`Writes::start_one`] for
    /// each key.
    pub(super) fn batch_start(
        &self,
        upsert: bool,
        client: Uuid,
        keys: &[String],
        lens: &[u64],
        c: &ReplicateConfig,
        tenant: &str,
    ) -> StartResults {
        if keys.len() != lens.len() || c.group_ids.as_ref().is_some_and(|g| g.len() != keys.len()) {
            return keys
                .iter()
                .map(|_| Err(ErrorCode::INVALID_PARAMS))
                .collect();
        }
        let mut cfg = c.clone();
        let mut out = Vec::with_capacity(keys.len());
        for (i, (key, len)) in keys.iter().zip(lens).enumerate() {
            let mut kc = cfg.clone();
            if let Some(g) = &c.group_ids {
                kc.group_ids = Some(vec![g[i].clone()]);
            }
            let r = self.start_one(upsert, client, key, *len, &kc, tenant);
            if !upsert && i == 0 && c.prefer_alloc_in_same_node {
                if let Ok(descs) = &r {
                    let endpoint = descs.iter().rev().find_map(|d| match &d.location {
                        crate::wire::master_api::ReplicaLocation::Memory(b)
                            if !b.transport_endpoint.is_empty() =>
                        {
                            Some(b.transport_endpoint.clone())
                        }
                        _ => None,
                    });
                    if let Some(e) = endpoint {
                        cfg.preferred_segment = e;
                    }
                }
            }
            out.push(r);
        }
        out
    }
}

/// Drops the replicas of (tenant, key) left on unmounted segments (their space went
/// with the segment) or on segments whose owner is unreachable (their buffers are
/// freed, unless a reader holds the object), erasing the object if none is left — so a
/// key whose owner died can be written again at once.
fn drop_dead_replicas(
    segments: &Segments,
    shard: &mut ShardGuard<'_>,
    tenant: &str,
    key: &str,
    now: u64,
    lease_ttl: u64,
) {
    if let Some(o) = shard.get_mut(tenant, key) {
        let held = o.held(now, lease_ttl);
        let gone = |r: &Replica| !r.seg.is_alive() || (!held && !r.seg.is_usable());
        if o.replicas.iter().any(gone) {
            let bufs = o.take_replicas(gone);
            shard.remove_if_empty(tenant, key);
            segments.release(bufs);
        }
    }
}

/// A revoke's work on `o`: when `kind` covers memory, every replica must be PROCESSING
/// and all are dropped; the buffers to release.
fn revoke(o: &mut Object, kind: ReplicaType) -> MasterResult<Vec<Buffer>> {
    if !o.any_processing() {
        return Err(ErrorCode::INVALID_WRITE);
    }
    let memory = matches!(kind, ReplicaType::Memory | ReplicaType::All);
    if memory
        && o.replicas
            .iter()
            .any(|r| r.status != ReplicaStatus::Processing)
    {
        return Err(ErrorCode::INVALID_WRITE);
    }
    let bufs = o.take_replicas(|r| memory && r.status == ReplicaStatus::Processing);
    if o.replicas.is_empty() {
        o.set_pending_pin(None);
    }
    Ok(bufs)
}
