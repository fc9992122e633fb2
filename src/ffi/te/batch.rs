//! Upstream's `transfer_engine_c.h` for batches: allocating, submitting transfers
//! (with or without a notify), task status and freeing. Conventions as in [`super`].

#![allow(non_snake_case)]

use crate::error::Error;
use crate::ffi::args::{c_slice, c_str_or, require_out};
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::engines::ENGINES;
use crate::ffi::fail::{invalid, FfiError};
use crate::ffi::te_types::*;
use crate::te::{Op, TransferRequest};
use std::ffi::c_int;

/// Allocates a batch that holds up to `batch_size` tasks in total. Returns its id, or
/// INVALID_BATCH for a bad handle.
///
/// # Safety
/// Always safe to call; the handle is validated.
#[no_mangle]
pub unsafe extern "C" fn allocateBatchID(
    engine: transfer_engine_t,
    batch_size: usize,
) -> batch_id_t {
    ffi_boundary!(fail = INVALID_BATCH, {
        let e = ENGINES.get(engine)?;
        Ok(e.allocate_batch(batch_size))
    })
}

/// The operation of `entries[i]`'s opcode (OPCODE_READ or OPCODE_WRITE; the TENT API
/// uses the same values).
pub(crate) fn op_of(i: usize, opcode: c_int) -> Result<Op, FfiError> {
    match opcode {
        OPCODE_READ => Ok(Op::Read),
        OPCODE_WRITE => Ok(Op::Write),
        other => Err(invalid(format!(
            "entries[{i}].opcode is {other}, not OPCODE_READ or OPCODE_WRITE"
        ))),
    }
}

/// Copies and validates C requests (opcode 0 or 1 only).
fn requests(entries: &[transfer_request]) -> Result<Vec<TransferRequest>, FfiError> {
    entries
        .iter()
        .enumerate()
        .map(|(i, r)| {
            Ok(TransferRequest {
                op: op_of(i, r.opcode)?,
                source: r.source as u64,
                target_id: r.target_id,
                target_offset: r.target_offset,
                length: r.length,
            })
        })
        .collect()
}

/// Submits `count` requests into a batch; tasks accumulate across calls, numbered
/// 0..N-1 in submission order. Returns a status code: 0 (also for `count == 0`),
/// 1 (bad handle or batch id, NULL entries, bad opcode, unknown target id),
/// 2 (batch capacity exceeded; nothing added), 8 (target protocol not installed).
///
/// # Safety
/// `entries` must be NULL or point to `count` requests. They are copied during the call.
#[no_mangle]
pub unsafe extern "C" fn submitTransfer(
    engine: transfer_engine_t,
    batch_id: batch_id_t,
    entries: *mut transfer_request,
    count: usize,
) -> c_int {
    ffi_boundary!(fail = 1, map = Error::status_code, {
        let e = ENGINES.get(engine)?;
        // SAFETY: count requests at entries, per the contract.
        let reqs = requests(unsafe { c_slice(entries.cast_const(), count, "entries") }?)?;
        e.submit(batch_id, &reqs)?;
        Ok(0)
    })
}

/// Like submitTransfer, then sends `notify_msg` to the first request's target once the
/// whole batch has completed (during the getTransferStatus call that observes it).
/// An empty list returns 1. NULL strings in `notify_msg` read as empty.
///
/// # Safety
/// As submitTransfer; `notify_msg`'s strings must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn submitTransferWithNotify(
    engine: transfer_engine_t,
    batch_id: batch_id_t,
    entries: *mut transfer_request,
    count: usize,
    notify_msg: notify_msg_t,
) -> c_int {
    ffi_boundary!(fail = 1, map = Error::status_code, {
        let e = ENGINES.get(engine)?;
        if count == 0 {
            return Err(invalid("no requests to submit (count is 0)"));
        }
        // SAFETY: count requests at entries, per the contract.
        let reqs = requests(unsafe { c_slice(entries.cast_const(), count, "entries") }?)?;
        // SAFETY: NULL or NUL-terminated, per the contract.
        let (name, msg) = unsafe { (c_str_or(notify_msg.name, ""), c_str_or(notify_msg.msg, "")) };
        e.submit_with_notify(batch_id, &reqs, &name, &msg)?;
        Ok(0)
    })
}

/// Fills `*status` with task `task_id` of a batch. A terminal result (COMPLETED or
/// FAILED) is what freeBatchID waits for. Returns 0, or 1 (bad handle or batch id,
/// task out of range, NULL status) leaving `*status` untouched.
///
/// # Safety
/// `status` must be NULL or point to a writable transfer_status.
#[no_mangle]
pub unsafe extern "C" fn getTransferStatus(
    engine: transfer_engine_t,
    batch_id: batch_id_t,
    task_id: usize,
    status: *mut transfer_status,
) -> c_int {
    ffi_boundary!(fail = 1, map = Error::status_code, {
        let e = ENGINES.get(engine)?;
        require_out(status, "status")?;
        let (state, bytes) = e.transfer_status(batch_id, task_id)?;
        let out = transfer_status {
            status: state as c_int,
            transferred_bytes: bytes,
        };
        // SAFETY: status is writable, per the contract.
        unsafe { status.write(out) };
        Ok(0)
    })
}

/// Frees a batch. Returns 0, 4 (BatchBusy: some task was not yet observed COMPLETED or
/// FAILED through getTransferStatus), or 1 (bad handle; unknown, freed or foreign
/// batch id).
///
/// # Safety
/// Always safe to call; handle and batch id are validated.
#[no_mangle]
pub unsafe extern "C" fn freeBatchID(engine: transfer_engine_t, batch_id: batch_id_t) -> c_int {
    ffi_boundary!(fail = 1, map = Error::status_code, {
        let e = ENGINES.get(engine)?;
        e.free_batch(batch_id)?;
        Ok(0)
    })
}
