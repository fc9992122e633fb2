//! Setups upstream's `store_c.h` lacks: with the SSD offload tier, and over an
//! existing Transfer Engine.

use crate::ffi::args::c_str_or;
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::engines::ENGINES;
use crate::ffi::fail::invalid;
use crate::ffi::store::args::SetupArgs;
use crate::ffi::store::handle::{set_up_client, setup_engine_handle, setup_handle};
use crate::ffi::store::mooncake_store_t;
use crate::ffi::te_types::transfer_engine_t;
use crate::store::SetupConfig;
use std::ffi::{c_char, c_int};

/// `mooncake_store_setup` with upstream's `enable_ssd_offload`, `ssd_offload_path` and
/// `tenant_id` (Python `setup(..., enable_ssd_offload=True, ssd_offload_path=...,
/// tenant_id=...)`): with `enable_ssd_offload` the client also keeps the objects the
/// master offloads on its local disk, in `ssd_offload_path` (NULL or empty:
/// `MOONCAKE_OFFLOAD_FILE_STORAGE_PATH`, default `/data/file_storage`), and serves them
/// to readers; the other `MOONCAKE_OFFLOAD_*` variables as upstream. Every object call
/// names `tenant_id` (NULL or empty: `default`), whose keys a master with
/// `--enable_multi_tenants` keeps apart from other tenants'. Returns as
/// `mooncake_store_setup`; besides, -600 when the directory is unusable (not absolute,
/// missing, a symlink) and the master's code when it does not offload (-1300 without
/// `--enable_offload`).
///
/// # Safety
/// The strings must be NULL or NUL-terminated.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mooncake_store_setup_with_offload(
    store: mooncake_store_t,
    local_hostname: *const c_char,
    metadata_server: *const c_char,
    global_segment_size: u64,
    local_buffer_size: u64,
    protocol: *const c_char,
    device_name: *const c_char,
    master_server_addr: *const c_char,
    enable_ssd_offload: bool,
    ssd_offload_path: *const c_char,
    tenant_id: *const c_char,
) -> c_int {
    ffi_boundary!({
        let args = SetupArgs {
            local_hostname,
            metadata_server,
            global_segment_size,
            local_buffer_size,
            protocol,
            device_name,
            master_server_addr,
        };
        // SAFETY: every string is NULL or NUL-terminated.
        let cfg = unsafe { offload_config(&args, enable_ssd_offload, ssd_offload_path, tenant_id) };
        setup_handle(store, &cfg)
    })
}

/// The setup of `mooncake_store_setup`'s arguments plus the SSD-offload pair and the
/// tenant.
///
/// # Safety
/// The strings must be NULL or NUL-terminated.
unsafe fn offload_config(
    args: &SetupArgs,
    enable_ssd_offload: bool,
    ssd_offload_path: *const c_char,
    tenant_id: *const c_char,
) -> SetupConfig {
    // SAFETY: the caller's strings are NULL or NUL-terminated.
    unsafe {
        SetupConfig {
            enable_ssd_offload,
            ssd_offload_path: c_str_or(ssd_offload_path, "").into_owned(),
            tenant_id: c_str_or(tenant_id, "").into_owned(),
            ..args.config()
        }
    }
}

/// `mooncake_store_setup_with_offload` over an existing Transfer Engine (Python
/// `setup(..., engine=...)`): the client registers its local buffer and segment with
/// `engine` (a live `createTransferEngine` handle) and moves data with its transports
/// instead of starting an engine of its own, so it shares the engine's segment name,
/// RPC port, memory registrations and transports. The client is named
/// `local_hostname` when that has a port, else the engine's segment name;
/// `metadata_server` is not used (the engine has its own), nor `protocol` and
/// `device_name` unless the engine has no transport yet. Memory the engine's owner
/// registered is accepted by `mooncake_store_register_buffer` without being
/// registered twice, and stays registered after the store is closed; the engine
/// lives at least as long as the store (destroying its handle first is safe).
/// `tenant_id` as for `mooncake_store_setup_with_offload`. Returns as
/// `mooncake_store_setup_with_offload`; -1 for a bad engine handle.
///
/// # Safety
/// The strings must be NULL or NUL-terminated.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mooncake_store_setup_on_engine(
    store: mooncake_store_t,
    engine: transfer_engine_t,
    local_hostname: *const c_char,
    metadata_server: *const c_char,
    global_segment_size: u64,
    local_buffer_size: u64,
    protocol: *const c_char,
    device_name: *const c_char,
    master_server_addr: *const c_char,
    enable_ssd_offload: bool,
    ssd_offload_path: *const c_char,
    tenant_id: *const c_char,
) -> c_int {
    ffi_boundary!({
        let engine = ENGINES.get(engine)?;
        let args = SetupArgs {
            local_hostname,
            metadata_server,
            global_segment_size,
            local_buffer_size,
            protocol,
            device_name,
            master_server_addr,
        };
        // SAFETY: every string is NULL or NUL-terminated.
        let cfg = unsafe { offload_config(&args, enable_ssd_offload, ssd_offload_path, tenant_id) };
        setup_engine_handle(store, &cfg, engine)
    })
}

/// Starts the client HTTP server of a set-up store (upstream's
/// `setup(..., enable_client_http_server=True, client_http_port=P)`) on all
/// interfaces at `port` (0: one the system picks): `GET /health`, `/metrics`
/// (upstream's `mooncake_transfer_*` and `mooncake_client_rpc_*` families) and
/// `/metrics/summary`; it stops when the store is closed. Returns the port bound,
/// -600 when not set up, for a dummy client or when the port cannot be bound, -1 for
/// a bad handle or a port above 65535.
#[no_mangle]
pub extern "C" fn mooncake_store_start_http_server(store: mooncake_store_t, port: c_int) -> c_int {
    ffi_boundary!({
        let port =
            u16::try_from(port).map_err(|_| invalid(format!("port {port} is not 0-65535")))?;
        let bound = set_up_client(store)?.start_http_server(port)?;
        Ok(c_int::from(bound))
    })
}
