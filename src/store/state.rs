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
use crate::wire::master_api::{ErrorCode, MasterApi, Segment, Uuid, DEFAULT_TENANT};
use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// Where a segment's memory came from, which decides the call that may unmount it
/// (upstream keeps file-backed and allocated segments in separate records).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SegmentOrigin {
    /// The global segment `setup` mounted (unmounted by `close`).
    Setup,
    /// A file mapped by `mount_segment`.
    File,
    /// Memory mapped by `allocate_and_mount_segment`.
    Allocated,
}

/// One segment this client contributes: what the master knows, and its memory.
struct OwnSegment {
    /// The mounted segment.
    segment: Segment,
    /// Its memory (registered with the TE, remotely accessible).
    memory: Mapping,
    /// Which call mounted it.
    origin: SegmentOrigin,
}

/// The state of a client, shared with its disk-tier thread; `None` once closed.
pub(crate) type SharedState = Arc<RwLock<Option<ClientState>>>;

/// The segments the master should know this client by (remounted from here after a
/// master restart or a leader change), shared with the heartbeat thread.
pub(crate) type PublishedSegments = Arc<Mutex<Vec<Segment>>>;

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
    /// The host part of the client's name (each segment's `host_id`).
    host: String,
    /// The tenant every object call names.
    tenant: String,
    /// Mounted segments.
    segments: Vec<OwnSegment>,
    /// What the master knows of `segments`.
    published: PublishedSegments,
    /// Segments unmounted with a grace period: no longer published, their memory kept
    /// (peers may still read it) until the grace period is over.
    draining: Vec<OwnSegment>,
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
        for s in self.segments.iter().chain(&self.draining) {
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
            addrs.extend(
                self.segments
                    .iter()
                    .chain(&self.draining)
                    .map(|s| s.memory.addr()),
            );
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
    /// creator) on `host`, naming `tenant` (empty: `default`) in its object calls,
    /// with a fresh client id and nothing mounted yet; `port` stays reserved while
    /// the state lives.
    pub(crate) fn new(
        master: Arc<dyn MasterApi>,
        engine: Arc<TransferEngine>,
        shared: bool,
        port: Option<TcpListener>,
        host: &str,
        tenant: &str,
    ) -> ClientState {
        let tenant = if tenant.is_empty() {
            DEFAULT_TENANT
        } else {
            tenant
        };
        ClientState {
            reads: ReadLeases::new(master.clone(), tenant),
            master,
            client_id: random_uuid(),
            te_name: engine.segment_name().to_string(),
            engine: Some(engine),
            staging: None,
            host: host.to_string(),
            tenant: tenant.to_string(),
            segments: Vec::new(),
            published: PublishedSegments::default(),
            draining: Vec::new(),
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
        self.published.lock().clone()
    }

    /// The tenant every object call names.
    pub(crate) fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The live list of [`ClientState::mounted`], for the threads that remount.
    pub(crate) fn published(&self) -> PublishedSegments {
        self.published.clone()
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

    /// Maps, registers and mounts the global segment of `size` bytes named
    /// `hostname`, reached by `protocol` (`size` 0: none).
    pub(crate) fn mount(&mut self, size: u64, hostname: &str, protocol: &str) -> StoreResult<()> {
        if size == 0 {
            return Ok(());
        }
        let memory = Mapping::shared(size).map_err(|e| map_error("the global segment", size, e))?;
        self.mount_memory(memory, hostname, protocol, "*", SegmentOrigin::Setup)
            .map_err(|e| e.context("setup: MountSegment"))?;
        Ok(())
    }

    /// Registers `memory` (at `location`, remotely accessible) and mounts it as a
    /// segment named `hostname`, reached by `protocol`; its new id. The memory is
    /// released (unregistered, unmapped) when this fails.
    pub(crate) fn mount_memory(
        &mut self,
        memory: Mapping,
        hostname: &str,
        protocol: &str,
        location: &str,
        origin: SegmentOrigin,
    ) -> StoreResult<Uuid> {
        let len = memory.len();
        self.engine()
            .register_memory(memory.addr(), len, location, true)
            .map_err(|e| StoreError::invalid(format!("registering {len} bytes of segment: {e}")))?;
        // Same-host peers map a shared-memory segment once instead of asking per
        // transfer (a file-backed one they reach through the engine).
        if let Some(Ok(file)) = memory.shared_file().map(|f| f.try_clone()) {
            if let Err(e) = self.engine().share_memory(memory.addr(), file, 0) {
                log::warn!("store: the segment is not shared with same-host peers: {e}");
            }
        }
        let segment = Segment {
            id: random_uuid(),
            name: hostname.to_string(),
            base: memory.addr(),
            size: len,
            te_endpoint: self.te_name.clone(),
            protocol: protocol.into(),
            host_id: self.host.clone(),
        };
        if let Err(e) = self.master.mount_segment(&segment, self.client_id) {
            let _ = self.engine().unregister_memory(memory.addr());
            return Err(StoreError::from(e).context("MountSegment"));
        }
        let id = segment.id;
        self.published.lock().push(segment.clone());
        self.segments.push(OwnSegment {
            segment,
            memory,
            origin,
        });
        Ok(id)
    }

    /// Unmounts the segment `id` that `origin`'s call mounted: at once (`grace_ms`
    /// 0: unmounted at the master, unregistered once no transfer touches it, and
    /// unmapped), or gracefully (the master stops allocating in it and drops it after
    /// `grace_ms`; its memory stays until [`ClientState::release_drained`]). -1 for an
    /// id this client did not mount that way; the master's code when it refuses.
    pub(crate) fn unmount_own(
        &mut self,
        id: Uuid,
        origin: SegmentOrigin,
        grace_ms: u64,
    ) -> StoreResult<()> {
        let Some(at) = self
            .segments
            .iter()
            .position(|s| s.segment.id == id && s.origin == origin)
        else {
            return Err(StoreError::new(
                ErrorCode::INTERNAL_ERROR,
                format!(
                    "segment {}-{} is not one this client mounted that way",
                    id.first, id.second
                ),
            ));
        };
        if grace_ms == 0 {
            self.master
                .unmount_segment(id, self.client_id)
                .map_err(StoreError::from)?;
        } else {
            self.master
                .graceful_unmount_segment(id, self.client_id, grace_ms)
                .map_err(StoreError::from)?;
        }
        self.published.lock().retain(|s| s.id != id);
        let own = self.segments.remove(at);
        if grace_ms == 0 {
            self.release(own);
        } else {
            self.draining.push(own);
        }
        Ok(())
    }

    /// Releases the memory of the gracefully unmounted segment `id` (once its grace
    /// period is over); nothing when it is not draining.
    pub(crate) fn release_drained(&mut self, id: Uuid) {
        if let Some(at) = self.draining.iter().position(|s| s.segment.id == id) {
            let own = self.draining.remove(at);
            self.release(own);
        }
    }

    /// Unregisters an unmounted segment's memory (waiting for transfers that still
    /// touch it) and unmaps it.
    fn release(&self, own: OwnSegment) {
        if let Err(e) = self.engine().unregister_memory(own.memory.addr()) {
            log::warn!("store: unregistering segment {:#x}: {e}", own.memory.addr());
        }
        drop(own);
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
