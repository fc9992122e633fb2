//! What the metadata holds, as JSON: the objects, and the nodes holding copies.

use super::handle::{emit, node};
use super::mooncake_p2p_t;
use crate::ffi::args::c_str_or;
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::fail::FfiError;
use crate::p2p::{P2pResult, P2pStore};
use serde_json::{json, Value};
use std::ffi::c_char;

/// The objects whose names start with `prefix` (NULL: every object), as a JSON array
/// of `{"name": str, "size": n, "max_shard_size": n, "size_list": [n, ...],
/// "holders": [node, ...]}` (upstream Go's `List`; `size_list` the sizes of the
/// buffers it was registered from, `holders` the nodes holding a copy of any shard,
/// sorted), written snprintf-style into `buf`: at most `len - 1` bytes and a NUL.
/// Returns the JSON's full length (call again with a larger buffer when it is not
/// below `len`; NULL `buf` with `len` 0 only asks for the length); -1 for a bad
/// handle or NULL `buf` with a non-zero `len`; `MOONCAKE_P2P_CORRUPT`,
/// `MOONCAKE_P2P_METADATA`, `MOONCAKE_P2P_CLOSED`.
///
/// # Safety
/// `prefix` NULL or NUL-terminated; `buf` NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_p2p_list(
    p: mooncake_p2p_t,
    prefix: *const c_char,
    buf: *mut c_char,
    len: usize,
) -> i64 {
    ffi_boundary!({
        // SAFETY: per the contract.
        unsafe {
            answer_json(p, prefix, buf, len, |store, prefix| {
                let objects = store.list(prefix)?.into_iter().map(|o| {
                    json!({
                        "name": o.name,
                        "size": o.size,
                        "max_shard_size": o.max_shard_size,
                        "size_list": o.size_list,
                        "holders": o.holders,
                    })
                });
                Ok(Value::Array(objects.collect()))
            })
        }
    })
}

/// The nodes holding a copy of a shard of any object whose name starts with `prefix`
/// (NULL: any object), as a sorted JSON array of node names, written as
/// `mooncake_p2p_list` writes. Returns the JSON's full length, or as
/// `mooncake_p2p_list`.
///
/// # Safety
/// `prefix` NULL or NUL-terminated; `buf` NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_p2p_discover_peers(
    p: mooncake_p2p_t,
    prefix: *const c_char,
    buf: *mut c_char,
    len: usize,
) -> i64 {
    ffi_boundary!({
        // SAFETY: per the contract.
        unsafe {
            answer_json(p, prefix, buf, len, |store, prefix| {
                Ok(json!(store.discover_peers(prefix)?))
            })
        }
    })
}

/// What `query` makes of node `p`'s store and `prefix` (NULL: ""), written into `buf`
/// as JSON text the way `mooncake_p2p_list` writes.
///
/// # Safety
/// `prefix` NULL or NUL-terminated; `buf` NULL or writable for `len` bytes.
unsafe fn answer_json(
    p: mooncake_p2p_t,
    prefix: *const c_char,
    buf: *mut c_char,
    len: usize,
    query: impl FnOnce(&P2pStore, &str) -> P2pResult<Value>,
) -> Result<i64, FfiError> {
    let h = node(p)?;
    // SAFETY: NULL or NUL-terminated, per the contract.
    let prefix = unsafe { c_str_or(prefix, "") };
    let text = query(&h.store, &prefix)?.to_string();
    // SAFETY: per the contract.
    unsafe { emit(buf, len, &text) }
}
