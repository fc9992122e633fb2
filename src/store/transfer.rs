//! Moving object bytes between local memory and replicas: a memcpy when the replica
//! lies in this client's own segment, otherwise Transfer Engine requests, all of one
//! operation in a single batch that is waited on (never spun on). Over RDMA, local
//! memory the NICs do not know (not registered with the engine) goes through the
//! registered local buffer in chunks, as upstream stages through it.

use super::error::{StoreError, StoreResult};
use super::state::ClientState;
use crate::te::transport::local::copy_bytes;
use crate::te::{Op, TaskStatus, TransferEngine, TransferRequest};
use crate::wire::master_api::ErrorCode;
use std::time::{Duration, Instant};

/// Largest piece one TE request carries (upstream's `kMaxSliceSize`, 16 MiB - 16).
pub const MAX_SLICE: u64 = (16 << 20) - 16;

/// Largest piece staged through the local buffer at once.
const BOUNCE_CHUNK: u64 = 16 << 20;
/// Smallest piece worth staging when the local buffer is busy.
const BOUNCE_MIN: u64 = 64 << 10;

/// How long one `wait_batch` call blocks before the wait is re-armed.
const WAIT_STEP: Duration = Duration::from_secs(5);

/// One contiguous copy between local memory and a replica.
#[derive(Debug, Clone)]
pub(crate) struct Move {
    /// Address in this process (source of a write, destination of a read).
    pub local: u64,
    /// Absolute address in the replica owner's process.
    pub remote: u64,
    /// Bytes to move.
    pub len: u64,
    /// TE segment name of the replica owner (`transport_endpoint`).
    pub endpoint: String,
}

/// Moves of one operation, each tagged with what it belongs to (`T`: an item of a
/// batch, a fragment), so outcomes can be given back to their owners.
pub(crate) struct MovePlan<T> {
    moves: Vec<Move>,
    owners: Vec<T>,
}

impl<T> MovePlan<T> {
    /// No moves yet.
    pub(crate) fn new() -> Self {
        MovePlan {
            moves: Vec::new(),
            owners: Vec::new(),
        }
    }

    /// Adds a move belonging to `owner`.
    pub(crate) fn push(&mut self, owner: T, mv: Move) {
        self.moves.push(mv);
        self.owners.push(owner);
    }
}

impl ClientState {
    /// Runs every move of `plan` (all in direction `op`, see [`ClientState::execute`]);
    /// each move's owner with its outcome.
    ///
    /// # Safety
    /// As [`ClientState::execute`], for every move of `plan`.
    pub(crate) unsafe fn run<T>(
        &self,
        op: Op,
        plan: MovePlan<T>,
    ) -> impl Iterator<Item = (T, StoreResult<()>)> {
        // SAFETY: forwarded contract.
        let done = unsafe { self.execute(op, &plan.moves) };
        plan.owners.into_iter().zip(done)
    }

    /// Runs every move (all in direction `op`) and reports each one's outcome
    /// (`TRANSFER_FAIL` for a failed move). Returns only when no transfer still
    /// touches any `local` range.
    ///
    /// # Safety
    /// Each move's `local` range must be valid for `len` bytes (reads for
    /// [`Op::Write`], writes for [`Op::Read`]) until this returns, and must not be
    /// accessed through Rust references meanwhile.
    pub(crate) unsafe fn execute(&self, op: Op, moves: &[Move]) -> Vec<StoreResult<()>> {
        let engine = self.engine();
        let staged = |m: &Move| {
            m.len > 0
                && engine.needs_registered_buffers()
                && !self.is_own(&m.endpoint, m.remote, m.len)
                && !engine.is_registered(m.local, m.len)
        };
        if !moves.iter().any(staged) {
            // SAFETY: forwarded contract.
            return unsafe { self.execute_direct(op, moves) };
        }
        let (direct, bounced): (Vec<usize>, Vec<usize>) =
            (0..moves.len()).partition(|&i| !staged(&moves[i]));
        let picked: Vec<Move> = direct.iter().map(|&i| moves[i].clone()).collect();
        // SAFETY: forwarded contract.
        let direct_results = unsafe { self.execute_direct(op, &picked) };
        let mut results = vec![Ok(()); moves.len()];
        for (i, r) in direct.into_iter().zip(direct_results) {
            results[i] = r;
        }
        for i in bounced {
            // SAFETY: forwarded contract.
            results[i] = unsafe { self.execute_staged(op, &moves[i]) };
        }
        results
    }

    /// One move through the local buffer, chunk by chunk.
    ///
    /// # Safety
    /// As [`ClientState::execute`].
    unsafe fn execute_staged(&self, op: Op, m: &Move) -> StoreResult<()> {
        let Some(staging) = self.staging() else {
            return Err(failed(format!(
                "{} bytes at {:#x} are not registered and there is no local buffer \
                 to stage them through (register_buffer them for RDMA)",
                m.len, m.local
            )));
        };
        let mut done = 0;
        while done < m.len {
            let mut want = (m.len - done).min(BOUNCE_CHUNK);
            let mut chunk = staging.allocate(want);
            while chunk.is_none() && want > BOUNCE_MIN {
                want = (want / 2).max(BOUNCE_MIN);
                chunk = staging.allocate(want);
            }
            let Some(chunk) = chunk else {
                return Err(failed("no room in the local buffer to stage a transfer"));
            };
            let n = chunk.len();
            if op == Op::Write {
                // SAFETY: the caller's range is readable (contract); the chunk is ours.
                unsafe { copy_bytes(chunk.addr(), m.local + done, n) }
                    .map_err(|e| failed(format!("staging {n} bytes: {e}")))?;
            }
            let piece = Move {
                local: chunk.addr(),
                remote: m.remote + done,
                len: n,
                endpoint: m.endpoint.clone(),
            };
            // SAFETY: the chunk is registered memory owned by this call.
            unsafe { self.execute_direct(op, std::slice::from_ref(&piece)) }
                .pop()
                .unwrap_or_else(|| Err(ErrorCode::TRANSFER_FAIL.into()))?;
            if op == Op::Read {
                // SAFETY: the caller's range is writable (contract); the chunk is ours.
                unsafe { copy_bytes(m.local + done, chunk.addr(), n) }
                    .map_err(|e| failed(format!("unstaging {n} bytes: {e}")))?;
            }
            done += n;
        }
        Ok(())
    }

    /// [`ClientState::execute`] with every local range usable by the engine as is.
    ///
    /// # Safety
    /// As [`ClientState::execute`].
    unsafe fn execute_direct(&self, op: Op, moves: &[Move]) -> Vec<StoreResult<()>> {
        let mut results = vec![Ok(()); moves.len()];
        let mut requests = Vec::new();
        let mut owners = Vec::new();
        let engine = self.engine();
        for (i, m) in moves.iter().enumerate() {
            if m.len == 0 {
                continue;
            }
            if self.is_own(&m.endpoint, m.remote, m.len) {
                let (src, dst) = match op {
                    Op::Write => (m.local, m.remote),
                    Op::Read => (m.remote, m.local),
                };
                // SAFETY: the remote range is inside this client's live segment
                // mapping (checked above); the local range is valid per the contract.
                if let Err(e) = unsafe { copy_bytes(dst, src, m.len) } {
                    results[i] = Err(failed(format!("copying {} bytes: {e}", m.len)));
                }
                continue;
            }
            let target_id = match engine.open_segment(&m.endpoint) {
                Ok(id) => id,
                Err(e) => {
                    let cause = format!("opening segment '{}': {e}", m.endpoint);
                    results[i] = Err(failed(cause));
                    continue;
                }
            };
            let mut done = 0;
            while done < m.len {
                let len = (m.len - done).min(MAX_SLICE);
                requests.push(TransferRequest {
                    op,
                    source: m.local + done,
                    target_id,
                    target_offset: m.remote + done,
                    length: len,
                });
                owners.push(i);
                done += len;
            }
        }
        if requests.is_empty() {
            return results;
        }
        let done = run_batch(engine, &requests);
        for (t, owner) in owners.into_iter().enumerate() {
            let why = match &done {
                Ok(completed) if completed[t] => continue,
                Ok(_) => "a transfer did not complete".to_string(),
                Err(e) => format!("submitting {} transfers: {e}", requests.len()),
            };
            if results[owner].is_ok() {
                let m = &moves[owner];
                let cause = format!(
                    "{op:?} of {} bytes at segment '{}': {why}",
                    m.len, m.endpoint
                );
                results[owner] = Err(failed(cause));
            }
        }
        results
    }
}

/// A failed move (`TRANSFER_FAIL`), because of `cause`.
fn failed(cause: impl Into<String>) -> StoreError {
    StoreError::new(ErrorCode::TRANSFER_FAIL, cause)
}

/// Submits `requests` as one batch, waits until every task is terminal, and returns
/// whether each completed, or the engine's error when the batch could not be submitted.
fn run_batch(engine: &TransferEngine, requests: &[TransferRequest]) -> crate::Result<Vec<bool>> {
    let batch = engine.allocate_batch(requests.len());
    if let Err(e) = engine.submit(batch, requests) {
        let _ = engine.free_batch(batch);
        return Err(e);
    }
    let started = Instant::now();
    let mut warned = false;
    // Tasks always end: the TCP transport fails slices that stop making progress.
    // Returning earlier would let a transfer touch memory the caller got back.
    loop {
        match engine.wait_batch(batch, WAIT_STEP) {
            Ok(true) => break,
            Ok(false) => {
                if !warned && started.elapsed() > Duration::from_secs(60) {
                    log::warn!("store: transfers still running after 60 s; waiting");
                    warned = true;
                }
            }
            Err(e) => {
                log::error!("store: waiting for batch: {e}");
                break;
            }
        }
    }
    let statuses = (0..requests.len())
        .map(|t| {
            matches!(
                engine.transfer_status(batch, t),
                Ok((TaskStatus::Completed, _))
            )
        })
        .collect();
    if let Err(e) = engine.free_batch(batch) {
        log::warn!("store: freeing batch: {e}");
    }
    Ok(statuses)
}
