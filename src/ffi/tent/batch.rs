//! TENT's batches: allocating and freeing them, submitting requests (with or without
//! a completion notification), task and batch status, and cancelling a task.
//! Conventions as in [`super`].

#![allow(non_snake_case)]

use super::segment_id;
use crate::ffi::args::{c_slice, c_str, require_out};
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::engines::ENGINES;
use crate::ffi::fail::{invalid, FfiError};
use crate::ffi::te::batch::op_of;
use crate::ffi::tent_types::*;
use crate::te::{TaskStatus, TransferRequest};
use std::ffi::{c_char, c_int};

/// Allocates a batch that holds up to `batch_size` tasks. Returns its id, or
/// UINT64_MAX for a bad handle.
///
/// # Safety
/// Always safe to call; the handle is validated.
#[no_mangle]
pub unsafe extern "C" fn tent_allocate_batch(
    engine: tent_engine_t,
    batch_size: usize,
) -> tent_batch_id_t {
    ffi_boundary!(fail = u64::MAX, {
        Ok(ENGINES.get(engine)?.allocate_batch(batch_size))
    })
}

/// Frees a batch at once, as TENT does: tasks still moving finish in the background
/// (their buffers must stay valid until then). Returns 0, or -1 for an unknown batch.
///
/// # Safety
/// Always safe to call; handle and batch id are validated.
#[no_mangle]
pub unsafe extern "C" fn tent_free_batch(
    engine: tent_engine_t,
    batch_id: tent_batch_id_t,
) -> c_int {
    ffi_boundary!({
        ENGINES.get(engine)?.discard_batch(batch_id)?;
        Ok(0)
    })
}

/// The engine transport a TENT transport hint pins (`None`: the engine's choice).
fn pin(i: usize, hint: c_int) -> Result<Option<&'static str>, FfiError> {
    match hint {
        TRANSPORT_UNSPEC => Ok(None),
        TRANSPORT_TCP => Ok(Some("tcp")),
        TRANSPORT_RDMA => Ok(Some("rdma")),
        TRANSPORT_SHM => Ok(Some("same_host")),
        other => Err(invalid(format!(
            "entries[{i}].transport_hint {other}: this engine has no such transport \
             (it has TCP, RDMA and shared memory)"
        ))),
    }
}

/// Copies and validates TENT requests and their transport hints (priorities are
/// accepted: requests are served in order).
fn requests(
    entries: &[tent_request],
) -> Result<(Vec<TransferRequest>, Vec<Option<&'static str>>), FfiError> {
    let pins = entries
        .iter()
        .enumerate()
        .map(|(i, r)| pin(i, r.transport_hint))
        .collect::<Result<Vec<_>, _>>()?;
    let reqs = entries
        .iter()
        .enumerate()
        .map(|(i, r)| {
            Ok(TransferRequest {
                op: op_of(i, r.opcode)?,
                source: r.source as u64,
                target_id: segment_id(r.target_id)?,
                target_offset: r.target_offset,
                length: r.length,
            })
        })
        .collect::<Result<Vec<_>, FfiError>>()?;
    Ok((reqs, pins))
}

/// Submits `count` requests as the batch's next tasks; a request with a transport
/// hint (TRANSPORT_TCP, TRANSPORT_RDMA, TRANSPORT_SHM) goes only over that transport.
/// Returns 0 or -1 (bad batch, bad request, a hint this engine has no transport for
/// or whose transport does not reach the target, more tasks than the batch holds:
/// nothing is added then).
///
/// # Safety
/// `entries` must be NULL or hold `count` requests; they are copied.
#[no_mangle]
pub unsafe extern "C" fn tent_submit(
    engine: tent_engine_t,
    batch_id: tent_batch_id_t,
    entries: *mut tent_request_t,
    count: usize,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        require_out(entries, "entries")?;
        // SAFETY: count requests at entries, per the contract.
        let (reqs, pins) = requests(unsafe { c_slice(entries.cast_const(), count, "entries") }?)?;
        e.submit_pinned(batch_id, &reqs, &pins)?;
        Ok(0)
    })
}

/// Like tent_submit; once these tasks all completed, `name`/`message` is sent to the
/// first request's target (as the classic API's submitTransferWithNotify).
///
/// # Safety
/// `entries` must be NULL or hold `count` requests; `name` and `message` NULL or
/// NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tent_submit_notif(
    engine: tent_engine_t,
    batch_id: tent_batch_id_t,
    entries: *mut tent_request_t,
    count: usize,
    name: *const c_char,
    message: *const c_char,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        require_out(entries, "entries")?;
        // SAFETY: NULL or NUL-terminated, per the contract.
        let name = unsafe { c_str(name, "name") }?;
        // SAFETY: as above.
        let message = unsafe { c_str(message, "message") }?;
        // SAFETY: count requests at entries, per the contract.
        let (reqs, pins) = requests(unsafe { c_slice(entries.cast_const(), count, "entries") }?)?;
        e.submit_pinned_with_notify(batch_id, &reqs, &pins, &name, &message)?;
        Ok(0)
    })
}

/// The C form of a task status.
fn c_status((state, bytes): (TaskStatus, u64)) -> tent_status {
    tent_status {
        status: c_int::from(state.code()),
        transferred_bytes: bytes,
    }
}

/// Writes task `task_id`'s status into `*status`. Returns 0 or -1 (unknown batch or
/// task, batch id 0).
///
/// # Safety
/// `status` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tent_task_status(
    engine: tent_engine_t,
    batch_id: tent_batch_id_t,
    task_id: usize,
    status: *mut tent_status_t,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        require_out(status, "status")?;
        let s = c_status(e.transfer_status(batch_id, task_id)?);
        // SAFETY: writable, per the contract.
        unsafe { status.write(s) };
        Ok(0)
    })
}

/// Writes the statuses of the batch's first `*count` tasks into `statuses` and sets
/// `*count` to the number of tasks (call again with more room when it grew).
/// Returns 0 or -1.
///
/// # Safety
/// `statuses` must be NULL or hold `*count` entries; `count` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tent_task_status_list(
    engine: tent_engine_t,
    batch_id: tent_batch_id_t,
    statuses: *mut tent_status_t,
    count: *mut usize,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        require_out(statuses, "statuses")?;
        require_out(count, "count")?;
        let all = e.task_statuses(batch_id)?;
        // SAFETY: count is readable and writable, per the contract.
        let room = unsafe { *count };
        for (i, s) in all.iter().take(room).enumerate() {
            // SAFETY: entries below *count are writable, per the contract.
            unsafe { statuses.add(i).write(c_status(*s)) };
        }
        // SAFETY: as above.
        unsafe { *count = all.len() };
        Ok(0)
    })
}

/// The whole batch into `*status`: FAILED when a task failed, else CANCELED when one
/// was cancelled, else COMPLETED when all completed, else WAITING; the bytes of the
/// completed tasks. Returns 0 or -1.
///
/// # Safety
/// `status` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tent_overall_status(
    engine: tent_engine_t,
    batch_id: tent_batch_id_t,
    status: *mut tent_status_t,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        require_out(status, "status")?;
        let s = c_status(e.batch_status(batch_id)?);
        // SAFETY: writable, per the contract.
        unsafe { status.write(s) };
        Ok(0)
    })
}

/// Cancels a task: the parts its transports have not started are dropped and it ends
/// CANCELED (parts already moving finish; a task that already moved entirely ends
/// COMPLETED). Keep polling for a terminal status. Returns 0 or -1.
///
/// # Safety
/// Always safe to call; handle, batch and task are validated.
#[no_mangle]
pub unsafe extern "C" fn tent_cancel_task(
    engine: tent_engine_t,
    batch_id: tent_batch_id_t,
    task_id: usize,
) -> c_int {
    ffi_boundary!({
        ENGINES.get(engine)?.cancel_task(batch_id, task_id)?;
        Ok(0)
    })
}
