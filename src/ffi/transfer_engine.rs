//! Upstream's `transfer_engine_c.h` for the engine object itself: its lifecycle,
//! transports, segments and memory registrations, over [`TransferEngine`]. Batches,
//! transfers and notifies are in [`super::transfer`]. (cbindgen writes the header in
//! source order, so each file holds a contiguous run of upstream's declarations.)
//!
//! Return conventions are upstream's (spec §1.2-§1.3): register, segment and notify
//! functions return negative `ERR_*` codes; submitTransfer, submitTransferWithNotify,
//! getTransferStatus and freeBatchID return positive status codes. Where upstream has
//! undefined behaviour (NULL or freed handles, bogus batch ids, NULL arrays), these
//! return the function's failure value instead and record the reason, readable with
//! `mooncake_last_error_message()` from `mooncake_ext.h`.

#![allow(non_snake_case)]

use super::args::{c_slice, c_str, c_str_or, require_out, write_truncated};
use super::boundary::ffi_boundary;
use super::engines::{engine_and_name, ENGINES};
use super::te_types::*;
use crate::error::Error;
use crate::te::{Range, TransferEngine};
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

/// Creates a Transfer Engine.
///
/// `metadata_conn_string` is `P2PHANDSHAKE`, an `http://` metadata URL,
/// `etcd://h1:2379,h2:2379` (or a bare `host:port`, meaning etcd) or
/// `redis://host:port`. The engine is
/// named `local_server_name` (in P2PHANDSHAKE mode it becomes `host:<rpc port>`; read
/// it back with getLocalIpAndPort). `ip_or_host_name` and `rpc_port` are ignored, as
/// upstream ignores them (MC_LEGACY_RPC_PORT_BINDING takes both from the name).
/// `auto_discover != 0` installs RDMA when a usable NIC is found (or `MC_FORCE_HCA`),
/// else TCP, as upstream; `MC_FORCE_TCP` installs TCP. Returns NULL on any error,
/// including an unreachable or unknown metadata backend (upstream aborts instead).
///
/// # Safety
/// The strings must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn createTransferEngine(
    metadata_conn_string: *const c_char,
    local_server_name: *const c_char,
    ip_or_host_name: *const c_char,
    rpc_port: u64,
    auto_discover: c_int,
) -> transfer_engine_t {
    let _ = (ip_or_host_name, rpc_port);
    ffi_boundary!({
        // SAFETY: the caller passes NUL-terminated strings or NULL.
        let metadata = unsafe { c_str(metadata_conn_string, "metadata_conn_string") }?;
        // SAFETY: as above.
        let name = unsafe { c_str(local_server_name, "local_server_name") }?;
        let engine = TransferEngine::new(&metadata, &name, auto_discover != 0)?;
        Ok(ENGINES.insert(engine))
    })
}

/// Re-runs topology discovery. Returns 0, or -1 for a bad handle.
///
/// # Safety
/// Always safe to call; the handle is validated.
#[no_mangle]
pub unsafe extern "C" fn discoverTopology(engine: transfer_engine_t) -> c_int {
    ffi_boundary!({
        ENGINES.get(engine)?;
        Ok(0)
    })
}

/// Writes `ip:port` of the engine's RPC daemon into `buf_out` like snprintf: truncated
/// to `buf_len - 1` bytes and NUL-terminated when `buf_len > 0`. Returns 0, or -1 for a
/// bad handle or a NULL buffer.
///
/// # Safety
/// `buf_out` must be NULL or valid for `buf_len` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn getLocalIpAndPort(
    engine: transfer_engine_t,
    buf_out: *mut c_char,
    buf_len: usize,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        require_out(buf_out, "buf_out")?;
        // SAFETY: the caller guarantees buf_len writable bytes at buf_out.
        unsafe { write_truncated(buf_out, buf_len, &e.local_ip_and_port()) };
        Ok(0)
    })
}

/// Installs a transport (`"tcp"` or `"rdma"`). If `args` and `args[0]` are non-NULL,
/// `args[0]` is a `char *` NIC priority-matrix JSON (for RDMA, the NICs to use instead
/// of discovering them), which must parse. Returns a borrowed, opaque transport handle
/// valid until the engine is destroyed (the same one when it is already installed), or
/// NULL for an unknown protocol, bad JSON, or a failed install (for RDMA: no verbs
/// library, no usable device; the reason is in the thread's last error).
///
/// # Safety
/// `proto` must be NULL or NUL-terminated; `args` must be NULL or point to a pointer
/// that is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn installTransport(
    engine: transfer_engine_t,
    proto: *const c_char,
    args: *mut *mut c_void,
) -> transport_t {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        // SAFETY: NULL or NUL-terminated, per the contract.
        let proto = unsafe { c_str(proto, "proto") }?;
        let mut topology = None;
        if !args.is_null() {
            // SAFETY: a non-NULL args points to at least one pointer.
            let arg0 = unsafe { *args }.cast::<c_char>().cast_const();
            if !arg0.is_null() {
                // SAFETY: args[0] is a NUL-terminated string.
                let text = unsafe { c_str(arg0, "args[0]") }?;
                serde_json::from_str::<serde_json::Value>(&text).map_err(|err| {
                    Error::MalformedJson(format!("args[0] is not a topology JSON: {err}"))
                })?;
                topology = Some(text);
            }
        }
        let handle: *const c_void = match &*proto {
            "rdma" => Arc::as_ptr(&e.install_rdma(None, topology.as_deref(), &[])?).cast(),
            _ => Arc::as_ptr(&e.install_transport(&proto)?).cast(),
        };
        Ok(handle.cast_mut())
    })
}

/// Does nothing, as upstream. Returns 0, or -1 for a bad handle.
///
/// # Safety
/// Always safe to call; the handle is validated and `proto` is not read.
#[no_mangle]
pub unsafe extern "C" fn uninstallTransport(
    engine: transfer_engine_t,
    proto: *const c_char,
) -> c_int {
    let _ = proto;
    ffi_boundary!({
        ENGINES.get(engine)?;
        Ok(0)
    })
}

/// Opens a segment by name (leading `/` ignored): 0 for this engine's own name, else a
/// per-engine id counting from 1, cached. Returns -1 on any failure.
///
/// # Safety
/// `segment_name` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn openSegment(
    engine: transfer_engine_t,
    segment_name: *const c_char,
) -> segment_id_t {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated, per the contract.
        let (e, name) = unsafe { engine_and_name(engine, segment_name, "segment_name") }?;
        Ok(e.open_segment(&name)?)
    })
}

/// Refreshes the segment's cached descriptor (if cached), then opens it like
/// openSegment. Returns the id, or -1.
///
/// # Safety
/// `segment_name` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn openSegmentNoCache(
    engine: transfer_engine_t,
    segment_name: *const c_char,
) -> segment_id_t {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated, per the contract.
        let (e, name) = unsafe { engine_and_name(engine, segment_name, "segment_name") }?;
        Ok(e.open_segment_no_cache(&name)?)
    })
}

/// Does nothing, as upstream. Returns 0, or -1 for a bad handle.
///
/// # Safety
/// Always safe to call; the handle is validated.
#[no_mangle]
pub unsafe extern "C" fn closeSegment(
    engine: transfer_engine_t,
    segment_id: segment_id_t,
) -> c_int {
    let _ = segment_id;
    ffi_boundary!({
        ENGINES.get(engine)?;
        Ok(0)
    })
}

/// Pre-connects EFA endpoints; there are none in this build. Returns 0, or -1 for a
/// bad handle.
///
/// # Safety
/// Always safe to call; the handle is validated and `segment_name` is not read.
#[no_mangle]
pub unsafe extern "C" fn warmupEfaSegment(
    engine: transfer_engine_t,
    segment_name: *const c_char,
) -> c_int {
    let _ = segment_name;
    ffi_boundary!({
        ENGINES.get(engine)?;
        Ok(0)
    })
}

/// Forgets the cached name -> id mapping of `segment_name` (a later openSegment gets a
/// new id); nothing is sent anywhere. Returns 0, or -1 for an empty or NULL name or a
/// bad handle.
///
/// # Safety
/// `segment_name` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn removeLocalSegment(
    engine: transfer_engine_t,
    segment_name: *const c_char,
) -> c_int {
    ffi_boundary!(map = Error::err_code, {
        // SAFETY: NULL or NUL-terminated, per the contract.
        let (e, name) = unsafe { engine_and_name(engine, segment_name, "segment_name") }?;
        e.remove_local_segment(&name)?;
        Ok(0)
    })
}

/// Destroys an engine: stops its threads and deletes its metadata keys. A NULL or
/// unknown handle is a no-op (the last error says so). Calls still running on other
/// threads keep the engine alive until they return.
///
/// # Safety
/// Always safe to call; the handle is validated.
#[no_mangle]
pub unsafe extern "C" fn destroyTransferEngine(engine: transfer_engine_t) {
    ffi_boundary!({
        drop(ENGINES.remove(engine)?);
        Ok(())
    })
}

/// Registers `[addr, addr + length)` with every installed transport and publishes the
/// segment descriptor. `location` NULL means `"*"`. Returns 0, -1 (zero length, NULL
/// address, bad handle), -7 (overlaps a registered region) or another ERR_* code.
///
/// # Safety
/// `location` must be NULL or NUL-terminated; the region must stay valid while
/// registered.
#[no_mangle]
pub unsafe extern "C" fn registerLocalMemory(
    engine: transfer_engine_t,
    addr: *mut c_void,
    length: usize,
    location: *const c_char,
    remote_accessible: c_int,
) -> c_int {
    ffi_boundary!(map = Error::err_code, {
        let e = ENGINES.get(engine)?;
        // SAFETY: NULL or NUL-terminated, per the contract.
        let location = unsafe { c_str_or(location, "*") };
        e.register_memory(
            addr as u64,
            length as u64,
            &location,
            remote_accessible != 0,
        )?;
        Ok(0)
    })
}

/// Unregisters the region based exactly at `addr`. Returns 0, -3 for an address that
/// is not a registered base, -1 for a bad handle.
///
/// # Safety
/// Always safe to call; `addr` is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn unregisterLocalMemory(
    engine: transfer_engine_t,
    addr: *mut c_void,
) -> c_int {
    ffi_boundary!(map = Error::err_code, {
        let e = ENGINES.get(engine)?;
        e.unregister_memory(addr as u64)?;
        Ok(0)
    })
}

/// Registers `buffer_len` regions at once (all or none) and publishes once. Returns 0
/// (also for an empty list), -1 (NULL list, zero length), -7 (overlap, within the list
/// or with registered regions) or another ERR_* code.
///
/// # Safety
/// `buffer_list` must be NULL or point to `buffer_len` entries; `location` must be NULL
/// or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn registerLocalMemoryBatch(
    engine: transfer_engine_t,
    buffer_list: *mut buffer_entry_t,
    buffer_len: usize,
    location: *const c_char,
) -> c_int {
    ffi_boundary!(map = Error::err_code, {
        let e = ENGINES.get(engine)?;
        // SAFETY: buffer_len entries at buffer_list, per the contract.
        let list = unsafe { c_slice(buffer_list.cast_const(), buffer_len, "buffer_list") }?;
        if list.is_empty() {
            return Ok(0);
        }
        // SAFETY: NULL or NUL-terminated, per the contract.
        let location = unsafe { c_str_or(location, "*") };
        let ranges: Vec<Range> = list
            .iter()
            .map(|b| Range {
                addr: b.addr as u64,
                len: b.length as u64,
            })
            .collect();
        e.register_memory_batch(&ranges, &location)?;
        Ok(0)
    })
}

/// Unregisters several regions (best effort) and publishes once. Returns 0 (also for
/// an empty list), the first ERR_* code met (-3 for an unknown address), or -1.
///
/// # Safety
/// `addr_list` must be NULL or point to `addr_len` pointers.
#[no_mangle]
pub unsafe extern "C" fn unregisterLocalMemoryBatch(
    engine: transfer_engine_t,
    addr_list: *mut *mut c_void,
    addr_len: usize,
) -> c_int {
    ffi_boundary!(map = Error::err_code, {
        let e = ENGINES.get(engine)?;
        // SAFETY: addr_len pointers at addr_list, per the contract.
        let list = unsafe { c_slice(addr_list.cast_const(), addr_len, "addr_list") }?;
        if list.is_empty() {
            return Ok(0);
        }
        let addrs: Vec<u64> = list.iter().map(|a| *a as u64).collect();
        e.unregister_memory_batch(&addrs)?;
        Ok(0)
    })
}
