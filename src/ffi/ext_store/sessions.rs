//! Put and get sessions (upstream's Python `batch_put_session_*`,
//! `batch_get_session_*`, `batch_*_multi_buffer_ranges`; see `store::ops::sessions`).
//! A ranged call's fragments are flattened: key `i` has `fragment_counts[i]`
//! consecutive entries of `ptrs`, `sizes` and `offsets`.

use super::support::config_arg;
use crate::ffi::args::c_slice;
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::fail::invalid;
use crate::ffi::store::keys::KeyBatch;
use crate::ffi::store::mooncake_store_t;
use crate::ffi::store::results::write_out;
use crate::store::{ErrorCode, Fragments};
use std::ffi::{c_char, c_int};

/// -600 for every key (the store is not set up).
fn not_set_up(n: usize) -> Vec<c_int> {
    vec![ErrorCode::INVALID_PARAMS.0; n]
}

/// Starts put sessions: one `BatchPutStart` reserving `sizes[i]` bytes for each key
/// under `config` (JSON as for the put extensions; NULL for the defaults); per key 0,
/// -600 (a session already, mismatched groups), the master's code, or -702 (no memory
/// replica). Returns 0, or -1 for a bad handle, NULL arrays or a bad config.
///
/// # Safety
/// `keys`, `sizes` and `results_out` hold `count` entries; keys and `config`
/// NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_put_session_start(
    store: mooncake_store_t,
    keys: *const *const c_char,
    count: usize,
    sizes: *const u64,
    config: *const c_char,
    results_out: *mut c_int,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let batch = unsafe { KeyBatch::read(store, keys, count, results_out, "results_out") }?;
        // SAFETY: per the contract.
        let (sizes, config) = unsafe { (c_slice(sizes, count, "sizes")?, config_arg(config)?) };
        let results = batch
            .with_client(|c, keys| c.put_session_start(keys, sizes, &config))
            .unwrap_or_else(|| not_set_up(count));
        // SAFETY: `count` entries per the contract.
        unsafe { write_out(results_out, count, results) };
        Ok(0)
    })
}

/// The fragments of `count` keys from the flattened arrays.
///
/// # Safety
/// `fragment_counts` holds `count` entries; `ptrs`, `sizes` and `offsets` hold their
/// sum.
unsafe fn fragments(
    count: usize,
    fragment_counts: *const usize,
    ptrs: *const u64,
    sizes: *const u64,
    offsets: *const u64,
) -> Result<Vec<Fragments>, crate::ffi::fail::FfiError> {
    // SAFETY: per the contract.
    let counts = unsafe { c_slice(fragment_counts, count, "fragment_counts") }?;
    let total = counts
        .iter()
        .try_fold(0usize, |a, &n| a.checked_add(n))
        .ok_or_else(|| invalid("fragment_counts overflow"))?;
    // SAFETY: per the contract.
    let (p, z, o) = unsafe {
        (
            c_slice(ptrs, total, "ptrs")?,
            c_slice(sizes, total, "sizes")?,
            c_slice(offsets, total, "offsets")?,
        )
    };
    let mut at = 0;
    Ok(counts
        .iter()
        .map(|&n| {
            let f = (at..at + n).map(|j| (p[j], z[j], o[j])).collect();
            at += n;
            f
        })
        .collect())
}

/// Writes each key's fragments (`sizes[j]` bytes at `ptrs[j]` to offset
/// `offsets[j]` of the object) into every memory replica of its put session; per key
/// the bytes written, -600 (no writable session, a fragment outside the object), -702
/// (no fragment), -800. Returns 0, or -1 for a bad handle or NULL arrays.
///
/// # Safety
/// `keys`, `fragment_counts` and `results_out` hold `count` entries; `ptrs`, `sizes`,
/// `offsets` the sum of the counts; every fragment readable for its size.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_put_from_multi_buffer_ranges(
    store: mooncake_store_t,
    keys: *const *const c_char,
    count: usize,
    fragment_counts: *const usize,
    ptrs: *const u64,
    sizes: *const u64,
    offsets: *const u64,
    results_out: *mut i64,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let batch = unsafe { KeyBatch::read(store, keys, count, results_out, "results_out") }?;
        // SAFETY: per the contract.
        let frags = unsafe { fragments(count, fragment_counts, ptrs, sizes, offsets) }?;
        let results = batch
            // SAFETY: every fragment is readable per the contract.
            .with_client(|c, keys| unsafe { c.put_ranges(keys, &frags) })
            .unwrap_or_else(|| vec![i64::from(ErrorCode::INVALID_PARAMS.0); count]);
        // SAFETY: `count` entries per the contract.
        unsafe { write_out(results_out, count, results) };
        Ok(0)
    })
}

/// Reads each key's fragments (`sizes[j]` bytes at offset `offsets[j]` of the object
/// to `ptrs[j]`) from its get session's replica; per key the bytes read, -600 (no
/// session, a fragment outside the object), -707 (the lease ran out; the session
/// ends), -800. Returns 0, or -1 for a bad handle or NULL arrays.
///
/// # Safety
/// As `mooncake_store_batch_put_from_multi_buffer_ranges`, every fragment writable.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_get_into_multi_buffer_ranges(
    store: mooncake_store_t,
    keys: *const *const c_char,
    count: usize,
    fragment_counts: *const usize,
    ptrs: *const u64,
    sizes: *const u64,
    offsets: *const u64,
    results_out: *mut i64,
) -> c_int {
    ffi_boundary!({
        // SAFETY: per the contract.
        let batch = unsafe { KeyBatch::read(store, keys, count, results_out, "results_out") }?;
        // SAFETY: per the contract.
        let frags = unsafe { fragments(count, fragment_counts, ptrs, sizes, offsets) }?;
        let results = batch
            // SAFETY: every fragment is writable per the contract.
            .with_client(|c, keys| unsafe { c.get_ranges(keys, &frags) })
            .unwrap_or_else(|| vec![i64::from(ErrorCode::INVALID_PARAMS.0); count]);
        // SAFETY: `count` entries per the contract.
        unsafe { write_out(results_out, count, results) };
        Ok(0)
    })
}

/// Which session call of one key list.
#[derive(Clone, Copy)]
enum KeysCall {
    PutEnd,
    PutRevoke,
    GetStart,
}

/// A session call over `count` keys writing one code per key.
///
/// # Safety
/// `keys` and `results_out` hold `count` entries; keys NUL-terminated.
unsafe fn keys_call(
    store: mooncake_store_t,
    keys: *const *const c_char,
    count: usize,
    results_out: *mut c_int,
    call: KeysCall,
) -> Result<c_int, crate::ffi::fail::FfiError> {
    // SAFETY: per the contract.
    let batch = unsafe { KeyBatch::read(store, keys, count, results_out, "results_out") }?;
    let results = batch
        .with_client(|c, keys| match call {
            KeysCall::PutEnd => c.put_session_end(keys),
            KeysCall::PutRevoke => c.put_session_revoke(keys),
            KeysCall::GetStart => c.get_session_start(keys),
        })
        .unwrap_or_else(|| not_set_up(count));
    // SAFETY: `count` entries per the contract.
    unsafe { write_out(results_out, count, results) };
    Ok(0)
}

/// Ends put sessions: waits for their ranged puts, then one `BatchPutEnd` (memory
/// replicas); per key 0, -600 without a session, or the master's code (the session
/// stays for another end or a revoke). Returns 0, or -1 for a bad handle or NULLs.
///
/// # Safety
/// `keys` and `results_out` hold `count` entries; keys NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_put_session_end(
    store: mooncake_store_t,
    keys: *const *const c_char,
    count: usize,
    results_out: *mut c_int,
) -> c_int {
    // SAFETY: forwarded contract.
    ffi_boundary!({ unsafe { keys_call(store, keys, count, results_out, KeysCall::PutEnd) } })
}

/// Revokes put sessions (one `BatchPutRevoke`); per key 0 (also when the master no
/// longer has the object), -600 without a session, or the master's code. Returns 0,
/// or -1 for a bad handle or NULLs.
///
/// # Safety
/// As `mooncake_store_batch_put_session_end`.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_put_session_revoke(
    store: mooncake_store_t,
    keys: *const *const c_char,
    count: usize,
    results_out: *mut c_int,
) -> c_int {
    // SAFETY: forwarded contract.
    ffi_boundary!({ unsafe { keys_call(store, keys, count, results_out, KeysCall::PutRevoke) } })
}

/// Starts get sessions (one `BatchGetReplicaList`, which grants read leases); per
/// key 0, the master's code, -707 (the lease ran out already), -702 (no complete
/// memory replica). Returns 0, or -1 for a bad handle or NULLs.
///
/// # Safety
/// As `mooncake_store_batch_put_session_end`.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_get_session_start(
    store: mooncake_store_t,
    keys: *const *const c_char,
    count: usize,
    results_out: *mut c_int,
) -> c_int {
    // SAFETY: forwarded contract.
    ffi_boundary!({ unsafe { keys_call(store, keys, count, results_out, KeysCall::GetStart) } })
}

/// Ends get sessions (nothing at the master). Returns 0; -600 for a store not set up
/// or a dummy client; -1 for a bad handle or NULL keys.
///
/// # Safety
/// `keys` holds `count` NUL-terminated entries.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_get_session_end(
    store: mooncake_store_t,
    keys: *const *const c_char,
    count: usize,
) -> c_int {
    ffi_boundary!({
        let mut unused = [0 as c_int; 1];
        // SAFETY: per the contract (the results array is never written).
        let batch = unsafe { KeyBatch::read(store, keys, count, unused.as_mut_ptr(), "results") }?;
        Ok(batch
            .with_client(|c, keys| c.get_session_end(keys))
            .unwrap_or(ErrorCode::INVALID_PARAMS.0))
    })
}
