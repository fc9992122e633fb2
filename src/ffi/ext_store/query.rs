//! Batch remove and size, and replica descriptors as JSON.

use super::support::{emit, replica_json};
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::store::args::keys_arg;
use crate::ffi::store::handle::{client, set_up};
use crate::ffi::store::keys::{KeyBatch, KeyCall};
use crate::ffi::store::mooncake_store_t;
use crate::ffi::store::results::{code_of, size_or_code, write_out};
use serde_json::{json, Value};
use std::ffi::{c_char, c_int};

/// Removes `count` keys in one master call: per key 0, -704 missing, -706 under a
/// read lease unless `force`, -703 while being written. Returns 0, or -1 (writing
/// nothing) for a bad handle or NULL arrays or keys.
///
/// # Safety
/// `keys` and `results_out` hold `count` entries; keys NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_remove(
    store: mooncake_store_t,
    keys: *const *const c_char,
    count: usize,
    force: c_int,
    results_out: *mut c_int,
) -> c_int {
    ffi_boundary!(name = function, {
        // SAFETY: per the contract.
        let batch = unsafe { KeyBatch::read(store, keys, count, results_out, "results_out") }?;
        let results = batch.results(Some(function), |c, keys| c.batch_remove(keys, force != 0));
        // SAFETY: results_out holds `count` entries.
        unsafe { write_out(results_out, count, results.into_iter().map(code_of)) };
        Ok(0)
    })
}

/// How many times this client's reads asked a disk owner to stage objects only its
/// disk holds (one call per owner per batch of reads: upstream's
/// `get_offload_rpc_read_count`). 0 before setup and for a dummy client (its reads
/// run in the real client); -1 for a bad handle.
#[no_mangle]
pub extern "C" fn mooncake_store_get_offload_rpc_read_count(store: mooncake_store_t) -> i64 {
    ffi_boundary!({
        Ok(client(store)?.map_or(0, |c| {
            i64::try_from(c.offload_rpc_read_count()).unwrap_or(i64::MAX)
        }))
    })
}

/// The sizes of `count` objects in one master call: per key the size or an error
/// code (-704 missing). Grants read leases. Returns 0, or -1 (writing nothing) for a
/// bad handle or NULL arrays or keys.
///
/// # Safety
/// `keys` and `results_out` hold `count` entries; keys NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_get_size(
    store: mooncake_store_t,
    keys: *const *const c_char,
    count: usize,
    results_out: *mut i64,
) -> c_int {
    ffi_boundary!(name = function, {
        // SAFETY: per the contract.
        let batch = unsafe { KeyBatch::read(store, keys, count, results_out, "results_out") }?;
        let results = batch.results(Some(function), |c, keys| c.batch_get_size(keys));
        // SAFETY: results_out holds `count` entries.
        unsafe { write_out(results_out, count, results.into_iter().map(size_or_code)) };
        Ok(0)
    })
}

/// The replicas of `key` as a JSON array of objects (`id`, `status`, `type` =
/// `memory` | `nof` | `disk` | `local_disk` | `dfs`, and that descriptor's fields,
/// e.g. `size`, `buffer_address`, `protocol`, `transport_endpoint` for memory),
/// written snprintf-style into `buf_out`: returns the JSON's length (call again with
/// a larger buffer when it is not below `buf_len`; NULL with `buf_len` 0 only asks
/// for the length). Negative: -704 missing, -600 not set up; -1 for a bad handle or
/// NULL key. Grants a read lease.
///
/// # Safety
/// `key` NULL or NUL-terminated; `buf_out` NULL or writable for `buf_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_get_replica_desc(
    store: mooncake_store_t,
    key: *const c_char,
    buf_out: *mut c_char,
    buf_len: usize,
) -> i64 {
    ffi_boundary!({
        // SAFETY: per the contract.
        let call = unsafe { KeyCall::read(store, key) }?;
        let replicas = call.client()?.get_replica_desc(call.key())?;
        let text = Value::Array(replicas.iter().map(replica_json).collect()).to_string();
        // SAFETY: per the contract.
        unsafe { emit(buf_out, buf_len, &text) }
    })
}

/// `mooncake_store_get_replica_desc` for `count` keys in one master call: a JSON
/// array with one entry per key, either that key's replica array or its error code
/// (an integer, e.g. -704). Length and truncation as for the single call; -600 when
/// not set up, -1 for a bad handle or NULL arrays or keys.
///
/// # Safety
/// `keys` holds `count` NUL-terminated keys; `buf_out` NULL or writable for
/// `buf_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_get_replica_desc(
    store: mooncake_store_t,
    keys: *const *const c_char,
    count: usize,
    buf_out: *mut c_char,
    buf_len: usize,
) -> i64 {
    ffi_boundary!({
        let h = client(store)?;
        // SAFETY: per the contract.
        let keys = unsafe { keys_arg(keys, count) }?;
        let c = set_up(h)?;
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let entries: Vec<Value> = c
            .batch_get_replica_desc(&refs)
            .into_iter()
            .map(|r| match r {
                Ok(v) => Value::Array(v.iter().map(replica_json).collect()),
                Err(e) => json!(e.code.0),
            })
            .collect();
        let text = Value::Array(entries).to_string();
        // SAFETY: per the contract.
        unsafe { emit(buf_out, buf_len, &text) }
    })
}
