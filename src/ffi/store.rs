//! Upstream's `store_c.h`: the 19 `mooncake_store_*` functions over
//! [`crate::store::Client`], with upstream's return conventions (spec store.md §1):
//! -1 for shim-level failures (NULL or unknown handle, NULL key or buffers, a
//! panic), otherwise the numeric `ErrorCode` (0 = OK, negative = error) or a
//! count/size. Every data operation on a handle that is not set up returns -600.
//!
//! Handles are opaque tokens looked up in a table, never dereferenced: NULL,
//! destroyed and foreign handles (e.g. a transfer engine) are rejected. Keys and
//! other strings are copied during the call (invalid UTF-8 is replaced by U+FFFD).

#![allow(non_camel_case_types)]

pub(super) mod args;
pub(super) mod handle;
pub(super) mod keys;
pub(super) mod results;

use super::args::{c_slice, c_str, c_str_or};
use super::boundary::ffi_boundary;
use super::fail::{invalid, FfiError};
use crate::store::{ReplicateConfig, SetupConfig, SoftPinAction, WriteMode};
use args::{items_arg, SetupArgs};
use handle::{client, set_up, set_up_client, setup_handle, STORES};
use keys::{write_copy, KeyBatch, KeyCall};
use results::write_out;
use std::ffi::{c_char, c_int, c_void};

/// An opaque store handle (`typedef void *`), from `mooncake_store_create`.
pub type mooncake_store_t = *mut c_void;

/// Replication options of a put. `NULL` means one replica, no pins, no preference.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mooncake_replicate_config {
    /// Memory replicas wanted, on distinct segments (best effort). 0 is passed to the
    /// master, which rejects it with -600.
    pub replica_num: usize,
    /// Non-zero: soft-pin the object (master's default TTL); zero: keep its state.
    pub with_soft_pin: c_int,
    /// Non-zero: never evict the object.
    pub with_hard_pin: c_int,
    /// Segment names (`mooncake_store_get_hostname` of their owner) tried first, in
    /// order; NULL entries are skipped, unknown names ignored.
    pub preferred_segments: *mut *const c_char,
    /// Number of entries in `preferred_segments`.
    pub preferred_segments_count: usize,
}

/// Typedef of struct mooncake_replicate_config.
pub type mooncake_replicate_config_t = mooncake_replicate_config;

/// Creates a store handle (not yet set up); NULL only when the process is out of
/// memory. Unlike upstream, this never blocks SIGINT/SIGTERM/SIGHUP/SIGUSR1 in the
/// calling thread nor installs signal handlers: the host's signal handling is left
/// alone.
#[no_mangle]
pub extern "C" fn mooncake_store_create() -> mooncake_store_t {
    ffi_boundary!({ Ok(STORES.insert(handle::StoreHandle::default())) })
}

/// Destroys a handle: stops the heartbeat, unmounts the client's segments, frees its
/// memory (waiting for operations still running on other threads). NULL, unknown and
/// already destroyed handles are ignored.
#[no_mangle]
pub extern "C" fn mooncake_store_destroy(store: mooncake_store_t) {
    ffi_boundary!({
        let Ok(h) = STORES.remove(store) else {
            return Ok(());
        };
        let client = h.client.write().take();
        if let Some(c) = client {
            c.close();
        }
        Ok(())
    })
}

/// Sets the handle up (spec store.md §1.4). NULL strings default to `""`
/// (local_hostname, metadata_server, device_name), `"tcp"` (protocol) and
/// `"127.0.0.1:50051"` (master_server_addr). `local_hostname` without a port gets a
/// free one from 12300-14300 (`MC_STORE_CLIENT_MIN_PORT`/`MAX_PORT`). Only the
/// `tcp` protocol and `P2PHANDSHAKE` / `http://` metadata are supported.
/// Returns 0; -1 for a bad handle; -600 for an empty hostname, another protocol, or
/// an already set-up handle; when the client cannot be created (master unreachable or
/// of another version, unsupported metadata, engine start failed), -600 with an
/// explicit port and -1 with an auto-selected one; or the master's error when
/// mounting fails. Setup never hangs past the master connect and RPC timeouts: RPCs
/// time out after `MC_RPC_TIMEOUT_MS` (connect: `MC_RPC_CONNECT_TIMEOUT_MS`).
///
/// # Safety
/// The strings must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_setup(
    store: mooncake_store_t,
    local_hostname: *const c_char,
    metadata_server: *const c_char,
    global_segment_size: u64,
    local_buffer_size: u64,
    protocol: *const c_char,
    device_name: *const c_char,
    master_server_addr: *const c_char,
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
        setup_handle(store, &unsafe { args.config() })
    })
}

/// Legacy setup (used by the Go binding): hostname `localhost:12345`, metadata
/// `127.0.0.1:2379` (etcd), a 1 GiB local buffer,
/// `mount_segment_size` bytes of segment, master `127.0.0.1:50051`. NULL protocol
/// means `"tcp"`. -600 when already set up, -1 for a bad handle.
///
/// # Safety
/// The strings must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_init_all(
    store: mooncake_store_t,
    protocol: *const c_char,
    device_name: *const c_char,
    mount_segment_size: u64,
) -> c_int {
    ffi_boundary!({
        // SAFETY: every string is NULL or NUL-terminated.
        let cfg = unsafe {
            SetupConfig {
                local_hostname: "localhost:12345".into(),
                metadata_server: "127.0.0.1:2379".into(),
                global_segment_size: mount_segment_size,
                local_buffer_size: 1 << 30,
                protocol: c_str_or(protocol, "tcp").into_owned(),
                device_name: c_str_or(device_name, "").into_owned(),
                master_server_addr: "127.0.0.1:50051".into(),
                ..SetupConfig::default()
            }
        };
        setup_handle(store, &cfg)
    })
}

/// 0 healthy, 1 not set up (or destroyed client), 2 when the last heartbeat ping
/// to the master failed, -1 for a bad handle. A client without a segment never
/// pings and reports 0.
#[no_mangle]
pub extern "C" fn mooncake_store_health_check(store: mooncake_store_t) -> c_int {
    ffi_boundary!({ Ok(client(store)?.map_or(1, |c| c.health() as c_int)) })
}

/// Copies `size` bytes into the local buffer and stores them under `key`. Returns 0
/// (also when the key exists: the old value is kept), -600 when `size` is 0 or
/// larger than the free local buffer, -200 no space, -800 transfer failure, -900
/// RPC failure; -1 for a bad handle, NULL key, or NULL value with `size > 0`.
///
/// # Safety
/// `key` NULL or NUL-terminated; `value` NULL or `size` readable bytes; `config`
/// NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_put(
    store: mooncake_store_t,
    key: *const c_char,
    value: *const c_void,
    size: usize,
    config: *const mooncake_replicate_config_t,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract; `config` is NULL or valid.
        let config = || unsafe { replicate_config(config) };
        // SAFETY: per the contract.
        unsafe { write_copy(WriteMode::Put, store, key, value, size, config) }
    })
}

/// Zero-copy put: the object is written straight from `buffer` (registration is
/// optional on TCP). `size == 0` returns 0 without storing anything. Codes as for
/// `mooncake_store_put`.
///
/// # Safety
/// `key` NULL or NUL-terminated; `buffer` NULL or `size` readable bytes; `config`
/// NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_put_from(
    store: mooncake_store_t,
    key: *const c_char,
    buffer: *mut c_void,
    size: usize,
    config: *const mooncake_replicate_config_t,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let (call, cfg) = unsafe { (KeyCall::read(store, key)?, replicate_config(config)?) };
        if buffer.is_null() && size > 0 {
            return Err(invalid("buffer is NULL with a non-zero size"));
        }
        let c = call.client()?;
        // SAFETY: `size` readable bytes at `buffer` per the contract.
        unsafe { c.put_from_raw(call.key(), buffer as u64, size as u64, &cfg) }?;
        Ok(0)
    })
}

/// Zero-copy puts of `count` objects. Writes 0 or an error code per item into
/// `results_out` and returns 0; duplicate keys store the last buffer given. Returns
/// -1 (writing nothing) for a bad handle, a NULL array, a NULL key, or a NULL buffer
/// with a non-zero size. Items of size 0 get -600.
///
/// # Safety
/// Non-NULL arrays must hold `count` entries; keys NUL-terminated; buffers readable
/// for their sizes; `config` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_put_from(
    store: mooncake_store_t,
    keys: *mut *const c_char,
    buffers: *mut *mut c_void,
    sizes: *const usize,
    count: usize,
    config: *const mooncake_replicate_config_t,
    results_out: *mut c_int,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let (batch, items, cfg) = unsafe {
            (
                KeyBatch::read(store, keys, count, results_out, "results_out")?,
                items_arg(buffers, sizes, count)?,
                replicate_config(config)?,
            )
        };
        let results = batch.results(None, |c, keys| {
            // SAFETY: every item is readable for its size per the contract.
            unsafe { c.batch_put_from_raw(keys, &items, &cfg) }
        });
        // SAFETY: results_out holds `count` entries.
        unsafe {
            write_out(
                results_out,
                count,
                results.into_iter().map(results::code_of),
            )
        };
        Ok(0)
    })
}

/// Reads `key` into `buffer` of capacity `size`. Returns the object's size, -600 when
/// the capacity is too small (or not set up), -704 missing, -703 not complete, -707
/// when the read lease expired during the read, -800 transfer failure; -1 for a bad
/// handle, NULL key, or NULL buffer with `size > 0`.
///
/// # Safety
/// `key` NULL or NUL-terminated; `buffer` NULL or `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_get_into(
    store: mooncake_store_t,
    key: *const c_char,
    buffer: *mut c_void,
    size: usize,
) -> i64 {
    ffi_boundary!({
        // SAFETY: per the contract.
        let call = unsafe { KeyCall::read(store, key) }?;
        if buffer.is_null() && size > 0 {
            return Err(invalid("buffer is NULL with a non-zero size"));
        }
        let c = call.client()?;
        // SAFETY: `size` writable bytes at `buffer` per the contract.
        Ok(unsafe { c.get_into_raw(call.key(), buffer as u64, size as u64) }? as i64)
    })
}

/// Reads `count` objects; `results_out[i]` is the object's size or an error code as
/// for `mooncake_store_get_into` (-704 missing, -600 too small). Returns 0, or -1
/// (writing nothing) for a bad handle, a NULL array, key, or NULL buffer with a
/// non-zero size.
///
/// # Safety
/// Non-NULL arrays must hold `count` entries; keys NUL-terminated; buffers writable
/// for their sizes and distinct.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_get_into(
    store: mooncake_store_t,
    keys: *mut *const c_char,
    buffers: *mut *mut c_void,
    sizes: *const usize,
    count: usize,
    results_out: *mut i64,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let (batch, items) = unsafe {
            (
                KeyBatch::read(store, keys, count, results_out, "results_out")?,
                items_arg(buffers, sizes, count)?,
            )
        };
        let results = batch.results(None, |c, keys| {
            // SAFETY: every item is writable for its size per the contract.
            unsafe { c.batch_get_into_raw(keys, &items) }
        });
        // SAFETY: results_out holds `count` entries.
        unsafe {
            write_out(
                results_out,
                count,
                results.into_iter().map(results::size_or_code),
            )
        };
        Ok(0)
    })
}

/// 1 when `key` has a complete replica, 0 when not, a negative code on error (-600
/// not set up, -900 master unreachable); -1 for a bad handle or NULL key. Grants a
/// read lease on the object, which blocks a non-forced remove for a while.
///
/// # Safety
/// `key` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_is_exist(
    store: mooncake_store_t,
    key: *const c_char,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let call = unsafe { KeyCall::read(store, key) }?;
        Ok(c_int::from(call.client()?.is_exist(call.key())?))
    })
}

/// `mooncake_store_is_exist` for `count` keys in one master call: 1/0/negative per
/// item in `results_out`; returns 0, or -1 (writing nothing) for a bad handle, a NULL
/// array or a NULL key.
///
/// # Safety
/// Non-NULL arrays must hold `count` entries; keys NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_is_exist(
    store: mooncake_store_t,
    keys: *mut *const c_char,
    count: usize,
    results_out: *mut c_int,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let batch = unsafe { KeyBatch::read(store, keys, count, results_out, "results_out") }?;
        let results = batch.results(None, |c, keys| c.batch_is_exist(keys));
        let results = results
            .into_iter()
            .map(|r| r.map_or_else(|e| e.0, c_int::from));
        // SAFETY: results_out holds `count` entries.
        unsafe { write_out(results_out, count, results) };
        Ok(0)
    })
}

/// The object's size in bytes, -704 when missing, -600 when not set up; -1 for a bad
/// handle or NULL key. Grants a read lease.
///
/// # Safety
/// `key` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_get_size(
    store: mooncake_store_t,
    key: *const c_char,
) -> i64 {
    ffi_boundary!({
        // SAFETY: per the contract.
        let call = unsafe { KeyCall::read(store, key) }?;
        Ok(call.client()?.get_size(call.key())? as i64)
    })
}

/// Copies the client's name (`host:port`, the auto-selected port included; `""`
/// before setup) and a NUL into `buf_out`. Returns 0, or -1 for a bad handle, a NULL
/// buffer, `buf_len == 0`, or a name that does not fit (nothing is written then).
///
/// # Safety
/// `buf_out` NULL or writable for `buf_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_get_hostname(
    store: mooncake_store_t,
    buf_out: *mut c_char,
    buf_len: usize,
) -> c_int {
    ffi_boundary!({
        let h = client(store)?;
        if buf_out.is_null() || buf_len == 0 {
            return Err(invalid("buf_out is NULL or buf_len is 0"));
        }
        let name = h.map(|c| c.hostname().to_string()).unwrap_or_default();
        if name.len() >= buf_len {
            return Err(invalid(format!(
                "hostname needs {} bytes, buf_len is {buf_len}",
                name.len() + 1
            )));
        }
        // SAFETY: name.len() + 1 <= buf_len writable bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(name.as_ptr(), buf_out.cast::<u8>(), name.len());
            *buf_out.add(name.len()) = 0;
        }
        Ok(0)
    })
}

/// Removes `key`. Returns 0, -704 missing, -706 under a read lease unless `force`,
/// -703 while being written; -600 not set up; -1 for a bad handle or NULL key.
///
/// # Safety
/// `key` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_remove(
    store: mooncake_store_t,
    key: *const c_char,
    force: c_int,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let call = unsafe { KeyCall::read(store, key) }?;
        call.client()?.remove(call.key(), force != 0)?;
        Ok(0)
    })
}

/// Removes every key `pattern` matches (ECMAScript regex, substring search); returns
/// how many were removed, -600 for an invalid pattern (or not set up), -1 for a bad
/// handle or NULL pattern. Leased (unless `force`) and incomplete objects are skipped.
///
/// # Safety
/// `pattern` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_remove_by_regex(
    store: mooncake_store_t,
    pattern: *const c_char,
    force: c_int,
) -> i64 {
    ffi_boundary!({
        let h = client(store)?;
        // SAFETY: per the contract.
        let pattern = unsafe { c_str(pattern, "pattern") }?.into_owned();
        Ok(set_up(h)?.remove_by_regex(&pattern, force != 0)?)
    })
}

/// Removes every removable object (hard-pinned ones too); returns how many were
/// removed, -600 when not set up, -1 for a bad handle.
#[no_mangle]
pub extern "C" fn mooncake_store_remove_all(store: mooncake_store_t, force: c_int) -> i64 {
    ffi_boundary!({ Ok(set_up_client(store)?.remove_all(force != 0)?) })
}

/// Registers `buffer` with the Transfer Engine (not remotely accessible; needed by
/// RDMA, optional on TCP). Returns 0, -600 when the engine refuses (e.g. overlap) or
/// not set up, -1 for a bad handle, NULL buffer or zero size.
///
/// # Safety
/// `buffer` must stay valid until unregistered or the store is destroyed.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_register_buffer(
    store: mooncake_store_t,
    buffer: *mut c_void,
    size: usize,
) -> c_int {
    ffi_boundary!({
        let h = client(store)?;
        if buffer.is_null() || size == 0 {
            return Err(invalid("buffer is NULL or size is 0"));
        }
        set_up(h)?.register_buffer(buffer.cast(), size)?;
        Ok(0)
    })
}

/// Unregisters a buffer registered with `mooncake_store_register_buffer` (exact base
/// address). Returns 0, -600 for any other address (NULL included) or when not set up,
/// -1 for a bad handle.
#[no_mangle]
pub extern "C" fn mooncake_store_unregister_buffer(
    store: mooncake_store_t,
    buffer: *mut c_void,
) -> c_int {
    ffi_boundary!({
        set_up_client(store)?.unregister_buffer(buffer.cast())?;
        Ok(0)
    })
}

/// Converts the C config (spec store.md §1.1).
///
/// # Safety
/// `config` must be NULL or point to a valid struct whose non-NULL
/// `preferred_segments` has `preferred_segments_count` entries, each NULL or a
/// NUL-terminated string.
unsafe fn replicate_config(
    config: *const mooncake_replicate_config_t,
) -> Result<ReplicateConfig, FfiError> {
    let mut out = ReplicateConfig::default();
    if config.is_null() {
        return Ok(out);
    }
    if (config as usize) % std::mem::align_of::<mooncake_replicate_config_t>() != 0 {
        return Err(invalid("config is not aligned"));
    }
    // SAFETY: non-NULL, aligned, valid per the contract; copied by value.
    let c = unsafe { *config };
    out.replica_num = c.replica_num as u64;
    out.soft_pin_action = if c.with_soft_pin != 0 {
        SoftPinAction::Enable
    } else {
        SoftPinAction::Preserve
    };
    out.with_hard_pin = c.with_hard_pin != 0;
    if !c.preferred_segments.is_null() {
        // SAFETY: the array has preferred_segments_count entries per the contract.
        let names = unsafe {
            c_slice(
                c.preferred_segments,
                c.preferred_segments_count,
                "preferred_segments",
            )
        }?;
        for &name in names.iter().filter(|n| !n.is_null()) {
            // SAFETY: a non-NULL entry is a NUL-terminated string.
            out.preferred_segments
                .push(unsafe { c_str(name, "preferred segment") }?.into_owned());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
