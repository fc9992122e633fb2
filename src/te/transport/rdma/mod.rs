//! The RDMA transport (spec transfer-engine.md §5): RC queue pairs over run-time-loaded
//! verbs ([`crate::sys::verbs`]), wire-compatible with upstream's descriptors,
//! handshake and topology.
//!
//! Layout: [`topology`] (which NICs serve which memory, and the NIC numbering peers
//! use), [`nic`] (one open NIC), [`memory`] (MRs on every NIC), [`endpoint`] and
//! [`connect`] (RC connections and their handshake), [`worker`] (per-NIC threads that
//! post and poll), [`slice`] (cutting transfers). This file ties them together: install,
//! publishing, submitting, the passive handshake, statistics, shutdown.

pub mod connect;
mod connectors;
pub mod endpoint;
pub mod gid;
pub mod handshake;
pub mod location;
pub mod memory;
pub mod nic;
pub mod slice;
pub mod stl_order;
pub mod topology;
pub mod worker;
pub mod worker_handle;
mod worker_runs;

use crate::config::RdmaConfig;
use crate::error::{Error, Result};
use crate::metadata::{RdmaBuffer, RdmaDevice, RdmaPart, SegmentDesc};
use crate::sys::verbs::{Access, RdmaOp, Verbs};
use crate::te::batch::{CompletionSignal, Task};
use crate::te::memory::Range;
use crate::te::transport::request::{Op, PeerRequest};
use crate::te::transport::seam::Transport;
use connectors::{ConnectJob, Connectors};
use endpoint::Endpoint;
use handshake::HandShake;
use nic::Nic;
use parking_lot::Mutex;
use serde_json::Value;
use slice::{Slice, Target};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use topology::Topology;
use worker_handle::{Msg, WorkerHandle};

/// How the transport reaches peers' RPC daemons (the engine provides it).
pub trait HandshakeChannel: Send + Sync {
    /// Sends `msg` as a type-0 RPC to the daemon of segment `segment` and returns the
    /// reply.
    fn exchange(&self, segment: &str, msg: &Value) -> Result<Value>;
    /// `(gid, lid)` of `device` as segment `segment` publishes it.
    fn peer_device(&self, segment: &str, device: &str) -> Option<(String, u16)>;
}

/// State shared by the transport, its workers and its connectors.
pub struct Shared {
    /// The verbs provider.
    pub verbs: Arc<dyn Verbs>,
    /// Tunables.
    pub cfg: RdmaConfig,
    /// The server part of our NIC paths.
    pub server: String,
    /// Our NICs.
    pub nics: Vec<Arc<Nic>>,
    workers: OnceLock<Vec<Vec<WorkerHandle>>>,
    /// Our topology matrix.
    pub topology: Topology,
    /// Published device order: indices into `nics`.
    publish_order: Vec<usize>,
    memory: memory::Memory,
    /// How to reach peers.
    pub channel: Arc<dyn HandshakeChannel>,
    connectors: Connectors,
    /// Peer servers named in NIC paths -> their segment names.
    servers: Mutex<HashMap<String, String>>,
    targets: Mutex<HashMap<String, (usize, Arc<Target>)>>,
    stopping: AtomicBool,
    started: Instant,
    random: AtomicU64,
}

/// The installed RDMA transport.
pub struct RdmaTransport {
    shared: Arc<Shared>,
}

/// What the install needs besides the verbs provider.
pub struct InstallArgs<'a> {
    /// Tunables.
    pub cfg: &'a RdmaConfig,
    /// Our segment name (the server part of NIC paths unless `MC_RDMA_BIND_ADDRESS`).
    pub segment: &'a str,
    /// A topology to use instead of discovering one (`installTransport` `args[0]`,
    /// `MC_CUSTOM_TOPO_JSON`).
    pub topology: Option<Topology>,
    /// Devices to consider (empty: all).
    pub devices: &'a [String],
    /// How to reach peers.
    pub channel: Arc<dyn HandshakeChannel>,
}

impl RdmaTransport {
    /// Opens the NICs (from `args.topology`, or discovered), starts their workers and
    /// the connector threads. Fails with the reason when no NIC is usable.
    pub fn install(verbs: Arc<dyn Verbs>, args: InstallArgs<'_>) -> Result<Arc<RdmaTransport>> {
        let unsupported = |why: String| Error::NotSupportedTransport(format!("rdma: {why}"));
        let (usable, skipped) = topology::usable_nics(verbs.as_ref(), args.cfg, args.devices)?;
        let topology = match args.topology {
            Some(t) => t,
            None => {
                let sysfs = std::path::Path::new("/sys");
                let placements: Vec<_> = usable
                    .iter()
                    .map(|n| topology::place_nic(sysfs, n))
                    .collect();
                let gpus = topology::place_gpus(sysfs);
                topology::build(&placements, &topology::numa_nodes(sysfs), &gpus)
            }
        };
        let order = topology.nic_order();
        if order.is_empty() {
            let why = if skipped.is_empty() {
                format!("no RDMA device found ({})", verbs.provider())
            } else {
                format!("no usable RDMA device: {}", skipped.join("; "))
            };
            return Err(unsupported(why));
        }
        let server = args
            .cfg
            .bind_address
            .clone()
            .unwrap_or_else(|| args.segment.to_string());
        let mut nics = Vec::new();
        let mut failures = Vec::new();
        for name in &order {
            if !usable.contains(name) {
                failures.push(format!("{name}: not usable"));
                continue;
            }
            match Nic::open(verbs.as_ref(), args.cfg, nics.len(), name, &server) {
                Ok(nic) => nics.push(Arc::new(nic)),
                Err(e) => failures.push(format!("{name}: {e}")),
            }
        }
        if nics.is_empty() {
            return Err(unsupported(format!(
                "no NIC could be opened: {}",
                failures.join("; ")
            )));
        }
        for f in &failures {
            log::warn!("rdma: skipping {f}");
        }
        let publish_order = order
            .iter()
            .filter_map(|name| nics.iter().position(|n| &n.name == name))
            .collect();
        let shared = Arc::new(Shared {
            verbs,
            cfg: args.cfg.clone(),
            server,
            nics,
            workers: OnceLock::new(),
            topology,
            publish_order,
            memory: memory::Memory::default(),
            channel: args.channel,
            connectors: Connectors::default(),
            servers: Mutex::new(HashMap::new()),
            targets: Mutex::new(HashMap::new()),
            stopping: AtomicBool::new(false),
            started: Instant::now(),
            random: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
        });
        let mut all_workers = Vec::new();
        for nic in &shared.nics {
            let mut ws = Vec::new();
            for w in 0..shared.cfg.workers_per_nic {
                match worker::spawn(&shared, nic, w) {
                    Ok(h) => ws.push(h),
                    Err(e) => {
                        for h in all_workers.iter().flatten().chain(&ws) {
                            WorkerHandle::stop(h);
                        }
                        return Err(unsupported(format!("starting {} workers: {e}", nic.name)));
                    }
                }
            }
            all_workers.push(ws);
        }
        let _ = shared.workers.set(all_workers);
        log::info!(
            "rdma: installed with {} (server {})",
            shared
                .nics
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            shared.server
        );
        Ok(Arc::new(RdmaTransport { shared }))
    }

    /// The topology in use.
    pub fn topology(&self) -> &Topology {
        &self.shared.topology
    }

    /// The server part of our NIC paths, published as `rdma_server_name` when it is
    /// not the segment name.
    pub fn server(&self) -> &str {
        &self.shared.server
    }

    /// Registers a region (memory of GPU `device`, or host memory) with every NIC
    /// (remote access only when `remote`).
    pub fn register(
        &self,
        addr: u64,
        len: u64,
        (location, device): (&str, Option<u32>),
        remote: bool,
    ) -> Result<()> {
        let s = &self.shared;
        let location = location::resolve(location, addr, &s.topology, device);
        let pds: Vec<_> = s.nics.iter().map(|n| n.pd).collect();
        let max_mr = s
            .nics
            .iter()
            .map(|n| n.attr.max_mr_size)
            .filter(|&m| m > 0)
            .min()
            .unwrap_or(u64::MAX)
            .min(s.cfg.max_mr_size);
        s.memory.register(
            s.verbs.as_ref(),
            &pds,
            addr,
            len,
            (&location, device),
            Access {
                remote,
                relaxed_ordering: s.cfg.relaxed_ordering,
            },
            max_mr,
        )
    }

    /// Deregisters the region at `addr` once no slice uses it any more.
    pub fn unregister(&self, addr: u64) {
        self.shared
            .memory
            .unregister(self.shared.verbs.as_ref(), addr);
    }

    /// Our part of the segment descriptor: devices and keys in the order an upstream
    /// reader numbers them, and the topology.
    pub fn part(&self) -> RdmaPart {
        let s = &self.shared;
        let devices = s
            .publish_order
            .iter()
            .map(|&i| RdmaDevice {
                name: s.nics[i].name.clone(),
                lid: s.nics[i].port_attr.lid,
                gid: s.nics[i].gid_text.clone(),
            })
            .collect();
        let mut buffers = Vec::new();
        for r in s.memory.regions() {
            for c in &r.chunks {
                let keys = |f: fn(&crate::sys::verbs::MrKeys) -> u32| -> Vec<u32> {
                    if !r.remote {
                        return Vec::new();
                    }
                    s.publish_order.iter().map(|&i| f(&c.keys[i])).collect()
                };
                buffers.push(RdmaBuffer {
                    location: r.location.clone(),
                    addr: c.addr,
                    length: c.len,
                    rkey: keys(|k| k.rkey),
                    lkey: keys(|k| k.lkey),
                });
            }
        }
        RdmaPart {
            devices,
            buffers,
            priority_matrix: s.topology.to_value(),
        }
    }

    /// Starts `req` on segment `segment` (descriptor `desc`); returns the task its
    /// slices complete.
    pub fn submit(
        &self,
        segment: &str,
        desc: &Arc<SegmentDesc>,
        req: &PeerRequest,
        signal: Option<Arc<CompletionSignal>>,
    ) -> Arc<Task> {
        let op = match req.op {
            Op::Read => RdmaOp::Read,
            Op::Write => RdmaOp::Write,
        };
        let len = req.len;
        match self
            .shared
            .slices(segment, desc, op, req.local, req.remote, len)
        {
            Ok(plan) => {
                let task = Task::new(len, plan.len() as u32, signal);
                self.shared.dispatch(plan, &task);
                task
            }
            Err(e) => {
                log::warn!("rdma: transfer of {len} bytes to {segment} refused: {e}");
                Task::failed(len)
            }
        }
    }

    /// Answers a handshake message (RPC type 0).
    pub fn on_handshake(&self, request: &Value) -> Value {
        let msg = HandShake::from_value(request);
        connect::accept(&self.shared, &msg).to_value()
    }

    /// Per-NIC `(name, bytes in flight, bytes per second since install)`.
    pub fn nic_loads(&self) -> Vec<(String, u64, f64)> {
        let secs = self.shared.started.elapsed().as_secs_f64().max(1e-3);
        self.shared
            .nics
            .iter()
            .map(|n| {
                let moved = n.stats.bytes_written.load(Ordering::Relaxed)
                    + n.stats.bytes_read.load(Ordering::Relaxed);
                (
                    n.name.clone(),
                    n.stats.bytes_in_flight.load(Ordering::Relaxed),
                    moved as f64 / secs,
                )
            })
            .collect()
    }

    /// The local NICs and topology, as upstream's `showLinks` JSON.
    pub fn links_json(&self) -> Value {
        let nics: Vec<Value> = self
            .shared
            .nics
            .iter()
            .map(|n| {
                let placement = topology::place_nic(std::path::Path::new("/sys"), &n.name);
                serde_json::json!({
                    "device": n.name,
                    "numa": placement.numa_node.map_or(-1, i64::from),
                    "gid": n.gid_text,
                    "gid_index": n.gid.index,
                    "port": n.port,
                    "mtu": crate::sys::verbs::mtu_bytes(n.path_mtu),
                    "source": if self.shared.cfg.gid_index.is_some() { "MC_GID_INDEX" } else { "auto" },
                    "bytes_written": n.stats.bytes_written.load(Ordering::Relaxed),
                    "bytes_read": n.stats.bytes_read.load(Ordering::Relaxed),
                    "slice_errors": n.stats.slice_errors.load(Ordering::Relaxed),
                    "endpoints": n.endpoints.lock().len(),
                })
            })
            .collect();
        serde_json::json!({"local_nics": nics, "topology": self.shared.topology.to_value()})
    }

    /// Stops the workers and connectors, fails what is still in flight, and releases
    /// every verbs object. Idempotent.
    pub fn shutdown(&self) {
        let s = &self.shared;
        if s.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        for job in s.connectors.close() {
            job.ep.conn.lock().retire(s.verbs.as_ref());
        }
        if let Some(workers) = s.workers.get() {
            for h in workers.iter().flatten() {
                h.stop();
            }
        }
    }
}

impl Drop for Shared {
    /// The devices are released by the last holder: the transport, or a handshake
    /// that was still waiting on a peer at shutdown.
    fn drop(&mut self) {
        let verbs = self.verbs.as_ref();
        for nic in &self.nics {
            for (_, ep) in nic.endpoints.lock().drain() {
                ep.conn.lock().retire(verbs);
            }
        }
        if let Some(workers) = self.workers.get() {
            for h in workers.iter().flatten() {
                verbs.destroy_cq(h.cq);
            }
        }
        self.memory.clear(verbs);
        for nic in &self.nics {
            verbs.dealloc_pd(nic.pd);
            verbs.close_device(nic.ctx);
        }
    }
}

impl Transport for RdmaTransport {
    fn name(&self) -> &'static str {
        "rdma"
    }

    /// Protocol `rdma` with the devices, keyed buffers and topology (over whatever
    /// TCP set), and the server name when it differs from the segment's.
    fn describe(&self, desc: &mut SegmentDesc) {
        let part = self.part();
        desc.protocol = "rdma".into();
        desc.buffers = part.plain_buffers();
        desc.rdma_server_name = (self.server() != desc.name).then(|| self.server().to_string());
        desc.rdma = Some(part);
    }

    fn register(
        &self,
        range: Range,
        location: &str,
        device: Option<u32>,
        remote: bool,
    ) -> Result<()> {
        RdmaTransport::register(self, range.addr, range.len, (location, device), remote)
    }

    fn unregister(&self, addr: u64) {
        RdmaTransport::unregister(self, addr);
    }

    fn on_handshake(&self, request: &Value) -> Option<Value> {
        Some(RdmaTransport::on_handshake(self, request))
    }

    fn shutdown(&self) {
        RdmaTransport::shutdown(self);
    }
}

impl Drop for RdmaTransport {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Shared {
    fn worker(&self, nic: &Nic, ep: &Endpoint) -> &WorkerHandle {
        &self.workers.get().expect("workers started")[nic.index][ep.worker]
    }

    /// The CQ of the worker owning `ep`.
    pub fn cq_of(&self, nic: &Nic, ep: &Endpoint) -> crate::sys::verbs::Cq {
        self.worker(nic, ep).cq
    }

    /// The worker that owns endpoints to `peer_path` on a NIC.
    fn worker_index(&self, peer_path: &str) -> usize {
        let h = peer_path.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        (h % self.cfg.workers_per_nic.max(1) as u64) as usize
    }

    /// The endpoint from `nic` to `peer_path`, created on first use (evicting the
    /// least recently used idle one beyond `MC_MAX_EP_PER_CTX`).
    pub fn endpoint(
        &self,
        nic: &Nic,
        peer_path: &str,
    ) -> std::result::Result<Arc<Endpoint>, String> {
        let now = self.started.elapsed().as_millis() as u64;
        let mut eps = nic.endpoints.lock();
        if let Some(ep) = eps.get(peer_path) {
            ep.last_used.store(now, Ordering::Relaxed);
            return Ok(ep.clone());
        }
        if eps.len() >= self.cfg.max_endpoints {
            let victim = eps
                .iter()
                .filter(|(_, e)| e.outstanding.load(Ordering::Relaxed) == 0)
                .min_by_key(|(_, e)| e.last_used.load(Ordering::Relaxed))
                .map(|(p, _)| p.clone());
            match victim {
                Some(p) => {
                    if let Some(old) = eps.remove(&p) {
                        old.conn.lock().retire(self.verbs.as_ref());
                    }
                }
                None => return Err(format!("{} has {} busy endpoints", nic.name, eps.len())),
            }
        }
        let w = self.worker_index(peer_path);
        let cq = self.workers.get().ok_or("workers not started")?[nic.index][w].cq;
        let ep = Endpoint::create(self.verbs.as_ref(), &self.cfg, nic, cq, w, peer_path)
            .map_err(|e| e.to_string())?;
        ep.last_used.store(now, Ordering::Relaxed);
        eps.insert(peer_path.to_string(), ep.clone());
        Ok(ep)
    }

    /// Drops the endpoint to `peer_path` (its QPs are destroyed).
    pub fn forget_endpoint(&self, nic: &Nic, peer_path: &str) {
        if let Some(ep) = nic.endpoints.lock().remove(peer_path) {
            let mut conn = ep.conn.lock();
            if conn.state != endpoint::State::Retired {
                conn.retire(self.verbs.as_ref());
            }
        }
    }

    /// Asks a connector thread to handshake `ep`.
    pub fn request_connect(self: &Arc<Self>, nic: &Arc<Nic>, ep: &Arc<Endpoint>) {
        let job = ConnectJob {
            nic: nic.clone(),
            ep: ep.clone(),
        };
        if self.connectors.submit(self, job).is_err() {
            self.worker(nic, ep).send(Msg::Connected(
                ep.peer_path.clone(),
                Some("the transport is shutting down".into()),
            ));
        }
    }

    /// Tells the worker owning `ep` that it may post on it now.
    pub fn endpoint_ready(&self, nic: &Nic, ep: &Endpoint) {
        self.worker(nic, ep)
            .send(Msg::Connected(ep.peer_path.clone(), None));
    }

    fn random(&self) -> u64 {
        let mut x = self
            .random
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^ (x >> 33)
    }

    /// The peer segment as slices need it, cached per descriptor.
    fn target(&self, segment: &str, desc: &Arc<SegmentDesc>) -> Result<Arc<Target>> {
        let key = Arc::as_ptr(desc) as usize;
        if let Some((k, t)) = self.targets.lock().get(segment) {
            if *k == key {
                return Ok(t.clone());
            }
        }
        let rdma = desc.rdma.clone().ok_or_else(|| {
            Error::NotSupportedTransport(format!("segment {segment} publishes no RDMA devices"))
        })?;
        let topology = Topology::from_value(&rdma.priority_matrix)?;
        let server = desc
            .rdma_server_name
            .clone()
            .unwrap_or_else(|| desc.name.clone());
        let paths = rdma
            .devices
            .iter()
            .map(|d| Arc::<str>::from(format!("{server}@{}", d.name)))
            .collect();
        let gids = rdma
            .devices
            .iter()
            .map(|d| gid::from_text(&d.gid).unwrap_or_default())
            .collect();
        let t = Arc::new(Target {
            segment: segment.to_string(),
            server: server.clone(),
            rdma,
            topology,
            paths,
            gids,
        });
        self.servers.lock().insert(server, segment.to_string());
        self.targets
            .lock()
            .insert(segment.to_string(), (key, t.clone()));
        Ok(t)
    }

    /// The segment name behind a NIC path's server part.
    pub fn segment_of(&self, server: &str) -> String {
        self.servers
            .lock()
            .get(server)
            .cloned()
            .unwrap_or_else(|| server.to_string())
    }

    /// Cuts a transfer into slices, checking both ends first.
    fn slices(
        &self,
        segment: &str,
        desc: &Arc<SegmentDesc>,
        op: RdmaOp,
        local: u64,
        remote: u64,
        len: u64,
    ) -> Result<Vec<Slice>> {
        if self.stopping.load(Ordering::Relaxed) {
            return Err(Error::NotSupportedTransport(
                "the RDMA transport is stopping".into(),
            ));
        }
        let target = self.target(segment, desc)?;
        let region = self.memory.find(local, len).ok_or_else(|| {
            Error::AddressNotRegistered(format!(
                "{len} bytes at {local:#x} are not in memory registered with the RDMA NICs"
            ))
        })?;
        let remote_buf = target.rdma.buffer_for(remote, len).ok_or_else(|| {
            Error::AddressNotRegistered(format!(
                "{len} bytes at {remote:#x} are not in a buffer segment {segment} published"
            ))
        })?;
        if remote_buf.rkey.is_empty() {
            return Err(Error::AddressNotRegistered(format!(
                "segment {segment}'s buffer at {:#x} is not remotely accessible",
                remote_buf.addr
            )));
        }
        let local_end = |at: u64| {
            region
                .chunk(local + at)
                .map_or(0, |c| c.addr + c.len - (local + at))
        };
        let pieces = slice::cut(len, self.cfg.slice_size, self.cfg.fragment_limit, |at| {
            let remote_room = remote_buf.addr + remote_buf.length - (remote + at);
            local_end(at).min(remote_room)
        });
        let hold = memory::Hold::new(region);
        let placeholder = Task::new(0, 0, None);
        Ok(pieces
            .into_iter()
            .map(|(at, n)| Slice {
                task: placeholder.clone(),
                op,
                local: local + at,
                remote: remote + at,
                len: n as u32,
                hold: hold.clone(),
                target: target.clone(),
                attempt: 0,
                nic: 0,
                lkey: 0,
                peer_dev: 0,
                rkey: 0,
                posted_at: None,
            })
            .collect())
    }

    /// Routes every slice of a new task (batched per worker).
    fn dispatch(&self, plan: Vec<Slice>, task: &Arc<Task>) {
        let mut batches: HashMap<(usize, usize), Vec<Slice>> = HashMap::new();
        for mut s in plan {
            s.task = task.clone();
            match self.resolve(&mut s) {
                Ok((nic, w)) => batches.entry((nic, w)).or_default().push(s),
                Err(e) => {
                    log::warn!("rdma: no path for a slice to {}: {e}", s.target.segment);
                    s.task.finish_slice(false);
                }
            }
        }
        let workers = self.workers.get().expect("workers started");
        for ((nic, w), slices) in batches {
            workers[nic][w].send(Msg::Slices(slices));
        }
    }

    /// Routes one slice (a retry); gives it back when there is no path.
    pub fn route(&self, mut s: Slice) -> std::result::Result<(), (Slice, String)> {
        match self.resolve(&mut s) {
            Ok((nic, w)) => {
                self.workers.get().expect("workers started")[nic][w].send(Msg::Slices(vec![s]));
                Ok(())
            }
            Err(e) => Err((s, e)),
        }
    }

    /// Picks this attempt's local NIC and peer device and fills in the keys; returns
    /// (NIC, worker).
    fn resolve(&self, s: &mut Slice) -> std::result::Result<(usize, usize), String> {
        if self.stopping.load(Ordering::Relaxed) {
            return Err("the transport is stopping".into());
        }
        let region = s.hold.region();
        let local_name = self
            .topology
            .select(&region.location, s.attempt, self.random())
            .ok_or("no local NIC for the buffer's location")?;
        let nic = self
            .nics
            .iter()
            .find(|n| n.name == local_name)
            .ok_or_else(|| format!("local NIC {local_name} is not open"))?;
        let chunk = region
            .chunk(s.local)
            .ok_or("the local buffer has no chunk")?;
        s.lkey = chunk.keys[nic.index].lkey;
        let t = &s.target;
        let buf = t
            .rdma
            .buffer_for(s.remote, u64::from(s.len))
            .ok_or("no remote buffer")?;
        let peer_name = t
            .topology
            .select(&buf.location, s.attempt, self.random())
            .ok_or("the peer's topology has no NIC for the buffer")?;
        let dev = t
            .rdma
            .device_index(&peer_name)
            .ok_or_else(|| format!("the peer publishes no device {peer_name}"))?;
        s.rkey = *buf
            .rkey
            .get(dev)
            .ok_or("the peer buffer has no key for that device")?;
        s.peer_dev = dev;
        s.nic = nic.index;
        Ok((nic.index, self.worker_index(&t.paths[dev])))
    }
}
