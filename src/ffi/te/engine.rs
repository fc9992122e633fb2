//! Upstream's `transfer_engine_c.h` for the engine object: its lifecycle, transports,
//! topology and introspection (NIC load, links, graceful shutdown), over
//! [`TransferEngine`]. Conventions as in [`super`].

#![allow(non_snake_case)]

use crate::error::Error;
use crate::ffi::args::{c_str, fill_c_array, require_out, write_truncated};
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::engines::{checked_no_op, ENGINES};
use crate::ffi::fail::invalid;
use crate::ffi::te_types::*;
use crate::te::TransferEngine;
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
    ffi_boundary!({ checked_no_op(engine) })
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
/// library, no usable device; the reason is in the thread's last error). With
/// `MC_FORCE_TCP` set, `"rdma"` installs TCP (with a warning), as the variable says.
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
            "rdma" if e.forces_tcp() => Arc::as_ptr(&e.tcp_instead_of_rdma()?).cast(),
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
    ffi_boundary!({
        let _ = proto;
        checked_no_op(engine)
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
        // SAFETY: `*count` writable entries at `stats` and a writable count, per the
        // contract.
        unsafe { report_nic_loads(&e, stats, count) };
        Ok(0)
    })
}

/// A C struct that holds one NIC's load (the classic and the TENT API each have one).
pub(crate) trait NicLoadSlot {
    /// Stores the device name (truncated, NUL-terminated), bytes in flight and
    /// bytes per second.
    fn fill(&mut self, name: &str, inflight_bytes: u64, bandwidth_bps: f64);
}

impl NicLoadSlot for nic_load_stat_t {
    fn fill(&mut self, name: &str, inflight_bytes: u64, bandwidth_bps: f64) {
        fill_c_array(&mut self.device_name, name);
        self.inflight_bytes = inflight_bytes;
        self.ewma_bandwidth_bps = bandwidth_bps;
    }
}

/// Fills the first `*count` entries of `stats` with each NIC's load, then sets
/// `*count` to the number of NICs.
///
/// # Safety
/// `count` must be readable and writable; `stats` valid for the `*count` entries
/// read on entry.
pub(crate) unsafe fn report_nic_loads<S: NicLoadSlot>(
    e: &TransferEngine,
    stats: *mut S,
    count: *mut usize,
) {
    let loads = e.rdma().map(|r| r.nic_loads()).unwrap_or_default();
    // SAFETY: readable, per the contract.
    let room = unsafe { *count };
    for (i, (name, inflight, bps)) in loads.iter().take(room).enumerate() {
        // SAFETY: `i < room`, and `stats` holds `room` entries, per the contract.
        unsafe { (*stats.add(i)).fill(name, *inflight, *bps) };
    }
    // SAFETY: writable, per the contract.
    unsafe { *count = loads.len() };
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
        crate::ffi::shutdown::install()
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
