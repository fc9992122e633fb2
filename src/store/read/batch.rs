//! One batch of reads through the read pipeline: lease (begin the reads, one master
//! call), choose (the replica of each object), execute (one transfer batch), check
//! (the lease still held once the bytes are in).

use super::choose::{choose, Nearness};
use super::lease::ReadTicket;
use crate::store::error::{Doing, StoreError, StoreResult};
use crate::store::state::ClientState;
use crate::store::transfer::MovePlan;
use crate::store::vocab::fit;
use crate::te::Op;
use crate::wire::master_api::{BufferDescriptor, ErrorCode, GetReplicaListResponse, MasterResult};
use std::time::{Duration, Instant};

impl Nearness for ClientState {
    fn is_own_endpoint(&self, endpoint: &str) -> bool {
        ClientState::is_own_endpoint(self, endpoint)
    }
    fn is_same_host(&self, endpoint: &str) -> bool {
        self.engine().is_same_host(endpoint)
    }
}

/// Reads of several objects in progress; the objects stay held (their reads not
/// ended) while it lives.
pub(crate) struct ReadBatch<'a> {
    state: &'a ClientState,
    started: Instant,
    lists: Vec<MasterResult<GetReplicaListResponse>>,
    ticket: ReadTicket<'a>,
}

/// The replica one object is read from, and how long its read is held (ms).
pub(crate) struct Source<'a> {
    /// The chosen replica.
    pub replica: &'a BufferDescriptor,
    /// The read lease TTL in ms, counted from when the lease was asked for (the
    /// request's last send).
    pub ttl_ms: u64,
}

impl<'a> ReadBatch<'a> {
    /// Begins reading `keys` (lease): one master call for their replica lists.
    pub(crate) fn begin(state: &'a ClientState, keys: &[String]) -> StoreResult<Self> {
        let (lists, ticket) = state.reads().begin(keys);
        let lists = lists.doing(format_args!("looking up {} key(s)", keys.len()))?;
        Ok(ReadBatch {
            state,
            started: ticket.leased_at(),
            lists: fit(lists, keys.len()),
            ticket,
        })
    }

    /// The replica to read key `i` from (choose), or why there is none.
    pub(crate) fn source(&self, i: usize) -> StoreResult<Source<'_>> {
        let resp = self.lists[i].as_ref().map_err(|e| StoreError::from(*e))?;
        Ok(Source {
            replica: choose(&resp.replicas, self.state)?,
            ttl_ms: resp.lease_ttl_ms,
        })
    }

    /// Runs the reads of `plan` in one transfer batch (execute); each move's owner
    /// with its outcome.
    ///
    /// # Safety
    /// Every move's local range must be writable, and not otherwise accessed, until
    /// this returns.
    pub(crate) unsafe fn transfer<T>(
        &self,
        plan: MovePlan<T>,
    ) -> impl Iterator<Item = (T, StoreResult<()>)> {
        // SAFETY: forwarded contract.
        unsafe { self.state.run(Op::Read, plan) }
    }

    /// Whether a read of `key` under a lease of `ttl_ms` is still covered by it
    /// (check): -707 once the lease ran out during the read (the bytes may be torn).
    pub(crate) fn check(&self, key: &str, ttl_ms: u64) -> StoreResult<()> {
        check_lease(self.started, ttl_ms).doing(format_args!(
            "get('{key}'): the read lease expired during the read"
        ))
    }

    /// Ends the batch without ending its reads: they stay held until given to
    /// [`ReadLeases::end`](super::lease::ReadLeases::end) (or their lease TTL).
    pub(crate) fn hold(self) -> Vec<(String, u64)> {
        self.ticket.into_reads()
    }
}

/// Whether a read begun at `started` under a lease of `ttl_ms` ms is still covered by
/// it: -707 once the lease ran out.
pub(crate) fn check_lease(started: Instant, ttl_ms: u64) -> Result<(), ErrorCode> {
    if started.elapsed() > Duration::from_millis(ttl_ms) {
        return Err(ErrorCode::LEASE_EXPIRED);
    }
    Ok(())
}
