//! `mooncake_store_*` extensions that upstream's `store_c.h` lacks (declared in
//! `mooncake_ext.h`), used by the Python package: puts with upstream's full
//! `ReplicateConfig`, upsert, puts and gets of objects scattered over several
//! buffers, whole-object gets into library memory, batch remove and size, and
//! replica descriptors as JSON; ranged reads (`ranges`) and replica clearing
//! (`clear`).
//!
//! Conventions are those of `store_c.h`: -1 for shim failures (bad handle, NULL
//! arrays or keys, NULL buffers with a non-zero size, a malformed config, a panic),
//! -600 when the handle is not set up, otherwise upstream's codes. Batch functions
//! return 0 and write one result per key.
//!
//! A config is a JSON object with the fields of upstream's Python `ReplicateConfig`,
//! each optional: `replica_num` (1), `soft_pin_action` (0 PRESERVE, 1 ENABLE,
//! 2 DISABLE), `soft_pin_ttl_ms` (null: the master's default), `with_hard_pin`,
//! `preferred_segments`, `preferred_segment`, `prefer_alloc_in_same_node`,
//! `group_ids` (null, or one group id per key), `nof_replica_num`,
//! `dfs_replica_num`, `preferred_nof_segments`, `data_type`; the legacy
//! `with_soft_pin` (true means ENABLE) is accepted too. Unknown fields are ignored.
//! NULL means upstream's defaults.

mod buffers;
pub mod clear;
pub mod dummy;
pub mod ranges;
mod support;

use super::boundary::{c_slice, c_str_or, ffi_boundary, invalid, FfiError};
use super::handles;
use super::store::support::{
    client, code, items_arg, key_arg, keys_arg, rc, rc64, setup_engine_handle, setup_handle,
};
use super::store::{mooncake_store_t, setup_config};
use super::te_types::transfer_engine_t;
use crate::store::api::batch_get_alloc;
use crate::store::{
    ErrorCode, Pieces, ReadTarget, ReplicateConfig, SetupConfig, StoreApi, WriteMode,
};
use serde_json::{json, Value};
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;
use support::*;

/// Puts or upserts one object from caller memory (zero-copy); shared by the
/// single-key functions.
///
/// # Safety
/// `len` bytes at `addr` readable for the call.
unsafe fn write_one(
    c: &dyn StoreApi,
    mode: WriteMode,
    key: &str,
    addr: u64,
    len: u64,
    cfg: &ReplicateConfig,
) -> Result<(), ErrorCode> {
    if len == 0 {
        // Upstream: an empty zero-copy write succeeds and stores nothing.
        log::warn!("store: writing '{key}' with no data; nothing stored");
        return Ok(());
    }
    // SAFETY: forwarded contract.
    let mut r = unsafe { c.batch_write_raw(mode, &[key], &[vec![(addr, len)]], cfg) };
    r.pop().unwrap_or(Err(ErrorCode::INTERNAL_ERROR))
}

/// `mooncake_store_put` with upstream's full `ReplicateConfig` as JSON (see the
/// module notes; NULL means defaults). The value is copied into the local buffer:
/// -600 when `size` is 0 or larger than the free local buffer; an existing key is
/// a success that keeps the old value. -1 for a malformed config.
///
/// # Safety
/// `key` and `config_json` NULL or NUL-terminated; `value` NULL or `size` readable
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_put_with_config(
    store: mooncake_store_t,
    key: *const c_char,
    value: *const c_void,
    size: usize,
    config_json: *const c_char,
) -> c_int {
    ffi_boundary!("mooncake_store_put_with_config", fail = -1, {
        let h = client(store)?;
        // SAFETY: per the contract.
        let (key, value, cfg) = unsafe {
            (
                key_arg(key)?,
                c_slice(value.cast::<u8>(), size, "value")?,
                config_arg(config_json)?,
            )
        };
        let Some(c) = h else {
            return Ok(code(
                "mooncake_store_put_with_config",
                ErrorCode::INVALID_PARAMS,
            ));
        };
        Ok(rc(
            "mooncake_store_put_with_config",
            c.put(&key, value, &cfg),
        ))
    })
}

/// Stores `value` under `key`, replacing an existing object (in place when the
/// size is unchanged); copied through the local buffer like `mooncake_store_put`.
/// Returns 0, -600 when `size` is 0 or larger than the free local buffer, or
/// upstream's codes (-200 no space, -800 transfer failure, ...).
///
/// # Safety
/// As for `mooncake_store_put_with_config`.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_upsert(
    store: mooncake_store_t,
    key: *const c_char,
    value: *const c_void,
    size: usize,
    config_json: *const c_char,
) -> c_int {
    ffi_boundary!("mooncake_store_upsert", fail = -1, {
        let h = client(store)?;
        // SAFETY: per the contract.
        let (key, value, cfg) = unsafe {
            (
                key_arg(key)?,
                c_slice(value.cast::<u8>(), size, "value")?,
                config_arg(config_json)?,
            )
        };
        let Some(c) = h else {
            return Ok(code("mooncake_store_upsert", ErrorCode::INVALID_PARAMS));
        };
        Ok(rc("mooncake_store_upsert", c.upsert(&key, value, &cfg)))
    })
}

/// `mooncake_store_put_from` with a JSON config. `size == 0` returns 0 without
/// storing anything.
///
/// # Safety
/// `key` and `config_json` NULL or NUL-terminated; `buffer` NULL or `size`
/// readable bytes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_put_from_with_config(
    store: mooncake_store_t,
    key: *const c_char,
    buffer: *const c_void,
    size: usize,
    config_json: *const c_char,
) -> c_int {
    ffi_boundary!("mooncake_store_put_from_with_config", fail = -1, {
        single_write(
            "mooncake_store_put_from_with_config",
            WriteMode::Put,
            store,
            key,
            buffer,
            size,
            config_json,
        )
    })
}

/// Zero-copy upsert of `size` bytes at `buffer` under `key`. `size == 0` returns 0
/// without storing anything (as upstream).
///
/// # Safety
/// As for `mooncake_store_put_from_with_config`.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_upsert_from(
    store: mooncake_store_t,
    key: *const c_char,
    buffer: *const c_void,
    size: usize,
    config_json: *const c_char,
) -> c_int {
    ffi_boundary!("mooncake_store_upsert_from", fail = -1, {
        single_write(
            "mooncake_store_upsert_from",
            WriteMode::Upsert,
            store,
            key,
            buffer,
            size,
            config_json,
        )
    })
}

/// Body of the single-key zero-copy writes.
///
/// # Safety
/// As for `mooncake_store_put_from_with_config`.
unsafe fn single_write(
    function: &str,
    mode: WriteMode,
    store: mooncake_store_t,
    key: *const c_char,
    buffer: *const c_void,
    size: usize,
    config_json: *const c_char,
) -> Result<c_int, FfiError> {
    let h = client(store)?;
    // SAFETY: per the caller's contract.
    let (key, cfg) = unsafe { (key_arg(key)?, config_arg(config_json)?) };
    if buffer.is_null() && size > 0 {
        return Err(invalid("buffer is NULL with a non-zero size"));
    }
    let Some(c) = h else {
        return Ok(code(function, ErrorCode::INVALID_PARAMS));
    };
    // SAFETY: `size` readable bytes at `buffer` per the contract.
    let r = unsafe { write_one(&*c, mode, &key, buffer as u64, size as u64, &cfg) };
    Ok(rc(function, r))
}

/// Body of the batch zero-copy writes over `Pieces`.
fn batch_write(
    function: &str,
    h: Option<Arc<dyn StoreApi>>,
    mode: WriteMode,
    keys: &[String],
    items: &[Pieces],
    cfg: &ReplicateConfig,
) -> Vec<c_int> {
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let results = match h {
        // SAFETY: the callers' contracts make every piece readable for the call.
        Some(c) => unsafe { c.batch_write_raw(mode, &refs, items, cfg) },
        None => not_set_up(function, keys.len()),
    };
    results.into_iter().map(code_of).collect()
}

/// `mooncake_store_batch_put_from` with a JSON config (whose `group_ids`, when
/// given, holds one group id per key). Per key 0 or an error code in
/// `results_out` (existing keys: 0; size 0: -600); returns 0, or -1 (writing
/// nothing) for a bad handle, a NULL array or key, a NULL buffer with a non-zero
/// size, or a malformed config.
///
/// # Safety
/// Non-NULL arrays must hold `count` entries; keys and `config_json`
/// NUL-terminated; buffers readable for their sizes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_put_from_with_config(
    store: mooncake_store_t,
    keys: *const *const c_char,
    buffers: *const *mut c_void,
    sizes: *const usize,
    count: usize,
    config_json: *const c_char,
    results_out: *mut c_int,
) -> c_int {
    ffi_boundary!("mooncake_store_batch_put_from_with_config", fail = -1, {
        // SAFETY: per the contract.
        unsafe {
            batch_single(
                "mooncake_store_batch_put_from_with_config",
                WriteMode::Put,
                store,
                keys,
                buffers,
                sizes,
                count,
                config_json,
                results_out,
            )
        }
    })
}

/// Zero-copy upserts of `count` objects; results as for
/// `mooncake_store_batch_put_from_with_config` (existing keys are replaced).
///
/// # Safety
/// As for `mooncake_store_batch_put_from_with_config`.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_upsert_from(
    store: mooncake_store_t,
    keys: *const *const c_char,
    buffers: *const *mut c_void,
    sizes: *const usize,
    count: usize,
    config_json: *const c_char,
    results_out: *mut c_int,
) -> c_int {
    ffi_boundary!("mooncake_store_batch_upsert_from", fail = -1, {
        // SAFETY: per the contract.
        unsafe {
            batch_single(
                "mooncake_store_batch_upsert_from",
                WriteMode::Upsert,
                store,
                keys,
                buffers,
                sizes,
                count,
                config_json,
                results_out,
            )
        }
    })
}

/// Body of the one-buffer-per-key batch writes.
///
/// # Safety
/// As for `mooncake_store_batch_put_from_with_config`.
#[allow(clippy::too_many_arguments)]
unsafe fn batch_single(
    function: &str,
    mode: WriteMode,
    store: mooncake_store_t,
    keys: *const *const c_char,
    buffers: *const *mut c_void,
    sizes: *const usize,
    count: usize,
    config_json: *const c_char,
    results_out: *mut c_int,
) -> Result<c_int, FfiError> {
    let h = client(store)?;
    if results_out.is_null() {
        return Err(invalid("results_out is NULL"));
    }
    // SAFETY: per the caller's contract.
    let (keys, items, cfg) = unsafe {
        (
            keys_arg(keys, count)?,
            items_arg(buffers, sizes, count)?,
            config_arg(config_json)?,
        )
    };
    let items: Vec<Pieces> = items.into_iter().map(|p| vec![p]).collect();
    let results = batch_write(function, h, mode, &keys, &items, &cfg);
    // SAFETY: results_out holds `count` entries.
    unsafe { write_out(results_out, count, results) };
    Ok(0)
}

/// Zero-copy puts of `count` objects, object `i` being the concatenation of the next
/// `buffer_counts[i]` entries of `buffers`/`sizes` (flattened, in key order). Per key
/// 0 or an error code in `results_out` (existing keys: 0; no bytes: -600); returns
/// 0, or -1 (writing nothing) for a bad handle, NULL arrays or keys, a NULL buffer
/// with a non-zero size, or a malformed config.
///
/// # Safety
/// `keys`, `buffer_counts` and `results_out` hold `count` entries, `buffers` and
/// `sizes` the sum of `buffer_counts`; keys and `config_json` NUL-terminated;
/// buffers readable for their sizes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_put_from_multi_buffers(
    store: mooncake_store_t,
    keys: *const *const c_char,
    buffers: *const *mut c_void,
    sizes: *const usize,
    buffer_counts: *const usize,
    count: usize,
    config_json: *const c_char,
    results_out: *mut c_int,
) -> c_int {
    ffi_boundary!("mooncake_store_batch_put_from_multi_buffers", fail = -1, {
        let h = client(store)?;
        if results_out.is_null() {
            return Err(invalid("results_out is NULL"));
        }
        // SAFETY: per the contract.
        let (keys, items, cfg) = unsafe {
            (
                keys_arg(keys, count)?,
                multi_items_arg(buffers, sizes, buffer_counts, count)?,
                config_arg(config_json)?,
            )
        };
        let results = batch_write(
            "mooncake_store_batch_put_from_multi_buffers",
            h,
            WriteMode::Put,
            &keys,
            &items,
            &cfg,
        );
        // SAFETY: results_out holds `count` entries.
        unsafe { write_out(results_out, count, results) };
        Ok(0)
    })
}

/// Reads `count` objects, object `i` scattered in order over the next
/// `buffer_counts[i]` entries of `buffers`/`sizes` (capacities). Per key in
/// `results_out`: the object's size, -600 when the buffers hold fewer bytes than the
/// object, -704 missing, -707 lease expired during the read, -800 transfer failure.
/// `prefer_alloc_in_same_node` is accepted for upstream compatibility and has no
/// effect on reads. Returns 0, or -1 (writing nothing) as for the multi-buffer put.
///
/// # Safety
/// As for `mooncake_store_batch_put_from_multi_buffers`, with buffers writable and
/// distinct.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_get_into_multi_buffers(
    store: mooncake_store_t,
    keys: *const *const c_char,
    buffers: *const *mut c_void,
    sizes: *const usize,
    buffer_counts: *const usize,
    count: usize,
    prefer_alloc_in_same_node: c_int,
    results_out: *mut i64,
) -> c_int {
    ffi_boundary!("mooncake_store_batch_get_into_multi_buffers", fail = -1, {
        let _ = prefer_alloc_in_same_node;
        let h = client(store)?;
        if results_out.is_null() {
            return Err(invalid("results_out is NULL"));
        }
        // SAFETY: per the contract.
        let (keys, items) = unsafe {
            (
                keys_arg(keys, count)?,
                multi_items_arg(buffers, sizes, buffer_counts, count)?,
            )
        };
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let results = match h {
            // SAFETY: every piece is writable per the contract.
            Some(c) => unsafe { c.batch_get_into_multi_raw(&refs, &items) },
            None => not_set_up("mooncake_store_batch_get_into_multi_buffers", count),
        };
        // SAFETY: results_out holds `count` entries.
        unsafe { write_out(results_out, count, results.into_iter().map(size_or_code)) };
        Ok(0)
    })
}

impl ReadTarget for buffers::Buffer {
    fn addr(&mut self) -> u64 {
        buffers::Buffer::addr(self)
    }
}

/// Reads whole objects into memory the library allocates (one master call, one
/// transfer batch). Per key: `results_out[i]` is the object's size and
/// `buffers_out[i]` its bytes (release with `mooncake_store_free_buffer`), or
/// `results_out[i]` is an error code (-704 missing, -703 not complete, -707 lease
/// expired, -800 transfer failure) and `buffers_out[i]` NULL. Returns 0, or -1
/// (writing nothing) for a bad handle or NULL arrays or keys.
///
/// # Safety
/// `keys`, `buffers_out` and `results_out` hold `count` entries; keys
/// NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_get_buffers(
    store: mooncake_store_t,
    keys: *const *const c_char,
    count: usize,
    buffers_out: *mut *mut c_void,
    results_out: *mut i64,
) -> c_int {
    ffi_boundary!("mooncake_store_batch_get_buffers", fail = -1, {
        let h = client(store)?;
        if results_out.is_null() || buffers_out.is_null() {
            return Err(invalid("results_out or buffers_out is NULL"));
        }
        // SAFETY: per the contract.
        let keys = unsafe { keys_arg(keys, count) }?;
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let alloc = |n: u64| buffers::Buffer::new(usize::try_from(n).ok()?);
        let results = match h {
            // SAFETY: a Buffer is writable for the size it was allocated with.
            Some(c) => unsafe { batch_get_alloc(&*c, &refs, alloc) },
            None => {
                code(
                    "mooncake_store_batch_get_buffers",
                    ErrorCode::INVALID_PARAMS,
                );
                (0..count).map(|_| Err(ErrorCode::INVALID_PARAMS)).collect()
            }
        };
        for (i, r) in results.into_iter().enumerate().take(count) {
            let (ptr, res) = match r {
                Ok((target, n)) => (target.into_raw(), n as i64),
                Err(e) => (std::ptr::null_mut(), i64::from(e.0)),
            };
            // SAFETY: both arrays hold `count` entries.
            unsafe {
                *buffers_out.add(i) = ptr;
                *results_out.add(i) = res;
            }
        }
        Ok(0)
    })
}

/// The allocator of [`mooncake_store_get_with_allocator`]: given its `ctx` and the
/// object's size, returns that many writable bytes (valid until the call returns), or
/// NULL to skip the read.
#[allow(non_camel_case_types)]
pub type mooncake_store_alloc_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, size: u64) -> *mut c_void>;

/// Memory the caller's allocator provided.
struct CallerMemory(*mut c_void);

impl ReadTarget for CallerMemory {
    fn addr(&mut self) -> u64 {
        self.0 as u64
    }
}

/// Reads the whole object `key` into memory from the caller's allocator, with one
/// master call and no copy: `alloc(ctx, size)` is called once, on the calling thread,
/// when the object's size is known and before any byte moves. Returns the object's
/// size, or an error code: -704 missing, -703 not complete, -707 lease expired during
/// the read, -800 transfer failure, -600 before setup or when `alloc` returned NULL;
/// -1 for a bad handle, a NULL key or a NULL allocator.
///
/// # Safety
/// `key` is NUL-terminated; `alloc` returns NULL or `size` bytes writable until this
/// call returns, and does not unwind.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_get_with_allocator(
    store: mooncake_store_t,
    key: *const c_char,
    alloc: mooncake_store_alloc_fn,
    ctx: *mut c_void,
) -> i64 {
    ffi_boundary!("mooncake_store_get_with_allocator", fail = -1, {
        let h = client(store)?;
        // SAFETY: per the contract.
        let key = unsafe { key_arg(key) }?;
        let Some(alloc) = alloc else {
            return Err(invalid("alloc is NULL"));
        };
        let Some(c) = h else {
            return Ok(i64::from(code(
                "mooncake_store_get_with_allocator",
                ErrorCode::INVALID_PARAMS,
            )));
        };
        let provide = |n: u64| {
            // SAFETY: the caller's allocator, per the contract.
            let p = unsafe { alloc(ctx, n) };
            (!p.is_null()).then_some(CallerMemory(p))
        };
        // SAFETY: the allocator's memory is writable for the size it was asked for.
        let result = unsafe { batch_get_alloc(&*c, &[key.as_str()], provide) }
            .pop()
            .unwrap_or(Err(ErrorCode::INTERNAL_ERROR));
        Ok(rc64(
            "mooncake_store_get_with_allocator",
            result.map(|(_, n)| n),
        ))
    })
}

/// Frees a buffer from `mooncake_store_batch_get_buffers`; NULL is ignored. A buffer
/// freed a second time is detected (while its memory is still ours) and ignored, with
/// the thread's last error set.
///
/// # Safety
/// `buffer` must be NULL or a buffer from `mooncake_store_batch_get_buffers` not yet
/// freed.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_free_buffer(buffer: *mut c_void) {
    ffi_boundary!("mooncake_store_free_buffer", fail = (), {
        // SAFETY: per the contract, NULL or a buffer from batch_get_buffers.
        if unsafe { buffers::release(buffer) } {
            Ok(())
        } else {
            Err(invalid("buffer was already freed"))
        }
    })
}

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
    ffi_boundary!("mooncake_store_batch_remove", fail = -1, {
        let h = client(store)?;
        if results_out.is_null() {
            return Err(invalid("results_out is NULL"));
        }
        // SAFETY: per the contract.
        let keys = unsafe { keys_arg(keys, count) }?;
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let results = match h {
            Some(c) => c.batch_remove(&refs, force != 0),
            None => not_set_up("mooncake_store_batch_remove", count),
        };
        // SAFETY: results_out holds `count` entries.
        unsafe { write_out(results_out, count, results.into_iter().map(code_of)) };
        Ok(0)
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
    ffi_boundary!("mooncake_store_batch_get_size", fail = -1, {
        let h = client(store)?;
        if results_out.is_null() {
            return Err(invalid("results_out is NULL"));
        }
        // SAFETY: per the contract.
        let keys = unsafe { keys_arg(keys, count) }?;
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let results = match h {
            Some(c) => c.batch_get_size(&refs),
            None => not_set_up("mooncake_store_batch_get_size", count),
        };
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
    ffi_boundary!("mooncake_store_get_replica_desc", fail = -1, {
        let h = client(store)?;
        // SAFETY: per the contract.
        let key = unsafe { key_arg(key) }?;
        let Some(c) = h else {
            return Ok(i64::from(code(
                "mooncake_store_get_replica_desc",
                ErrorCode::INVALID_PARAMS,
            )));
        };
        match c.get_replica_desc(&key) {
            Ok(v) => {
                let text = Value::Array(v.iter().map(replica_json).collect()).to_string();
                // SAFETY: per the contract.
                unsafe { emit(buf_out, buf_len, &text) }
            }
            Err(e) => Ok(rc64("mooncake_store_get_replica_desc", Err(e))),
        }
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
    ffi_boundary!("mooncake_store_batch_get_replica_desc", fail = -1, {
        let h = client(store)?;
        // SAFETY: per the contract.
        let keys = unsafe { keys_arg(keys, count) }?;
        let Some(c) = h else {
            return Ok(i64::from(code(
                "mooncake_store_batch_get_replica_desc",
                ErrorCode::INVALID_PARAMS,
            )));
        };
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let entries: Vec<Value> = c
            .batch_get_replica_desc(&refs)
            .into_iter()
            .map(|r| match r {
                Ok(v) => Value::Array(v.iter().map(replica_json).collect()),
                Err(e) => json!(e.0),
            })
            .collect();
        let text = Value::Array(entries).to_string();
        // SAFETY: per the contract.
        unsafe { emit(buf_out, buf_len, &text) }
    })
}

/// `mooncake_store_setup` with upstream's `enable_ssd_offload` and `ssd_offload_path`
/// (Python `setup(..., enable_ssd_offload=True, ssd_offload_path=...)`): the client
/// also keeps the objects the master offloads on its local disk, in
/// `ssd_offload_path` (NULL or empty: `MOONCAKE_OFFLOAD_FILE_STORAGE_PATH`, default
/// `/data/file_storage`), and serves them to readers; the other `MOONCAKE_OFFLOAD_*`
/// variables as upstream. Returns as `mooncake_store_setup`; besides, -600 when the
/// directory is unusable (not absolute, missing, a symlink) and the master's code when
/// it does not offload (-1300 without `--enable_offload`).
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
) -> c_int {
    ffi_boundary!("mooncake_store_setup_with_offload", fail = -1, {
        // SAFETY: every string is NULL or NUL-terminated.
        let cfg = unsafe {
            offload_setup_config(
                local_hostname,
                metadata_server,
                global_segment_size,
                local_buffer_size,
                protocol,
                device_name,
                master_server_addr,
                enable_ssd_offload,
                ssd_offload_path,
            )
        };
        setup_handle("mooncake_store_setup_with_offload", store, &cfg)
    })
}

/// The setup of `mooncake_store_setup`'s arguments plus the SSD-offload pair.
///
/// # Safety
/// The strings must be NULL or NUL-terminated.
#[allow(clippy::too_many_arguments)]
unsafe fn offload_setup_config(
    local_hostname: *const c_char,
    metadata_server: *const c_char,
    global_segment_size: u64,
    local_buffer_size: u64,
    protocol: *const c_char,
    device_name: *const c_char,
    master_server_addr: *const c_char,
    enable_ssd_offload: bool,
    ssd_offload_path: *const c_char,
) -> SetupConfig {
    // SAFETY: the caller's strings are NULL or NUL-terminated.
    unsafe {
        SetupConfig {
            enable_ssd_offload,
            ssd_offload_path: c_str_or(ssd_offload_path, "").into_owned(),
            ..setup_config(
                local_hostname,
                metadata_server,
                global_segment_size,
                local_buffer_size,
                protocol,
                device_name,
                master_server_addr,
            )
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
/// Returns as `mooncake_store_setup_with_offload`; -1 for a bad engine handle.
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
) -> c_int {
    ffi_boundary!("mooncake_store_setup_on_engine", fail = -1, {
        let engine = handles::get(engine)?;
        // SAFETY: every string is NULL or NUL-terminated.
        let cfg = unsafe {
            offload_setup_config(
                local_hostname,
                metadata_server,
                global_segment_size,
                local_buffer_size,
                protocol,
                device_name,
                master_server_addr,
                enable_ssd_offload,
                ssd_offload_path,
            )
        };
        setup_engine_handle("mooncake_store_setup_on_engine", store, &cfg, engine)
    })
}
