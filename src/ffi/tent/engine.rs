//! TENT's engine object: creating one from the thread's settings, destroying it, its
//! names, availability and NIC load. Conventions as in [`super`].

#![allow(non_snake_case)]

use super::config::current_plan;
use crate::config::Config;
use crate::ffi::args::{fill_c_array, require_out, write_truncated};
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::engines::ENGINES;
use crate::ffi::fail::invalid;
use crate::ffi::te::engine::{report_nic_loads, NicLoadSlot};
use crate::ffi::tent_types::*;
use crate::te::TransferEngine;
use std::ffi::{c_char, c_int};

/// Creates an engine from the calling thread's settings (tent_set_config,
/// tent_load_config_from_file), discovering transports (RDMA when a usable NIC
/// exists, else TCP; the same-host path between processes of this host). The handle
/// also works with the classic API's functions. Returns NULL on failure (the reason is
/// in the thread's last error); upstream returns an engine that is not
/// tent_available instead.
#[no_mangle]
pub extern "C" fn tent_create_engine() -> tent_engine_t {
    ffi_boundary!({
        let plan = current_plan()?;
        let mut config = Config::global().clone();
        if let Some(port) = plan.rpc_port {
            config.min_rpc_port = port;
            config.max_rpc_port = port;
        }
        let engine = TransferEngine::with_config(config, &plan.metadata, &plan.local_name, true)?;
        Ok(ENGINES.insert(engine))
    })
}

/// Destroys an engine (its segment leaves the metadata store). NULL is a no-op.
///
/// # Safety
/// Always safe to call; the handle is validated.
#[no_mangle]
pub unsafe extern "C" fn tent_destroy_engine(engine: tent_engine_t) {
    if engine.is_null() {
        return;
    }
    ffi_boundary!({
        drop(ENGINES.remove(engine)?);
        Ok(())
    })
}

/// Writes the engine's segment name (peers open it by this name) into `buf`,
/// truncated and NUL-terminated. Returns 0 or -1.
///
/// # Safety
/// `buf` must be NULL or valid for `buf_len` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn tent_segment_name(
    engine: tent_engine_t,
    buf: *mut c_char,
    buf_len: usize,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        require_out(buf, "buf")?;
        // SAFETY: buf_len writable bytes at buf, per the contract.
        unsafe { write_truncated(buf, buf_len, e.segment_name()) };
        Ok(0)
    })
}

/// Writes the address of the engine's RPC server into `addr_buf` (truncated,
/// NUL-terminated) and its port into `*port`. Returns 0 or -1.
///
/// # Safety
/// `addr_buf` must be NULL or valid for `buf_len` bytes of writes; `port` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn tent_rpc_server_addr_port(
    engine: tent_engine_t,
    addr_buf: *mut c_char,
    buf_len: usize,
    port: *mut u16,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        require_out(addr_buf, "addr_buf")?;
        require_out(port, "port")?;
        let address = e.local_ip_and_port();
        let host = match address.rsplit_once(':') {
            Some((host, _)) => host.trim_start_matches('[').trim_end_matches(']'),
            None => address.as_str(),
        };
        // SAFETY: buf_len writable bytes at addr_buf and a writable port, per the contract.
        unsafe {
            write_truncated(addr_buf, buf_len, host);
            *port = e.rpc_port();
        }
        Ok(0)
    })
}

/// 1 when `engine` is a live engine ready for transfers, else 0 (NULL included).
///
/// # Safety
/// Always safe to call; the handle is validated.
#[no_mangle]
pub unsafe extern "C" fn tent_available(engine: tent_engine_t) -> c_int {
    ffi_boundary!(fail = 0, { Ok(c_int::from(ENGINES.get(engine).is_ok())) })
}

/// Per-RDMA-NIC load: fills up to `*count` entries of `stats` and sets `*count` to
/// the number of NICs (0 without RDMA). Returns 0 or -1.
///
/// # Safety
/// `stats` must be NULL or valid for `*count` entries; `count` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tent_get_nic_load_stats(
    engine: tent_engine_t,
    stats: *mut tent_nic_load_stat_t,
    count: *mut usize,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        if stats.is_null() || count.is_null() {
            return Err(invalid("stats and count must not be NULL"));
        }
        // SAFETY: `*count` writable entries at `stats` and a writable count, per the
        // contract.
        unsafe { report_nic_loads(&e, stats, count) };
        Ok(0)
    })
}

impl NicLoadSlot for tent_nic_load_stat_t {
    fn fill(&mut self, name: &str, inflight_bytes: u64, bandwidth_bps: f64) {
        fill_c_array(&mut self.device_name, name);
        self.inflight_bytes = inflight_bytes;
        self.ewma_bandwidth_bps = bandwidth_bps;
    }
}
