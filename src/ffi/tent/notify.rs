//! TENT's notifications: sending one to a segment, and draining those received.
//! Conventions as in [`super`].

#![allow(non_snake_case)]

use super::segment_id;
use crate::ffi::args::{c_str_or, fill_c_array, require_out};
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::engines::ENGINES;
use crate::ffi::fail::failed;
use crate::ffi::tent_types::*;
use std::ffi::{c_char, c_int};

/// Sends `name`/`message` to the open segment `handle` now (NULL strings are "").
/// Returns 0 or -1.
///
/// # Safety
/// `name` and `message` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tent_send_notifs(
    engine: tent_engine_t,
    handle: tent_segment_id_t,
    name: *const c_char,
    message: *const c_char,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        // SAFETY: NULL or NUL-terminated, per the contract.
        let name = unsafe { c_str_or(name, "") };
        // SAFETY: as above.
        let message = unsafe { c_str_or(message, "") };
        e.send_notify(segment_id(handle)?, &name, &message)?;
        Ok(0)
    })
}

/// Drains the notifications received so far into `*info`: a malloc'ed array (NULL
/// with 0 records when there are none), released by tent_free_notifs. Names longer
/// than 255 bytes and messages longer than 4095 are truncated. Returns 0 or -1.
///
/// # Safety
/// `info` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tent_recv_notifs(
    engine: tent_engine_t,
    info: *mut tent_notifi_info,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        require_out(info, "info")?;
        let notifies = e.take_notifies();
        let n = notifies.len();
        let records = if n == 0 {
            std::ptr::null_mut()
        } else {
            // SAFETY: plain allocation of n records, released by tent_free_notifs.
            let p = unsafe { libc::calloc(n, std::mem::size_of::<tent_notifi_record>()) }
                .cast::<tent_notifi_record>();
            if p.is_null() {
                return Err(failed("out of memory"));
            }
            for (i, m) in notifies.iter().enumerate() {
                // SAFETY: record i of n, zeroed by calloc.
                let r = unsafe { &mut *p.add(i) };
                r.handle = 0;
                fill_c_array(&mut r.name, &m.name);
                fill_c_array(&mut r.msg, &m.msg);
            }
            p
        };
        let out = tent_notifi_info {
            num_records: c_int::try_from(n).unwrap_or(c_int::MAX),
            records,
        };
        // SAFETY: writable, per the contract.
        unsafe { info.write(out) };
        Ok(0)
    })
}

/// Releases what tent_recv_notifs allocated and empties `*info`. NULL is a no-op.
///
/// # Safety
/// `info` must be NULL or filled by tent_recv_notifs and not freed since.
#[no_mangle]
pub unsafe extern "C" fn tent_free_notifs(info: *mut tent_notifi_info) {
    if info.is_null() {
        return;
    }
    // SAFETY: filled by tent_recv_notifs, per the contract.
    let info = unsafe { &mut *info };
    // SAFETY: calloc'ed by tent_recv_notifs, or NULL.
    unsafe { libc::free(info.records.cast()) };
    info.records = std::ptr::null_mut();
    info.num_records = 0;
}
