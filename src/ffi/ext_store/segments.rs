//! Segments mounted and unmounted at run time (upstream's Python `mount_segment`,
//! `allocate_and_mount_segment`, `unmount_segment`, `unmount_and_free_segment`). A
//! segment id is two 64-bit halves (upstream's `UUID`; its Python form is
//! `"<first>-<second>"` in decimal).

use super::support::write_id;
use crate::ffi::args::{c_str, c_str_or};
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::fail::invalid;
use crate::ffi::store::handle::set_up_client;
use crate::ffi::store::mooncake_store_t;
use crate::wire::master_api::Uuid;
use std::ffi::{c_char, c_int};
use std::path::Path;

/// Maps `size` bytes of the file at `path` from `offset` (page-aligned, inside the
/// file) shared and mounts them as a segment of this client reached by `protocol`
/// (NULL: "tcp"), registered at `location` (NULL or "": anywhere); the segment's id
/// goes to `id_out[0..2]`. Returns 1 (mounted), 0 for `size` 0 (nothing mounted), -1
/// when the file cannot be mapped, the protocol is not installed, for a dummy client,
/// a bad handle or a NULL argument, -600 when not set up, or the master's code.
///
/// # Safety
/// `path` (and `protocol`, `location` when not NULL) NUL-terminated; `id_out`
/// writable for two entries.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_mount_file_segment(
    store: mooncake_store_t,
    path: *const c_char,
    offset: u64,
    size: u64,
    protocol: *const c_char,
    location: *const c_char,
    id_out: *mut u64,
) -> c_int {
    ffi_boundary!({
        if id_out.is_null() {
            return Err(invalid("id_out is NULL"));
        }
        // SAFETY: NUL-terminated per the contract.
        let (path, protocol, location) = unsafe {
            (
                c_str(path, "path")?,
                c_str_or(protocol, "tcp"),
                c_str_or(location, ""),
            )
        };
        let client = set_up_client(store)?;
        match client.mount_file_segment(Path::new(&*path), offset, size, &protocol, &location)? {
            Some(id) => {
                // SAFETY: two entries per the contract.
                unsafe { write_id(id_out, id) };
                Ok(1)
            }
            None => Ok(0),
        }
    })
}

/// Maps `size` bytes (> 0, rounded up to a multiple of 16 MiB) of shared memory and
/// mounts them as a segment of this client (`protocol`, `location` as for
/// `mooncake_store_mount_file_segment`); its id goes to `id_out[0..2]` and the size
/// mounted to `allocated_out`. Returns 0, -1 for size 0, memory that cannot be had, a
/// protocol not installed, a dummy client, a bad handle or a NULL output, -600 when not
/// set up, or the master's code.
///
/// # Safety
/// `protocol`, `location` NULL or NUL-terminated; `id_out` writable for two entries,
/// `allocated_out` for one.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_allocate_and_mount_segment(
    store: mooncake_store_t,
    size: u64,
    protocol: *const c_char,
    location: *const c_char,
    id_out: *mut u64,
    allocated_out: *mut u64,
) -> c_int {
    ffi_boundary!({
        if id_out.is_null() || allocated_out.is_null() {
            return Err(invalid("id_out or allocated_out is NULL"));
        }
        // SAFETY: NUL-terminated per the contract.
        let (protocol, location) = unsafe { (c_str_or(protocol, "tcp"), c_str_or(location, "")) };
        let client = set_up_client(store)?;
        let (id, allocated) = client.allocate_and_mount_segment(size, &protocol, &location)?;
        // SAFETY: writable per the contract.
        unsafe {
            write_id(id_out, id);
            *allocated_out = allocated;
        }
        Ok(0)
    })
}

/// Unmounts the segment `{id_first, id_second}` that
/// `mooncake_store_mount_file_segment` (`allocated` 0) or
/// `mooncake_store_allocate_and_mount_segment` (non-zero) mounted: at once
/// (`grace_seconds` 0: its objects dropped, its memory released), or after
/// `grace_seconds` (the master places nothing new in it meanwhile; its memory is kept
/// 10 s longer for reads under way). Returns 0, -1 for an id this client did not mount
/// that way, a dummy client or a bad handle, -600 when not set up, or the master's
/// code.
#[no_mangle]
pub extern "C" fn mooncake_store_unmount_segment(
    store: mooncake_store_t,
    id_first: u64,
    id_second: u64,
    allocated: c_int,
    grace_seconds: u64,
) -> c_int {
    ffi_boundary!({
        let id = Uuid {
            first: id_first,
            second: id_second,
        };
        set_up_client(store)?.unmount_run_time_segment(id, allocated != 0, grace_seconds)?;
        Ok(0)
    })
}

/// Unmounts the client's local disk (SSD tier) at the master: its copies are no
/// longer read from there and nothing more is offloaded to it; then waits
/// `grace_period_seconds` (upstream's `unmount_local_disk_segment`). Returns 0 (also
/// for a client without a disk tier), -600 for a store not set up, or -1 when the
/// master refuses, for a dummy client or a bad handle.
#[no_mangle]
pub extern "C" fn mooncake_store_unmount_local_disk_segment(
    store: mooncake_store_t,
    grace_period_seconds: u64,
) -> c_int {
    ffi_boundary!({
        set_up_client(store)?
            .unmount_local_disk_segment(grace_period_seconds)
            .map_err(|e| crate::ffi::fail::failed(e.to_string()))?;
        Ok(0)
    })
}
