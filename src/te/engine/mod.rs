//! [`TransferEngine`]: identity, metadata, segments, memory, batches and notifies.
//! Installing RDMA is in [`rdma`].

mod rdma;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::host::addr::{join_host_port, parse_host_port};
use crate::host::idle::IdleClock;
use crate::metadata::{KeyLayout, MetadataSource, MetadataStore, SegmentDesc};
use crate::te::batch::{BatchTable, CompletionSignal, PendingNotify, Task, TaskStatus};
use crate::te::local::{LocalRpcHandler, LocalSegment, Notify};
use crate::te::memory::{MemoryRegistry, Range};
use crate::te::rpc::{encode_json, RpcClient, RpcServer};
use crate::te::segment::{SegmentCache, LOCAL_SEGMENT_ID};
use crate::te::transport::local;
use crate::te::transport::same_host::SameHostError;
use crate::te::transport::staging::Stager;
use crate::te::transport::tcp::{Endpoint, Op, TcpTransport, INLINE_MAX_BYTES};
use crate::te::transport::PeerRequest;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// One transfer request (the C `transfer_request_t`, validated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferRequest {
    /// Read from or write to the target.
    pub op: Op,
    /// Local buffer address.
    pub source: u64,
    /// Target segment id (0 = this engine).
    pub target_id: i32,
    /// Absolute address in the target process.
    pub target_offset: u64,
    /// Length in bytes.
    pub length: u64,
}

impl TransferRequest {
    /// A request moving `length` bytes between `source` here and `target_offset` in
    /// segment `target_id`.
    pub const fn new(
        op: Op,
        source: u64,
        target_id: i32,
        target_offset: u64,
        length: u64,
    ) -> TransferRequest {
        TransferRequest {
            op,
            source,
            target_id,
            target_offset,
            length,
        }
    }
}

struct Inner {
    config: Config,
    p2p: bool,
    rpc_host: String,
    rpc_port: u16,
    store: Option<Box<dyn MetadataStore>>,
    keys: KeyLayout,
    local: Arc<LocalSegment>,
    segments: SegmentCache,
    batches: BatchTable,
    rpc_server: Mutex<Option<RpcServer>>,
    rpc_client: RpcClient,
    rpc_meta_cache: Mutex<HashMap<String, (String, u16)>>,
    rpc_meta_created: AtomicBool,
    descriptor_published: AtomicBool,
    publish_lock: Mutex<()>,
    stopping: AtomicBool,
    stager: Stager,
}

impl From<&TransferRequest> for PeerRequest {
    fn from(r: &TransferRequest) -> PeerRequest {
        PeerRequest {
            op: r.op,
            local: r.source,
            remote: r.target_offset,
            len: r.length,
        }
    }
}

/// A Transfer Engine instance.
pub struct TransferEngine {
    inner: Arc<Inner>,
    refresher: Option<std::thread::JoinHandle<()>>,
}

impl TransferEngine {
    /// Creates an engine (upstream `createTransferEngine` + `init`), reading the
    /// process configuration from the environment.
    pub fn new(metadata: &str, local_server_name: &str, auto_discover: bool) -> Result<Self> {
        Self::with_config(
            Config::global().clone(),
            metadata,
            local_server_name,
            auto_discover,
        )
    }

    /// Creates an engine with an explicit configuration.
    pub fn with_config(
        config: Config,
        metadata: &str,
        local_server_name: &str,
        auto_discover: bool,
    ) -> Result<Self> {
        let source = MetadataSource::parse(metadata)?;
        let p2p = source == MetadataSource::P2p;
        let store = source.open()?;
        let (name_host, name_port) = parse_host_port(local_server_name, config.handshake_port);
        if local_server_name.is_empty() {
            return Err(Error::InvalidArgument("local server name is empty".into()));
        }
        let listener = if config.legacy_rpc_port_binding && !p2p {
            crate::host::net::bind_port(name_port, config.use_ipv6)
                .map_err(|e| Error::socket(format!("binding rpc port {name_port}"), e))?
        } else {
            crate::host::net::bind_in_range(
                config.min_rpc_port,
                config.max_rpc_port,
                config.use_ipv6,
            )?
        };
        // Re-listening on a bound socket only updates its backlog (MC_HANDSHAKE_LISTEN_BACKLOG).
        // SAFETY: the fd belongs to `listener`, which is open.
        unsafe {
            libc::listen(
                std::os::fd::AsRawFd::as_raw_fd(&listener),
                config.handshake_listen_backlog,
            )
        };
        let rpc_port = listener
            .local_addr()
            .map_err(|e| Error::socket("rpc listener address", e))?
            .port();
        let (rpc_host, name) = if p2p {
            (name_host.clone(), join_host_port(&name_host, rpc_port))
        } else if config.legacy_rpc_port_binding {
            (name_host.clone(), local_server_name.to_string())
        } else {
            let ip = config
                .advertised_ip
                .clone()
                .or_else(|| crate::host::net::first_interface_ip(config.use_ipv6))
                .unwrap_or_else(|| {
                    log::warn!("no non-loopback interface is up; advertising 127.0.0.1");
                    "127.0.0.1".into()
                });
            (ip, local_server_name.to_string())
        };
        let local = Arc::new(LocalSegment {
            name,
            host: rpc_host.clone(),
            memory: Arc::new(MemoryRegistry::default()),
            tcp: parking_lot::RwLock::new(None),
            rdma: parking_lot::RwLock::new(None),
            notifies: Mutex::new(VecDeque::new()),
        });
        let handler = Arc::new(LocalRpcHandler(local.clone()));
        let server = RpcServer::start(
            listener,
            handler,
            config.handshake_max_length,
            config.inbound_limits(),
        )?;
        let rpc_client = RpcClient::new(
            Duration::from_secs(config.handshake_connect_timeout_secs),
            config.handshake_max_length,
        );
        let inner = Arc::new(Inner {
            keys: KeyLayout::new(config.cluster_id.as_deref()),
            p2p,
            rpc_host,
            rpc_port,
            store,
            local,
            segments: SegmentCache::new(IdleClock::new(Duration::from_secs(config.peer_idle_secs))),
            batches: BatchTable::new(),
            rpc_server: Mutex::new(Some(server)),
            rpc_client,
            rpc_meta_cache: Mutex::new(HashMap::new()),
            rpc_meta_created: AtomicBool::new(false),
            descriptor_published: AtomicBool::new(false),
            publish_lock: Mutex::new(()),
            stopping: AtomicBool::new(false),
            stager: Stager::default(),
            config,
        });
        let mut engine = TransferEngine {
            inner,
            refresher: None,
        };
        engine.inner.publish_rpc_meta()?;
        if engine.inner.config.force_tcp {
            engine.install_transport("tcp")?;
        } else if auto_discover {
            engine.auto_install()?;
        }
        let interval = engine.inner.config.metadata_refresh_interval_secs;
        if interval > 0 && !engine.inner.config.disable_metacache {
            engine.refresher = Some(spawn_refresher(Arc::downgrade(&engine.inner), interval));
        }
        Ok(engine)
    }

    /// The segment name peers open this engine by.
    pub fn segment_name(&self) -> &str {
        &self.inner.local.name
    }

    /// `ip:port` of the RPC daemon; in P2P mode this is the segment name.
    pub fn local_ip_and_port(&self) -> String {
        if self.inner.p2p {
            return self.inner.local.name.clone();
        }
        format!("{}:{}", self.inner.rpc_host, self.inner.rpc_port)
    }

    /// The RPC daemon's port.
    pub fn rpc_port(&self) -> u16 {
        self.inner.rpc_port
    }

    /// What `auto_discover` installs, as upstream: TCP with `MC_FORCE_TCP`, else RDMA
    /// when a NIC is usable (or `MC_FORCE_HCA` is set, then failing without one), else
    /// TCP.
    fn auto_install(&self) -> Result<()> {
        self.auto_install_with(&[])
    }

    /// [`TransferEngine::auto_install`] with discovery limited to `devices` (the
    /// Python API's `device_name`).
    pub fn auto_install_with(&self, devices: &[String]) -> Result<()> {
        if self.inner.config.force_tcp {
            return self.install_transport("tcp").map(|_| ());
        }
        match self.install_rdma(None, None, devices) {
            Ok(_) => Ok(()),
            Err(e) if !self.inner.config.rdma.force_hca => {
                log::info!("no RDMA ({e}); using TCP");
                self.install_transport("tcp").map(|_| ())
            }
            Err(e) => Err(e),
        }
    }

    /// Installs a transport by protocol name (`tcp`, `rdma`); the same one again
    /// returns it as is. `topology`: upstream's `installTransport` `args[0]` (a NIC
    /// priority matrix; RDMA only).
    pub fn install(&self, proto: &str, topology: Option<&str>) -> Result<()> {
        match proto {
            "tcp" => self.install_transport("tcp").map(|_| ()),
            "rdma" => self.install_rdma(None, topology, &[]).map(|_| ()),
            other => Err(Error::NotSupportedTransport(format!(
                "transport '{other}' is not available in this build (tcp, rdma)"
            ))),
        }
    }

    /// Installs the TCP transport; installing it again returns it as is.
    pub fn install_transport(&self, proto: &str) -> Result<Arc<TcpTransport>> {
        if proto != "tcp" {
            return Err(Error::NotSupportedTransport(format!(
                "install_transport installs tcp only (not '{proto}'); use install"
            )));
        }
        let inner = &self.inner;
        let mut slot = inner.local.tcp.write();
        if let Some(tcp) = slot.as_ref() {
            log::warn!("transport tcp is already installed");
            return Ok(tcp.clone());
        }
        let tcp = Arc::new(TcpTransport::install(
            &inner.config,
            inner.local.memory.clone(),
        )?);
        *slot = Some(tcp.clone());
        drop(slot);
        if let Err(e) = inner.publish_descriptor() {
            *inner.local.tcp.write() = None;
            return Err(e);
        }
        Ok(tcp)
    }

    /// Whether `[addr, addr + len)` lies inside one registered region.
    pub fn is_registered(&self, addr: u64, len: u64) -> bool {
        self.inner.local.memory.find(addr, len).is_some()
    }

    /// Bytes this engine moved as an initiator over the same-host path (diagnostics:
    /// 0 when every peer is reached over the network).
    pub fn same_host_bytes(&self) -> u64 {
        let tcp = self.inner.local.tcp.read();
        tcp.as_ref().map_or(0, |t| t.same_host_bytes())
    }

    /// Of [`TransferEngine::same_host_bytes`], those copied through peers' shared
    /// regions mapped into this process (see [`TransferEngine::share_memory`]).
    pub fn same_host_mapped_bytes(&self) -> u64 {
        let tcp = self.inner.local.tcp.read();
        tcp.as_ref().map_or(0, |t| t.same_host_mapped_bytes())
    }

    /// Whether a transport of that name is installed.
    pub fn has_transport(&self, proto: &str) -> bool {
        match proto {
            "tcp" => self.inner.local.tcp.read().is_some(),
            "rdma" => self.inner.local.rdma.read().is_some(),
            _ => false,
        }
    }

    /// Opens a segment by name, returning its id (0 for this engine's own name).
    pub fn open_segment(&self, name: &str) -> Result<i32> {
        let name = name.trim_start_matches('/');
        if name.is_empty() {
            return Err(Error::InvalidArgument("segment name is empty".into()));
        }
        if name == self.inner.local.name {
            return Ok(LOCAL_SEGMENT_ID);
        }
        if let Some(id) = self.inner.segments.id_of(name) {
            return Ok(id);
        }
        let desc = self.inner.fetch_descriptor(name)?;
        self.inner
            .segments
            .insert(name, desc)
            .ok_or_else(|| Error::InvalidArgument("segment ids exhausted".into()))
    }

    /// Whether the segment `name` belongs to an engine on this host: this engine's
    /// own, or one whose descriptor carries this process's host identity (what the
    /// same-host path goes by). Opens the segment (fetching its descriptor once) when
    /// it is not open yet; `false` when it cannot be opened.
    pub fn is_same_host(&self, name: &str) -> bool {
        let Ok(id) = self.open_segment(name) else {
            return false;
        };
        if id == LOCAL_SEGMENT_ID {
            return true;
        }
        let Some(mine) = crate::te::transport::same_host::identity::host_identity() else {
            return false;
        };
        self.segment_descriptor(id)
            .is_some_and(|d| d.same_host.as_ref().is_some_and(|sh| sh.identity == mine))
    }

    /// Refreshes a cached segment's descriptor, then opens it.
    pub fn open_segment_no_cache(&self, name: &str) -> Result<i32> {
        self.inner.refresh(name.trim_start_matches('/'));
        self.open_segment(name)
    }

    /// Drops the cached name -> id mapping; a later open gets a new id.
    pub fn remove_local_segment(&self, name: &str) -> Result<()> {
        let name = name.trim_start_matches('/');
        if name.is_empty() {
            return Err(Error::InvalidArgument("segment name is empty".into()));
        }
        self.inner.segments.forget(name);
        Ok(())
    }

    /// Refetches every cached remote descriptor.
    pub fn sync_segment_cache(&self) {
        self.inner.sync_all();
    }

    /// The descriptor of a remote segment id (fetched again when it was dropped for
    /// idleness; `None` when that fails or the id is not open).
    pub fn segment_descriptor(&self, id: i32) -> Option<Arc<SegmentDesc>> {
        if id == LOCAL_SEGMENT_ID {
            return self.inner.local.descriptor().map(Arc::new);
        }
        self.inner.segment(id).ok().map(|(_, d)| d)
    }

    /// Registers one region (with the RDMA NICs too, when installed) and republishes
    /// the descriptor.
    pub fn register_memory(&self, addr: u64, len: u64, location: &str, remote: bool) -> Result<()> {
        let memory = &self.inner.local.memory;
        memory.register(Range { addr, len }, location, remote)?;
        self.inner
            .register_rdma(&[Range { addr, len }], location, remote)?;
        self.inner.publish_or_rollback(&[addr])
    }

    /// Lets same-host peers map the remotely accessible region based at `addr` through
    /// `file`, a sealed memfd holding it from `offset` (memory this library allocated
    /// itself, e.g. a store segment): they then copy without a round trip to this
    /// process per transfer. Nothing to do when the same-host path is disabled.
    pub fn share_memory(&self, addr: u64, file: std::os::fd::OwnedFd, offset: u64) -> Result<()> {
        if self.inner.config.disable_same_host {
            return Ok(());
        }
        self.inner.local.memory.share(addr, file, offset)
    }

    /// Registers several regions (remotely accessible) and publishes once.
    pub fn register_memory_batch(&self, ranges: &[Range], location: &str) -> Result<()> {
        self.inner
            .local
            .memory
            .register_all(ranges, location, true)?;
        self.inner.register_rdma(ranges, location, true)?;
        let addrs: Vec<u64> = ranges.iter().map(|r| r.addr).collect();
        self.inner.publish_or_rollback(&addrs)
    }

    /// Unregisters the region based at `addr` and republishes. Returns once no
    /// transfer touches it any more.
    pub fn unregister_memory(&self, addr: u64) -> Result<()> {
        self.inner.local.memory.unregister(addr)?;
        if let Some(rdma) = self.inner.local.rdma.read().clone() {
            rdma.unregister(addr);
        }
        self.inner.publish_descriptor()
    }

    /// Unregisters several regions (best effort), publishing once; first error wins.
    pub fn unregister_memory_batch(&self, addrs: &[u64]) -> Result<()> {
        let mut first = None;
        let rdma = self.inner.local.rdma.read().clone();
        for &addr in addrs {
            match self.inner.local.memory.unregister(addr) {
                Ok(()) => {
                    if let Some(r) = &rdma {
                        r.unregister(addr);
                    }
                }
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        let published = self.inner.publish_descriptor();
        first.map_or(published, Err)
    }

    /// Allocates a batch that can hold `capacity` tasks.
    pub fn allocate_batch(&self, capacity: usize) -> u64 {
        self.inner.batches.allocate(capacity)
    }

    /// Submits requests into a batch; tasks accumulate in submission order.
    pub fn submit(&self, batch_id: u64, requests: &[TransferRequest]) -> Result<()> {
        let batch = self.inner.batches.get(batch_id)?;
        let routes = requests
            .iter()
            .map(|r| self.inner.route(r))
            .collect::<Result<Vec<_>>>()?;
        let mut reservation = batch.reserve(requests.len())?;
        let signal = batch.signal();
        let together = self
            .inner
            .start_same_host_batch(requests, &routes, &signal)
            .or_else(|| self.inner.start_small_batch(requests, &routes, &signal));
        if let Some(tasks) = together {
            tasks.into_iter().for_each(|t| reservation.push(t));
            return Ok(());
        }
        let alone = requests.len() == 1;
        for (req, route) in requests.iter().zip(routes) {
            reservation.push(self.inner.start(req, route, &signal, alone));
        }
        Ok(())
    }

    /// Submits, then sends `notify` to the first request's target once the whole
    /// batch completed (from inside [`TransferEngine::transfer_status`]).
    pub fn submit_with_notify(
        &self,
        batch_id: u64,
        requests: &[TransferRequest],
        name: &str,
        msg: &str,
    ) -> Result<()> {
        let first = requests
            .first()
            .ok_or_else(|| Error::InvalidArgument("no requests to submit".into()))?;
        self.submit(batch_id, requests)?;
        let notify = PendingNotify {
            target_id: first.target_id,
            name: name.to_string(),
            msg: msg.to_string(),
        };
        self.inner.batches.get(batch_id)?.set_notify(notify);
        Ok(())
    }

    /// Status of one task; `None`-like error when the index is out of range.
    pub fn transfer_status(&self, batch_id: u64, task: usize) -> Result<(TaskStatus, u64)> {
        let batch = self.inner.batches.get(batch_id)?;
        let status = batch.task_status(task).ok_or_else(|| {
            Error::InvalidArgument(format!("task {task} is not in batch {batch_id:#x}"))
        })?;
        if status.0 == TaskStatus::Completed {
            if let Some(n) = batch.take_notify_if_complete() {
                if let Err(e) = self.send_notify(n.target_id, &n.name, &n.msg) {
                    log::warn!(
                        "batch completion notify to segment {} failed: {e}",
                        n.target_id
                    );
                }
            }
        }
        Ok(status)
    }

    /// Blocks until every task submitted to the batch so far is terminal, or the
    /// timeout passes (true when all are terminal). An alternative to polling
    /// [`TransferEngine::transfer_status`] in a loop; it does not mark tasks observed.
    pub fn wait_batch(&self, batch_id: u64, timeout: Duration) -> Result<bool> {
        let batch = self.inner.batches.get(batch_id)?;
        Ok(batch.wait(std::time::Instant::now() + timeout))
    }

    /// Frees a batch; busy until every task was observed terminal.
    pub fn free_batch(&self, batch_id: u64) -> Result<()> {
        self.inner.batches.free(batch_id)
    }

    /// Removes and returns every received notify.
    pub fn take_notifies(&self) -> Vec<Notify> {
        self.inner.local.drain_notifies()
    }

    /// Sends a notify now to segment `target_id`.
    pub fn send_notify(&self, target_id: i32, name: &str, msg: &str) -> Result<()> {
        let segment = if target_id == LOCAL_SEGMENT_ID {
            self.inner.local.name.clone()
        } else {
            let (segment, _) =
                self.inner.segments.get(target_id).ok_or_else(|| {
                    Error::Metadata(format!("segment id {target_id} is not open"))
                })?;
            segment
        };
        let (host, port) = self.inner.rpc_address(&segment)?;
        self.inner.rpc_client.send_notify(&host, port, name, msg)
    }

    /// A handle that re-publishes this engine's metadata (its `rpc_meta` entry and
    /// segment descriptor), e.g. after the metadata server restarted empty. It holds
    /// no strong reference: once the engine is gone, re-publishing does nothing.
    pub fn metadata_publisher(&self) -> MetadataPublisher {
        MetadataPublisher(Arc::downgrade(&self.inner))
    }

    /// Probes a peer's RPC daemon by segment name.
    pub fn probe(&self, segment: &str) -> Result<()> {
        let (host, port) = self.inner.rpc_address(segment)?;
        self.inner.rpc_client.probe(&host, port)
    }
}

impl Drop for TransferEngine {
    fn drop(&mut self) {
        let inner = &self.inner;
        inner.stopping.store(true, Ordering::SeqCst);
        if let Some(mut server) = inner.rpc_server.lock().take() {
            server.stop();
        }
        if let Some(tcp) = inner.local.tcp.write().take() {
            tcp.shutdown();
        }
        inner.stager.shutdown();
        if let Some(rdma) = inner.local.rdma.write().take() {
            rdma.shutdown();
        }
        if let Some(refresher) = self.refresher.take() {
            refresher.thread().unpark();
            let _ = refresher.join();
        }
        if let Some(store) = &inner.store {
            let name = &inner.local.name;
            if inner.rpc_meta_created.load(Ordering::SeqCst) {
                if let Err(e) = store.remove(&inner.keys.rpc_meta(name)) {
                    log::warn!("removing rpc_meta of {name}: {e}");
                }
            }
            if inner.descriptor_published.load(Ordering::SeqCst) {
                if let Err(e) = store.remove(&inner.keys.segment(name)) {
                    log::warn!("removing descriptor of {name}: {e}");
                }
            }
        }
    }
}

/// Re-publishes an engine's metadata; see [`TransferEngine::metadata_publisher`].
#[derive(Clone)]
pub struct MetadataPublisher(Weak<Inner>);

impl MetadataPublisher {
    /// Writes the `rpc_meta` entry (accepting an identical existing one) and the
    /// current descriptor again. P2P engines publish nothing, so this is a no-op.
    pub fn republish(&self) -> Result<()> {
        let Some(inner) = self.0.upgrade() else {
            return Ok(());
        };
        let Some(store) = inner.store.as_ref() else {
            return Ok(());
        };
        if inner.stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        inner.publish_rpc_meta().or_else(|e| {
            let key = inner.keys.rpc_meta(&inner.local.name);
            match store.get(&key) {
                Ok(Some(existing)) if existing == inner.rpc_meta_body() => Ok(()),
                _ => Err(e),
            }
        })?;
        inner.publish_descriptor()
    }
}

fn spawn_refresher(inner: Weak<Inner>, secs: u64) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || loop {
        std::thread::park_timeout(Duration::from_secs(secs));
        match inner.upgrade() {
            Some(i) if !i.stopping.load(Ordering::SeqCst) => i.sync_all(),
            _ => return,
        }
    })
}

/// Where one request goes.
enum Route {
    Local,
    Tcp(Endpoint),
    /// A peer on this host: its same-host socket, and its TCP endpoint to fall back to.
    SameHost(String, Endpoint),
    Rdma(String, Arc<SegmentDesc>),
}

impl Inner {
    fn publish_rpc_meta(&self) -> Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        store
            .set(&self.keys.rpc_meta(&self.local.name), &self.rpc_meta_body())
            .map_err(|e| {
                Error::Metadata(format!(
                    "publishing rpc_meta for '{}' (is another engine using this name?): {e}",
                    self.local.name
                ))
            })?;
        self.rpc_meta_created.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// The rpc_meta value in upstream's `Json::FastWriter` form (sorted, newline).
    fn rpc_meta_body(&self) -> Vec<u8> {
        encode_json(&json!({"ip_or_host_name": self.rpc_host, "rpc_port": self.rpc_port}))
    }

    fn publish_descriptor(&self) -> Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let _serial = self.publish_lock.lock();
        let Some(desc) = self.local.descriptor() else {
            return Ok(());
        };
        store.set(
            &self.keys.segment(&self.local.name),
            &encode_json(&desc.to_json()),
        )?;
        self.descriptor_published.store(true, Ordering::SeqCst);
        Ok(())
    }

    fn publish_or_rollback(&self, addrs: &[u64]) -> Result<()> {
        self.publish_descriptor().inspect_err(|_| {
            let rdma = self.local.rdma.read().clone();
            for &a in addrs {
                let _ = self.local.memory.unregister(a);
                if let Some(r) = &rdma {
                    r.unregister(a);
                }
            }
        })
    }

    /// Registers `ranges` with the RDMA NICs, if installed; on failure every range
    /// is unregistered again (from the engine too).
    fn register_rdma(&self, ranges: &[Range], location: &str, remote: bool) -> Result<()> {
        let Some(rdma) = self.local.rdma.read().clone() else {
            return Ok(());
        };
        for (i, r) in ranges.iter().enumerate() {
            let device = self
                .local
                .memory
                .find(r.addr, r.len)
                .and_then(|region| region.device);
            if let Err(e) = rdma.register(r.addr, r.len, (location, device), remote) {
                for done in &ranges[..i] {
                    rdma.unregister(done.addr);
                }
                for r in ranges {
                    let _ = self.local.memory.unregister(r.addr);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    fn fetch_descriptor(&self, name: &str) -> Result<SegmentDesc> {
        match &self.store {
            Some(store) => {
                let bytes = store
                    .get(&self.keys.segment(name))?
                    .ok_or_else(|| Error::Metadata(format!("segment '{name}' is not published")))?;
                SegmentDesc::from_slice(&bytes)
            }
            None => {
                let (host, port) = parse_host_port(name, self.config.handshake_port);
                let own = self
                    .local
                    .descriptor()
                    .map_or_else(|| json!({"name": self.local.name}), |d| d.to_json());
                let reply = self.rpc_client.exchange_metadata(&host, port, &own)?;
                SegmentDesc::from_json(&reply)
            }
        }
    }

    fn refresh(&self, name: &str) {
        if self.segments.id_of(name).is_none() {
            return;
        }
        match self.fetch_descriptor(name) {
            Ok(desc) => {
                if self.segments.replace(name, Arc::new(desc)) {
                    self.rpc_meta_cache.lock().remove(name);
                }
            }
            Err(e) => log::warn!("refreshing segment '{name}': {e}"),
        }
    }

    fn sync_all(&self) {
        for name in self.segments.names() {
            self.refresh(&name);
        }
    }

    /// The name and descriptor of a remote segment id, fetching the descriptor again
    /// when it was dropped for idleness. Drops idle descriptors first, when due (with
    /// the RPC addresses of segments no longer cached).
    fn segment(&self, id: i32) -> Result<(String, Arc<SegmentDesc>)> {
        if self.segments.drop_idle() {
            self.rpc_meta_cache
                .lock()
                .retain(|name, _| self.segments.is_cached(name));
        }
        let not_open = || Error::InvalidArgument(format!("segment id {id} is not open"));
        let (name, desc) = self.segments.get(id).ok_or_else(not_open)?;
        if let Some(desc) = desc {
            return Ok((name, desc));
        }
        let fresh = Arc::new(self.fetch_descriptor(&name)?);
        self.segments.replace(&name, fresh.clone());
        Ok((name, fresh))
    }

    fn rpc_address(&self, segment: &str) -> Result<(String, u16)> {
        let Some(store) = &self.store else {
            return Ok(parse_host_port(segment, self.config.handshake_port));
        };
        if let Some(addr) = self.rpc_meta_cache.lock().get(segment) {
            return Ok(addr.clone());
        }
        let bytes = store
            .get(&self.keys.rpc_meta(segment))?
            .ok_or_else(|| Error::Metadata(format!("no rpc_meta for segment '{segment}'")))?;
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| Error::MalformedJson(format!("rpc_meta of '{segment}': {e}")))?;
        let host = v.get("ip_or_host_name").and_then(Value::as_str);
        let port = v.get("rpc_port").and_then(Value::as_u64);
        let (Some(host), Some(port)) = (host, port) else {
            return Err(Error::MalformedJson(format!(
                "rpc_meta of '{segment}': {v}"
            )));
        };
        let addr = (host.to_string(), port as u16);
        self.rpc_meta_cache
            .lock()
            .insert(segment.to_string(), addr.clone());
        Ok(addr)
    }

    fn route(&self, req: &TransferRequest) -> Result<Route> {
        if req.length > 0 && req.source == 0 {
            return Err(Error::InvalidArgument("request source is NULL".into()));
        }
        if req.target_id == LOCAL_SEGMENT_ID && !self.config.disable_local_copy {
            return Ok(Route::Local);
        }
        let tcp_installed = self.local.tcp.read().is_some();
        let rdma_installed = self.local.rdma.read().is_some();
        if req.target_id == LOCAL_SEGMENT_ID && rdma_installed && !tcp_installed {
            let desc = self.local.descriptor().ok_or_else(|| {
                Error::NotSupportedTransport("no transport installed for the local segment".into())
            })?;
            return Ok(Route::Rdma(self.local.name.clone(), Arc::new(desc)));
        }
        if req.target_id == LOCAL_SEGMENT_ID {
            let tcp = self.local.tcp.read();
            let port = tcp.as_ref().map(|t| t.port()).ok_or_else(|| {
                Error::NotSupportedTransport("no transport installed for the local segment".into())
            })?;
            let host = if self.config.use_ipv6 {
                "::1"
            } else {
                "127.0.0.1"
            };
            return Ok(Route::Tcp(Endpoint {
                host: host.into(),
                port,
                v2: !self.config.tcp_force_v1,
            }));
        }
        let (name, desc) = self.segment(req.target_id)?;
        let desc = if self.config.disable_metacache {
            let fresh = Arc::new(self.fetch_descriptor(&name)?);
            self.segments.replace(&name, fresh.clone());
            fresh
        } else {
            desc
        };
        if desc.protocol == "rdma" && rdma_installed {
            return Ok(Route::Rdma(name, desc));
        }
        // An RDMA peer of this library also publishes its TCP port.
        let tcp_reachable = desc.protocol == "tcp" || desc.tcp_data_port != 0;
        if !tcp_reachable || !tcp_installed {
            return Err(Error::NotSupportedTransport(format!(
                "segment '{name}' uses protocol '{}', which is not installed here",
                desc.protocol
            )));
        }
        let host = match &desc.tcp_data_host {
            Some(h) => h.clone(),
            None => self.rpc_address(&desc.name)?.0,
        };
        let v2 = desc.tcp_proto_version >= 2 && !self.config.tcp_force_v1;
        let endpoint = Endpoint {
            host,
            port: desc.tcp_data_port,
            v2,
        };
        let same_host = desc.same_host.as_ref().and_then(|sh| {
            let tcp = self.local.tcp.read();
            tcp.as_ref()?.same_host_peer(sh)
        });
        Ok(match same_host {
            Some(socket) if !self.config.disable_same_host => Route::SameHost(socket, endpoint),
            _ => Route::Tcp(endpoint),
        })
    }

    /// The GPU runtime when `addr` is GPU memory (registered as such, or so the
    /// runtime says); `None` for host memory and on hosts without a GPU runtime.
    fn gpu_of(&self, addr: u64) -> Option<Arc<dyn crate::sys::cuda::Gpu>> {
        let gpu = crate::sys::cuda::system()?;
        let device = match self.local.memory.find(addr, 1) {
            Some(region) => region.device,
            None => gpu.device_of(addr),
        };
        device.map(|_| gpu)
    }

    /// Starts several requests that all go to one TCP peer and are small enough to be
    /// moved together on the calling thread; `None` when they are not.
    fn start_small_batch(
        &self,
        requests: &[TransferRequest],
        routes: &[Route],
        signal: &Arc<CompletionSignal>,
    ) -> Option<Vec<Arc<Task>>> {
        let Some(Route::Tcp(endpoint)) = routes.first() else {
            return None;
        };
        let total: u64 = requests.iter().map(|r| r.length).sum();
        if requests.len() < 2
            || total > INLINE_MAX_BYTES
            || routes
                .iter()
                .any(|r| !matches!(r, Route::Tcp(e) if e == endpoint))
        {
            return None;
        }
        if requests.iter().any(|r| self.gpu_of(r.source).is_some()) {
            return None;
        }
        let tcp = self.local.tcp.read().clone()?;
        let batch: Vec<PeerRequest> = requests.iter().map(PeerRequest::from).collect();
        Some(tcp.submit_small_batch(endpoint, &batch, signal))
    }

    /// Moves requests to one same-host peer on the calling thread, all at once; those
    /// the path cannot take (no permission) go to the peer's TCP `endpoint`. One
    /// task per request, in order.
    fn start_same_host(
        &self,
        socket: &str,
        endpoint: &Endpoint,
        requests: &[&TransferRequest],
        signal: &Arc<CompletionSignal>,
    ) -> Vec<Arc<Task>> {
        let Some(tcp) = self.local.tcp.read().clone() else {
            return requests.iter().map(|r| Task::failed(r.length)).collect();
        };
        let peer: Vec<PeerRequest> = requests.iter().map(|r| PeerRequest::from(*r)).collect();
        let results = tcp.same_host_transfer(socket, &peer);
        let alone = requests.len() == 1;
        requests
            .iter()
            .zip(results)
            .map(|(req, result)| match result {
                Ok(()) => {
                    let task = Task::new(req.length, 1, None);
                    task.finish_slice(true);
                    task
                }
                Err(SameHostError::Unavailable(_) | SameHostError::UseTcp) => {
                    self.start(req, Route::Tcp(endpoint.clone()), signal, alone)
                }
                Err(e) => {
                    log::warn!("same-host transfer failed: {e:?}");
                    Task::failed(req.length)
                }
            })
            .collect()
    }

    /// Starts a whole submission whose requests all go to one same-host peer from
    /// host memory as one pipelined exchange; `None` when they do not.
    fn start_same_host_batch(
        &self,
        requests: &[TransferRequest],
        routes: &[Route],
        signal: &Arc<CompletionSignal>,
    ) -> Option<Vec<Arc<Task>>> {
        let Some(Route::SameHost(socket, endpoint)) = routes.first() else {
            return None;
        };
        let same_peer = routes
            .iter()
            .all(|r| matches!(r, Route::SameHost(s, _) if s == socket));
        if requests.len() < 2
            || !same_peer
            || requests
                .iter()
                .any(|r| r.length == 0 || self.gpu_of(r.source).is_some())
        {
            return None;
        }
        let refs: Vec<&TransferRequest> = requests.iter().collect();
        Some(self.start_same_host(socket, endpoint, &refs, signal))
    }

    /// Starts one request on its route; `alone`: it is the whole submission.
    fn start(
        &self,
        req: &TransferRequest,
        route: Route,
        signal: &Arc<CompletionSignal>,
        alone: bool,
    ) -> Arc<Task> {
        match route {
            Route::Local => {
                let done = local::copy(
                    &self.local.memory,
                    req.op,
                    req.source,
                    req.target_offset,
                    req.length,
                );
                match done {
                    Ok(()) => {
                        let task = Task::new(req.length, 1, None);
                        task.finish_slice(true);
                        task
                    }
                    Err(e) => {
                        log::warn!("local transfer failed: {e}");
                        Task::failed(req.length)
                    }
                }
            }
            Route::Rdma(segment, desc) => {
                let rdma = self.local.rdma.read().clone();
                let Some(rdma) = rdma else {
                    return Task::failed(req.length);
                };
                let request = PeerRequest::from(req);
                rdma.submit(&segment, &desc, &request, Some(signal.clone()))
            }
            Route::SameHost(socket, endpoint) => {
                if req.length == 0 || self.gpu_of(req.source).is_some() {
                    return self.start(req, Route::Tcp(endpoint), signal, alone);
                }
                let tasks = self.start_same_host(&socket, &endpoint, &[req], signal);
                tasks
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| Task::failed(req.length))
            }
            Route::Tcp(endpoint) => {
                let tcp = self.local.tcp.read().clone();
                let Some(tcp) = tcp else {
                    return Task::failed(req.length);
                };
                let request = PeerRequest::from(req);
                if let Some(gpu) = self.gpu_of(req.source) {
                    return self
                        .stager
                        .submit(tcp, &endpoint, &request, Some(signal.clone()), gpu);
                }
                tcp.submit(&endpoint, &request, Some(signal.clone()), alone)
            }
        }
    }
}
