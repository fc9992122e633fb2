//! Upstream's `transfer_engine_c.h` for notifies: reading those that arrived,
//! freeing what was handed out and sending one. Conventions as in [`super`].

#![allow(non_snake_case)]

use crate::error::Error;
use crate::ffi::args::{c_str_or, require_out, write_truncated};
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::engines::ENGINES;
use crate::ffi::fail::{invalid, FfiError};
use crate::ffi::te_types::*;
use std::ffi::{c_char, c_int};

/// Frees everything in a partly built notify array.
///
/// # Safety
/// The first `filled` entries hold malloc'ed strings or NULL.
unsafe fn free_notify_array(array: *mut notify_msg_t, filled: usize) {
    for i in 0..filled {
        // SAFETY: entry i was initialised.
        let m = unsafe { &*array.add(i) };
        // SAFETY: malloc'ed or NULL.
        unsafe {
            libc::free(m.name.cast());
            libc::free(m.msg.cast());
        }
    }
    // SAFETY: malloc'ed.
    unsafe { libc::free(array.cast()) };
}

/// A malloc'ed copy of `text` with a NUL terminator (NULL when out of memory).
fn malloc_c_string(text: &str) -> *mut c_char {
    // SAFETY: plain allocation.
    let p = unsafe { libc::malloc(text.len() + 1) }.cast::<c_char>();
    if !p.is_null() {
        // SAFETY: p holds text.len() + 1 bytes.
        unsafe { write_truncated(p, text.len() + 1, text) };
    }
    p
}

/// Drains the notifications received so far. Returns a malloc'ed array of `*size`
/// entries whose strings are malloc'ed too; release it with freeNotifsMsgBuf. Returns
/// NULL with `*size = 0` when there are none, or on error (bad handle, out of memory).
///
/// # Safety
/// `size` must be NULL or point to a writable int.
#[no_mangle]
pub unsafe extern "C" fn getNotifsFromEngine(
    engine: transfer_engine_t,
    size: *mut c_int,
) -> *mut notify_msg_t {
    ffi_boundary!({
        require_out(size, "size")?;
        // SAFETY: size is a writable int, per the contract.
        unsafe { *size = 0 };
        let e = ENGINES.get(engine)?;
        let notifies = e.take_notifies();
        if notifies.is_empty() {
            return Ok(std::ptr::null_mut());
        }
        let count = c_int::try_from(notifies.len()).map_err(|_| {
            invalid(format!(
                "{} notifications do not fit an int",
                notifies.len()
            ))
        })?;
        let out_of_memory = || FfiError::Failed {
            what: format!("out of memory copying {count} notifications"),
            errno: libc::ENOMEM,
        };
        // SAFETY: plain allocation of count entries.
        let array = unsafe { libc::malloc(notifies.len() * std::mem::size_of::<notify_msg_t>()) }
            .cast::<notify_msg_t>();
        if array.is_null() {
            return Err(out_of_memory());
        }
        for (i, n) in notifies.iter().enumerate() {
            let entry = notify_msg {
                name: malloc_c_string(&n.name),
                msg: malloc_c_string(&n.msg),
            };
            // SAFETY: i < count entries were allocated.
            unsafe { array.add(i).write(entry) };
            if entry.name.is_null() || entry.msg.is_null() {
                // SAFETY: entries 0..=i are initialised.
                unsafe { free_notify_array(array, i + 1) };
                return Err(out_of_memory());
            }
        }
        // SAFETY: as above.
        unsafe { *size = count };
        Ok(array)
    })
}

/// Frees an array from getNotifsFromEngine: the strings of its first `size` entries,
/// then the array. NULL is a no-op. Returns 0.
///
/// # Safety
/// `msg` must be NULL or an unfreed array from getNotifsFromEngine with `size` entries.
#[no_mangle]
pub unsafe extern "C" fn freeNotifsMsgBuf(msg: *mut notify_msg_t, size: c_int) -> c_int {
    ffi_boundary!({
        if !msg.is_null() {
            // SAFETY: an array from getNotifsFromEngine with size initialised entries.
            unsafe { free_notify_array(msg, usize::try_from(size).unwrap_or(0)) };
        }
        Ok(0)
    })
}

/// Sends `notify_msg` now to segment `target_id` (an id from openSegment, or
/// LOCAL_SEGMENT). Returns 0, -200 for an id that is not open, -101/-102 for
/// connection errors, -103 for a malformed reply, -1 for a bad handle.
///
/// # Safety
/// `notify_msg`'s strings must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn genNotifyInEngine(
    engine: transfer_engine_t,
    target_id: u64,
    notify_msg: notify_msg_t,
) -> c_int {
    ffi_boundary!(map = Error::err_code, {
        let e = ENGINES.get(engine)?;
        let id = i32::try_from(target_id)
            .map_err(|_| Error::Metadata(format!("segment id {target_id} is not open")))?;
        // SAFETY: NULL or NUL-terminated, per the contract.
        let (name, msg) = unsafe { (c_str_or(notify_msg.name, ""), c_str_or(notify_msg.msg, "")) };
        e.send_notify(id, &name, &msg)?;
        Ok(0)
    })
}
