//! Upstream's `transfer_engine_c.h` for segments: opening (with and without the
//! descriptor cache), closing, warming up, removing the own segment and syncing the
//! cache. Conventions as in [`super`].

#![allow(non_snake_case)]

use crate::error::Error;
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::engines::{checked_no_op, engine_and_name, ENGINES};
use crate::ffi::fail::FfiError;
use crate::ffi::te_types::*;
use std::ffi::{c_char, c_int};

/// Opens a segment by name (leading `/` ignored): 0 for this engine's own name, else a
/// per-engine id counting from 1, cached. Returns -1 on any failure.
///
/// # Safety
/// `segment_name` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn openSegment(
    engine: transfer_engine_t,
    segment_name: *const c_char,
) -> segment_id_t {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated, per the contract.
        unsafe { open_named(engine, segment_name, true) }
    })
}

/// Refreshes the segment's cached descriptor (if cached), then opens it like
/// openSegment. Returns the id, or -1.
///
/// # Safety
/// `segment_name` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn openSegmentNoCache(
    engine: transfer_engine_t,
    segment_name: *const c_char,
) -> segment_id_t {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated, per the contract.
        unsafe { open_named(engine, segment_name, false) }
    })
}

/// Body of the two opens: the segment named `segment_name`, through the descriptor
/// cache when `cached`, else with its cached descriptor refreshed first.
///
/// # Safety
/// `segment_name` must be NULL or NUL-terminated.
unsafe fn open_named(
    engine: transfer_engine_t,
    segment_name: *const c_char,
    cached: bool,
) -> Result<segment_id_t, FfiError> {
    // SAFETY: forwarded contract.
    let (e, name) = unsafe { engine_and_name(engine, segment_name, "segment_name") }?;
    let id = if cached {
        e.open_segment(&name)?
    } else {
        e.open_segment_no_cache(&name)?
    };
    Ok(id)
}

/// Does nothing, as upstream. Returns 0, or -1 for a bad handle.
///
/// # Safety
/// Always safe to call; the handle is validated.
#[no_mangle]
pub unsafe extern "C" fn closeSegment(
    engine: transfer_engine_t,
    segment_id: segment_id_t,
) -> c_int {
    ffi_boundary!({
        let _ = segment_id;
        checked_no_op(engine)
    })
}

/// Pre-connects EFA endpoints; there are none in this build. Returns 0, or -1 for a
/// bad handle.
///
/// # Safety
/// Always safe to call; the handle is validated and `segment_name` is not read.
#[no_mangle]
pub unsafe extern "C" fn warmupEfaSegment(
    engine: transfer_engine_t,
    segment_name: *const c_char,
) -> c_int {
    ffi_boundary!({
        let _ = segment_name;
        checked_no_op(engine)
    })
}

/// Forgets the cached name -> id mapping of `segment_name` (a later openSegment gets a
/// new id); nothing is sent anywhere. Returns 0, or -1 for an empty or NULL name or a
/// bad handle.
///
/// # Safety
/// `segment_name` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn removeLocalSegment(
    engine: transfer_engine_t,
    segment_name: *const c_char,
) -> c_int {
    ffi_boundary!(map = Error::err_code, {
        // SAFETY: NULL or NUL-terminated, per the contract.
        let (e, name) = unsafe { engine_and_name(engine, segment_name, "segment_name") }?;
        e.remove_local_segment(&name)?;
        Ok(0)
    })
}

/// Refetches every cached remote segment descriptor (failures keep the old one).
/// Returns 0, or -1 for a bad handle.
///
/// # Safety
/// Always safe to call; the handle is validated.
#[no_mangle]
pub unsafe extern "C" fn syncSegmentCache(engine: transfer_engine_t) -> c_int {
    ffi_boundary!({
        ENGINES.get(engine)?.sync_segment_cache();
        Ok(0)
    })
}
