//! The fake fabric's state (devices, memory regions, completion queues, queue
//! pairs, injected faults) and the operations on it: delivering a completion,
//! finding the region a key covers, carrying out one RDMA request.

use super::{wc, Completion, RdmaOp, WorkRequest};
use crate::sys::memmove::memmove;
use std::collections::{HashMap, VecDeque};
use std::os::fd::RawFd;

/// A fault the next posted requests meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The target refuses the access (`IBV_WC_REM_ACCESS_ERR`); the QP goes to error.
    RemoteAccess,
    /// The peer does not answer (`IBV_WC_RETRY_EXC_ERR`); the QP goes to error.
    RetryExceeded,
    /// The QP goes to error before the request runs: it and what follows are flushed.
    QpError,
    /// The request succeeds but its completion is never delivered.
    LostCompletion,
}

/// One fake device's identity.
#[derive(Debug, Clone)]
pub(super) struct Device {
    pub(super) gid: [u8; 16],
}

/// A registered memory region.
#[derive(Debug)]
pub(super) struct MrState {
    pub(super) pd: u64,
    pub(super) addr: u64,
    pub(super) len: u64,
    pub(super) remote: bool,
}

/// A completion queue: its completions, whether a waiter armed it, its event fd.
#[derive(Debug)]
pub(super) struct CqState {
    pub(super) completions: VecDeque<Completion>,
    pub(super) armed: bool,
    pub(super) event_fd: RawFd,
}

/// The RC queue pair state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum QpState {
    Reset,
    Init,
    Rtr,
    Rts,
    Error,
}

/// A queue pair: its device, PD, CQ, number, state and connected peer.
#[derive(Debug)]
pub(super) struct QpEntry {
    pub(super) device: String,
    pub(super) pd: u64,
    pub(super) cq: u64,
    pub(super) qp_num: u32,
    pub(super) state: QpState,
    pub(super) remote: Option<([u8; 16], u32)>,
}

/// Everything on the fabric.
#[derive(Default)]
pub(super) struct State {
    pub(super) devices: HashMap<String, Device>,
    pub(super) contexts: HashMap<u64, String>,
    pub(super) pds: HashMap<u64, String>,
    pub(super) mrs: HashMap<u64, MrState>,
    pub(super) keys: HashMap<u32, u64>,
    pub(super) cqs: HashMap<u64, CqState>,
    pub(super) qps: HashMap<u64, QpEntry>,
    pub(super) qp_by_num: HashMap<([u8; 16], u32), u64>,
    pub(super) faults: VecDeque<Fault>,
    pub(super) reorder: bool,
    pub(super) posted: u64,
    /// While set, posted requests wait in `held` instead of running.
    pub(super) holding: bool,
    /// Requests posted while holding: (QP id, request), in posting order.
    pub(super) held: Vec<(u64, WorkRequest)>,
    /// Ranges `ibv_reg_mr` refuses (device memory without a peer-memory driver).
    pub(super) dmabuf_only: Vec<(u64, u64)>,
}

/// Queues a completion on a CQ, waking an armed waiter.
pub(super) fn deliver(s: &mut State, cq: u64, c: Completion) {
    if let Some(q) = s.cqs.get_mut(&cq) {
        q.completions.push_back(c);
        if q.armed {
            q.armed = false;
            let one: u64 = 1;
            // SAFETY: writing 8 bytes to an eventfd we own.
            unsafe { libc::write(q.event_fd, (&one as *const u64).cast(), 8) };
        }
    }
}

/// The MR id whose key is `key` and which covers `[addr, addr + len)`.
pub(super) fn covering(s: &State, key: u32, addr: u64, len: u64) -> Option<u64> {
    let id = *s.keys.get(&key)?;
    let mr = s.mrs.get(&id)?;
    let end = addr.checked_add(len)?;
    (addr >= mr.addr && end <= mr.addr + mr.len).then_some(id)
}

/// Carries out one request against the fabric; the completion status.
pub(super) fn execute(
    s: &State,
    pd: u64,
    remote: Option<([u8; 16], u32)>,
    wr: &WorkRequest,
) -> u32 {
    let len = u64::from(wr.len);
    let Some(local) = covering(s, wr.lkey, wr.local_addr, len) else {
        return 4; // IBV_WC_LOC_PROT_ERR
    };
    if s.mrs.get(&local).map(|m| m.pd) != Some(pd) {
        return 4;
    }
    // The peer QP must exist, be connected and be connected back to this one.
    let Some((gid, dest)) = remote else {
        return wc::RETRY_EXC_ERR;
    };
    let peer_ok = s
        .qp_by_num
        .get(&(gid, dest))
        .and_then(|id| s.qps.get(id))
        .is_some_and(|p| matches!(p.state, QpState::Rtr | QpState::Rts));
    if !peer_ok {
        return wc::RETRY_EXC_ERR;
    }
    let Some(target) = covering(s, wr.rkey, wr.remote_addr, len) else {
        return wc::REM_ACCESS_ERR;
    };
    if !s.mrs.get(&target).is_some_and(|m| m.remote) {
        return wc::REM_ACCESS_ERR;
    }
    let (src, dst) = match wr.op {
        RdmaOp::Write => (wr.local_addr, wr.remote_addr),
        RdmaOp::Read => (wr.remote_addr, wr.local_addr),
    };
    // SAFETY: both ranges are inside registered regions of this process, which the
    // registrants keep mapped while registered (the same contract as real verbs).
    unsafe { memmove(dst, src, len) };
    wc::SUCCESS
}
