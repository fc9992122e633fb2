//! [`Client`]: setup (naming, master connection, Transfer Engine, staging buffer,
//! mounted segment, heartbeat) and teardown. The operations are in `ops/`, the
//! state they work on in `state.rs`.

use super::config::{split_explicit_port, SetupConfig, StoreEnv};
use super::disk_tier::config::DiskTierConfig;
use super::disk_tier::DiskTier;
use super::error::{StoreError, StoreResult};
use super::heartbeat::Heartbeat;
use super::http::ClientHttp;
use super::metrics::ClientMetrics;
use super::sessions::Sessions;
use super::state::{ClientState, SharedState, StateGuard};
use super::tasks::TaskRunner;
use crate::codec::debug_by_field::debug_by_field;
use crate::config::Config;
use crate::host::addr::join_host_port;
use crate::metadata::MetadataSource;
use crate::runtime::http_server::HttpServer;
use crate::te::TransferEngine;
use crate::wire::master_api::{ErrorCode, MasterApi, Uuid, SERVICE_VERSION};
use parking_lot::{Mutex, RwLock};
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

/// A Mooncake Store client (upstream `RealClient`): thread-safe, every method takes
/// `&self`. Dropping it (or [`Client::close`]) unmounts its segments and frees its
/// memory; afterwards every operation returns `INVALID_PARAMS` (-600).
pub struct Client {
    state: SharedState,
    hostname: String,
    healthy: Arc<AtomicBool>,
    heartbeat: Mutex<Option<Heartbeat>>,
    /// Runs the copy and move tasks the master hands out (with the heartbeat).
    tasks: Mutex<Option<TaskRunner>>,
    /// Put and get sessions.
    sessions: Sessions,
    disk_tier: Mutex<Option<DiskTier>>,
    metrics: Arc<ClientMetrics>,
    /// The client HTTP server, once started.
    http: Mutex<Option<HttpServer>>,
}

debug_by_field!(Client, hostname);

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
    pub fn setup(cfg: &SetupConfig) -> StoreResult<Client> {
        Self::setup_with_disk(cfg, cfg.disk_tier_from_env())
    }

    /// [`Client::setup`] with the disk tier configured explicitly (`None`: none, whatever
    /// `cfg.enable_ssd_offload` says).
    pub fn setup_with_disk(cfg: &SetupConfig, disk: Option<DiskTierConfig>) -> StoreResult<Client> {
        Self::open(cfg, disk, None)
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
    ) -> StoreResult<Client> {
        Self::open(cfg, disk, Some(engine))
    }

    /// [`Client::setup_with_disk`] (over `engine` when given: see
    /// [`Client::setup_on_engine`]), the cause of a failure returned with its code.
    pub(crate) fn open(
        cfg: &SetupConfig,
        disk: Option<DiskTierConfig>,
        engine: Option<Arc<TransferEngine>>,
    ) -> StoreResult<Client> {
        let cfg = cfg.with_defaults();
        let env = StoreEnv::from_env();
        Self::setup_inner(&cfg, &env, disk, engine, |addr| {
            super::connect::connect(addr, env.rpc_timeout, env.connect_timeout)
        })
    }

    /// Like [`Client::setup`], with an already connected master (the in-process
    /// `MasterService`, or any other [`MasterApi`]); `master_server_addr` is ignored.
    pub fn setup_with_master(cfg: &SetupConfig, master: Arc<dyn MasterApi>) -> StoreResult<Client> {
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
        connect: impl Fn(&str) -> StoreResult<Arc<dyn MasterApi>>,
    ) -> StoreResult<Client> {
        if cfg.local_hostname.is_empty() {
            return Err(StoreError::invalid("setup: local_hostname is empty"));
        }
        if cfg.protocol != "tcp" && cfg.protocol != "rdma" {
            return Err(StoreError::invalid(format!(
                "setup: protocol '{}' is not supported by this build (tcp, rdma)",
                cfg.protocol
            )));
        }
        let (host, port) = split_explicit_port(&cfg.local_hostname);
        // Upstream's code for a failed client creation: -600 with an explicit port,
        // -1 once the auto-port retries are used up.
        let create_failed = |cause: String| {
            let code = match port {
                Some(_) => ErrorCode::INVALID_PARAMS,
                None => ErrorCode::INTERNAL_ERROR,
            };
            StoreError::new(code, format!("setup: {cause}"))
        };
        if let (None, Err(e)) = (&shared, MetadataSource::parse(&cfg.metadata_server)) {
            return Err(create_failed(format!(
                "metadata server '{}': {e}",
                cfg.metadata_server
            )));
        }
        let master = connect_checked(&cfg.master_server_addr, connect, create_failed)?;
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
                .map_err(|e| create_failed(format!("starting the transfer engine: {e}")))?;
                (Arc::new(engine), cfg.local_hostname.clone(), None)
            }
            (None, None) => {
                let (engine, name, reserved) =
                    start_engine_on_free_port(cfg, &host, env, create_failed)?;
                (Arc::new(engine), name, reserved)
            }
        };
        let protocol = match (engine.has_transport("rdma"), engine.has_transport("tcp")) {
            (true, _) if reuse => "rdma",
            (false, true) if reuse => "tcp",
            _ => install_transport(&engine, cfg, env)?,
        };
        let mut inner = ClientState::new(master, engine, reuse, reserved, &host, &cfg.tenant_id);
        inner.add_staging(cfg.local_buffer_size)?;
        inner.mount(cfg.global_segment_size, &hostname, protocol)?;
        // A new leader learns this client's segments (those mounted at run time too)
        // before any call reaches it.
        let published = inner.published();
        let client_id = inner.client_id();
        inner.master().on_new_leader(Box::new(move |leader| {
            let segments = published.lock().clone();
            match segments.is_empty() {
                true => Ok(()),
                false => leader.remount_segment(&segments, client_id),
            }
        }));
        let healthy = Arc::new(AtomicBool::new(true));
        // A client with a segment or a disk tier pings (a disk's mount lives as long as
        // its client does at the master); one without starts when it mounts one.
        let heartbeat = match inner.mounted().is_empty() && disk.is_none() {
            true => None,
            false => Some(start_heartbeat(&inner, &healthy)?),
        };
        log::info!(
            "store: client {} set up as '{hostname}' (TE segment '{}')",
            inner.client_id(),
            inner.te_name()
        );
        let has_heartbeat = heartbeat.is_some();
        let client = Client {
            state: Arc::new(RwLock::new(Some(inner))),
            hostname,
            healthy,
            heartbeat: Mutex::new(heartbeat),
            tasks: Mutex::new(None),
            sessions: Sessions::default(),
            disk_tier: Mutex::new(None),
            metrics: Arc::new(ClientMetrics::default()),
            http: Mutex::new(None),
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
        if has_heartbeat {
            if let Err(e) = client.start_tasks() {
                client.close();
                return Err(e);
            }
        }
        Ok(client)
    }

    /// Starts running the master's copy and move tasks unless that runs already.
    fn start_tasks(&self) -> StoreResult<()> {
        let mut tasks = self.tasks.lock();
        if tasks.is_none() {
            let runner = TaskRunner::start(self.state.clone())
                .map_err(|e| StoreError::internal(format!("starting the task thread: {e}")))?;
            *tasks = Some(runner);
        }
        Ok(())
    }

    /// The client's name (`host:port`, the auto-selected port included); also the
    /// name of its mounted segment, usable in `preferred_segments`.
    pub fn hostname(&self) -> &str {
        &self.hostname
    }

    /// This client's id as the master knows it (`None` once closed).
    pub fn client_id(&self) -> Option<Uuid> {
        self.state.read().as_ref().map(|i| i.client_id())
    }

    /// The Transfer Engine segment name peers reach this client by (in P2PHANDSHAKE
    /// mode `ip:rpc_port`, else the hostname); `None` once closed.
    pub fn te_segment_name(&self) -> Option<String> {
        self.state.read().as_ref().map(|i| i.te_name().to_string())
    }

    /// 0 healthy, 1 closed, 2 when the last heartbeat ping failed. A client without a
    /// mounted segment (or disk tier) never pings and stays healthy.
    pub fn health(&self) -> Health {
        health_of(&self.state, &self.healthy)
    }

    /// This client's operation metrics.
    pub fn metrics(&self) -> &Arc<ClientMetrics> {
        &self.metrics
    }

    /// Starts the client HTTP server (`/health`, `/metrics`, `/metrics/summary`) on
    /// all interfaces at `port` (0: one the system picks), replacing a running one;
    /// returns the port. -600 when the port cannot be bound.
    pub fn start_http_server(&self, port: u16) -> StoreResult<u16> {
        let (state, healthy) = (self.state.clone(), self.healthy.clone());
        let handler = ClientHttp {
            metrics: self.metrics.clone(),
            health: Arc::new(move || health_of(&state, &healthy) as i32),
        };
        let mut http = self.http.lock();
        if let Some(old) = http.take() {
            old.stop();
        }
        let addr = std::net::SocketAddr::from(([0, 0, 0, 0], port));
        let server = HttpServer::start(addr, "client HTTP", Arc::new(handler)).map_err(|e| {
            StoreError::invalid(format!("the client HTTP server on port {port}: {e}"))
        })?;
        let bound = server.local_addr().port();
        *http = Some(server);
        Ok(bound)
    }

    /// Unmounts this client's local disk (SSD tier) at the master, so its copies are
    /// no longer read from there and nothing more is offloaded to it, then waits
    /// `grace` for readers already on their way (upstream's
    /// `unmount_local_disk_segment`). Nothing to do without a disk tier; -600 once
    /// closed; the master's code when it refuses.
    pub fn unmount_local_disk_segment(&self, grace: std::time::Duration) -> StoreResult<()> {
        self.state()?;
        match self.disk_tier.lock().as_ref() {
            Some(tier) => tier.drain(&self.state)?,
            None => {
                log::warn!("unmount_local_disk_segment: this client has no SSD tier");
                return Ok(());
            }
        }
        if !grace.is_zero() {
            std::thread::sleep(grace);
        }
        Ok(())
    }

    /// Stops the heartbeat, unmounts every segment, unregisters and frees the
    /// client's memory (after the TE stopped). Waits for running operations;
    /// idempotent.
    pub fn close(&self) {
        if let Some(http) = self.http.lock().take() {
            http.stop();
        }
        if let Some(mut hb) = self.heartbeat.lock().take() {
            hb.stop();
        }
        if let Some(mut tasks) = self.tasks.lock().take() {
            tasks.stop();
        }
        if let Some(mut tier) = self.disk_tier.lock().take() {
            tier.stop();
        }
        let inner = self.state.write().take();
        drop(inner);
    }

    /// The set-up state for one operation, or -600 once closed.
    pub(crate) fn state(&self) -> Result<StateGuard<'_>, ErrorCode> {
        StateGuard::new(self.state.read())
    }

    /// The client's put and get sessions.
    pub(crate) fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// The shared state itself (for the calls that change what the client owns).
    pub(crate) fn shared_state(&self) -> &SharedState {
        &self.state
    }

    /// Starts the heartbeat of `inner` unless it runs already (a client set up
    /// without a segment starts pinging once it mounts one).
    pub(crate) fn ensure_heartbeat(&self, inner: &ClientState) -> StoreResult<()> {
        let mut heartbeat = self.heartbeat.lock();
        if heartbeat.is_none() {
            *heartbeat = Some(start_heartbeat(inner, &self.healthy)?);
        }
        drop(heartbeat);
        self.start_tasks()
    }
}

/// Starts the heartbeat of the client `inner`, which remounts its published segments
/// when the master asks and keeps `healthy` up to date.
fn start_heartbeat(inner: &ClientState, healthy: &Arc<AtomicBool>) -> StoreResult<Heartbeat> {
    Heartbeat::start(
        inner.master().clone(),
        inner.client_id(),
        inner.published(),
        inner.engine().metadata_publisher(),
        healthy.clone(),
        HEARTBEAT_PERIOD,
    )
    .map_err(|e| StoreError::internal(format!("starting the heartbeat thread: {e}")))
}

/// A client's health from its state and its last ping.
fn health_of(state: &SharedState, healthy: &AtomicBool) -> Health {
    if state.read().is_none() {
        Health::NotInitialized
    } else if healthy.load(Ordering::SeqCst) {
        Health::Healthy
    } else {
        Health::MasterUnreachable
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.close();
    }
}

/// Connects and checks `ServiceReady`; what failed, if anything, as `failed` makes
/// a failed setup's error of its cause.
fn connect_checked(
    addr: &str,
    connect: impl Fn(&str) -> StoreResult<Arc<dyn MasterApi>>,
    failed: impl Fn(String) -> StoreError,
) -> StoreResult<Arc<dyn MasterApi>> {
    let master = connect(addr).map_err(|e| failed(e.to_string()))?;
    match master.service_ready() {
        Ok(v) if v == SERVICE_VERSION => Ok(master),
        Ok(v) => Err(failed(format!(
            "master at {addr} reports version '{v}', expected '{SERVICE_VERSION}' ({})",
            ErrorCode::INVALID_VERSION
        ))),
        Err(e) => Err(failed(format!("master at {addr} is not ready: {e}"))),
    }
}

/// Reserves a port in the configured range and starts the TE as `host:port`,
/// retrying on a new port (upstream's auto-port loop); the last failure once the
/// attempts are used up, as `failed` makes a failed setup's error of its cause.
fn start_engine_on_free_port(
    cfg: &SetupConfig,
    host: &str,
    env: &StoreEnv,
    failed: impl Fn(String) -> StoreError,
) -> StoreResult<(TransferEngine, String, Option<TcpListener>)> {
    let mut last = String::from("no attempt");
    for attempt in 1..=env.setup_retries {
        let listener = match crate::host::net::bind_in_range(env.min_port, env.max_port, false) {
            Ok(l) => l,
            Err(e) => {
                log::warn!("store setup: no free port (attempt {attempt}): {e}");
                last = format!("no free port: {e}");
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
            Ok(engine) => return Ok((engine, name, Some(listener))),
            Err(e) => {
                log::warn!(
                    "store setup: starting the transfer engine as '{name}' failed \
                     (attempt {attempt}/{}): {e}",
                    env.setup_retries
                );
                last = format!("starting the transfer engine as '{name}': {e}");
                drop(listener);
                std::thread::sleep(RETRY_PAUSE);
            }
        }
    }
    Err(failed(format!(
        "giving up after {} attempts ({last})",
        env.setup_retries
    )))
}

/// Installs the transport setup asked for, as upstream's `InitTransferEngine`; returns
/// the protocol the segment is reached by.
fn install_transport(
    engine: &TransferEngine,
    cfg: &SetupConfig,
    env: &StoreEnv,
) -> StoreResult<&'static str> {
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
        engine
            .auto_install_with(filters)
            .map_err(|e| transport_failed(format!("transport discovery: {e}")))?;
    } else if cfg.protocol == "rdma" {
        if devices.is_empty() {
            return Err(StoreError::invalid(
                "setup: rdma without auto-discovery needs device names",
            ));
        }
        engine.install_rdma(None, None, &devices).map_err(|e| {
            transport_failed(format!("installing rdma on {}: {e}", devices.join(",")))
        })?;
    } else {
        if !devices.is_empty() {
            log::warn!("store setup: device names are ignored for tcp");
        }
        engine
            .install("tcp", None)
            .map_err(|e| transport_failed(format!("installing tcp: {e}")))?;
    }
    Ok(if engine.has_transport("rdma") {
        "rdma"
    } else {
        "tcp"
    })
}

/// A transport that did not start (-1, upstream's code).
fn transport_failed(cause: String) -> StoreError {
    StoreError::internal(format!("setup: {cause}"))
}
