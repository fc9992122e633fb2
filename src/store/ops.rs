//! The store operations of [`Client`] (spec store.md §1.3, §2.2, §2.3), with
//! upstream's return codes. Every operation on a closed client returns
//! `INVALID_PARAMS` (-600); batch operations then report -600 for every item.

use super::api::StoreApi;
use super::client::{Client, Inner};
use super::transfer::Move;
use crate::te::Op;
use crate::wire::master_api::{
    BufferDescriptor, ErrorCode, ObjectMeta, ReplicaDescriptor, ReplicaLocation, ReplicaStatus,
    ReplicaType, ReplicateConfig, DEFAULT_TENANT,
};
use std::time::{Duration, Instant};

/// Attempts of one put whose replicas could not be written (`TRANSFER_FAIL`).
pub(super) const PUT_ATTEMPTS: u32 = 3;
/// No put is tried again once this much time has passed since it began.
pub(super) const PUT_RETRY_BUDGET: Duration = Duration::from_secs(5);

/// Whether a revoke left nothing behind: done, or the object was already gone (its
/// segment left under the write).
pub(super) fn is_gone(revoke: Result<(), ErrorCode>) -> bool {
    matches!(revoke, Ok(()) | Err(ErrorCode::OBJECT_NOT_FOUND))
}

/// First error of a set of per-move results.
fn first_error(results: &[Result<(), ErrorCode>]) -> Result<(), ErrorCode> {
    results
        .iter()
        .copied()
        .find(Result::is_err)
        .unwrap_or(Ok(()))
}

/// The moves that write `len` bytes at `addr` into every memory replica.
fn plan_writes(
    addr: u64,
    len: u64,
    replicas: &[ReplicaDescriptor],
) -> Result<Vec<Move>, ErrorCode> {
    let mut moves = Vec::new();
    for r in replicas {
        match &r.location {
            ReplicaLocation::Memory(d) => {
                if d.size < len || d.buffer_address == 0 {
                    log::error!(
                        "store: replica {} has size {} for {len} bytes",
                        r.id,
                        d.size
                    );
                    return Err(ErrorCode::INVALID_REPLICA);
                }
                moves.push(Move {
                    local: addr,
                    remote: d.buffer_address,
                    len,
                    endpoint: d.transport_endpoint.clone(),
                });
            }
            other => log::warn!("store: skipping unsupported replica kind {other:?}"),
        }
    }
    Ok(moves)
}

/// The size recorded in a replica descriptor, whatever its kind.
pub(super) fn replica_size(r: &ReplicaDescriptor) -> u64 {
    match &r.location {
        ReplicaLocation::Memory(d) | ReplicaLocation::Nof(d) => d.size,
        ReplicaLocation::Disk { object_size, .. }
        | ReplicaLocation::LocalDisk { object_size, .. }
        | ReplicaLocation::Dfs { object_size, .. } => *object_size,
    }
}

impl Inner {
    /// The replica to read: a complete memory replica, this client's own first.
    pub(super) fn choose<'a>(
        &self,
        replicas: &'a [ReplicaDescriptor],
    ) -> Result<&'a BufferDescriptor, ErrorCode> {
        let memory = || {
            replicas.iter().filter_map(|r| match &r.location {
                ReplicaLocation::Memory(d) if r.status == ReplicaStatus::Complete => Some(d),
                _ => None,
            })
        };
        let own = memory().find(|d| d.transport_endpoint.trim_start_matches('/') == self.te_name);
        match own.or_else(|| memory().next()) {
            Some(d) => Ok(d),
            None if replicas.is_empty() => Err(ErrorCode::REPLICA_IS_NOT_READY),
            None => Err(ErrorCode::INVALID_REPLICA),
        }
    }

    /// [`Inner::put_once`], tried again (on whatever segments the master picks then)
    /// while a replica could not be written, or the object vanished with its segment
    /// before PutEnd, and [`PUT_ATTEMPTS`] / [`PUT_RETRY_BUDGET`] allow: a segment
    /// owner that just died is excluded from placement by then.
    ///
    /// # Safety
    /// `[addr, addr + len)` must be readable until this returns.
    unsafe fn put_raw(
        &self,
        key: &str,
        addr: u64,
        len: u64,
        config: &ReplicateConfig,
    ) -> Result<(), ErrorCode> {
        let start = Instant::now();
        let mut attempt = 1;
        loop {
            // SAFETY: forwarded contract.
            let (result, retryable) = unsafe { self.put_once(key, addr, len, config) };
            match result {
                Err(_)
                    if retryable
                        && attempt < PUT_ATTEMPTS
                        && start.elapsed() < PUT_RETRY_BUDGET =>
                {
                    log::info!("store: put('{key}'): a replica could not be written; retrying");
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// PutStart, write every replica, then PutEnd (or PutRevoke and the error). Also
    /// says whether a failure may be tried again: a write that failed and was
    /// revoked, or an object gone before PutEnd (its segment left under it).
    ///
    /// # Safety
    /// `[addr, addr + len)` must be readable until this returns.
    unsafe fn put_once(
        &self,
        key: &str,
        addr: u64,
        len: u64,
        config: &ReplicateConfig,
    ) -> (Result<(), ErrorCode>, bool) {
        let replicas = match self
            .master
            .put_start(self.client_id, key, len, config, DEFAULT_TENANT)
        {
            Ok(r) => r,
            // Upstream: putting an existing key succeeds and keeps the old value.
            Err(ErrorCode::OBJECT_ALREADY_EXISTS) => return (Ok(()), false),
            Err(e) => return (Err(e), false),
        };
        let written = plan_writes(addr, len, &replicas).and_then(|moves| {
            // SAFETY: the source range is readable per this function's contract.
            first_error(&unsafe { self.execute(Op::Write, &moves) })
        });
        match written {
            Ok(()) => {
                let meta = ObjectMeta {
                    key: key.to_string(),
                    checksum: None,
                };
                let ended =
                    self.master
                        .put_end(self.client_id, &meta, ReplicaType::All, DEFAULT_TENANT);
                let gone = ended == Err(ErrorCode::OBJECT_NOT_FOUND);
                (ended, gone)
            }
            Err(e) => {
                let revoked =
                    self.master
                        .put_revoke(self.client_id, key, ReplicaType::All, DEFAULT_TENANT);
                if let Err(r) = revoked {
                    log::warn!("store: PutRevoke('{key}') after {e}: {r}");
                }
                (Err(e), e == ErrorCode::TRANSFER_FAIL && is_gone(revoked))
            }
        }
    }
}

impl Client {
    /// Stores a copy of `value` under `key`. Like upstream, the value's size is
    /// reserved in the local buffer for the duration of the put: -600 when `value` is
    /// empty or larger than the free local buffer; an existing key is a success that
    /// keeps the old value.
    pub fn put(&self, key: &str, value: &[u8], config: &ReplicateConfig) -> Result<(), ErrorCode> {
        let inner = self.inner()?;
        let reserved = inner
            .staging
            .as_ref()
            .and_then(|s| s.allocate(value.len() as u64));
        let Some(mut reserved) = reserved else {
            log::error!(
                "store: put('{key}'): {} bytes do not fit the free local buffer (or are empty)",
                value.len()
            );
            return Err(ErrorCode::INVALID_PARAMS);
        };
        // RDMA sends only from registered memory: the bytes go through the reserved
        // local buffer, as upstream. TCP and the local copy take them straight from
        // `value`.
        let source = if inner.engine().needs_registered_buffers() {
            reserved.fill(value);
            reserved.addr()
        } else {
            value.as_ptr() as u64
        };
        // SAFETY: `value` and the reservation are readable until the put returns.
        unsafe { inner.put_raw(key, source, value.len() as u64, config) }
    }

    /// Stores `buf` under `key` without copying it first (zero-copy). An empty `buf`
    /// succeeds without storing anything.
    pub fn put_from(
        &self,
        key: &str,
        buf: &[u8],
        config: &ReplicateConfig,
    ) -> Result<(), ErrorCode> {
        // SAFETY: the slice is readable for the duration of the call.
        unsafe { StoreApi::put_from_raw(self, key, buf.as_ptr() as u64, buf.len() as u64, config) }
    }

    /// Zero-copy puts of several objects in one round of master calls; one result
    /// per item (existing keys succeed). Duplicate keys collapse into one put of the
    /// last buffer given for them.
    pub fn batch_put_from(
        &self,
        keys: &[&str],
        bufs: &[&[u8]],
        config: &ReplicateConfig,
    ) -> Vec<Result<(), ErrorCode>> {
        let items: Vec<(u64, u64)> = bufs
            .iter()
            .map(|b| (b.as_ptr() as u64, b.len() as u64))
            .collect();
        // SAFETY: every slice is readable for the duration of the call.
        unsafe { StoreApi::batch_put_from_raw(self, keys, &items, config) }
    }

    /// Reads `key` into `buf` (its capacity); returns the object's size. -600 when
    /// `buf` is too small, -704 missing, -703 not complete, -707 when the read lease
    /// expired during the read (the bytes may be torn).
    pub fn get_into(&self, key: &str, buf: &mut [u8]) -> Result<u64, ErrorCode> {
        // SAFETY: the slice is writable for the duration of the call.
        unsafe { self.get_into_raw(key, buf.as_mut_ptr() as u64, buf.len() as u64) }
    }

    /// [`Client::get_into`] on raw memory.
    ///
    /// # Safety
    /// `[addr, addr + cap)` must be writable, and not otherwise accessed, until this
    /// returns.
    pub(crate) unsafe fn get_into_raw(
        &self,
        key: &str,
        addr: u64,
        cap: u64,
    ) -> Result<u64, ErrorCode> {
        // SAFETY: forwarded contract.
        let mut r = unsafe { self.batch_get_into_raw(&[key], &[(addr, cap)]) };
        r.pop().unwrap_or(Err(ErrorCode::INTERNAL_ERROR))
    }

    /// Reads several objects (one master call, one transfer batch); one result per
    /// item: the object's size or an error code as for [`Client::get_into`].
    pub fn batch_get_into(
        &self,
        keys: &[&str],
        bufs: &mut [&mut [u8]],
    ) -> Vec<Result<u64, ErrorCode>> {
        let items: Vec<(u64, u64)> = bufs
            .iter_mut()
            .map(|b| (b.as_mut_ptr() as u64, b.len() as u64))
            .collect();
        // SAFETY: the slices are distinct, writable, and borrowed for the call.
        unsafe { self.batch_get_into_raw(keys, &items) }
    }

    /// [`Client::batch_get_into`] on raw `(address, capacity)` items.
    ///
    /// # Safety
    /// Every item must be writable, and not otherwise accessed, until this returns.
    pub(crate) unsafe fn batch_get_into_raw(
        &self,
        keys: &[&str],
        items: &[(u64, u64)],
    ) -> Vec<Result<u64, ErrorCode>> {
        let n = keys.len();
        let inner = match self.inner() {
            Ok(i) if items.len() == n => i,
            Ok(_) => return vec![Err(ErrorCode::INVALID_PARAMS); n],
            Err(e) => return vec![Err(e); n],
        };
        let start = Instant::now();
        let owned: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let (lists, _reads) = inner.reads.begin(&owned);
        let lists = match lists {
            Ok(l) => l,
            Err(e) => return vec![Err(e); n],
        };
        let mut results: Vec<Result<u64, ErrorCode>> = Vec::with_capacity(n);
        let mut moves = Vec::new();
        let mut planned = Vec::new();
        for (i, &(addr, cap)) in items.iter().enumerate() {
            let planned_item = lists
                .get(i)
                .cloned()
                .unwrap_or(Err(ErrorCode::INTERNAL_ERROR))
                .and_then(|resp| {
                    let d = inner.choose(&resp.replicas)?;
                    if cap < d.size {
                        log::error!(
                            "store: get('{}'): buffer {cap} < object {}",
                            keys[i],
                            d.size
                        );
                        return Err(ErrorCode::INVALID_PARAMS);
                    }
                    moves.push(Move {
                        local: addr,
                        remote: d.buffer_address,
                        len: d.size,
                        endpoint: d.transport_endpoint.clone(),
                    });
                    planned.push((i, resp.lease_ttl_ms));
                    Ok(d.size)
                });
            results.push(planned_item);
        }
        // SAFETY: every destination is writable per this function's contract.
        let done = unsafe { inner.execute(Op::Read, &moves) };
        for ((i, ttl), outcome) in planned.into_iter().zip(done) {
            if let Err(e) = outcome {
                results[i] = Err(e);
            } else if start.elapsed() > Duration::from_millis(ttl) {
                log::warn!(
                    "store: get('{}'): the read lease expired during the read",
                    keys[i]
                );
                results[i] = Err(ErrorCode::LEASE_EXPIRED);
            }
        }
        results
    }

    /// Whether `key` has a complete replica (grants a read lease when it does).
    pub fn is_exist(&self, key: &str) -> Result<bool, ErrorCode> {
        self.inner()?.master.exist_key(key, DEFAULT_TENANT)
    }

    /// [`Client::is_exist`] for several keys in one master call.
    pub fn batch_is_exist(&self, keys: &[&str]) -> Vec<Result<bool, ErrorCode>> {
        let inner = match self.inner() {
            Ok(i) => i,
            Err(e) => return vec![Err(e); keys.len()],
        };
        let owned: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        match inner.master.batch_exist_key(&owned, DEFAULT_TENANT) {
            Ok(mut r) => {
                r.resize(keys.len(), Err(ErrorCode::INTERNAL_ERROR));
                r
            }
            Err(e) => vec![Err(e); keys.len()],
        }
    }

    /// The object's size in bytes (grants a read lease). -704 when missing.
    pub fn get_size(&self, key: &str) -> Result<u64, ErrorCode> {
        let resp = self.inner()?.master.get_replica_list(key, DEFAULT_TENANT)?;
        resp.replicas
            .first()
            .map(replica_size)
            .ok_or(ErrorCode::INVALID_PARAMS)
    }

    /// Removes `key`: -704 missing, -706 under a read lease unless `force`.
    pub fn remove(&self, key: &str, force: bool) -> Result<(), ErrorCode> {
        self.inner()?.master.remove(key, force, DEFAULT_TENANT)
    }

    /// Removes every key `pattern` matches (ECMAScript search semantics); returns how
    /// many were removed. -600 for an invalid pattern.
    pub fn remove_by_regex(&self, pattern: &str, force: bool) -> Result<i64, ErrorCode> {
        self.inner()?
            .master
            .remove_by_regex(pattern, force, DEFAULT_TENANT)
    }

    /// Removes every removable object; returns how many were removed.
    pub fn remove_all(&self, force: bool) -> Result<i64, ErrorCode> {
        self.inner()?.master.remove_all(force, DEFAULT_TENANT)
    }

    /// Registers caller memory with the Transfer Engine (not remotely accessible),
    /// as RDMA users must; TCP transfers work without it. -1 for a NULL address or
    /// zero length, -600 when the engine refuses (e.g. overlap with a registered
    /// region). Registration never lets peers touch the memory. On a shared engine
    /// ([`Client::setup_on_engine`]), memory its owner registered is accepted as it
    /// is (not registered twice, and left registered by `unregister_buffer`).
    pub fn register_buffer(&self, addr: *mut u8, len: usize) -> Result<(), ErrorCode> {
        if addr.is_null() || len == 0 {
            return Err(ErrorCode::INTERNAL_ERROR);
        }
        let inner = self.inner()?;
        let (base, len) = (addr as u64, len as u64);
        let Some(engine) = inner.engine.as_ref() else {
            return Err(ErrorCode::INVALID_PARAMS);
        };
        let mut registered = inner.registered.lock();
        if inner.shared_engine && !registered.contains_key(&base) && engine.is_registered(base, len)
        {
            // The shared engine's owner registered it: usable as it is, and theirs.
            inner.borrowed.lock().insert(base);
            registered.insert(base, len);
            return Ok(());
        }
        engine.register_memory(base, len, "*", false).map_err(|e| {
            log::error!("store: register_buffer({base:#x}, {len}): {e}");
            ErrorCode::INVALID_PARAMS
        })?;
        registered.insert(base, len);
        Ok(())
    }

    /// Unregisters a buffer registered with [`Client::register_buffer`] (exact base
    /// address); -600 for anything else.
    pub fn unregister_buffer(&self, addr: *mut u8) -> Result<(), ErrorCode> {
        let inner = self.inner()?;
        let base = addr as u64;
        let mut registered = inner.registered.lock();
        if !registered.contains_key(&base) {
            log::error!("store: unregister_buffer({base:#x}): not registered by register_buffer");
            return Err(ErrorCode::INVALID_PARAMS);
        }
        if inner.borrowed.lock().remove(&base) {
            registered.remove(&base);
            return Ok(());
        }
        let Some(engine) = inner.engine.as_ref() else {
            return Err(ErrorCode::INVALID_PARAMS);
        };
        engine.unregister_memory(base).map_err(|e| {
            log::error!("store: unregister_buffer({base:#x}): {e}");
            ErrorCode::INVALID_PARAMS
        })?;
        registered.remove(&base);
        Ok(())
    }
}
