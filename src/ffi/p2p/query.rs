//! What the metadata holds, as JSON: the objects, and the nodes holding copies.

use super::handle::{emit, node};
use super::mooncake_p2p_t;
use crate::ffi::args::c_str_or;
use crate::ffi::boundary::ffi_boundary;
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
        let h = node(p)?;
        // SAFETY: NULL or NUL-terminated, per the contract.
        let prefix = unsafe { c_str_or(prefix, "") };
        let objects: Vec<Value> = h
            .store
            .list(&prefix)?
            .into_iter()
            .map(|o| {
                json!({
                    "name": o.name,
                    "size": o.size,
                    "max_shard_size": o.max_shard_size,
                    "size_list": o.size_list,
                    "holders": o.holders,
                })
            })
            .collect();
        // SAFETY: per the contract.
        unsafe { emit(buf, len, &Value::Array(objects).to_string()) }
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
        let h = node(p)?;
        // SAFETY: NULL or NUL-terminated, per the contract.
        let prefix = unsafe { c_str_or(prefix, "") };
        let peers = h.store.discover_peers(&prefix)?;
        // SAFETY: per the contract.
        unsafe { emit(buf, len, &json!(peers).to_string()) }
    })
}
