//! [`ClientState`]: everything a set-up [`Client`] owns (master, Transfer Engine,
//! staging buffer, mounted segments, registered buffers, read leases), behind the
//! narrow API the operations, transfers and the disk tier use. Dropped (in a safe
//! order) when the client closes.
//!
//! [`Client`]: super::Client

use super::error::{StoreError, StoreResult};
use super::memory::{Mapping, StagingBuffer};
use super::read::lease::ReadLeases;
use crate::host::net::random_u64;
use crate::te::TransferEngine;
use crate::wire::master_api::{ErrorCode, MasterApi, Segment, Uuid};
use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// One segment this client contributes: what the master knows, and its memory.
struct OwnSegment {
    /// The mounted segment.
    segment: Segment,
    /// Its memory (registered with the TE, remotely accessible).
    memory: Mapping,
}

/// The state of a client, shared with its disk-tier thread; `None` once closed.
pub(crate) type SharedState = Arc<RwLock<Option<ClientState>>>;

/// Everything a set-up client owns; dropped (in a safe order) by `close`.
pub(crate) struct ClientState {
    /// The master, reached only through this.
    master: Arc<dyn MasterApi>,
    /// This client's 128-bit id.
    client_id: Uuid,
    /// The Transfer Engine (the client's own, or one it shares with its creator);
    /// `None` only during teardown.
    engine: Option<Arc<TransferEngine>>,
    /// The TE segment name peers open this client by.
    te_name: String,
    /// Staging for `put` (`local_buffer_size` > 0).
    staging: Option<StagingBuffer>,
    /// Mounted segments.
    segments: Vec<OwnSegment>,
    /// Buffers registered through `register_buffer`: base -> length.
    registered: Mutex<BTreeMap<u64, u64>>,
    /// The bases in `registered` that a shared engine's owner had registered already:
    /// usable by the store, never unregistered by it.
    borrowed: Mutex<BTreeSet<u64>>,
    /// Whether `engine` was given to `setup_on_engine` (its owner's registrations
    /// are then usable as the store's).
    shared_engine: bool,
    /// Reads that hold objects only while they run (when the master allows it).
    reads: ReadLeases,
    /// Where the disk tier stages objects for readers (with SSD offload).
    offload_arena: Option<Arc<StagingBuffer>>,
    /// Keeps the auto-selected port reserved.
    _port: Option<TcpListener>,
}

impl Drop for ClientState {
    fn drop(&mut self) {
        for s in &self.segments {
            if let Err(e) = self.master.unmount_segment(s.segment.id, self.client_id) {
                log::warn!("store: unmounting segment {}: {e}", s.segment.id);
            }
        }
        if let Some(engine) = self.engine.take() {
            let borrowed = self.borrowed.lock();
            let mut addrs: Vec<u64> = (self.registered.lock().keys())
                .filter(|a| !borrowed.contains(a))
                .copied()
                .collect();
            addrs.extend(self.staging.iter().map(|s| s.memory().addr()));
            addrs.extend(self.offload_arena.iter().map(|s| s.memory().addr()));
            addrs.extend(self.segments.iter().map(|s| s.memory.addr()));
            for addr in addrs {
                // Waits until no transfer touches the region any more.
                if let Err(e) = engine.unregister_memory(addr) {
                    log::warn!("store: unregistering {addr:#x}: {e}");
                }
            }
            // Stops the TE servers (of an engine of its own; a shared engine lives on
            // with its owner, and no longer reaches the memory unregistered above).
            drop(engine);
        }
    }
}

/// Memory that could not be mapped: -600 (upstream's code).
pub(crate) fn map_error(what: &str, len: u64, e: std::io::Error) -> StoreError {
    StoreError::invalid(format!("mapping {len} bytes for {what}: {e}"))
}

/// A new random 128-bit id.
fn random_uuid() -> Uuid {
    Uuid {
        first: random_u64(),
        second: random_u64(),
    }
}

impl ClientState {
    /// The state of a client of `master` over `engine` (`shared`: given by its
    /// creator), with a fresh client id and nothing mounted yet; `port` stays
    /// reserved while the state lives.
    pub(crate) fn new(
        master: Arc<dyn MasterApi>,
        engine: Arc<TransferEngine>,
        shared: bool,
        port: Option<TcpListener>,
    ) -> ClientState {
        ClientState {
            reads: ReadLeases::new(master.clone()),
            master,
            client_id: random_uuid(),
            te_name: engine.segment_name().to_string(),
            engine: Some(engine),
            staging: None,
            segments: Vec::new(),
            registered: Mutex::new(BTreeMap::new()),
            borrowed: Mutex::new(BTreeSet::new()),
            shared_engine: shared,
            offload_arena: None,
            _port: port,
        }
    }

    /// The master.
    pub(crate) fn master(&self) -> &Arc<dyn MasterApi> {
        &self.master
    }

    /// This client's id as the master knows it.
    pub(crate) fn client_id(&self) -> Uuid {
        self.client_id
    }

    /// The TE segment name peers open this client by.
    pub(crate) fn te_name(&self) -> &str {
        &self.te_name
    }

    /// The Transfer Engine.
    pub(crate) fn engine(&self) -> &TransferEngine {
        // Only teardown takes the engine, and nothing runs after it.
        self.engine
            .as_deref()
            .expect("transfer engine present until teardown")
    }

    /// The local buffer puts stage through, if any.
    pub(crate) fn staging(&self) -> Option<&StagingBuffer> {
        self.staging.as_ref()
    }

    /// The read leases of this client's reads.
    pub(crate) fn reads(&self) -> &ReadLeases {
        &self.reads
    }

    /// The segments this client mounted, as the master knows them.
    pub(crate) fn mounted(&self) -> Vec<Segment> {
        self.segments.iter().map(|s| s.segment.clone()).collect()
    }

    /// Whether `[addr, addr + len)` on `endpoint` is inside one of this client's own
    /// mounted segments, so it can be copied directly.
    pub(crate) fn is_own(&self, endpoint: &str, addr: u64, len: u64) -> bool {
        self.is_own_endpoint(endpoint) && self.segments.iter().any(|s| s.memory.contains(addr, len))
    }

    /// Whether `endpoint` names this client's own TE segment.
    pub(crate) fn is_own_endpoint(&self, endpoint: &str) -> bool {
        endpoint.trim_start_matches('/') == self.te_name
    }

    /// The mounted segments: base, length and a descriptor of the sealed file holding
    /// each (segments whose memory is not a file are left out).
    pub(crate) fn segment_files(&self) -> Vec<(u64, u64, OwnedFd)> {
        self.segments
            .iter()
            .filter_map(|s| {
                let file = s.memory.shared_file()?.try_clone().ok()?;
                Some((s.memory.addr(), s.memory.len(), file))
            })
            .collect()
    }

    /// Bytes from `addr` to the end of the `register_buffer` region holding it (0:
    /// none does).
    pub(crate) fn registered_capacity(&self, addr: u64) -> u64 {
        if addr == 0 {
            return 0;
        }
        let registered = self.registered.lock();
        match registered.range(..=addr).next_back() {
            Some((&base, &len)) if addr - base < len => len - (addr - base),
            _ => 0,
        }
    }

    /// Registers caller memory with the engine (see `Client::register_buffer`).
    pub(crate) fn register_buffer(&self, base: u64, len: u64) -> StoreResult<()> {
        let Some(engine) = self.engine.as_ref() else {
            return Err(StoreError::invalid(
                "register_buffer: the client has no engine",
            ));
        };
        let mut registered = self.registered.lock();
        if self.shared_engine && !registered.contains_key(&base) && engine.is_registered(base, len)
        {
            // The shared engine's owner registered it: usable as it is, and theirs.
            self.borrowed.lock().insert(base);
            registered.insert(base, len);
            return Ok(());
        }
        engine
            .register_memory(base, len, "*", false)
            .map_err(|e| StoreError::invalid(format!("register_buffer({base:#x}, {len}): {e}")))?;
        registered.insert(base, len);
        Ok(())
    }

    /// Unregisters memory registered by [`ClientState::register_buffer`] (exact base).
    pub(crate) fn unregister_buffer(&self, base: u64) -> StoreResult<()> {
        let mut registered = self.registered.lock();
        if !registered.contains_key(&base) {
            return Err(StoreError::invalid(format!(
                "unregister_buffer({base:#x}): not registered by register_buffer"
            )));
        }
        if self.borrowed.lock().remove(&base) {
            registered.remove(&base);
            return Ok(());
        }
        let Some(engine) = self.engine.as_ref() else {
            return Err(StoreError::invalid(
                "unregister_buffer: the client has no engine",
            ));
        };
        engine
            .unregister_memory(base)
            .map_err(|e| StoreError::invalid(format!("unregister_buffer({base:#x}): {e}")))?;
        registered.remove(&base);
        Ok(())
    }

    /// Maps and registers the local buffer (`size` 0: none).
    pub(crate) fn add_staging(&mut self, size: u64) -> StoreResult<()> {
        if size == 0 {
            return Ok(());
        }
        let memory = self.registered_new(Mapping::zeroed(size), "the local buffer", size, false)?;
        self.staging = Some(StagingBuffer::new(memory));
        Ok(())
    }

    /// Maps, registers and mounts a segment of `size` bytes named `hostname` on host
    /// `host`, reached by `protocol` (`size` 0: none).
    pub(crate) fn mount(
        &mut self,
        size: u64,
        hostname: &str,
        host: &str,
        protocol: &str,
    ) -> StoreResult<()> {
        if size == 0 {
            return Ok(());
        }
        let memory =
            self.registered_new(Mapping::shared(size), "the global segment", size, true)?;
        // Same-host peers map the segment once instead of asking per transfer.
        let shared = memory.shared_file().map(|f| f.try_clone());
        if let Some(Ok(file)) = shared {
            if let Err(e) = self.engine().share_memory(memory.addr(), file, 0) {
                log::warn!("store: the segment is not shared with same-host peers: {e}");
            }
        }
        let segment = Segment {
            id: random_uuid(),
            name: hostname.to_string(),
            base: memory.addr(),
            size,
            te_endpoint: self.te_name.clone(),
            protocol: protocol.into(),
            host_id: host.to_string(),
        };
        if let Err(e) = self.master.mount_segment(&segment, self.client_id) {
            let _ = self.engine().unregister_memory(memory.addr());
            return Err(StoreError::from(e).context("setup: MountSegment"));
        }
        self.segments.push(OwnSegment { segment, memory });
        Ok(())
    }

    /// Maps and registers (remotely readable) the arena disk reads are staged in.
    pub(crate) fn add_offload_arena(&mut self, size: u64) -> StoreResult<Arc<StagingBuffer>> {
        let what = "the offload staging buffer";
        let memory = self.registered_new(Mapping::zeroed(size.max(1)), what, size, true)?;
        let arena = Arc::new(StagingBuffer::new(memory));
        self.offload_arena = Some(arena.clone());
        Ok(arena)
    }

    /// `memory` (just mapped for `what`, `size` bytes asked) registered with the
    /// engine, remotely accessible when `remote`; -600 when either failed.
    fn registered_new(
        &self,
        memory: std::io::Result<Mapping>,
        what: &str,
        size: u64,
        remote: bool,
    ) -> StoreResult<Mapping> {
        let memory = memory.map_err(|e| map_error(what, size, e))?;
        self.engine()
            .register_memory(memory.addr(), memory.len(), "*", remote)
            .map_err(|e| StoreError::invalid(format!("setup: registering {what}: {e}")))?;
        Ok(memory)
    }
}

/// Read access to a live [`ClientState`] for the duration of one operation.
pub(crate) struct StateGuard<'a>(RwLockReadGuard<'a, Option<ClientState>>);

impl<'a> StateGuard<'a> {
    /// The guard over `guard`, or -600 when the client is closed.
    pub(crate) fn new(guard: RwLockReadGuard<'a, Option<ClientState>>) -> Result<Self, ErrorCode> {
        if guard.is_none() {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        Ok(StateGuard(guard))
    }
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = ClientState;
    fn deref(&self) -> &ClientState {
        // `StateGuard::new` only builds a guard over `Some`.
        self.0.as_ref().expect("StateGuard over a closed client")
    }
}
