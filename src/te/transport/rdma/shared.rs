//! [`Shared`]: the RDMA transport's state that its workers and connectors hold too
//! (verbs provider, NICs, worker handles, topology, registered memory, peers), and the
//! devices' release by its last holder.

use super::channel::HandshakeChannel;
use super::connectors::{ConnectJob, Connectors};
use super::endpoint::Endpoint;
use super::error::{RdmaError, RouteError};
use super::nic::Nic;
use super::slice::{Slice, Target};
use super::topology::Topology;
use super::worker_handle::{Msg, WorkerHandle};
use super::{endpoint, gid, slice};
use crate::config::RdmaConfig;
use crate::error::{Error, Result};
use crate::metadata::SegmentDesc;
use crate::sys::verbs::{RdmaOp, Verbs};
use crate::te::batch::Task;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

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
    pub(super) workers: OnceLock<Vec<Vec<WorkerHandle>>>,
    /// Our topology matrix.
    pub topology: Topology,
    /// Published device order: indices into `nics`.
    pub(super) publish_order: Vec<usize>,
    pub(super) memory: super::memory::Memory,
    /// How to reach peers.
    pub channel: Arc<dyn HandshakeChannel>,
    pub(super) connectors: Connectors,
    /// Peer servers named in NIC paths -> their segment names.
    pub(super) servers: Mutex<HashMap<String, String>>,
    pub(super) targets: Mutex<HashMap<String, (usize, Arc<Target>)>>,
    pub(super) stopping: AtomicBool,
    pub(super) started: Instant,
    pub(super) random: AtomicU64,
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

impl Shared {
    pub(super) fn worker(&self, nic: &Nic, ep: &Endpoint) -> &WorkerHandle {
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
    ) -> std::result::Result<Arc<Endpoint>, RdmaError> {
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
                None => {
                    return Err(RdmaError::BusyEndpoints {
                        nic: nic.name.clone(),
                        count: eps.len(),
                    })
                }
            }
        }
        let w = self.worker_index(peer_path);
        let cq = self.workers.get().ok_or(RdmaError::WorkersNotStarted)?[nic.index][w].cq;
        let setup = nic.qp_setup(&self.cfg);
        let ep = Endpoint::create(self.verbs.as_ref(), &setup, cq, w, peer_path)?;
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
                Some(RdmaError::ShuttingDown),
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
    pub(super) fn slices(
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
        let hold = super::memory::Hold::new(region);
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
    pub(super) fn dispatch(&self, plan: Vec<Slice>, task: &Arc<Task>) {
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
    pub fn route(&self, mut s: Slice) -> std::result::Result<(), (Slice, RouteError)> {
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
    fn resolve(&self, s: &mut Slice) -> std::result::Result<(usize, usize), RouteError> {
        if self.stopping.load(Ordering::Relaxed) {
            return Err(RouteError::Stopping);
        }
        let region = s.hold.region();
        let local_name = self
            .topology
            .select(&region.location, s.attempt, self.random())
            .ok_or(RouteError::NoLocalNic)?;
        let nic = self
            .nics
            .iter()
            .find(|n| n.name == local_name)
            .ok_or_else(|| RouteError::LocalNicNotOpen(local_name.as_str().into()))?;
        let chunk = region.chunk(s.local).ok_or(RouteError::NoLocalChunk)?;
        s.lkey = chunk.keys[nic.index].lkey;
        let t = &s.target;
        let buf = t
            .rdma
            .buffer_for(s.remote, u64::from(s.len))
            .ok_or(RouteError::NoRemoteBuffer)?;
        let peer_name = t
            .topology
            .select(&buf.location, s.attempt, self.random())
            .ok_or(RouteError::NoPeerNic)?;
        let dev = t
            .rdma
            .device_index(&peer_name)
            .ok_or_else(|| RouteError::PeerDeviceUnknown(peer_name.as_str().into()))?;
        s.rkey = *buf.rkey.get(dev).ok_or(RouteError::NoRemoteKey)?;
        s.peer_dev = dev;
        s.nic = nic.index;
        Ok((nic.index, self.worker_index(&t.paths[dev])))
    }
}
