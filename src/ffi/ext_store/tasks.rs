//! Copy and move tasks (upstream's Python `create_copy_task`, `create_move_task`,
//! `query_task`). A task id is two 64-bit halves (upstream's `UUID`, a Python
//! `(first, second)` tuple); a task's state travels as JSON.

use super::support::emit;
use super::support::write_id;
use crate::ffi::args::c_str;
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::fail::invalid;
use crate::ffi::store::args::keys_arg;
use crate::ffi::store::handle::set_up_client;
use crate::ffi::store::mooncake_store_t;
use crate::wire::master_api::Uuid;
use serde_json::json;
use std::ffi::{c_char, c_int};

/// Queues a copy of `key` to the `count` segments `targets` (the owning clients'
/// hostnames), run later by the owner of one of its replicas; the task id goes to
/// `id_out[0..2]`. Returns 0; -600 when not set up, for no target or an unknown one;
/// -704 for a missing object; -1401 when the master's pending limit is reached; -1
/// for a bad handle or a NULL argument.
///
/// # Safety
/// `key` and the `count` entries of `targets` NUL-terminated; `id_out` writable for
/// two entries.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_create_copy_task(
    store: mooncake_store_t,
    key: *const c_char,
    targets: *const *const c_char,
    count: usize,
    id_out: *mut u64,
) -> c_int {
    ffi_boundary!({
        if id_out.is_null() {
            return Err(invalid("id_out is NULL"));
        }
        // SAFETY: per the contract.
        let (key, targets) = unsafe { (c_str(key, "key")?, keys_arg(targets, count)?) };
        let id = set_up_client(store)?.create_copy_task(&key, &targets)?;
        // SAFETY: two entries per the contract.
        unsafe { write_id(id_out, id) };
        Ok(0)
    })
}

/// Queues a move of `key`'s replica on segment `source` to segment `target`, run
/// later by the owner of `source`; the task id goes to `id_out[0..2]`. Returns 0;
/// -600 when not set up, when `source` is `target`, `target` is unknown or `source`
/// holds no replica of the object; -704 for a missing object; -1 for a bad handle or
/// a NULL argument.
///
/// # Safety
/// `key`, `source`, `target` NUL-terminated; `id_out` writable for two entries.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_create_move_task(
    store: mooncake_store_t,
    key: *const c_char,
    source: *const c_char,
    target: *const c_char,
    id_out: *mut u64,
) -> c_int {
    ffi_boundary!({
        if id_out.is_null() {
            return Err(invalid("id_out is NULL"));
        }
        // SAFETY: NUL-terminated per the contract.
        let (key, source, target) = unsafe {
            (
                c_str(key, "key")?,
                c_str(source, "source")?,
                c_str(target, "target")?,
            )
        };
        let id = set_up_client(store)?.create_move_task(&key, &source, &target)?;
        // SAFETY: two entries per the contract.
        unsafe { write_id(id_out, id) };
        Ok(0)
    })
}

/// The state of task `(first, second)` as a JSON object (`id`, `type`, `status`,
/// `created_at_ms_epoch`, `last_updated_at_ms_epoch`, `assigned_client`, `message`;
/// ids as `[first, second]`) written NUL-terminated to `buf_out` (truncated to
/// `buf_len`). Returns the text's length (call again with a larger buffer when it
/// is not below `buf_len`); -1400 for an unknown or forgotten task; -600 when not set
/// up; -1 for a bad handle.
///
/// # Safety
/// `buf_out` writable for `buf_len` bytes (NULL when `buf_len` is 0).
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_query_task(
    store: mooncake_store_t,
    first: u64,
    second: u64,
    buf_out: *mut c_char,
    buf_len: usize,
) -> i64 {
    ffi_boundary!({
        let r = set_up_client(store)?.query_task(Uuid { first, second })?;
        let text = json!({
            "id": [r.id.first, r.id.second],
            "type": r.task_type,
            "status": r.status,
            "created_at_ms_epoch": r.created_at_ms,
            "last_updated_at_ms_epoch": r.last_updated_at_ms,
            "assigned_client": [r.assigned_client.first, r.assigned_client.second],
            "message": r.message,
        })
        .to_string();
        // SAFETY: per the contract.
        unsafe { emit(buf_out, buf_len, &text) }
    })
}
