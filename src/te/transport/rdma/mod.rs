//! The RDMA transport (spec transfer-engine.md §5): RC queue pairs over run-time-loaded
//! verbs ([`crate::sys::verbs`]), wire-compatible with upstream's descriptors,
//! handshake and topology.
//!
//! Layout: [`topology`] (which NICs serve which memory, and the NIC numbering peers
//! use), [`nic`] (one open NIC), [`memory`] (MRs on every NIC), [`endpoint`] and
//! [`connect`] (RC connections and their handshake), [`worker`] (per-NIC threads that
//! post and poll), [`slice`] (cutting transfers). This file ties them together: install,
//! publishing, submitting, the passive handshake, statistics, shutdown.

mod channel;
pub mod connect;
mod connectors;
pub mod endpoint;
pub mod error;
pub mod gid;
pub mod handshake;
pub mod location;
pub mod memory;
pub mod nic;
mod seam;
mod shared;
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
use crate::te::transport::request::{Op, PeerRequest};
use connectors::Connectors;
use handshake::HandShake;
use nic::Nic;
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use topology::Topology;
use worker_handle::WorkerHandle;

pub use channel::HandshakeChannel;
pub use shared::Shared;

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

impl Drop for RdmaTransport {
    fn drop(&mut self) {
        self.shutdown();
    }
}
