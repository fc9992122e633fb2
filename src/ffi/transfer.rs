//! Upstream's `transfer_engine_c.h` for batches, transfers and notifies, followed by
//! the engine introspection upstream declares after them (segment cache sync, NIC
//! stats, graceful shutdown, links). Conventions as in [`super::transfer_engine`].

#![allow(non_snake_case)]

use super::args::{c_slice, c_str_or, require_out, write_truncated};
use super::boundary::ffi_boundary;
use super::engines::ENGINES;
use super::fail::{invalid, FfiError};
use super::te_types::*;
use crate::error::Error;
use crate::te::{Op, TransferRequest};
use std::ffi::{c_char, c_int};

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

/// Copies and validates C requests (opcode 0 or 1 only).
fn requests(entries: &[transfer_request]) -> Result<Vec<TransferRequest>, FfiError> {
    entries
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let op = match r.opcode {
                OPCODE_READ => Op::Read,
                OPCODE_WRITE => Op::Write,
                other => {
                    return Err(invalid(format!(
                        "entries[{i}].opcode is {other}, not OPCODE_READ or OPCODE_WRITE"
                    )))
                }
            };
            Ok(TransferRequest {
                op,
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

/// Frees everything in a partly built notify array.
///
/// # Safety
/// The first `filled` entries hold malloc'ed strings or NULL.
unsafe fn free_notify_array(array: *mut notify_msg_t, filled: usize) {
    for i in 0..filled {
        // SAFETY: entry i was initialised.
        let m = unsafe { &*array.add(i) };
        // SAFETY: malloc'ed or NULL.
        unsafe {
            libc::free(m.name.cast());
            libc::free(m.msg.cast());
        }
    }
    // SAFETY: malloc'ed.
    unsafe { libc::free(array.cast()) };
}

/// A malloc'ed copy of `text` with a NUL terminator (NULL when out of memory).
fn malloc_c_string(text: &str) -> *mut c_char {
    // SAFETY: plain allocation.
    let p = unsafe { libc::malloc(text.len() + 1) }.cast::<c_char>();
    if !p.is_null() {
        // SAFETY: p holds text.len() + 1 bytes.
        unsafe { write_truncated(p, text.len() + 1, text) };
    }
    p
}

/// Drains the notifications received so far. Returns a malloc'ed array of `*size`
/// entries whose strings are malloc'ed too; release it with freeNotifsMsgBuf. Returns
/// NULL with `*size = 0` when there are none, or on error (bad handle, out of memory).
///
/// # Safety
/// `size` must be NULL or point to a writable int.
#[no_mangle]
pub unsafe extern "C" fn getNotifsFromEngine(
    engine: transfer_engine_t,
    size: *mut c_int,
) -> *mut notify_msg_t {
    ffi_boundary!({
        require_out(size, "size")?;
        // SAFETY: size is a writable int, per the contract.
        unsafe { *size = 0 };
        let e = ENGINES.get(engine)?;
        let notifies = e.take_notifies();
        if notifies.is_empty() {
            return Ok(std::ptr::null_mut());
        }
        let count = c_int::try_from(notifies.len()).map_err(|_| {
            invalid(format!(
                "{} notifications do not fit an int",
                notifies.len()
            ))
        })?;
        let out_of_memory = || FfiError::Failed {
            what: format!("out of memory copying {count} notifications"),
            errno: libc::ENOMEM,
        };
        // SAFETY: plain allocation of count entries.
        let array = unsafe { libc::malloc(notifies.len() * std::mem::size_of::<notify_msg_t>()) }
            .cast::<notify_msg_t>();
        if array.is_null() {
            return Err(out_of_memory());
        }
        for (i, n) in notifies.iter().enumerate() {
            let entry = notify_msg {
                name: malloc_c_string(&n.name),
                msg: malloc_c_string(&n.msg),
            };
            // SAFETY: i < count entries were allocated.
            unsafe { array.add(i).write(entry) };
            if entry.name.is_null() || entry.msg.is_null() {
                // SAFETY: entries 0..=i are initialised.
                unsafe { free_notify_array(array, i + 1) };
                return Err(out_of_memory());
            }
        }
        // SAFETY: as above.
        unsafe { *size = count };
        Ok(array)
    })
}

/// Frees an array from getNotifsFromEngine: the strings of its first `size` entries,
/// then the array. NULL is a no-op. Returns 0.
///
/// # Safety
/// `msg` must be NULL or an unfreed array from getNotifsFromEngine with `size` entries.
#[no_mangle]
pub unsafe extern "C" fn freeNotifsMsgBuf(msg: *mut notify_msg_t, size: c_int) -> c_int {
    ffi_boundary!({
        if !msg.is_null() {
            // SAFETY: an array from getNotifsFromEngine with size initialised entries.
            unsafe { free_notify_array(msg, usize::try_from(size).unwrap_or(0)) };
        }
        Ok(0)
    })
}

/// Sends `notify_msg` now to segment `target_id` (an id from openSegment, or
/// LOCAL_SEGMENT). Returns 0, -200 for an id that is not open, -101/-102 for
/// connection errors, -103 for a malformed reply, -1 for a bad handle.
///
/// # Safety
/// `notify_msg`'s strings must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn genNotifyInEngine(
    engine: transfer_engine_t,
    target_id: u64,
    notify_msg: notify_msg_t,
) -> c_int {
    ffi_boundary!(map = Error::err_code, {
        let e = ENGINES.get(engine)?;
        let id = i32::try_from(target_id)
            .map_err(|_| Error::Metadata(format!("segment id {target_id} is not open")))?;
        // SAFETY: NULL or NUL-terminated, per the contract.
        let (name, msg) = unsafe { (c_str_or(notify_msg.name, ""), c_str_or(notify_msg.msg, "")) };
        e.send_notify(id, &name, &msg)?;
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

/// Refetches every cached remote segment descriptor (failures keep the old one).
/// Returns 0, or -1 for a bad handle.
///
/// # Safety
/// Always safe to call; the handle is validated.
#[no_mangle]
pub unsafe extern "C" fn syncSegmentCache(engine: transfer_engine_t) -> c_int {
    ffi_boundary!({
        ENGINES.get(engine)?.sync_segment_cache();
        Ok(0)
    })
}

/// Reports per-RDMA-NIC load: fills up to `*count` entries of `stats` (device name,
/// bytes posted and not completed, average bytes per second since the transport was
/// installed) and sets `*count` to the number of NICs (0 without RDMA), so a caller
/// whose array was too small can call again. Returns 0, or -1 if any argument is NULL
/// or the handle is bad.
///
/// # Safety
/// `count` must be NULL or point to a writable size_t; `stats` must be NULL or valid
/// for `*count` entries.
#[no_mangle]
pub unsafe extern "C" fn getNicLoadStats(
    engine: transfer_engine_t,
    stats: *mut nic_load_stat_t,
    count: *mut usize,
) -> c_int {
    ffi_boundary!({
        if stats.is_null() || count.is_null() {
            return Err(invalid("stats and count must not be NULL"));
        }
        let e = ENGINES.get(engine)?;
        let loads = e.rdma().map(|r| r.nic_loads()).unwrap_or_default();
        // SAFETY: count is readable and writable, per the contract.
        let room = unsafe { *count };
        for (i, (name, inflight, bps)) in loads.iter().take(room).enumerate() {
            // SAFETY: i < *count entries are writable, per the contract.
            let slot = unsafe { &mut *stats.add(i) };
            slot.device_name = [0; 64];
            for (d, b) in slot.device_name.iter_mut().zip(name.bytes().take(63)) {
                *d = b as c_char;
            }
            slot.inflight_bytes = *inflight;
            slot.ewma_bandwidth_bps = *bps;
        }
        // SAFETY: as above.
        unsafe { *count = loads.len() };
        Ok(0)
    })
}

/// Installs SIGINT/SIGTERM handlers (once per process). On either signal a watcher
/// thread destroys every live engine, so their metadata keys are deleted, then exits
/// the process with status 128 + signal number. A second signal exits at once.
///
/// # Safety
/// Always safe to call; the handle is validated.
#[no_mangle]
pub unsafe extern "C" fn enableGracefulShutdown(engine: transfer_engine_t) {
    ffi_boundary!({
        ENGINES.get(engine)?;
        super::shutdown::install()
    })
}

/// Writes a description of the engine's NICs and topology into `buf_out` (truncated,
/// NUL-terminated): JSON `{"local_nics":[...],"topology":{...}}` when `json != 0`,
/// else text. Returns 0, or -1 for a NULL handle or buffer, `buf_len == 0`, or a bad
/// handle.
///
/// # Safety
/// `buf_out` must be NULL or valid for `buf_len` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn showLinks(
    engine: transfer_engine_t,
    buf_out: *mut c_char,
    buf_len: usize,
    json: c_int,
) -> c_int {
    ffi_boundary!({
        if buf_out.is_null() || buf_len == 0 {
            return Err(invalid("buf_out is NULL or buf_len is 0"));
        }
        let e = ENGINES.get(engine)?;
        let links = e
            .rdma()
            .map(|r| r.links_json())
            .unwrap_or_else(|| serde_json::json!({"local_nics": [], "topology": {}}));
        let text = if json != 0 {
            links.to_string()
        } else {
            links_text(e.segment_name(), e.has_transport("tcp"), &links)
        };
        // SAFETY: buf_len writable bytes, per the contract.
        unsafe { write_truncated(buf_out, buf_len, &text) };
        Ok(0)
    })
}

/// The human-readable form of `showLinks`.
fn links_text(segment: &str, tcp: bool, links: &serde_json::Value) -> String {
    let nics = links["local_nics"].as_array().cloned().unwrap_or_default();
    if nics.is_empty() {
        let transport = if tcp { "tcp" } else { "none installed" };
        return format!("segment {segment}: no RDMA NICs; transport: {transport}\n");
    }
    let mut out = format!("segment {segment}: {} RDMA NIC(s)\n", nics.len());
    for n in &nics {
        out.push_str(&format!(
            "  {} numa {} port {} gid[{}] {} ({}) mtu {}\n",
            n["device"].as_str().unwrap_or(""),
            n["numa"],
            n["port"],
            n["gid_index"],
            n["gid"].as_str().unwrap_or(""),
            n["source"].as_str().unwrap_or(""),
            n["mtu"]
        ));
    }
    out.push_str(&format!("topology: {}\n", links["topology"]));
    out
}
