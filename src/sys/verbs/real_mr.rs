//! Memory-region helpers of the libibverbs backend: access flags and the keys of a
//! registered region.

use super::abi::*;
use super::error::{VResult, VerbsError};
use super::types::{Access, Mr, MrKeys};
use std::ffi::c_int;

/// The calling thread's errno.
pub(super) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The `ibv_reg_mr` access flags for `access`: local write always, remote read and
/// write when asked.
pub(super) fn access_flags(access: Access) -> c_int {
    let mut flags = IBV_ACCESS_LOCAL_WRITE;
    if access.remote {
        flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
    }
    flags
}

/// The keys of a region `call` registered (`len` bytes at `addr`), or its error when
/// it returned NULL.
///
/// # Safety
///
/// `mr` is NULL or a memory region the library returned.
pub(super) unsafe fn registered(
    mr: *mut ibv_mr,
    call: &'static str,
    len: u64,
    addr: u64,
) -> VResult<MrKeys> {
    if mr.is_null() {
        return Err(VerbsError::new(
            call,
            errno(),
            format!("{len} bytes at {addr:#x}"),
        ));
    }
    // SAFETY: a valid MR returned by the library (the caller's promise).
    let (lkey, rkey) = unsafe { ((*mr).lkey, (*mr).rkey) };
    Ok(MrKeys {
        mr: Mr(mr as usize as u64),
        lkey,
        rkey,
    })
}
