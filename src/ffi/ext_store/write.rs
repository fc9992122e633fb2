//! Writes with upstream's full `ReplicateConfig`: puts and upserts of one object,
//! batches of one buffer per key, and batches of objects scattered over several
//! buffers.

use super::support::{config_arg, multi_items_arg};
use crate::ffi::boundary::{ffi_boundary, FnName};
use crate::ffi::fail::{invalid, FfiError};
use crate::ffi::store::args::items_arg;
use crate::ffi::store::keys::{write_copy, KeyBatch, KeyCall};
use crate::ffi::store::mooncake_store_t;
use crate::ffi::store::results::{code_of, write_out};
use crate::store::api::write_piece;
use crate::store::{BatchWrite, Pieces, ReplicateConfig, WriteMode};
use std::ffi::{c_char, c_int, c_void};

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
    ffi_boundary!({
        // SAFETY: `config_json` is NULL or NUL-terminated per the contract.
        let config = || unsafe { config_arg(config_json) };
        // SAFETY: per the contract.
        unsafe { write_copy(WriteMode::Put, store, key, value, size, config) }
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
    ffi_boundary!({
        // SAFETY: `config_json` is NULL or NUL-terminated per the contract.
        let config = || unsafe { config_arg(config_json) };
        // SAFETY: per the contract.
        unsafe { write_copy(WriteMode::Upsert, store, key, value, size, config) }
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
    ffi_boundary!({
        // SAFETY: forwarded contract: the caller guarantees `key`, `buffer`/`size` and
        // `config_json` as `single_write` requires (the same contract as this function).
        unsafe { single_write(WriteMode::Put, store, key, buffer, size, config_json) }
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
    ffi_boundary!({
        // SAFETY: forwarded contract: the caller guarantees `key`, `buffer`/`size` and
        // `config_json` as `single_write` requires (the same contract as this function).
        unsafe { single_write(WriteMode::Upsert, store, key, buffer, size, config_json) }
    })
}

/// Body of the single-key zero-copy writes.
///
/// # Safety
/// As for `mooncake_store_put_from_with_config`.
unsafe fn single_write(
    mode: WriteMode,
    store: mooncake_store_t,
    key: *const c_char,
    buffer: *const c_void,
    size: usize,
    config_json: *const c_char,
) -> Result<c_int, FfiError> {
    // SAFETY: per the caller's contract.
    let (call, cfg) = unsafe { (KeyCall::read(store, key)?, config_arg(config_json)?) };
    if buffer.is_null() && size > 0 {
        return Err(invalid("buffer is NULL with a non-zero size"));
    }
    let c = call.client()?;
    if size == 0 {
        // Upstream: an empty zero-copy write succeeds and stores nothing.
        log::warn!(
            "store: writing '{}' with no data; nothing stored",
            call.key()
        );
        return Ok(0);
    }
    // SAFETY: `size` readable bytes at `buffer` per the contract.
    unsafe { write_piece(c, mode, call.key(), (buffer as u64, size as u64), &cfg) }?;
    Ok(0)
}

/// Body of the batch zero-copy writes over `Pieces`.
fn batch_write(
    function: FnName,
    batch: &KeyBatch,
    mode: WriteMode,
    items: &[Pieces],
    cfg: &ReplicateConfig,
) -> Vec<c_int> {
    let results = batch.results(Some(function), |c, keys| {
        // SAFETY: the callers' contracts make every piece readable for the call.
        unsafe {
            c.batch_write_raw(BatchWrite {
                mode,
                keys,
                items,
                config: cfg,
            })
        }
    });
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
    ffi_boundary!(name = function, {
        // SAFETY: per the contract.
        unsafe {
            batch_single(
                function,
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
    ffi_boundary!(name = function, {
        // SAFETY: per the contract.
        unsafe {
            batch_single(
                function,
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
    function: FnName,
    mode: WriteMode,
    store: mooncake_store_t,
    keys: *const *const c_char,
    buffers: *const *mut c_void,
    sizes: *const usize,
    count: usize,
    config_json: *const c_char,
    results_out: *mut c_int,
) -> Result<c_int, FfiError> {
    // SAFETY: per the caller's contract.
    let (batch, items, cfg) = unsafe {
        (
            KeyBatch::read(store, keys, count, results_out, "results_out")?,
            items_arg(buffers, sizes, count)?,
            config_arg(config_json)?,
        )
    };
    let items: Vec<Pieces> = items.into_iter().map(|p| vec![p]).collect();
    let results = batch_write(function, &batch, mode, &items, &cfg);
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
    ffi_boundary!(name = function, {
        // SAFETY: per the contract.
        let (batch, items, cfg) = unsafe {
            (
                KeyBatch::read(store, keys, count, results_out, "results_out")?,
                multi_items_arg(buffers, sizes, buffer_counts, count)?,
                config_arg(config_json)?,
            )
        };
        let results = batch_write(function, &batch, WriteMode::Put, &items, &cfg);
        // SAFETY: results_out holds `count` entries.
        unsafe { write_out(results_out, count, results) };
        Ok(0)
    })
}
