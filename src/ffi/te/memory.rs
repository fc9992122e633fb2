//! Upstream's `transfer_engine_c.h` for memory registrations, one at a time and in
//! batches. Conventions as in [`super`].

#![allow(non_snake_case)]

use crate::error::Error;
use crate::ffi::args::c_str_or;
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::engines::{engine_and_list, ENGINES};
use crate::ffi::te_types::*;
use crate::te::Range;
use std::ffi::{c_char, c_int, c_void};

/// Registers `[addr, addr + length)` with every installed transport and publishes the
/// segment descriptor. `location` NULL means `"*"`. Returns 0, -1 (zero length, NULL
/// address, bad handle), -7 (overlaps a registered region) or another ERR_* code.
///
/// # Safety
/// `location` must be NULL or NUL-terminated; the region must stay valid while
/// registered.
#[no_mangle]
pub unsafe extern "C" fn registerLocalMemory(
    engine: transfer_engine_t,
    addr: *mut c_void,
    length: usize,
    location: *const c_char,
    remote_accessible: c_int,
) -> c_int {
    ffi_boundary!(map = Error::err_code, {
        let e = ENGINES.get(engine)?;
        // SAFETY: NULL or NUL-terminated, per the contract.
        let location = unsafe { c_str_or(location, "*") };
        e.register_memory(
            addr as u64,
            length as u64,
            &location,
            remote_accessible != 0,
        )?;
        Ok(0)
    })
}

/// Unregisters the region based exactly at `addr`. Returns 0, -3 for an address that
/// is not a registered base, -1 for a bad handle.
///
/// # Safety
/// Always safe to call; `addr` is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn unregisterLocalMemory(
    engine: transfer_engine_t,
    addr: *mut c_void,
) -> c_int {
    ffi_boundary!(map = Error::err_code, {
        let e = ENGINES.get(engine)?;
        e.unregister_memory(addr as u64)?;
        Ok(0)
    })
}

/// Registers `buffer_len` regions at once (all or none) and publishes once. Returns 0
/// (also for an empty list), -1 (NULL list, zero length), -7 (overlap, within the list
/// or with registered regions) or another ERR_* code.
///
/// # Safety
/// `buffer_list` must be NULL or point to `buffer_len` entries; `location` must be NULL
/// or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn registerLocalMemoryBatch(
    engine: transfer_engine_t,
    buffer_list: *mut buffer_entry_t,
    buffer_len: usize,
    location: *const c_char,
) -> c_int {
    ffi_boundary!(map = Error::err_code, {
        // SAFETY: buffer_len entries at buffer_list, per the contract.
        let found = unsafe {
            engine_and_list(engine, buffer_list.cast_const(), buffer_len, "buffer_list")
        }?;
        let Some((e, list)) = found else {
            return Ok(0);
        };
        // SAFETY: NULL or NUL-terminated, per the contract.
        let location = unsafe { c_str_or(location, "*") };
        let ranges: Vec<Range> = list
            .iter()
            .map(|b| Range {
                addr: b.addr as u64,
                len: b.length as u64,
            })
            .collect();
        e.register_memory_batch(&ranges, &location)?;
        Ok(0)
    })
}

/// Unregisters several regions (best effort) and publishes once. Returns 0 (also for
/// an empty list), the first ERR_* code met (-3 for an unknown address), or -1.
///
/// # Safety
/// `addr_list` must be NULL or point to `addr_len` pointers.
#[no_mangle]
pub unsafe extern "C" fn unregisterLocalMemoryBatch(
    engine: transfer_engine_t,
    addr_list: *mut *mut c_void,
    addr_len: usize,
) -> c_int {
    ffi_boundary!(map = Error::err_code, {
        // SAFETY: addr_len pointers at addr_list, per the contract.
        let found =
            unsafe { engine_and_list(engine, addr_list.cast_const(), addr_len, "addr_list") }?;
        let Some((e, list)) = found else {
            return Ok(0);
        };
        let addrs: Vec<u64> = list.iter().map(|a| *a as u64).collect();
        e.unregister_memory_batch(&addrs)?;
        Ok(0)
    })
}
