//! An endpoint: the RC connection from one of our NICs to one peer NIC, made of
//! `MC_NUM_QP_PER_EP` queue pairs that complete on the CQ of the worker owning the
//! endpoint. Its connection state is behind one lock, which posting also takes, so a
//! queue pair is never destroyed while a worker posts to it.

use super::error::RdmaError;
use crate::sys::verbs::{Cq, Pd, QpCaps, QpInfo, QpTransition, RemotePath, Verbs, VerbsError};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Where a connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// QPs in INIT, nothing agreed with the peer.
    Unconnected,
    /// An active handshake is under way.
    Connecting,
    /// Connected by the peer's handshake; waiting for its ready ACK (since then).
    WaitAck(Instant),
    /// Ready to post.
    Connected,
    /// Removed from its NIC; nothing is posted any more.
    Retired,
}

/// The lock-protected part of an endpoint.
#[derive(Debug)]
pub struct Conn {
    /// Connection state.
    pub state: State,
    /// Our QPs.
    pub qps: Vec<QpInfo>,
    /// The peer's QP numbers once connected.
    pub peer_qpns: Vec<u32>,
    /// Bumped whenever the QPs are replaced; work posted under an older generation
    /// is void.
    pub generation: u64,
}

/// One endpoint.
pub struct Endpoint {
    /// The peer NIC path, `<server>@<device>`.
    pub peer_path: String,
    /// Index of the worker (of our NIC) that posts on it and polls its CQ.
    pub worker: usize,
    /// Connection state and QPs.
    pub conn: Mutex<Conn>,
    /// Slices posted on it and not completed.
    pub outstanding: AtomicU64,
    /// When it was last used (ms since the transport started), for eviction.
    pub last_used: AtomicU64,
}

/// What an endpoint's queue pairs are made and connected with: their NIC's protection
/// domain, port and path, and the tunables that size them (`Nic::qp_setup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpSetup {
    /// The NIC's protection domain.
    pub pd: Pd,
    /// Port used (`MC_IB_PORT`).
    pub port: u8,
    /// P_Key index (`MC_IB_PKEY_INDEX`).
    pub pkey_index: u16,
    /// Queue pairs per endpoint (`MC_NUM_QP_PER_EP`).
    pub count: usize,
    /// Queue sizes, within the device's limits.
    pub caps: QpCaps,
    /// Path MTU as the verbs enum.
    pub path_mtu: u32,
    /// Local GID index.
    pub sgid_index: u8,
    /// Traffic class (`MC_IB_TC`), when set.
    pub traffic_class: Option<u8>,
    /// Service level (`MC_IB_SL`).
    pub service_level: u8,
    /// Outstanding RDMA reads each QP may issue and take (`max_rd_atomic`).
    pub max_rd_atomic: u8,
}

/// A fresh generation number, unique in the process.
fn next_generation() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Endpoint {
    /// An unconnected endpoint to `peer_path` with its QPs created and in INIT.
    pub fn create(
        verbs: &dyn Verbs,
        setup: &QpSetup,
        cq: Cq,
        worker: usize,
        peer_path: &str,
    ) -> Result<Arc<Endpoint>, VerbsError> {
        let qps = create_qps(verbs, setup, cq)?;
        Ok(Arc::new(Endpoint {
            peer_path: peer_path.to_string(),
            worker,
            conn: Mutex::new(Conn {
                state: State::Unconnected,
                qps,
                peer_qpns: Vec::new(),
                generation: next_generation(),
            }),
            outstanding: AtomicU64::new(0),
            last_used: AtomicU64::new(0),
        }))
    }

    /// Whether work may be posted now.
    pub fn ready(&self) -> bool {
        self.conn.lock().state == State::Connected
    }
}

/// Creates `MC_NUM_QP_PER_EP` RC QPs on `cq` and moves them to INIT.
pub fn create_qps(verbs: &dyn Verbs, setup: &QpSetup, cq: Cq) -> Result<Vec<QpInfo>, VerbsError> {
    let mut qps: Vec<QpInfo> = Vec::with_capacity(setup.count);
    for _ in 0..setup.count {
        let made = verbs.create_qp(setup.pd, cq, setup.caps).and_then(|qp| {
            let init = QpTransition::Init {
                port: setup.port,
                pkey_index: setup.pkey_index,
            };
            match verbs.modify_qp(qp.qp, &init) {
                Ok(()) => Ok(qp),
                Err(e) => {
                    verbs.destroy_qp(qp.qp);
                    Err(e)
                }
            }
        });
        match made {
            Ok(qp) => qps.push(qp),
            Err(e) => {
                for qp in qps {
                    verbs.destroy_qp(qp.qp);
                }
                return Err(e);
            }
        }
    }
    Ok(qps)
}

impl Conn {
    /// Replaces the QPs with fresh ones in INIT (the old ones are destroyed, and work
    /// posted on them is void) and forgets the peer.
    pub fn reset(&mut self, verbs: &dyn Verbs, setup: &QpSetup, cq: Cq) -> Result<(), VerbsError> {
        for qp in self.qps.drain(..) {
            verbs.destroy_qp(qp.qp);
        }
        self.peer_qpns.clear();
        self.generation = next_generation();
        self.state = State::Unconnected;
        self.qps = create_qps(verbs, setup, cq)?;
        Ok(())
    }

    /// Connects every QP to the peer QP at the same index (INIT -> RTR -> RTS).
    pub fn connect(
        &mut self,
        verbs: &dyn Verbs,
        setup: &QpSetup,
        peer_gid: [u8; 16],
        peer_lid: u16,
        peer_qpns: &[u32],
    ) -> Result<(), RdmaError> {
        if peer_qpns.len() != self.qps.len() {
            return Err(RdmaError::QpCountMismatch {
                peer: peer_qpns.len(),
                ours: self.qps.len(),
            });
        }
        for (qp, &dest) in self.qps.iter().zip(peer_qpns) {
            let rtr = QpTransition::Rtr(RemotePath {
                path_mtu: setup.path_mtu,
                dest_qp_num: dest,
                gid: peer_gid,
                lid: peer_lid,
                sgid_index: setup.sgid_index,
                port: setup.port,
                traffic_class: setup.traffic_class,
                service_level: setup.service_level,
                max_dest_rd_atomic: setup.max_rd_atomic,
            });
            verbs.modify_qp(qp.qp, &rtr)?;
            let rts = QpTransition::Rts {
                max_rd_atomic: setup.max_rd_atomic,
            };
            verbs.modify_qp(qp.qp, &rts)?;
        }
        self.peer_qpns = peer_qpns.to_vec();
        Ok(())
    }

    /// Our QP numbers.
    pub fn qp_nums(&self) -> Vec<u32> {
        self.qps.iter().map(|q| q.qp_num).collect()
    }

    /// Destroys the QPs for good.
    pub fn retire(&mut self, verbs: &dyn Verbs) {
        for qp in self.qps.drain(..) {
            verbs.destroy_qp(qp.qp);
        }
        self.state = State::Retired;
        self.generation = next_generation();
    }
}
