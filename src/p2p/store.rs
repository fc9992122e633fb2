//! [`P2pStore`]: one node of the P2P Store. It registers objects from its memory
//! (their *gold* copies), fetches objects other nodes hold into its buffers (becoming
//! a source of every shard as it lands), and withdraws its copies when it lets them
//! go or closes. Upstream's Go `P2PStore` has the same operations (`Register`,
//! `Unregister`, `List`, `GetReplica`, `DeleteReplica`) over the same metadata.

use super::config::P2pConfig;
use super::error::{P2pError, P2pResult};
use super::fetch::Receiver;
use super::layout::lay_out;
use super::memory::Registrations;
use super::meta::{Meta, Updated};
use super::payload::{cuts, Payload};
pub use super::vocab::{Fetched, GetOptions, ObjectInfo};
use crate::metadata::versioned::open_versioned;
use crate::te::TransferEngine;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Where receivers register the buffers they fetch into (upstream's Go store's).
const RECEIVER_LOCATION: &str = "cpu:0";

/// An object this node holds.
struct Held {
    /// Registered here (gold), or a replica fetched here.
    gold: bool,
    buffers: Vec<(u64, u64)>,
    /// The memory behind `buffers` when the store allocated it (`put`, `get`).
    owned: Option<Box<[u8]>>,
}

/// What a failed `get_replica` had landed, for the next call with the same buffers.
struct Partial {
    buffers: Vec<(u64, u64)>,
    sizes: Vec<u64>,
    landed: Vec<bool>,
}

/// One node of the P2P Store.
pub struct P2pStore {
    engine: Arc<TransferEngine>,
    meta: Meta,
    config: P2pConfig,
    held: Mutex<HashMap<String, Held>>,
    partial: Mutex<HashMap<String, Partial>>,
    memory: Registrations,
    closed: AtomicBool,
}

impl P2pStore {
    /// A node named `local_server_name` (`host[:port]`) over the metadata at
    /// `metadata` (an etcd address, `etcd://...`, `http://.../metadata` or
    /// `redis://...`), moving data over TCP, or over RDMA with the NIC priority matrix
    /// `nic_priority_matrix` when one is given, as upstream's `NewP2PStore`.
    pub fn new(
        metadata: &str,
        local_server_name: &str,
        nic_priority_matrix: Option<&str>,
    ) -> P2pResult<P2pStore> {
        P2pStore::new_with(
            metadata,
            local_server_name,
            nic_priority_matrix,
            P2pConfig::from_env(),
        )
    }

    /// [`P2pStore::new`] with explicit settings.
    pub fn new_with(
        metadata: &str,
        local_server_name: &str,
        nic_priority_matrix: Option<&str>,
        config: P2pConfig,
    ) -> P2pResult<P2pStore> {
        let engine = TransferEngine::new(metadata, local_server_name, false)?;
        let (proto, matrix) = match nic_priority_matrix.filter(|m| !m.is_empty()) {
            None => ("tcp", None),
            Some(matrix) => ("rdma", Some(matrix)),
        };
        if !engine.has_transport(proto) {
            engine.install(proto, matrix)?;
        }
        P2pStore::with_engine(Arc::new(engine), metadata, config)
    }

    /// A node that moves data with `engine` (already set up with its transports) and
    /// keeps its payloads in the store at `metadata`.
    pub fn with_engine(
        engine: Arc<TransferEngine>,
        metadata: &str,
        config: P2pConfig,
    ) -> P2pResult<P2pStore> {
        let store = open_versioned(metadata)
            .map_err(|e| P2pError::Metadata(format!("opening '{metadata}': {e}")))?;
        Ok(P2pStore::over(engine, Meta::new(store), config))
    }

    /// A node over an already opened metadata store.
    pub fn over(engine: Arc<TransferEngine>, meta: Meta, config: P2pConfig) -> P2pStore {
        P2pStore {
            engine,
            meta,
            config,
            held: Mutex::new(HashMap::new()),
            partial: Mutex::new(HashMap::new()),
            memory: Registrations::default(),
            closed: AtomicBool::new(false),
        }
    }

    /// The name other nodes find this one by (its segment name).
    pub fn local_server_name(&self) -> &str {
        self.engine.segment_name()
    }

    /// The engine this node moves data with.
    pub fn engine(&self) -> &Arc<TransferEngine> {
        &self.engine
    }

    /// The settings.
    pub fn config(&self) -> &P2pConfig {
        &self.config
    }

    /// Fails with [`P2pError::Closed`] once the store is closed.
    pub fn check_open(&self) -> P2pResult<()> {
        match self.closed.load(Ordering::Acquire) {
            true => Err(P2pError::Closed),
            false => Ok(()),
        }
    }

    fn not_held(&self, name: &str) -> P2pResult<()> {
        match self.held.lock().contains_key(name) {
            true => Err(P2pError::AlreadyHeld(name.to_string())),
            false => Ok(()),
        }
    }

    /// Publishes the object `name` made of `buffers` (`(addr, len)`, in order), cut
    /// into shards of at most `max_shard_size` bytes, readable from this node's memory
    /// at `location` (`cpu:0`, `cuda:1`, ...). Fails with [`P2pError::Exists`] when an
    /// object of that name exists, unless `force` (which replaces it).
    ///
    /// # Safety
    /// Every buffer must stay valid and unchanged until `unregister(name)` (or the
    /// store closes).
    pub unsafe fn register(
        &self,
        name: &str,
        buffers: &[(u64, u64)],
        max_shard_size: u64,
        location: &str,
        force: bool,
    ) -> P2pResult<()> {
        self.check_open()?;
        check_name(name)?;
        if buffers.is_empty() || max_shard_size == 0 {
            return Err(P2pError::InvalidArgument(format!(
                "register '{name}': no buffers, or a shard size of 0"
            )));
        }
        lay_out(&[], buffers)?;
        self.not_held(name)?;
        let crcs = self.config.checksum.then(|| {
            buffers
                .iter()
                .flat_map(|&(addr, size)| {
                    cuts(size, max_shard_size).map(move |(o, l)| (addr + o, l))
                })
                // SAFETY: the caller's contract: the buffers are valid for reads.
                .map(|(addr, len)| unsafe { crc_of(addr, len) })
                .collect::<Vec<u32>>()
        });
        let own = self.local_server_name();
        let payload = Payload::registered(name, own, buffers, max_shard_size, crcs.as_deref());
        self.memory.add_all(&self.engine, buffers, location)?;
        let created = self.meta.create(&payload, force);
        if !matches!(created, Ok(true)) {
            self.memory.remove_all(&self.engine, buffers);
            created?;
            return Err(P2pError::Exists(name.to_string()));
        }
        self.hold(name, true, buffers)
    }

    /// Records that this node holds `name` (`gold`: registered here) in `buffers`; a
    /// store closed meanwhile (whose `close` may have missed it) withdraws it again.
    fn hold(&self, name: &str, gold: bool, buffers: &[(u64, u64)]) -> P2pResult<()> {
        let held = Held {
            gold,
            buffers: buffers.to_vec(),
            owned: None,
        };
        self.held.lock().insert(name.to_string(), held);
        if self.closed.load(Ordering::Acquire) {
            let _ = self.release(name, gold);
            return Err(P2pError::Closed);
        }
        Ok(())
    }

    /// Withdraws this node's gold copy of `name` (which it registered): it is no
    /// longer read from here, and the object's key goes once no copy is left.
    pub fn unregister(&self, name: &str) -> P2pResult<()> {
        self.release(name, true)
    }

    /// Withdraws this node's replica of `name` (which it fetched).
    pub fn delete_replica(&self, name: &str) -> P2pResult<()> {
        self.release(name, false)
    }

    fn release(&self, name: &str, gold: bool) -> P2pResult<()> {
        let mut held = self.held.lock();
        match held.get(name) {
            Some(h) if h.gold == gold => {}
            _ => return Err(P2pError::NotHeld(name.to_string())),
        }
        let own = self.local_server_name();
        match self.meta.update(name, |p| p.remove_segment(own))? {
            Updated::Kept(_) | Updated::Deleted | Updated::Missing => {}
        }
        if let Some(h) = held.remove(name) {
            self.memory.remove_all(&self.engine, &h.buffers);
        }
        Ok(())
    }

    /// The objects whose names start with `prefix`.
    pub fn list(&self, prefix: &str) -> P2pResult<Vec<ObjectInfo>> {
        self.check_open()?;
        Ok(self
            .meta
            .list(prefix)?
            .into_iter()
            .map(|p| ObjectInfo {
                holders: holders(std::slice::from_ref(&p)),
                name: p.name,
                size: p.size,
                max_shard_size: p.max_shard_size,
                size_list: p.size_list,
            })
            .collect())
    }

    /// The nodes that hold a copy of a shard of an object whose name starts with
    /// `prefix`, sorted.
    pub fn discover_peers(&self, prefix: &str) -> P2pResult<Vec<String>> {
        self.check_open()?;
        Ok(holders(&self.meta.list(prefix)?))
    }

    /// The size of object `name`.
    pub fn size_of(&self, name: &str) -> P2pResult<u64> {
        self.check_open()?;
        match self.meta.get(name)? {
            Some((p, _)) => Ok(p.size),
            None => Err(P2pError::NotFound(name.to_string())),
        }
    }

    /// Fetches object `name` into `buffers` (laid end to end; see `layout`) from the
    /// nodes that hold it, several shards at a time, and keeps it there as a replica
    /// other nodes read from, until `delete_replica(name)`. A call that fails withdraws
    /// what it published and unregisters the buffers; called again with the same
    /// buffers it fetches only the shards it did not have.
    ///
    /// # Safety
    /// Every buffer must be valid for writes and not otherwise accessed during the
    /// call, then stay valid and unchanged until `delete_replica(name)` (or the store
    /// closes).
    pub unsafe fn get_replica(&self, name: &str, buffers: &[(u64, u64)]) -> P2pResult<()> {
        // SAFETY: forwarded contract.
        unsafe { self.get_replica_with(name, buffers, GetOptions::default()) }.map(|_| ())
    }

    /// [`P2pStore::get_replica`] with options.
    ///
    /// # Safety
    /// As [`P2pStore::get_replica`].
    pub unsafe fn get_replica_with(
        &self,
        name: &str,
        buffers: &[(u64, u64)],
        options: GetOptions<'_>,
    ) -> P2pResult<Fetched> {
        self.check_open()?;
        check_name(name)?;
        if buffers.is_empty() {
            return Err(P2pError::InvalidArgument(format!(
                "get_replica '{name}': no buffers"
            )));
        }
        self.not_held(name)?;
        let Some((payload, _)) = self.meta.get(name)? else {
            return Err(P2pError::NotFound(name.to_string()));
        };
        let sizes = payload.shard_sizes();
        let dests = lay_out(&sizes, buffers)?;
        // SAFETY: forwarded contract (the buffers are ours to read).
        let landed = unsafe { self.landed_before(name, buffers, &payload, &dests, options) };
        let kept: u64 = (0..sizes.len())
            .filter(|&s| landed[s])
            .map(|s| sizes[s])
            .sum();
        let total = payload.size;
        self.memory
            .add_all(&self.engine, buffers, RECEIVER_LOCATION)?;
        let receiver = Receiver {
            engine: &self.engine,
            meta: &self.meta,
            own: self.local_server_name(),
            name,
            dests: &dests,
            config: &self.config,
            progress: options.progress,
            only: options.only,
        };
        // SAFETY: `dests` lay the shards inside the caller's buffers, which are ours
        // to write until this returns.
        let outcome = unsafe { receiver.fetch(payload, &landed) };
        let landed = outcome.landed;
        if let Err(e) = outcome.result {
            self.withdraw(name);
            self.memory.remove_all(&self.engine, buffers);
            self.partial.lock().insert(
                name.to_string(),
                Partial {
                    buffers: buffers.to_vec(),
                    sizes,
                    landed,
                },
            );
            return Err(e);
        }
        self.partial.lock().remove(name);
        self.hold(name, false, buffers)?;
        Ok(Fetched {
            kept,
            fetched: total - kept,
            by_source: outcome.by_source,
        })
    }

    /// Which shards are already in the buffers: those an earlier failed call with the
    /// same buffers landed, and with `resume_by_checksum` those whose bytes match
    /// their CRC-32C; a shard with a CRC-32C is kept only when it matches.
    ///
    /// # Safety
    /// The buffers behind `dests` must be valid for reads.
    unsafe fn landed_before(
        &self,
        name: &str,
        buffers: &[(u64, u64)],
        payload: &Payload,
        dests: &[u64],
        options: GetOptions<'_>,
    ) -> Vec<bool> {
        let sizes = payload.shard_sizes();
        let remembered = self
            .partial
            .lock()
            .remove(name)
            .filter(|p| p.buffers == buffers && p.sizes == sizes)
            .map(|p| p.landed);
        let mut landed = remembered.unwrap_or_else(|| vec![false; sizes.len()]);
        for (i, shard) in payload.shards.iter().enumerate() {
            let check = landed[i] || options.resume_by_checksum;
            landed[i] = match (check, shard.crc32c) {
                (false, _) => false,
                // SAFETY: the caller's contract.
                (true, Some(crc)) => (unsafe { crc_of(dests[i], shard.size) }) == crc,
                (true, None) => landed[i],
            };
        }
        landed
    }

    /// Removes this node's locations from `name` after a failed fetch (best effort).
    fn withdraw(&self, name: &str) {
        let own = self.local_server_name();
        if let Err(e) = self.meta.update(name, |p| p.remove_segment(own)) {
            log::warn!("p2p: withdrawing the copies of '{name}' from {own}: {e}");
        }
    }

    /// Publishes a copy of `data` as object `name`, cut into shards of the configured
    /// size, from memory the store keeps until `unregister(name)`.
    pub fn put(&self, name: &str, data: &[u8]) -> P2pResult<()> {
        if data.is_empty() {
            return Err(P2pError::InvalidArgument(format!("put '{name}': no bytes")));
        }
        let copy: Box<[u8]> = data.into();
        let buffers = [(copy.as_ptr() as u64, copy.len() as u64)];
        // SAFETY: the buffer is `copy`, which the held object then owns, unchanged.
        unsafe { self.register(name, &buffers, self.config.shard_size, "cpu:0", false) }?;
        self.keep(name, copy);
        Ok(())
    }

    /// Keeps `memory` (behind the buffers of `name`, which this node just took up)
    /// alive while the object is held; when it was withdrawn meanwhile (the store
    /// closed), the memory is freed now.
    fn keep(&self, name: &str, memory: Box<[u8]>) {
        if let Some(h) = self.held.lock().get_mut(name) {
            h.owned = Some(memory);
        }
    }

    /// Fetches object `name` into memory the store keeps (serving it as a replica
    /// until `delete_replica(name)`) and returns a copy of its bytes; an object this
    /// node put or got before is copied from its own memory.
    pub fn get(&self, name: &str) -> P2pResult<Vec<u8>> {
        self.get_with(name, GetOptions::default())
    }

    /// [`P2pStore::get`] with options (`resume_by_checksum` does not apply: the
    /// memory is new).
    pub fn get_with(&self, name: &str, options: GetOptions<'_>) -> P2pResult<Vec<u8>> {
        let size = self.get_kept_with(name, options)?;
        let held = self.held.lock();
        match held.get(name).and_then(|h| h.owned.as_deref()) {
            Some(bytes) => Ok(bytes[..size as usize].to_vec()),
            None => Err(P2pError::NotHeld(name.to_string())),
        }
    }

    /// Makes sure this node holds a copy of `name` (fetching it into memory the store
    /// keeps, as `get` does, unless it holds one already) and returns its size.
    pub fn get_kept(&self, name: &str) -> P2pResult<u64> {
        self.get_kept_with(name, GetOptions::default())
    }

    fn get_kept_with(&self, name: &str, options: GetOptions<'_>) -> P2pResult<u64> {
        if let Some(h) = self.held.lock().get(name) {
            return match &h.owned {
                Some(_) => Ok(h.buffers.iter().map(|&(_, len)| len).sum()),
                None => Err(P2pError::AlreadyHeld(name.to_string())),
            };
        }
        let size = self.size_of(name)?;
        let size = usize::try_from(size)
            .map_err(|_| P2pError::InvalidArgument(format!("'{name}' has {size} bytes")))?;
        let memory: Box<[u8]> = vec![0u8; size.max(1)].into_boxed_slice();
        let buffers = [(memory.as_ptr() as u64, size as u64)];
        let options = GetOptions {
            resume_by_checksum: false,
            ..options
        };
        // SAFETY: `memory` is ours alone; the held object then keeps it, unchanged.
        if let Err(e) = unsafe { self.get_replica_with(name, &buffers, options) } {
            // `memory` is freed now: what landed in it cannot be resumed.
            self.partial.lock().remove(name);
            return Err(e);
        }
        self.keep(name, memory);
        Ok(size as u64)
    }

    /// The names of the objects this node holds, sorted.
    pub fn held_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.held.lock().keys().cloned().collect();
        names.sort_unstable();
        names
    }

    /// The metadata this node uses.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Withdraws every copy this node holds and refuses further calls. Dropping the
    /// store does the same.
    pub fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let names: Vec<(String, bool)> = self
            .held
            .lock()
            .iter()
            .map(|(n, h)| (n.clone(), h.gold))
            .collect();
        for (name, gold) in names {
            if let Err(e) = self.release(&name, gold) {
                log::warn!("p2p: closing: withdrawing '{name}': {e}");
            }
        }
    }
}

impl Drop for P2pStore {
    fn drop(&mut self) {
        self.close();
    }
}

/// The nodes holding a copy of a shard of any of `payloads`, sorted.
fn holders(payloads: &[Payload]) -> Vec<String> {
    let mut nodes: Vec<String> = payloads
        .iter()
        .flat_map(|p| p.shards.iter().flat_map(|s| s.locations()))
        .map(|l| l.segment_name.clone())
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}

/// An object name upstream's keys can carry: not empty.
fn check_name(name: &str) -> P2pResult<()> {
    match name.is_empty() {
        true => Err(P2pError::InvalidArgument("the object name is empty".into())),
        false => Ok(()),
    }
}

/// CRC-32C of `len` bytes at `addr`.
///
/// # Safety
/// `[addr, addr + len)` must be valid for reads.
unsafe fn crc_of(addr: u64, len: u64) -> u32 {
    // SAFETY: the caller's contract.
    crc32c::crc32c(unsafe { std::slice::from_raw_parts(addr as *const u8, len as usize) })
}
