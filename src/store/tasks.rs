//! The copy and move tasks of a client that owns segments (spec tasks §4): every
//! second `FetchTasks`, then each task run on a worker of its own (at most
//! [`WORKERS`] at once), as upstream's client runs them: `CopyStart`/`MoveStart`,
//! the bytes written from this client's replica into the new ones, `CopyEnd`/`MoveEnd`
//! (`*Revoke` when anything fails), and the outcome reported with
//! `MarkTaskToComplete`. A task that found no room (-200) is run again from its start,
//! up to the retry budget the master set, waiting 50 ms more each time.

use super::state::{ClientState, SharedState};
use super::transfer::Move;
use crate::runtime::stoppable::{StopSignal, StoppableThread};
use crate::te::Op;
use crate::wire::master_api::{
    ErrorCode, MasterResult, ReplicaDescriptor, ReplicaLocation, TaskAssignment,
    TaskCompleteRequest, TaskStatus, Uuid, TASK_REPLICA_COPY, TASK_REPLICA_MOVE,
};
use crate::wire::task_payload::{CopyPayload, MovePayload};
use std::time::Duration;

/// How often the master is asked for tasks.
const POLL_PERIOD: Duration = Duration::from_secs(1);
/// Tasks asked for at once.
const BATCH: u64 = 16;
/// Tasks run at once.
const WORKERS: usize = 4;
/// The back-off before the first retry; each further one waits this much longer.
const RETRY_STEP: Duration = Duration::from_millis(50);
/// What a successful task reports.
const SUCCESS_MESSAGE: &str = "Task completed successfully";

/// A running task poller; stopped and joined by [`TaskRunner::stop`] or on drop (a
/// task in progress finishes first; tasks not yet started are left to the master's
/// timeouts, as upstream's client leaves them).
pub struct TaskRunner(StoppableThread);

impl TaskRunner {
    /// Starts polling for the tasks of the client in `state`.
    pub fn start(state: SharedState) -> std::io::Result<TaskRunner> {
        let thread = StoppableThread::spawn("mc-store-tasks", move |signal| {
            while signal.wait(POLL_PERIOD) {
                poll(&state, &signal);
            }
        })?;
        Ok(TaskRunner(thread))
    }

    /// Stops the thread and waits for it.
    pub fn stop(&mut self) {
        self.0.stop();
    }
}

/// One round: fetch, then run what came, [`WORKERS`] at a time.
fn poll(state: &SharedState, signal: &StopSignal) {
    let guard = state.read();
    let Some(inner) = guard.as_ref() else {
        return;
    };
    let tasks = match inner.master().fetch_tasks(inner.client_id(), BATCH) {
        Ok(t) => t,
        Err(e) => {
            log::debug!("store: FetchTasks failed: {e}");
            return;
        }
    };
    for group in tasks.chunks(WORKERS) {
        std::thread::scope(|s| {
            for task in group {
                s.spawn(move || run(inner, task, signal));
            }
        });
    }
}

/// Runs `task` (again while it finds no room and retries are left) and reports it.
fn run(inner: &ClientState, task: &TaskAssignment, signal: &StopSignal) {
    let mut attempt: u32 = 0;
    let outcome = loop {
        let r = execute(inner, task);
        if r != Err(ErrorCode::NO_AVAILABLE_HANDLE) || attempt >= task.max_retry {
            break r;
        }
        attempt += 1;
        if !signal.wait(RETRY_STEP * attempt) {
            break r;
        }
    };
    let report = match outcome {
        Ok(()) => TaskCompleteRequest {
            id: task.id,
            status: TaskStatus::Success as i32,
            message: SUCCESS_MESSAGE.to_string(),
        },
        Err(e) => TaskCompleteRequest {
            id: task.id,
            status: TaskStatus::Failed as i32,
            message: format!("{} (max retries reached: {})", e.name(), task.max_retry),
        },
    };
    if let Err(e) = inner
        .master()
        .mark_task_to_complete(inner.client_id(), &report)
    {
        log::warn!("store: reporting task {} failed: {e}", task.id);
    }
}

/// One attempt of `task`.
fn execute(inner: &ClientState, task: &TaskAssignment) -> MasterResult<()> {
    match task.task_type {
        TASK_REPLICA_COPY => {
            let p: CopyPayload =
                serde_json::from_str(&task.payload).map_err(|_| ErrorCode::INTERNAL_ERROR)?;
            copy(inner, &p)
        }
        TASK_REPLICA_MOVE => {
            let p: MovePayload =
                serde_json::from_str(&task.payload).map_err(|_| ErrorCode::INTERNAL_ERROR)?;
            relocate(inner, &p)
        }
        _ => Err(ErrorCode::INVALID_PARAMS),
    }
}

/// What ends a copy or a move at the master.
struct Ends<'a> {
    end: &'a dyn Fn() -> MasterResult<()>,
    revoke: &'a dyn Fn() -> MasterResult<()>,
}

/// A copy: `CopyStart`, the writes, `CopyEnd`. A copy the master asked for to
/// spread a hot object (its payload carries a lease) goes through the
/// `DynamicReplicaCopy*` calls instead, and is done when its target already holds
/// the object (-705).
fn copy(inner: &ClientState, p: &CopyPayload) -> MasterResult<()> {
    let (m, client) = (inner.master(), inner.client_id());
    let (key, tenant) = (p.key.as_str(), p.tenant_id.as_str());
    let lease = Uuid {
        first: p.dynamic_replication_lease_id_high,
        second: p.dynamic_replication_lease_id_low,
    };
    let epoch = p.dynamic_replication_version_epoch;
    if lease.first == 0 && lease.second == 0 {
        let started = m.copy_start(client, key, tenant, &p.source, &p.targets)?;
        let ends = Ends {
            end: &|| m.copy_end(client, key, tenant),
            revoke: &|| m.copy_revoke(client, key, tenant),
        };
        return finish(inner, &started.source, &started.targets, &ends);
    }
    let started = match m
        .dynamic_replica_copy_start(client, key, tenant, &p.source, &p.targets, lease, epoch)
    {
        Err(ErrorCode::OBJECT_ALREADY_EXISTS) => return Ok(()),
        other => other?,
    };
    let ends = Ends {
        end: &|| m.dynamic_replica_copy_end(client, key, tenant, lease, epoch),
        revoke: &|| m.dynamic_replica_copy_revoke(client, key, tenant, lease, epoch),
    };
    finish(inner, &started.source, &started.targets, &ends)
}

/// A move: `MoveStart`, the write, `MoveEnd`.
fn relocate(inner: &ClientState, p: &MovePayload) -> MasterResult<()> {
    let (m, client) = (inner.master(), inner.client_id());
    let started = m.move_start(client, &p.key, &p.tenant_id, &p.source, &p.target)?;
    let ends = Ends {
        end: &|| m.move_end(client, &p.key, &p.tenant_id),
        revoke: &|| m.move_revoke(client, &p.key, &p.tenant_id),
    };
    let targets: Vec<ReplicaDescriptor> = started.target.into_iter().collect();
    finish(inner, &started.source, &targets, &ends)
}

/// Writes `source` (which must be in this client's memory) into every target, then
/// ends the copy; revokes it when the source is not here (-713) or a write fails
/// (-800), or when the end itself fails (its error is the result).
fn finish(
    inner: &ClientState,
    source: &ReplicaDescriptor,
    targets: &[ReplicaDescriptor],
    ends: &Ends<'_>,
) -> MasterResult<()> {
    let revoked = |e: ErrorCode| {
        if let Err(r) = (ends.revoke)() {
            log::debug!("store: revoking a copy after {e}: {r}");
        }
        Err(e)
    };
    if !targets.is_empty() {
        let ReplicaLocation::Memory(src) = &source.location else {
            return revoked(ErrorCode::INVALID_PARAMS);
        };
        if !inner.is_own(&src.transport_endpoint, src.buffer_address, src.size) {
            return revoked(ErrorCode::REPLICA_NOT_IN_LOCAL_MEMORY);
        }
        let mut moves = Vec::with_capacity(targets.len());
        for t in targets {
            match &t.location {
                ReplicaLocation::Memory(b) if b.size == src.size => moves.push(Move {
                    local: src.buffer_address,
                    remote: b.buffer_address,
                    len: src.size,
                    endpoint: b.transport_endpoint.clone(),
                }),
                _ => return revoked(ErrorCode::INVALID_PARAMS),
            }
        }
        // SAFETY: the source lies in this client's own mounted segment (checked
        // above), which stays mapped while `inner` (the state's read guard) is held;
        // the transfers only read it.
        let results = unsafe { inner.execute(Op::Write, &moves) };
        if results.iter().any(Result::is_err) {
            return revoked(ErrorCode::TRANSFER_FAIL);
        }
    }
    match (ends.end)() {
        Ok(()) => Ok(()),
        Err(e) => revoked(e),
    }
}
