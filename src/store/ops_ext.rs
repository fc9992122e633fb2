//! Operations of upstream's Python API that `store_c.h` lacks: upsert, puts and gets
//! of objects scattered over several buffers, whole-object gets into memory this
//! client allocates, batch remove, batch size, and replica descriptors. Same return
//! codes as the rest of [`Client`]; on a closed client everything is -600.

use super::client::{Client, Inner};
use super::ops::{is_gone, replica_size, PUT_ATTEMPTS, PUT_RETRY_BUDGET};
use super::ops_local::Located;
use super::transfer::Move;
use crate::te::Op;
use crate::wire::master_api::{
    ErrorCode, MasterResult, ObjectMeta, ReplicaDescriptor, ReplicaLocation, ReplicaType,
    ReplicateConfig, DEFAULT_TENANT,
};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How a write treats an existing key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Create only: an existing key is a success that keeps the old value.
    Put,
    /// Insert or replace (in place when the size is unchanged).
    Upsert,
}

/// The pieces `(address, length)` whose concatenation, in order, is one object.
pub type Pieces = Vec<(u64, u64)>;

/// One de-duplicated object of a batch write.
#[derive(Clone)]
struct Item<'a> {
    key: &'a str,
    pieces: &'a [(u64, u64)],
    len: u64,
    group: Option<String>,
}

/// The moves that write `pieces` (concatenated, `len` bytes) into every memory replica.
fn plan_piece_writes(
    pieces: &[(u64, u64)],
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
                let mut off = 0;
                for &(addr, n) in pieces {
                    moves.push(Move {
                        local: addr,
                        remote: d.buffer_address + off,
                        len: n,
                        endpoint: d.transport_endpoint.clone(),
                    });
                    off += n;
                }
            }
            other => log::warn!("store: skipping unsupported replica kind {other:?}"),
        }
    }
    Ok(moves)
}

/// Keeps every result aligned with `n` inputs.
pub(super) fn fit<T: Clone>(mut v: Vec<MasterResult<T>>, n: usize) -> Vec<MasterResult<T>> {
    v.resize(n, Err(ErrorCode::INTERNAL_ERROR));
    v
}

impl Inner {
    /// Start (Put/Upsert), single or batch RPC depending on the count.
    fn write_start(
        &self,
        mode: WriteMode,
        keys: &[String],
        lens: &[u64],
        config: &ReplicateConfig,
    ) -> Vec<MasterResult<Vec<ReplicaDescriptor>>> {
        let (m, c, t) = (&self.master, self.client_id, DEFAULT_TENANT);
        if keys.len() == 1 {
            return vec![match mode {
                WriteMode::Put => m.put_start(c, &keys[0], lens[0], config, t),
                WriteMode::Upsert => m.upsert_start(c, &keys[0], lens[0], config, t),
            }];
        }
        let r = match mode {
            WriteMode::Put => m.batch_put_start(c, keys, lens, config, t),
            WriteMode::Upsert => m.batch_upsert_start(c, keys, lens, config, t),
        };
        match r {
            Ok(v) => fit(v, keys.len()),
            Err(e) => vec![Err(e); keys.len()],
        }
    }

    /// End (Put/Upsert) for written keys.
    fn write_end(&self, mode: WriteMode, keys: &[String]) -> Vec<MasterResult<()>> {
        let (m, c, t) = (&self.master, self.client_id, DEFAULT_TENANT);
        let metas: Vec<ObjectMeta> = keys
            .iter()
            .map(|k| ObjectMeta {
                key: k.clone(),
                checksum: None,
            })
            .collect();
        if metas.len() == 1 {
            return vec![match mode {
                WriteMode::Put => m.put_end(c, &metas[0], ReplicaType::All, t),
                WriteMode::Upsert => m.upsert_end(c, &metas[0], ReplicaType::All, t),
            }];
        }
        let r = match mode {
            WriteMode::Put => m.batch_put_end(c, &metas, ReplicaType::All, t),
            WriteMode::Upsert => m.batch_upsert_end(c, &metas, t),
        };
        match r {
            Ok(v) => fit(v, keys.len()),
            Err(e) => vec![Err(e); keys.len()],
        }
    }

    /// Revoke (Put/Upsert) for keys whose write failed; returns, per key, whether
    /// nothing of it is left (failures are only logged).
    fn write_revoke(&self, mode: WriteMode, keys: &[String]) -> Vec<bool> {
        let (m, c, t) = (&self.master, self.client_id, DEFAULT_TENANT);
        let r = match (mode, keys.len()) {
            (_, 0) => return Vec::new(),
            (WriteMode::Put, 1) => Ok(vec![m.put_revoke(c, &keys[0], ReplicaType::All, t)]),
            (WriteMode::Upsert, 1) => Ok(vec![m.upsert_revoke(c, &keys[0], ReplicaType::All, t)]),
            (WriteMode::Put, _) => m.batch_put_revoke(c, keys, ReplicaType::All, t),
            (WriteMode::Upsert, _) => m.batch_upsert_revoke(c, keys, t),
        };
        match r {
            Ok(each) => fit(each, keys.len())
                .into_iter()
                .zip(keys)
                .map(|(r, k)| {
                    if !is_gone(r) {
                        log::warn!("store: revoking '{k}': {r:?}");
                    }
                    is_gone(r)
                })
                .collect(),
            Err(e) => {
                log::warn!("store: revoking {} key(s): {e}", keys.len());
                vec![false; keys.len()]
            }
        }
    }

    /// [`Inner::write_once`], then again for the items whose replicas could not be
    /// written (`TRANSFER_FAIL`, revoked) or that vanished with their segment before
    /// the End (`OBJECT_NOT_FOUND`), while [`PUT_ATTEMPTS`] and
    /// [`PUT_RETRY_BUDGET`] allow: the master places them anew, and a segment owner
    /// that just died is excluded from placement by then.
    ///
    /// # Safety
    /// Every piece must be readable until this returns.
    unsafe fn write_items(
        &self,
        mode: WriteMode,
        items: &[Item<'_>],
        config: &ReplicateConfig,
    ) -> Vec<Result<(), ErrorCode>> {
        let start = Instant::now();
        // SAFETY: forwarded contract.
        let (mut results, mut retryable) = unsafe { self.write_once(mode, items, config) };
        for _ in 1..PUT_ATTEMPTS {
            let again: Vec<usize> = (0..items.len())
                .filter(|&s| retryable[s] && results[s].is_err())
                .collect();
            if again.is_empty() || start.elapsed() >= PUT_RETRY_BUDGET {
                break;
            }
            log::info!(
                "store: {} object(s) could not be written; trying again",
                again.len()
            );
            let subset: Vec<Item<'_>> = again.iter().map(|&s| items[s].clone()).collect();
            // SAFETY: forwarded contract (a subset of the same items).
            let (retried, still_retryable) = unsafe { self.write_once(mode, &subset, config) };
            for ((s, r), v) in again.into_iter().zip(retried).zip(still_retryable) {
                results[s] = r;
                retryable[s] = v;
            }
        }
        results
    }

    /// Start, one transfer batch, then End for the written keys and Revoke for the
    /// others. Empty objects get -600 without reaching the master. Also says, per
    /// item, whether a failure may be tried again (see [`Inner::write_items`]).
    ///
    /// # Safety
    /// Every piece must be readable until this returns.
    unsafe fn write_once(
        &self,
        mode: WriteMode,
        items: &[Item<'_>],
        config: &ReplicateConfig,
    ) -> (Vec<Result<(), ErrorCode>>, Vec<bool>) {
        let mut results: Vec<Result<(), ErrorCode>> = vec![Ok(()); items.len()];
        let mut retryable = vec![false; items.len()];
        let started: Vec<usize> = (0..items.len())
            .filter(|&s| {
                if items[s].len == 0 {
                    results[s] = Err(ErrorCode::INVALID_PARAMS);
                }
                items[s].len > 0
            })
            .collect();
        if started.is_empty() {
            return (results, retryable);
        }
        let keys: Vec<String> = started.iter().map(|&s| items[s].key.to_string()).collect();
        let lens: Vec<u64> = started.iter().map(|&s| items[s].len).collect();
        let mut cfg = config.clone();
        if cfg.group_ids.is_some() {
            cfg.group_ids = Some(
                started
                    .iter()
                    .map(|&s| items[s].group.clone().unwrap_or_default())
                    .collect(),
            );
        }
        let starts = self.write_start(mode, &keys, &lens, &cfg);
        let (mut moves, mut owner, mut pending) = (Vec::new(), Vec::new(), Vec::new());
        for (&s, start) in started.iter().zip(starts) {
            match start {
                Ok(replicas) => {
                    pending.push(s);
                    match plan_piece_writes(items[s].pieces, items[s].len, &replicas) {
                        Ok(m) => {
                            owner.extend(std::iter::repeat(s).take(m.len()));
                            moves.extend(m);
                        }
                        Err(e) => results[s] = Err(e),
                    }
                }
                Err(ErrorCode::OBJECT_ALREADY_EXISTS) if mode == WriteMode::Put => {}
                Err(e) => results[s] = Err(e),
            }
        }
        // SAFETY: every source is readable per this function's contract.
        let done = unsafe { self.execute(Op::Write, &moves) };
        for (s, outcome) in owner.into_iter().zip(done) {
            if results[s].is_ok() {
                results[s] = outcome;
            }
        }
        let (ok, failed): (Vec<usize>, Vec<usize>) =
            pending.into_iter().partition(|&s| results[s].is_ok());
        let names =
            |v: &[usize]| -> Vec<String> { v.iter().map(|&s| items[s].key.to_string()).collect() };
        if !ok.is_empty() {
            for (&s, r) in ok.iter().zip(self.write_end(mode, &names(&ok))) {
                retryable[s] = r == Err(ErrorCode::OBJECT_NOT_FOUND);
                results[s] = r;
            }
        }
        let revoked = self.write_revoke(mode, &names(&failed));
        for (&s, v) in failed.iter().zip(revoked) {
            retryable[s] = v && results[s] == Err(ErrorCode::TRANSFER_FAIL);
        }
        (results, retryable)
    }
}

/// Owned memory a whole-object get reads into; `addr` stays valid while it lives.
pub trait ReadTarget {
    /// Address of the first byte.
    fn addr(&mut self) -> u64;
}

impl ReadTarget for Vec<u8> {
    fn addr(&mut self) -> u64 {
        self.as_mut_ptr() as u64
    }
}

impl Client {
    /// Stores `value` under `key`, replacing an existing object (staged through the
    /// local buffer like [`Client::put`]): -600 when empty or larger than the free
    /// local buffer.
    pub fn upsert(
        &self,
        key: &str,
        value: &[u8],
        config: &ReplicateConfig,
    ) -> Result<(), ErrorCode> {
        let inner = self.inner()?;
        let staged = inner
            .staging
            .as_ref()
            .and_then(|s| s.allocate(value.len() as u64));
        let Some(mut staged) = staged else {
            log::error!(
                "store: upsert('{key}'): {} bytes do not fit the free local buffer (or are empty)",
                value.len()
            );
            return Err(ErrorCode::INVALID_PARAMS);
        };
        staged.fill(value);
        let pieces = [(staged.addr(), staged.len())];
        let item = Item {
            key,
            pieces: &pieces,
            len: staged.len(),
            group: config.group_ids.as_ref().and_then(|g| g.first().cloned()),
        };
        // SAFETY: the staging allocation stays alive until the write returns.
        let mut r = unsafe { inner.write_items(WriteMode::Upsert, &[item], config) };
        r.pop().unwrap_or(Err(ErrorCode::INTERNAL_ERROR))
    }

    /// Zero-copy writes of several objects, each the concatenation of its pieces, in
    /// one round of master calls (single-object RPCs for one key). One result per
    /// key; duplicate keys collapse into one write of the last pieces given. Objects
    /// of total size 0 get -600. With `config.group_ids`, there must be one group
    /// id per key (else every key gets -600), as upstream's master requires.
    ///
    /// # Safety
    /// Every piece must be readable until this returns.
    pub unsafe fn batch_write_raw(
        &self,
        mode: WriteMode,
        keys: &[&str],
        items: &[Pieces],
        config: &ReplicateConfig,
    ) -> Vec<Result<(), ErrorCode>> {
        let n = keys.len();
        let groups_ok = config.group_ids.as_ref().map_or(true, |g| g.len() == n);
        let inner = match self.inner() {
            Ok(i) if items.len() == n && groups_ok => i,
            Ok(_) => return vec![Err(ErrorCode::INVALID_PARAMS); n],
            Err(e) => return vec![Err(e); n],
        };
        let mut slot_of: HashMap<&str, usize> = HashMap::new();
        let mut unique: Vec<Item<'_>> = Vec::new();
        let mut positions = Vec::with_capacity(n);
        for (i, (&key, pieces)) in keys.iter().zip(items).enumerate() {
            let item = Item {
                key,
                pieces,
                len: pieces.iter().map(|p| p.1).sum(),
                group: config.group_ids.as_ref().map(|g| g[i].clone()),
            };
            let slot = match slot_of.get(key) {
                Some(&s) => {
                    unique[s] = item;
                    s
                }
                None => {
                    unique.push(item);
                    slot_of.insert(key, unique.len() - 1);
                    unique.len() - 1
                }
            };
            positions.push(slot);
        }
        // SAFETY: forwarded contract.
        let results = unsafe { inner.write_items(mode, &unique, config) };
        positions.into_iter().map(|s| results[s]).collect()
    }

    /// Reads several objects, each scattered over its pieces in order (one master
    /// call, one transfer batch). Per key: the object's size, -600 when the pieces
    /// hold fewer bytes than the object, -704 missing, -703 not complete, -707 lease
    /// expired during the read, -800 transfer failure. Pieces beyond the object's
    /// size are left untouched.
    ///
    /// # Safety
    /// Every piece must be writable, and not otherwise accessed, until this returns.
    pub unsafe fn batch_get_into_multi_raw(
        &self,
        keys: &[&str],
        items: &[Pieces],
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
            Ok(l) => fit(l, n),
            Err(e) => return vec![Err(e); n],
        };
        let mut results: Vec<Result<u64, ErrorCode>> = Vec::with_capacity(n);
        let (mut moves, mut owner, mut planned) = (Vec::new(), Vec::new(), Vec::new());
        for (i, list) in lists.into_iter().enumerate() {
            let r = list.and_then(|resp| {
                let d = inner.choose(&resp.replicas)?;
                let cap: u64 = items[i].iter().map(|p| p.1).sum();
                if cap < d.size {
                    log::error!(
                        "store: get('{}'): buffers {cap} < object {}",
                        keys[i],
                        d.size
                    );
                    return Err(ErrorCode::INVALID_PARAMS);
                }
                let mut off = 0;
                for &(addr, len) in &items[i] {
                    if off >= d.size {
                        break;
                    }
                    let len = len.min(d.size - off);
                    moves.push(Move {
                        local: addr,
                        remote: d.buffer_address + off,
                        len,
                        endpoint: d.transport_endpoint.clone(),
                    });
                    owner.push(i);
                    off += len;
                }
                planned.push((i, resp.lease_ttl_ms));
                Ok(d.size)
            });
            results.push(r);
        }
        // SAFETY: every destination is writable per this function's contract.
        let done = unsafe { inner.execute(Op::Read, &moves) };
        for (i, outcome) in owner.into_iter().zip(done) {
            if let Err(e) = outcome {
                results[i] = Err(e);
            }
        }
        for (i, ttl) in planned {
            if results[i].is_ok() && start.elapsed() > Duration::from_millis(ttl) {
                log::warn!(
                    "store: get('{}'): the read lease expired during the read",
                    keys[i]
                );
                results[i] = Err(ErrorCode::LEASE_EXPIRED);
            }
        }
        results
    }

    /// Reads whole objects into memory from `alloc(key index, size)` (one master call,
    /// one transfer batch); per key the filled target and the object's size, or an
    /// error code as for [`Client::get_into`] (-600 when `alloc` declined). Targets of
    /// failed keys are dropped.
    ///
    /// # Safety
    /// The address a target reports must be writable for the size it was allocated
    /// with, for as long as the target lives.
    pub unsafe fn batch_get_alloc_raw<T: ReadTarget>(
        &self,
        keys: &[&str],
        alloc: impl FnMut(usize, u64) -> Option<T>,
    ) -> Vec<Result<(T, u64), ErrorCode>> {
        // SAFETY: forwarded contract.
        let (found, held) = unsafe { self.get_whole(keys, alloc, false) };
        self.end_held_reads(held);
        found
            .into_iter()
            .map(|r| match r? {
                (Located::Read(target), size, _) => Ok((target, size)),
                (Located::Own(_), _, _) => Err(ErrorCode::INTERNAL_ERROR),
            })
            .collect()
    }

    /// Reads a whole object into a new vector, with one master call.
    pub fn get(&self, key: &str) -> Result<Vec<u8>, ErrorCode> {
        self.batch_get(&[key])
            .pop()
            .unwrap_or(Err(ErrorCode::INTERNAL_ERROR))
    }

    /// Reads whole objects into new vectors; see [`Client::batch_get_alloc_raw`].
    pub fn batch_get(&self, keys: &[&str]) -> Vec<Result<Vec<u8>, ErrorCode>> {
        let alloc = |_: usize, n: u64| usize::try_from(n).ok().map(|n| vec![0u8; n]);
        // SAFETY: a vector's buffer is writable for its length while it lives.
        unsafe { self.batch_get_alloc_raw(keys, alloc) }
            .into_iter()
            .map(|r| r.map(|(v, _)| v))
            .collect()
    }

    /// Removes several keys in one master call; per key as [`Client::remove`].
    pub fn batch_remove(&self, keys: &[&str], force: bool) -> Vec<Result<(), ErrorCode>> {
        let inner = match self.inner() {
            Ok(i) => i,
            Err(e) => return vec![Err(e); keys.len()],
        };
        let owned: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        match inner.master.batch_remove(&owned, force, DEFAULT_TENANT) {
            Ok(v) => fit(v, keys.len()),
            Err(e) => vec![Err(e); keys.len()],
        }
    }

    /// The sizes of several objects in one master call (grants read leases).
    pub fn batch_get_size(&self, keys: &[&str]) -> Vec<Result<u64, ErrorCode>> {
        self.batch_get_replica_desc(keys)
            .into_iter()
            .map(|r| r.and_then(|v| v.first().map(replica_size).ok_or(ErrorCode::INVALID_PARAMS)))
            .collect()
    }

    /// The replicas of `key` as the master reports them (grants a read lease);
    /// -704 when missing.
    pub fn get_replica_desc(&self, key: &str) -> Result<Vec<ReplicaDescriptor>, ErrorCode> {
        let resp = self.inner()?.master.get_replica_list(key, DEFAULT_TENANT)?;
        Ok(resp.replicas)
    }

    /// [`Client::get_replica_desc`] for several keys in one master call.
    pub fn batch_get_replica_desc(
        &self,
        keys: &[&str],
    ) -> Vec<Result<Vec<ReplicaDescriptor>, ErrorCode>> {
        let inner = match self.inner() {
            Ok(i) => i,
            Err(e) => return vec![Err(e); keys.len()],
        };
        let owned: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        match inner.master.batch_get_replica_list(&owned, DEFAULT_TENANT) {
            Ok(v) => fit(v, keys.len())
                .into_iter()
                .map(|r| r.map(|resp| resp.replicas))
                .collect(),
            Err(e) => vec![Err(e); keys.len()],
        }
    }
}

#[cfg(test)]
#[path = "ops_ext_tests.rs"]
mod tests;
