//! What a worker tracks per endpoint it drives: each QP's posted requests in order,
//! and the slices waiting for the endpoint to connect.

use super::endpoint::Endpoint;
use super::slice::Slice;
use crate::sys::verbs::QpInfo;
use std::collections::VecDeque;
use std::sync::Arc;

/// One QP's posted work, oldest first.
pub(super) struct QpRun {
    pub(super) qp: QpInfo,
    /// Distinguishes this QP's requests from those of QPs it replaced.
    pub(super) run: u32,
    pub(super) next_seq: u32,
    pub(super) since_signal: u32,
    /// (sequence, slice, signalled).
    pub(super) outstanding: VecDeque<(u32, Slice, bool)>,
}

/// One endpoint as its worker drives it.
pub(super) struct EpRun {
    pub(super) ep: Arc<Endpoint>,
    pub(super) generation: u64,
    pub(super) qps: Vec<QpRun>,
    pub(super) pending: VecDeque<Slice>,
    pub(super) connecting: bool,
    /// The cancellation epoch of the last scan of `pending` for cancelled tasks.
    pub(super) cancel_seen: u64,
}
