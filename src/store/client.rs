//! [`Client`]: setup (naming, master connection, Transfer Engine, staging buffer,
//! mounted segment, heartbeat) and teardown. The operations are in `ops.rs`.

use super::config::{split_explicit_port, SetupConfig, StoreEnv};
use super::disk_tier::config::DiskTierConfig;
use super::disk_tier::DiskTier;
use super::heartbeat::Heartbeat;
use super::memory::{Mapping, StagingBuffer};
use super::read_leases::ReadLeases;
use crate::config::Config;
use crate::host::addr::join_host_port;
use crate::host::net::random_u64;
use crate::metadata::MetadataSource;
use crate::te::TransferEngine;
use crate::wire::master_api::{ErrorCode, MasterApi, Segment, Uuid, SERVICE_VERSION};
use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Heartbeat period (upstream: 1 s).
const HEARTBEAT_PERIOD: Duration = Duration::from_secs(1);
/// Pause between setup attempts on a new port (upstream: 100 ms).
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// What `health_check` reports (upstream's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Health {
    /// Set up, and the last ping (if any) succeeded.
    Healthy = 0,
    /// Not set up, or closed.
    NotInitialized = 1,
    /// The last ping to the master failed.
    MasterUnreachable = 2,
}

/// One segment this client contributes: what the master knows, and its memory.
pub(crate) struct OwnSegment {
    /// The mounted segment.
    pub segment: Segment,
    /// Its memory (registered with the TE, remotely accessible).
    pub memory: Mapping,
}

/// Everything a set-up client owns; dropped (in a safe order) by `close`.
pub(crate) struct Inner {
    /// The master, reached only through this.
    pub master: Arc<dyn MasterApi>,
    /// This client's 128-bit id.
    pub client_id: Uuid,
    /// The Transfer Engine (the client's own, or one it shares with its creator);
    /// `None` only during teardown.
    pub engine: Option<Arc<TransferEngine>>,
    /// The TE segment name peers open this client by.
    pub te_name: String,
    /// Staging for `put` (`local_buffer_size` > 0).
    pub staging: Option<StagingBuffer>,
    /// Mounted segments.
    pub segments: Vec<OwnSegment>,
    /// Buffers registered through `register_buffer`: base -> length.
    pub registered: Mutex<BTreeMap<u64, u64>>,
    /// The bases in `registered` that a shared engine's owner had registered already:
    /// usable by the store, never unregistered by it.
    pub borrowed: Mutex<BTreeSet<u64>>,
    /// Whether `engine` was given to `setup_on_engine` (its owner's registrations
    /// are then usable as the store's).
    pub shared_engine: bool,
    /// Reads that hold objects only while they run (when the master allows it).
    pub reads: ReadLeases,
    /// Where the disk tier stages objects for readers (with SSD offload).
    pub offload_arena: Option<Arc<StagingBuffer>>,
    /// Keeps the auto-selected port reserved.
    _port: Option<TcpListener>,
}

impl Drop for Inner {
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

/// A Mooncake Store client (upstream `RealClient`): thread-safe, every method takes
/// `&self`. Dropping it (or [`Client::close`]) unmounts its segments and frees its
/// memory; afterwards every operation returns `INVALID_PARAMS` (-600).
pub struct Client {
    state: Arc<RwLock<Option<Inner>>>,
    hostname: String,
    healthy: Arc<AtomicBool>,
    heartbeat: Mutex<Option<Heartbeat>>,
    disk_tier: Mutex<Option<DiskTier>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("hostname", &self.hostname)
            .finish_non_exhaustive()
    }
}

fn te_error(what: &str, e: crate::error::Error) -> ErrorCode {
    log::error!("store: {what}: {e}");
    ErrorCode::INVALID_PARAMS
}

/// Memory that could not be mapped: logged, -600 (upstream's code).
pub(crate) fn map_error(what: &str, len: u64, e: std::io::Error) -> ErrorCode {
    log::error!("store: mapping {len} bytes for {what}: {e}");
    ErrorCode::INVALID_PARAMS
}

fn random_uuid() -> Uuid {
    Uuid {
        first: random_u64(),
        second: random_u64(),
    }
}

impl Client {
    /// Sets up a client connected to the master at `cfg.master_server_addr` over
    /// coro_rpc (upstream `setup_real`; spec store.md §1.4). The transfer engine uses
    /// `cfg.protocol`: `tcp`, or `rdma` on the NICs of `cfg.device_name` (none or
    /// `auto-discovery`: discovered, TCP when there is none; `MC_MS_AUTO_DISC` and
    /// `MC_MS_FILTERS` as upstream). Upstream's codes: -600 for an empty hostname or a
    /// protocol other than `tcp`/`rdma`, or `rdma` without devices when
    /// auto-discovery is off; -1 when the RDMA transport cannot start; when the client cannot be
    /// created (master unreachable or of another version, unsupported metadata, the
    /// engine does not start), -600 with an explicit port and -1 (after retrying the
    /// engine on other ports) with an auto-selected one; the master's code when
    /// mounting fails.
    ///
    /// With `cfg.enable_ssd_offload`, the client also keeps the objects the master
    /// offloads on its local disk (configured from `MOONCAKE_OFFLOAD_*` and
    /// `cfg.ssd_offload_path`); setup fails when the disk cannot be used or the master
    /// does not offload.
    pub fn setup(cfg: &SetupConfig) -> Result<Client, ErrorCode> {
        let disk = cfg
            .enable_ssd_offload
            .then(|| DiskTierConfig::from_env(|k| std::env::var(k).ok(), &cfg.ssd_offload_path));
        Self::setup_with_disk(cfg, disk)
    }

    /// [`Client::setup`] with the disk tier configured explicitly (`None`: none, whatever
    /// `cfg.enable_ssd_offload` says).
    pub fn setup_with_disk(
        cfg: &SetupConfig,
        disk: Option<DiskTierConfig>,
    ) -> Result<Client, ErrorCode> {
        let cfg = cfg.with_defaults();
        let env = StoreEnv::from_env();
        Self::setup_inner(&cfg, &env, disk, None, |addr| {
            super::connect::connect_master(addr, env.rpc_timeout, env.connect_timeout)
        })
    }

    /// [`Client::setup_with_disk`] over an existing Transfer Engine (upstream's
    /// `setup(..., engine=...)`): the client registers its local buffer and segment
    /// with `engine` and moves data with its transports, instead of starting an engine
    /// of its own. The segment is reached at the engine's segment name; the client is
    /// named `cfg.local_hostname` when that has a port, else the engine's segment
    /// name. `cfg.metadata_server` is not used (the engine has its own metadata), nor
    /// `cfg.protocol` and `cfg.device_name` unless the engine has no transport yet
    /// (then they are installed as [`Client::setup`] does). Memory the engine's owner
    /// registered stays theirs: `register_buffer` of it succeeds without registering
    /// it again, and neither `unregister_buffer` nor `close` unregisters it.
    pub fn setup_on_engine(
        cfg: &SetupConfig,
        disk: Option<DiskTierConfig>,
        engine: Arc<TransferEngine>,
    ) -> Result<Client, ErrorCode> {
        let cfg = cfg.with_defaults();
        let env = StoreEnv::from_env();
        Self::setup_inner(&cfg, &env, disk, Some(engine), |addr| {
            super::connect::connect_master(addr, env.rpc_timeout, env.connect_timeout)
        })
    }

    /// Like [`Client::setup`], with an already connected master (the in-process
    /// `MasterService`, or any other [`MasterApi`]); `master_server_addr` is ignored.
    pub fn setup_with_master(
        cfg: &SetupConfig,
        master: Arc<dyn MasterApi>,
    ) -> Result<Client, ErrorCode> {
        let cfg = cfg.with_defaults();
        Self::setup_inner(&cfg, &StoreEnv::from_env(), None, None, move |_| {
            Ok(master.clone())
        })
    }

    fn setup_inner(
        cfg: &SetupConfig,
        env: &StoreEnv,
        disk: Option<DiskTierConfig>,
        shared: Option<Arc<TransferEngine>>,
        connect: impl Fn(&str) -> Result<Arc<dyn MasterApi>, ErrorCode>,
    ) -> Result<Client, ErrorCode> {
        if cfg.local_hostname.is_empty() {
            log::error!("store setup: local_hostname is empty");
            return Err(ErrorCode::INVALID_PARAMS);
        }
        if cfg.protocol != "tcp" && cfg.protocol != "rdma" {
            log::error!(
                "store setup: protocol '{}' is not supported by this build (tcp, rdma)",
                cfg.protocol
            );
            return Err(ErrorCode::INVALID_PARAMS);
        }
        let (host, port) = split_explicit_port(&cfg.local_hostname);
        // Upstream's code for a failed client creation: -600 with an explicit port,
        // -1 once the auto-port retries are used up.
        let create_failed = if port.is_some() {
            ErrorCode::INVALID_PARAMS
        } else {
            ErrorCode::INTERNAL_ERROR
        };
        if let (None, Err(e)) = (&shared, MetadataSource::parse(&cfg.metadata_server)) {
            log::error!(
                "store setup: metadata server '{}': {e}",
                cfg.metadata_server
            );
            return Err(create_failed);
        }
        let master = connect_checked(&cfg.master_server_addr, connect).ok_or(create_failed)?;
        let reuse = shared.is_some();
        let (engine, hostname, reserved) = match (shared, port) {
            (Some(engine), _) => {
                let name = match port {
                    Some(_) => cfg.local_hostname.clone(),
                    None => engine.segment_name().to_string(),
                };
                (engine, name, None)
            }
            (None, Some(_)) => {
                let engine = TransferEngine::with_config(
                    Config::global().clone(),
                    &cfg.metadata_server,
                    &cfg.local_hostname,
                    false,
                )
                .map_err(|e| {
                    log::error!("store setup: starting the transfer engine: {e}");
                    create_failed
                })?;
                (Arc::new(engine), cfg.local_hostname.clone(), None)
            }
            (None, None) => {
                let (engine, name, reserved) =
                    start_engine_on_free_port(cfg, &host, env).ok_or(create_failed)?;
                (Arc::new(engine), name, reserved)
            }
        };
        let protocol = match (engine.has_transport("rdma"), engine.has_transport("tcp")) {
            (true, _) if reuse => "rdma",
            (false, true) if reuse => "tcp",
            _ => install_transport(&engine, cfg, env)?,
        };
        let mut inner = Inner {
            reads: ReadLeases::new(master.clone()),
            master,
            client_id: random_uuid(),
            te_name: engine.segment_name().to_string(),
            engine: Some(engine),
            staging: None,
            segments: Vec::new(),
            registered: Mutex::new(BTreeMap::new()),
            borrowed: Mutex::new(BTreeSet::new()),
            shared_engine: reuse,
            offload_arena: None,
            _port: reserved,
        };
        inner.add_staging(cfg.local_buffer_size)?;
        inner.mount(cfg.global_segment_size, &hostname, &host, protocol)?;
        if !inner.segments.is_empty() {
            // A new leader learns this client's segments before any call reaches it.
            let segments: Vec<Segment> = inner.segments.iter().map(|s| s.segment.clone()).collect();
            let client_id = inner.client_id;
            inner.master.on_new_leader(Box::new(move |leader| {
                leader.remount_segment(&segments, client_id)
            }));
        }
        let healthy = Arc::new(AtomicBool::new(true));
        // A client with a segment or a disk tier pings (a disk's mount lives as long as
        // its client does at the master).
        let heartbeat = if inner.segments.is_empty() && disk.is_none() {
            None
        } else {
            let segments = inner.segments.iter().map(|s| s.segment.clone()).collect();
            let hb = Heartbeat::start(
                inner.master.clone(),
                inner.client_id,
                segments,
                inner.engine().metadata_publisher(),
                healthy.clone(),
                HEARTBEAT_PERIOD,
            )
            .map_err(|e| {
                log::error!("store setup: starting the heartbeat thread: {e}");
                ErrorCode::INTERNAL_ERROR
            })?;
            Some(hb)
        };
        log::info!(
            "store: client {} set up as '{hostname}' (TE segment '{}')",
            inner.client_id,
            inner.te_name
        );
        let client = Client {
            state: Arc::new(RwLock::new(Some(inner))),
            hostname,
            healthy,
            heartbeat: Mutex::new(heartbeat),
            disk_tier: Mutex::new(None),
        };
        if let Some(disk) = disk {
            match DiskTier::start(&client.state, disk, &host) {
                Ok(tier) => *client.disk_tier.lock() = Some(tier),
                Err(e) => {
                    client.close();
                    return Err(e);
                }
            }
        }
        Ok(client)
    }

    /// The client's name (`host:port`, the auto-selected port included); also the
    /// name of its mounted segment, usable in `preferred_segments`.
    pub fn hostname(&self) -> &str {
        &self.hostname
    }

    /// This client's id as the master knows it (`None` once closed).
    pub fn client_id(&self) -> Option<Uuid> {
        self.state.read().as_ref().map(|i| i.client_id)
    }

    /// The Transfer Engine segment name peers reach this client by (in P2PHANDSHAKE
    /// mode `ip:rpc_port`, else the hostname); `None` once closed.
    pub fn te_segment_name(&self) -> Option<String> {
        self.state.read().as_ref().map(|i| i.te_name.clone())
    }

    /// 0 healthy, 1 closed, 2 when the last heartbeat ping failed. A client without a
    /// mounted segment (or disk tier) never pings and stays healthy.
    pub fn health(&self) -> Health {
        if self.state.read().is_none() {
            Health::NotInitialized
        } else if self.healthy.load(Ordering::SeqCst) {
            Health::Healthy
        } else {
            Health::MasterUnreachable
        }
    }

    /// Stops the heartbeat, unmounts every segment, unregisters and frees the
    /// client's memory (after the TE stopped). Waits for running operations;
    /// idempotent.
    pub fn close(&self) {
        if let Some(mut hb) = self.heartbeat.lock().take() {
            hb.stop();
        }
        if let Some(mut tier) = self.disk_tier.lock().take() {
            tier.stop();
        }
        let inner = self.state.write().take();
        drop(inner);
    }

    /// The set-up state for one operation, or -600 once closed.
    pub(crate) fn inner(&self) -> Result<InnerGuard<'_>, ErrorCode> {
        let guard = self.state.read();
        if guard.is_none() {
            return Err(ErrorCode::INVALID_PARAMS);
        }
        Ok(InnerGuard(guard))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.close();
    }
}

/// Read access to a live [`Inner`] for the duration of one operation.
pub(crate) struct InnerGuard<'a>(RwLockReadGuard<'a, Option<Inner>>);

impl std::ops::Deref for InnerGuard<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        // `Client::inner` only builds a guard over `Some`.
        self.0.as_ref().expect("InnerGuard over a closed client")
    }
}

/// Connects and checks `ServiceReady`; logs and returns `None` on any failure.
fn connect_checked(
    addr: &str,
    connect: impl Fn(&str) -> Result<Arc<dyn MasterApi>, ErrorCode>,
) -> Option<Arc<dyn MasterApi>> {
    let master = connect(addr)
        .map_err(|e| log::error!("store setup: connecting to the master at {addr}: {e}"))
        .ok()?;
    match master.service_ready() {
        Ok(v) if v == SERVICE_VERSION => Some(master),
        Ok(v) => {
            log::error!(
                "store setup: master at {addr} reports version '{v}', expected \
                 '{SERVICE_VERSION}' ({})",
                ErrorCode::INVALID_VERSION
            );
            None
        }
        Err(e) => {
            log::error!("store setup: master at {addr} is not ready: {e}");
            None
        }
    }
}

/// Reserves a port in the configured range and starts the TE as `host:port`,
/// retrying on a new port (upstream's auto-port loop).
fn start_engine_on_free_port(
    cfg: &SetupConfig,
    host: &str,
    env: &StoreEnv,
) -> Option<(TransferEngine, String, Option<TcpListener>)> {
    for attempt in 1..=env.setup_retries {
        let listener = match crate::host::net::bind_in_range(env.min_port, env.max_port, false) {
            Ok(l) => l,
            Err(e) => {
                log::warn!("store setup: no free port (attempt {attempt}): {e}");
                std::thread::sleep(RETRY_PAUSE);
                continue;
            }
        };
        let Ok(port) = listener.local_addr().map(|a| a.port()) else {
            continue;
        };
        let name = join_host_port(host, port);
        match TransferEngine::with_config(
            Config::global().clone(),
            &cfg.metadata_server,
            &name,
            false,
        ) {
            Ok(engine) => return Some((engine, name, Some(listener))),
            Err(e) => {
                log::warn!(
                    "store setup: starting the transfer engine as '{name}' failed \
                     (attempt {attempt}/{}): {e}",
                    env.setup_retries
                );
                drop(listener);
                std::thread::sleep(RETRY_PAUSE);
            }
        }
    }
    log::error!(
        "store setup: giving up after {} attempts",
        env.setup_retries
    );
    None
}

/// Installs the transport setup asked for, as upstream's `InitTransferEngine`; returns
/// the protocol the segment is reached by.
fn install_transport(
    engine: &TransferEngine,
    cfg: &SetupConfig,
    env: &StoreEnv,
) -> Result<&'static str, ErrorCode> {
    let devices = match cfg.device_name.trim() {
        "" | "auto-discovery" => Vec::new(),
        list => crate::config::comma_list(list),
    };
    let auto = env
        .auto_discover
        .unwrap_or(cfg.protocol == "rdma" && devices.is_empty());
    if auto {
        let filters = if devices.is_empty() {
            &env.discover_filters
        } else {
            &devices
        };
        engine.auto_install_with(filters).map_err(|e| {
            log::error!("store setup: transport discovery: {e}");
            ErrorCode::INTERNAL_ERROR
        })?;
    } else if cfg.protocol == "rdma" {
        if devices.is_empty() {
            log::error!("store setup: rdma without auto-discovery needs device names");
            return Err(ErrorCode::INVALID_PARAMS);
        }
        engine.install_rdma(None, None, &devices).map_err(|e| {
            log::error!("store setup: installing rdma on {}: {e}", devices.join(","));
            ErrorCode::INTERNAL_ERROR
        })?;
    } else {
        if !devices.is_empty() {
            log::warn!("store setup: device names are ignored for tcp");
        }
        engine.install("tcp", None).map_err(|e| {
            log::error!("store setup: installing tcp: {e}");
            ErrorCode::INTERNAL_ERROR
        })?;
    }
    Ok(if engine.has_transport("rdma") {
        "rdma"
    } else {
        "tcp"
    })
}

impl Inner {
    pub(crate) fn engine(&self) -> &TransferEngine {
        // Only teardown takes the engine, and nothing runs after it.
        self.engine
            .as_deref()
            .expect("transfer engine present until teardown")
    }

    fn add_staging(&mut self, size: u64) -> Result<(), ErrorCode> {
        if size == 0 {
            return Ok(());
        }
        let memory = Mapping::zeroed(size).map_err(|e| map_error("the local buffer", size, e))?;
        self.engine()
            .register_memory(memory.addr(), memory.len(), "*", false)
            .map_err(|e| te_error("registering the local buffer", e))?;
        self.staging = Some(StagingBuffer::new(memory));
        Ok(())
    }

    fn mount(
        &mut self,
        size: u64,
        hostname: &str,
        host: &str,
        protocol: &str,
    ) -> Result<(), ErrorCode> {
        if size == 0 {
            return Ok(());
        }
        let memory = Mapping::shared(size).map_err(|e| map_error("the global segment", size, e))?;
        self.engine()
            .register_memory(memory.addr(), memory.len(), "*", true)
            .map_err(|e| te_error("registering the global segment", e))?;
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
            log::error!("store setup: MountSegment: {e}");
            let _ = self.engine().unregister_memory(memory.addr());
            return Err(e);
        }
        self.segments.push(OwnSegment { segment, memory });
        Ok(())
    }
}
