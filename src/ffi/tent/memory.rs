//! TENT's memory: allocating and freeing host memory for transfers, and registering
//! regions (plain, with a permission, with options, in batches). Conventions as in
//! [`super`].
//!
//! Permissions and transport types are accepted: this engine registers a region with
//! every transport it has and lets peers read and write it. Locations other than host
//! memory (`cpu`, `cpu:N`, `*`, "") are refused by the allocators (no device memory is
//! allocated here); registering device memory goes through the engine as with the
//! classic API.

#![allow(non_snake_case)]

use crate::ffi::args::{c_array_text, c_slice, c_str_or, require_out};
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::engines::ENGINES;
use crate::ffi::fail::{failed, invalid, FfiError};
use crate::ffi::tent_types::*;
use crate::te::TransferEngine;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};

/// Host memory handed out by tent_allocate_memory, by address: its length.
static ALLOCATED: Mutex<Option<HashMap<usize, usize>>> = Mutex::new(None);

/// The location every registration is made with: the engine finds where memory lives.
const ANY_LOCATION: &str = "*";

/// Maps `size` bytes of zeroed host memory (page aligned).
fn allocate_host(size: usize, location: &str) -> Result<*mut c_void, FfiError> {
    let host =
        location.is_empty() || location == "*" || location == "cpu" || location.starts_with("cpu:");
    if !host {
        return Err(invalid(format!(
            "location {location:?}: only host memory (cpu, cpu:N, *) is allocated here"
        )));
    }
    if size == 0 {
        return Err(invalid("size is 0"));
    }
    // SAFETY: an anonymous private mapping; no existing memory is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(failed(format!(
            "mapping {size} bytes: {}",
            std::io::Error::last_os_error()
        )));
    }
    ALLOCATED
        .lock()
        .get_or_insert_with(HashMap::new)
        .insert(p as usize, size);
    Ok(p)
}

/// Allocates `size` bytes of host memory at `location` into `*addr` (not registered:
/// tent_register_memory does that). Returns 0 or -1.
///
/// # Safety
/// `addr` must be NULL or writable; `location` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tent_allocate_memory(
    engine: tent_engine_t,
    addr: *mut *mut c_void,
    size: usize,
    location: *const c_char,
) -> c_int {
    ffi_boundary!({
        ENGINES.get(engine)?;
        require_out(addr, "addr")?;
        // SAFETY: NULL or NUL-terminated, per the contract.
        let location = unsafe { c_str_or(location, "") };
        let p = allocate_host(size, &location)?;
        // SAFETY: writable, per the contract.
        unsafe { *addr = p };
        Ok(0)
    })
}

/// tent_allocate_memory with options (`location`; the rest is accepted).
///
/// # Safety
/// `addr` must be NULL or writable; `opts` NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn tent_allocate_memory_ex(
    engine: tent_engine_t,
    addr: *mut *mut c_void,
    size: usize,
    opts: *mut tent_memory_options_t,
) -> c_int {
    ffi_boundary!({
        ENGINES.get(engine)?;
        require_out(addr, "addr")?;
        require_out(opts, "opts")?;
        // SAFETY: readable, per the contract.
        let location = c_array_text(unsafe { &(*opts).location });
        let p = allocate_host(size, &location)?;
        // SAFETY: writable, per the contract.
        unsafe { *addr = p };
        Ok(0)
    })
}

/// Frees memory from tent_allocate_memory (unregistering it first if it still is).
/// Returns 0, or -1 for an address it did not hand out.
///
/// # Safety
/// Nothing may use the memory afterwards.
#[no_mangle]
pub unsafe extern "C" fn tent_free_memory(engine: tent_engine_t, addr: *mut c_void) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        let size = ALLOCATED
            .lock()
            .as_mut()
            .and_then(|m| m.remove(&(addr as usize)))
            .ok_or_else(|| {
                invalid(format!(
                    "{addr:p} was not allocated by tent_allocate_memory"
                ))
            })?;
        if e.is_registered(addr as u64, 1) {
            let _ = e.unregister_memory(addr as u64);
        }
        // SAFETY: mapped by allocate_host with this size and now forgotten.
        unsafe { libc::munmap(addr, size) };
        Ok(0)
    })
}

/// Registers regions with the engine, publishing once.
fn register(e: &TransferEngine, addrs: &[*mut c_void], sizes: &[usize]) -> Result<c_int, FfiError> {
    if addrs.len() != sizes.len() {
        return Err(invalid("addresses and sizes differ in number"));
    }
    if addrs.len() == 1 {
        e.register_memory(addrs[0] as u64, sizes[0] as u64, ANY_LOCATION, true)?;
    } else {
        let ranges: Vec<_> = addrs
            .iter()
            .zip(sizes)
            .map(|(a, s)| crate::te::Range {
                addr: *a as u64,
                len: *s as u64,
            })
            .collect();
        e.register_memory_batch(&ranges, ANY_LOCATION)?;
    }
    Ok(0)
}

/// Registers the `count` regions of two C arrays (none: nothing to do).
///
/// # Safety
/// `addrs` and `sizes` must be NULL or hold `count` entries.
unsafe fn register_arrays(
    engine: tent_engine_t,
    addrs: *mut *mut c_void,
    sizes: *mut usize,
    count: usize,
) -> Result<c_int, FfiError> {
    let e = ENGINES.get(engine)?;
    // SAFETY: count entries each, per the contract.
    let addrs = unsafe { c_slice(addrs.cast_const(), count, "addrs") }?;
    // SAFETY: as above.
    let sizes = unsafe { c_slice(sizes.cast_const(), count, "sizes") }?;
    if count == 0 {
        return Ok(0);
    }
    register(&e, addrs, sizes)
}

/// Registers `[addr, addr + size)` for transfers (peers may read and write it).
/// Returns 0 or -1 (zero size, overlap with a registered region).
///
/// # Safety
/// The memory must stay valid until unregistered.
#[no_mangle]
pub unsafe extern "C" fn tent_register_memory(
    engine: tent_engine_t,
    addr: *mut c_void,
    size: usize,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        require_out(addr, "addr")?;
        register(&e, &[addr], &[size])
    })
}

/// tent_register_memory with a PERM_* permission (accepted).
///
/// # Safety
/// The memory must stay valid until unregistered.
#[no_mangle]
pub unsafe extern "C" fn tent_register_memory_with_perm(
    engine: tent_engine_t,
    addr: *mut c_void,
    size: usize,
    permission: c_int,
) -> c_int {
    let _ = permission;
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        require_out(addr, "addr")?;
        register(&e, &[addr], &[size])
    })
}

/// tent_register_memory with options (accepted: see the module notes).
///
/// # Safety
/// The memory must stay valid until unregistered; `opts` NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn tent_register_memory_ex(
    engine: tent_engine_t,
    addr: *mut c_void,
    size: usize,
    opts: *mut tent_memory_options_t,
) -> c_int {
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        require_out(addr, "addr")?;
        require_out(opts, "opts")?;
        register(&e, &[addr], &[size])
    })
}

/// Registers `count` regions (`addrs[i]`, `sizes[i]`) with a permission (accepted),
/// publishing once. Returns 0 or -1 (nothing is registered then).
///
/// # Safety
/// `addrs` and `sizes` must be NULL or hold `count` entries.
#[no_mangle]
pub unsafe extern "C" fn tent_register_memory_batch(
    engine: tent_engine_t,
    addrs: *mut *mut c_void,
    sizes: *mut usize,
    count: usize,
    permission: c_int,
) -> c_int {
    let _ = permission;
    // SAFETY: `count` entries at each array or NULL, per the contract.
    ffi_boundary!({ unsafe { register_arrays(engine, addrs, sizes, count) } })
}

/// tent_register_memory_batch with options (accepted).
///
/// # Safety
/// `addrs` and `sizes` must be NULL or hold `count` entries; `opts` NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn tent_register_memory_batch_ex(
    engine: tent_engine_t,
    addrs: *mut *mut c_void,
    sizes: *mut usize,
    count: usize,
    opts: *mut tent_memory_options_t,
) -> c_int {
    ffi_boundary!({
        require_out(opts, "opts")?;
        // SAFETY: `count` entries at each array or NULL, per the contract.
        unsafe { register_arrays(engine, addrs, sizes, count) }
    })
}

/// Unregisters the region starting at `addr` (`size` is accepted; the whole region
/// goes). Returns 0 or -1.
///
/// # Safety
/// Always safe to call; the handle is validated.
#[no_mangle]
pub unsafe extern "C" fn tent_unregister_memory(
    engine: tent_engine_t,
    addr: *mut c_void,
    size: usize,
) -> c_int {
    let _ = size;
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        require_out(addr, "addr")?;
        e.unregister_memory(addr as u64)?;
        Ok(0)
    })
}

/// Unregisters `count` regions, publishing once (`sizes` may be NULL). Returns 0 or
/// -1 (the first error; the others are still unregistered).
///
/// # Safety
/// `addrs` must be NULL or hold `count` entries; `sizes` NULL or `count` entries.
#[no_mangle]
pub unsafe extern "C" fn tent_unregister_memory_batch(
    engine: tent_engine_t,
    addrs: *mut *mut c_void,
    sizes: *mut usize,
    count: usize,
) -> c_int {
    let _ = sizes;
    ffi_boundary!({
        let e = ENGINES.get(engine)?;
        // SAFETY: count entries, per the contract.
        let addrs = unsafe { c_slice(addrs.cast_const(), count, "addrs") }?;
        let addrs: Vec<u64> = addrs.iter().map(|a| *a as u64).collect();
        e.unregister_memory_batch(&addrs)?;
        Ok(0)
    })
}
