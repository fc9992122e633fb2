//! TENT's segments: opening and closing peers' segments and reading a segment's
//! buffers. Conventions as in [`super`].

#![allow(non_snake_case)]

use super::segment_id;
use crate::ffi::args::{c_str, fill_c_array, require_out};
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::engines::ENGINES;
use crate::ffi::fail::failed;
use crate::ffi::tent_types::*;
use std::ffi::{c_char, c_int};

/// The engine's own segment.
pub const LOCAL_SEGMENT_ID: tent_segment_id_t = 0;

/// Opens a segment by name into `*handle`: the engine's own name (or "") is
/// LOCAL_SEGMENT_ID. Returns 0 or -1.
///
/// # Safety
/// `handle` must be NULL or writable; `segment_name` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tent_open_segment(
    engine: tent_engine_t,
    handle: *mut tent_segment_id_t,
    segment_name: *const c_char,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        require_out(handle, "handle")?;
        // SAFETY: NULL or NUL-terminated, per the contract.
        let name = unsafe { c_str(segment_name, "segment_name") }?;
        let id = if name.is_empty() || name == e.segment_name() {
            LOCAL_SEGMENT_ID
        } else {
            e.open_segment(&name)? as tent_segment_id_t
        };
        // SAFETY: writable, per the contract.
        unsafe { *handle = id };
        Ok(0)
    })
}

/// Closes an open segment: 0 for an open one (its cached descriptor stays, as with
/// the classic API's closeSegment), -1 for a handle that is not open.
///
/// # Safety
/// Always safe to call; the handle is validated.
#[no_mangle]
pub unsafe extern "C" fn tent_close_segment(
    engine: tent_engine_t,
    handle: tent_segment_id_t,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        if e.segment_descriptor(segment_id(handle)?).is_none() && handle != LOCAL_SEGMENT_ID {
            return Err(failed(format!("segment {handle} is not open")));
        }
        Ok(0)
    })
}

/// Fills `*info` with the segment's buffers (TYPE_MEMORY; a malloc'ed array,
/// released by tent_free_segment_info). Returns 0 or -1.
///
/// # Safety
/// `info` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tent_get_segment_info(
    engine: tent_engine_t,
    handle: tent_segment_id_t,
    info: *mut tent_segment_info_t,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        require_out(info, "info")?;
        let id = segment_id(handle)?;
        let desc = e
            .segment_descriptor(id)
            .ok_or_else(|| failed(format!("segment {handle} is not open")))?;
        let n = desc.buffers.len();
        let buffers = if n == 0 {
            std::ptr::null_mut()
        } else {
            // SAFETY: plain allocation of n entries, released by tent_free_segment_info.
            let p = unsafe { libc::calloc(n, std::mem::size_of::<tent_buffer_info>()) }
                .cast::<tent_buffer_info>();
            if p.is_null() {
                return Err(failed("out of memory"));
            }
            for (i, b) in desc.buffers.iter().enumerate() {
                let mut entry = tent_buffer_info {
                    base: b.addr,
                    length: b.length,
                    location: [0; 64],
                };
                fill_c_array(
                    &mut entry.location,
                    if b.name.is_empty() { "*" } else { &b.name },
                );
                // SAFETY: i < n entries were allocated above.
                unsafe { p.add(i).write(entry) };
            }
            p
        };
        let out = tent_segment_info {
            r#type: TYPE_MEMORY,
            num_buffers: c_int::try_from(n).unwrap_or(c_int::MAX),
            buffers,
        };
        // SAFETY: writable, per the contract.
        unsafe { info.write(out) };
        Ok(0)
    })
}

/// Releases what tent_get_segment_info allocated and empties `*info`. NULL is a no-op.
///
/// # Safety
/// `info` must be NULL or filled by tent_get_segment_info and not freed since.
#[no_mangle]
pub unsafe extern "C" fn tent_free_segment_info(info: *mut tent_segment_info_t) {
    if info.is_null() {
        return;
    }
    // SAFETY: filled by tent_get_segment_info, per the contract.
    let info = unsafe { &mut *info };
    // SAFETY: malloc'ed by tent_get_segment_info, or NULL.
    unsafe { libc::free(info.buffers.cast()) };
    info.buffers = std::ptr::null_mut();
    info.num_buffers = 0;
}
