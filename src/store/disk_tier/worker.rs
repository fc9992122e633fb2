//! The owner's disk-tier thread (spec tiers-events-conductor.md §1.6): each tick it
//! drains its offload mailbox at the master, copies those objects from its own
//! segment into new bucket files and reports them (`NotifyOffloadSuccess`, a NACK for
//! each it could not keep), wipes its disk when the master asks (`PollRemoveAll`),
//! promotes objects the master wants back in memory, and keeps the disk under its
//! limits by deleting the oldest buckets, each announced to the master first
//! (`BatchEvictDiskReplica`) so no reader is sent to a copy about to go.
//!
//! The mailbox is drained by [`drain`] (polled often while work keeps coming); the
//! rest ([`housekeeping`]) runs once per heartbeat interval.

use super::backend::{write_bucket_file, DiskStore, Location};
use super::config::DiskTierConfig;
use super::server::ReadService;
use crate::store::state::ClientState;
use crate::store::transfer::Move;
use crate::te::Op;
use crate::wire::disk_tier_api::{DiskTierApi, OffloadTaskItem, StorageObjectMetadata};
use crate::wire::master_api::{
    ErrorCode, MasterResult, ReplicaLocation, ReplicaStatus, ReplicaType,
};
use crate::wire::offload_rpc::storage_key;
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Objects re-registered per `NotifyOffloadSuccess` after a (re)mount.
const REGISTER_CHUNK: usize = 4096;
/// Largest bucket written (when the configured limit is larger): each bucket is
/// reported as soon as it is durable, so puts waiting for the memory of objects being
/// offloaded get it bucket by bucket rather than after the whole mailbox.
const MAX_BUCKET_BYTES: u64 = 16 << 20;

/// What the thread works with besides the client.
pub(crate) struct WorkerContext {
    /// The settings.
    pub cfg: DiskTierConfig,
    /// The disk store (shared with the offload port).
    pub store: Arc<RwLock<DiskStore>>,
    /// The offload port's service (its expired batches are collected each tick).
    pub service: Arc<ReadService>,
    /// The offload port's address, the `transport_endpoint` of this owner's replicas.
    pub endpoint: String,
}

/// The master's disk-tier calls, or `NOT_SUPPORTED`.
fn disk_api(inner: &ClientState) -> MasterResult<&dyn DiskTierApi> {
    inner.master().disk_tier().ok_or(ErrorCode::NOT_SUPPORTED)
}

/// Splits a storage key into (tenant, key).
fn split_storage_key(k: &str) -> (&str, &str) {
    k.split_once('\0').unwrap_or(("default", k))
}

/// The master's record of an object at `loc`.
fn metadata(key: &str, loc: &Location, endpoint: &str) -> StorageObjectMetadata {
    StorageObjectMetadata {
        bucket_id: loc.bucket as i64,
        offset: loc.offset as i64,
        key_size: key.len() as i64,
        data_size: loc.len as i64,
        transport_endpoint: endpoint.to_string(),
    }
}

/// The NACK of a task that was not kept.
fn nack(endpoint: &str) -> StorageObjectMetadata {
    StorageObjectMetadata {
        bucket_id: 0,
        offset: 0,
        key_size: 0,
        data_size: -1,
        transport_endpoint: endpoint.to_string(),
    }
}

/// Mounts the local disk at the master, reports its capacity and registers every
/// object on it (upstream's `Init` / re-mount sequence).
pub(crate) fn mount(inner: &ClientState, ctx: &WorkerContext) -> MasterResult<()> {
    let api = disk_api(inner)?;
    api.mount_local_disk_segment(inner.client_id(), true)?;
    api.report_ssd_capacity(
        inner.client_id(),
        i64::try_from(ctx.cfg.total_size_limit).unwrap_or(i64::MAX),
    )?;
    let objects: Vec<(String, Location)> = {
        let store = ctx.store.read();
        store.objects().map(|(k, l)| (k.clone(), *l)).collect()
    };
    let mut registered = 0usize;
    for chunk in objects.chunks(REGISTER_CHUNK) {
        let (tasks, metas): (Vec<_>, Vec<_>) = chunk
            .iter()
            .map(|(k, loc)| {
                let (tenant, key) = split_storage_key(k);
                let task = OffloadTaskItem {
                    tenant_id: tenant.to_string(),
                    key: key.to_string(),
                    size: loc.len as i64,
                };
                (task, metadata(k, loc, &ctx.endpoint))
            })
            .unzip();
        api.notify_offload_success(inner.client_id(), &tasks, &metas)?;
        registered += chunk.len();
    }
    log::info!(
        "offload: local disk {} mounted ({registered} objects on it registered)",
        ctx.cfg.path.display()
    );
    Ok(())
}

/// Drains the offload mailbox and writes what it held; whether there was work.
pub(crate) fn drain(inner: &ClientState, ctx: &WorkerContext) -> bool {
    let Ok(api) = disk_api(inner) else {
        return false;
    };
    match api.offload_object_heartbeat(inner.client_id(), true) {
        Ok(tasks) if tasks.is_empty() => false,
        Ok(tasks) => {
            offload(inner, api, ctx, &tasks);
            true
        }
        Err(ErrorCode::SEGMENT_NOT_FOUND) => {
            log::warn!("offload: the master no longer knows this disk; mounting it again");
            if let Err(e) = mount(inner, ctx) {
                log::warn!("offload: mounting the local disk again failed: {e}");
            }
            false
        }
        Err(e) => {
            log::warn!("offload: OffloadObjectHeartbeat failed: {e}");
            false
        }
    }
}

/// Once per heartbeat interval: a wipe the master asks for, promotions, watermark
/// eviction, staged batches past their GC TTL.
pub(crate) fn housekeeping(inner: &ClientState, ctx: &WorkerContext) {
    let Ok(api) = disk_api(inner) else {
        return;
    };
    match api.poll_remove_all(inner.client_id()) {
        Ok(true) => {
            let cleared = ctx.store.write().clear();
            match cleared {
                Ok(()) => log::info!("offload: local disk wiped (RemoveAll)"),
                Err(e) => log::warn!("offload: wiping the local disk: {e}"),
            }
        }
        Ok(false) => {}
        Err(e) => log::debug!("offload: PollRemoveAll failed: {e}"),
    }
    promote(inner, api, ctx);
    if ctx.cfg.watermark_eviction {
        let high = (ctx.cfg.total_size_limit as f64 * ctx.cfg.high_watermark) as u64;
        if ctx.store.read().bytes() > high {
            let low = (ctx.cfg.total_size_limit as f64 * ctx.cfg.low_watermark) as u64;
            make_room(inner, api, ctx, low, ctx.cfg.total_keys_limit);
        }
    }
    ctx.service.collect_expired();
}

/// Writes the objects of `tasks` to disk, in buckets, and reports each one.
fn offload(
    inner: &ClientState,
    api: &dyn DiskTierApi,
    ctx: &WorkerContext,
    tasks: &[OffloadTaskItem],
) {
    let bucket_bytes = ctx.cfg.bucket_size_limit.min(MAX_BUCKET_BYTES);
    let mut start = 0;
    while start < tasks.len() {
        let mut end = start;
        let mut bytes = 0u64;
        while end < tasks.len()
            && ((end - start) as u64) < ctx.cfg.bucket_keys_limit
            && (end == start || bytes + tasks[end].size.max(0) as u64 <= bucket_bytes)
        {
            bytes += tasks[end].size.max(0) as u64;
            end += 1;
        }
        let chunk = &tasks[start..end];
        let metas = offload_bucket(inner, api, ctx, chunk);
        let kept = metas.iter().filter(|m| m.data_size >= 0).count();
        match api.notify_offload_success(inner.client_id(), chunk, &metas) {
            Ok(()) => log::debug!("offload: {kept} of {} objects written", chunk.len()),
            Err(e) => log::warn!(
                "offload: NotifyOffloadSuccess for {} objects: {e}",
                chunk.len()
            ),
        }
        start = end;
    }
}

/// Writes one bucket of `chunk`'s objects, read from this client's own segments; the
/// metadata to report for each task (a NACK for those not written).
fn offload_bucket(
    inner: &ClientState,
    api: &dyn DiskTierApi,
    ctx: &WorkerContext,
    chunk: &[OffloadTaskItem],
) -> Vec<StorageObjectMetadata> {
    let mut metas = vec![nack(&ctx.endpoint); chunk.len()];
    let (sources, holds) = own_copies(inner, chunk);
    write_own_copies(inner, api, ctx, chunk, &sources, &mut metas);
    holds.end(inner);
    metas
}

/// Writes the objects found in this client's own memory as one bucket, filling in
/// `metas` for those written.
fn write_own_copies(
    inner: &ClientState,
    api: &dyn DiskTierApi,
    ctx: &WorkerContext,
    chunk: &[OffloadTaskItem],
    sources: &[Option<(u64, u64)>],
    metas: &mut [StorageObjectMetadata],
) {
    let mut batch: Vec<(String, &[u8])> = Vec::new();
    let mut slots: Vec<usize> = Vec::new();
    for (i, (task, source)) in chunk.iter().zip(sources).enumerate() {
        if let Some((addr, len)) = *source {
            // SAFETY: `own_copies` checked the range lies in one of this client's
            // mounted segments, which stay mapped while `inner` is borrowed; the master
            // keeps the replica (pinned by the pending offload) until it is reported.
            let value =
                unsafe { std::slice::from_raw_parts(addr as usize as *const u8, len as usize) };
            batch.push((storage_key(&task.tenant_id, &task.key), value));
            slots.push(i);
        }
    }
    if batch.is_empty() {
        return;
    }
    let bytes: u64 = batch.iter().map(|(_, v)| v.len() as u64).sum();
    let limit = ctx.cfg.total_size_limit.saturating_sub(bytes);
    let keys_limit = ctx.cfg.total_keys_limit.saturating_sub(batch.len() as u64);
    let full = {
        let s = ctx.store.read();
        s.bytes() > limit || s.len() as u64 > keys_limit
    };
    if full && !(ctx.cfg.watermark_eviction && make_room(inner, api, ctx, limit, keys_limit)) {
        log::warn!(
            "offload: the local disk is full ({} bytes limit); {} objects not offloaded",
            ctx.cfg.total_size_limit,
            batch.len()
        );
        return;
    }
    let (dir, id) = ctx.store.write().new_bucket();
    match write_bucket_file(&dir, id, &batch) {
        Ok(written) => {
            for ((key, _), (&slot, loc)) in batch.iter().zip(slots.iter().zip(&written.locations)) {
                metas[slot] = metadata(key, loc, &ctx.endpoint);
            }
            ctx.store.write().commit(written);
        }
        Err(e) => log::warn!("offload: writing bucket {id} to {}: {e}", dir.display()),
    }
}

/// Reads begun on a master with `BatchBeginRead`, ended once the bytes are on disk.
struct ReadHolds {
    /// (tenant, keys, the replica id each read was given).
    holds: Vec<(String, Vec<String>, Vec<u64>)>,
}

impl ReadHolds {
    /// Ends every read (the objects are evictable at once, not a lease later).
    fn end(self, inner: &ClientState) {
        for (tenant, keys, ids) in self.holds {
            if let Err(e) = inner.master().batch_end_read(&keys, &ids, &tenant) {
                log::debug!("offload: ending {} reads: {e}", keys.len());
            }
        }
    }
}

/// For each task, the address and length of its complete memory replica in this
/// client's own segments (`None` when it has none of the task's size). The lookups
/// are reads that hold the objects only until [`ReadHolds::end`] where the master
/// allows (`BatchBeginRead`), else reads under an ordinary lease.
fn own_copies(
    inner: &ClientState,
    chunk: &[OffloadTaskItem],
) -> (Vec<Option<(u64, u64)>>, ReadHolds) {
    let mut by_tenant: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, t) in chunk.iter().enumerate() {
        by_tenant.entry(t.tenant_id.as_str()).or_default().push(i);
    }
    let mut found = vec![None; chunk.len()];
    let mut holds = ReadHolds { holds: Vec::new() };
    for (tenant, idx) in by_tenant {
        let keys: Vec<String> = idx.iter().map(|&i| chunk[i].key.clone()).collect();
        let (lists, held) = match inner.master().batch_begin_read(&keys, tenant) {
            Ok(l) => (l, true),
            Err(ErrorCode::NOT_SUPPORTED) => {
                match inner.master().batch_get_replica_list(&keys, tenant) {
                    Ok(l) => (l, false),
                    Err(_) => continue,
                }
            }
            Err(_) => continue,
        };
        if lists.len() != keys.len() {
            continue;
        }
        let mut hold = (tenant.to_string(), Vec::new(), Vec::new());
        for (&i, list) in idx.iter().zip(lists) {
            let Ok(list) = list else { continue };
            if held {
                if let Some(r) = list.replicas.first() {
                    hold.1.push(chunk[i].key.clone());
                    hold.2.push(r.id);
                }
            }
            let want = chunk[i].size;
            found[i] = list.replicas.iter().find_map(|r| match &r.location {
                ReplicaLocation::Memory(b)
                    if r.status == ReplicaStatus::Complete
                        && i64::try_from(b.size).ok() == Some(want)
                        && inner.is_own(&b.transport_endpoint, b.buffer_address, b.size) =>
                {
                    Some((b.buffer_address, b.size))
                }
                _ => None,
            });
        }
        if !hold.1.is_empty() {
            holds.holds.push(hold);
        }
    }
    (found, holds)
}

/// Deletes the oldest buckets, each announced to the master first, until the disk
/// holds at most `bytes` bytes and `keys` objects; whether it got there.
fn make_room(
    inner: &ClientState,
    api: &dyn DiskTierApi,
    ctx: &WorkerContext,
    bytes: u64,
    keys: u64,
) -> bool {
    loop {
        let oldest = {
            let s = ctx.store.read();
            if s.bytes() <= bytes && s.len() as u64 <= keys {
                return true;
            }
            s.oldest_bucket()
        };
        let Some((id, live)) = oldest else {
            return false;
        };
        let mut by_tenant: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for k in &live {
            let (tenant, key) = split_storage_key(k);
            by_tenant.entry(tenant).or_default().push(key.to_string());
        }
        for (tenant, keys) in by_tenant {
            if let Err(e) = api.batch_evict_disk_replica(
                inner.client_id(),
                &keys,
                tenant,
                ReplicaType::LocalDisk,
            ) {
                // The master cannot send readers here any more once this disk's copies
                // are gone from it; without its answer the bucket stays.
                log::warn!("offload: announcing the eviction of bucket {id}: {e}");
                return false;
            }
        }
        if let Err(e) = ctx.store.write().delete_bucket(id) {
            log::warn!("offload: deleting bucket {id}: {e}");
            return false;
        }
        log::debug!("offload: bucket {id} evicted ({} objects)", live.len());
    }
}

/// Promotes the objects the master asks for back into memory: reads each from disk,
/// writes it into the memory replica the master allocates, and reports the outcome.
fn promote(inner: &ClientState, api: &dyn DiskTierApi, ctx: &WorkerContext) {
    let tasks = match api.promotion_object_heartbeat(inner.client_id()) {
        Ok(t) => t,
        Err(e) => {
            log::debug!("offload: PromotionObjectHeartbeat failed: {e}");
            return;
        }
    };
    let preferred: Vec<String> = inner.mounted().into_iter().map(|s| s.name).collect();
    for t in tasks {
        let ok = promote_one(inner, api, ctx, &t, &preferred);
        let reported = if ok {
            api.notify_promotion_success(inner.client_id(), &t.key, &t.tenant_id)
        } else {
            api.notify_promotion_failure(inner.client_id(), &t.key, &t.tenant_id)
        };
        if let Err(e) = reported {
            log::debug!("offload: reporting the promotion of {:?}: {e}", t.key);
        }
    }
}

fn promote_one(
    inner: &ClientState,
    api: &dyn DiskTierApi,
    ctx: &WorkerContext,
    t: &OffloadTaskItem,
    preferred: &[String],
) -> bool {
    let opened = ctx
        .store
        .read()
        .open_object(&storage_key(&t.tenant_id, &t.key));
    let Ok(Some((file, loc))) = opened else {
        return false;
    };
    let mut value = vec![0u8; loc.len as usize];
    if let Err(e) = super::backend::read_at(&file, &loc, &mut value) {
        log::warn!("offload: reading {:?} to promote it: {e}", t.key);
        return false;
    }
    let target = match api.promotion_alloc_start(
        inner.client_id(),
        &t.key,
        &t.tenant_id,
        loc.len,
        preferred,
    ) {
        Ok(a) => a.memory_descriptor,
        Err(e) => {
            log::debug!("offload: no memory to promote {:?}: {e}", t.key);
            return false;
        }
    };
    let ReplicaLocation::Memory(buf) = target.location else {
        return false;
    };
    if buf.size != loc.len {
        return false;
    }
    let mv = Move {
        local: value.as_ptr() as u64,
        remote: buf.buffer_address,
        len: loc.len,
        endpoint: buf.transport_endpoint,
    };
    // SAFETY: `value` is a live buffer of `len` bytes, not touched until this returns.
    let results = unsafe { inner.execute(Op::Write, std::slice::from_ref(&mv)) };
    results.iter().all(Result::is_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_keys_split_back() {
        assert_eq!(split_storage_key(&storage_key("t", "a\0b")), ("t", "a\0b"));
        assert_eq!(split_storage_key("plain"), ("default", "plain"));
        assert_eq!(nack("e").data_size, -1);
    }
}
