//! Objects through memory the node keeps: their size, a put of bytes, a get into the
//! caller's buffer.

use super::handle::node_and_name;
use super::mooncake_p2p_t;
use crate::ffi::args::c_slice;
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::fail::{invalid, FfiError};
use std::ffi::{c_char, c_int, c_void};

/// The size in bytes of object `name` (from the metadata). Returns it (at least 1);
/// -1 for a bad handle or NULL name; `MOONCAKE_P2P_NOT_FOUND`,
/// `MOONCAKE_P2P_CORRUPT`, `MOONCAKE_P2P_METADATA`, `MOONCAKE_P2P_CLOSED`.
///
/// # Safety
/// `name` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_p2p_size(p: mooncake_p2p_t, name: *const c_char) -> i64 {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated, per the contract.
        let (h, name) = unsafe { node_and_name(p, name) }?;
        let size = h.store.size_of(&name)?;
        i64::try_from(size).map_err(|_| invalid(format!("'{name}' has {size} bytes")))
    })
}

/// Publishes a copy of the `len` bytes at `data` as object `name`, from memory the
/// node keeps until `mooncake_p2p_unregister(p, name)` (or destroy), cut into shards
/// of `MC_P2P_SHARD_SIZE` bytes (16 MiB by default). The caller's memory is not used
/// after the call. Returns 0; -1 for a bad handle, NULL name or data, `len` 0;
/// `MOONCAKE_P2P_EXISTS`, `MOONCAKE_P2P_ALREADY_HELD`, `MOONCAKE_P2P_ENGINE`,
/// `MOONCAKE_P2P_METADATA`, `MOONCAKE_P2P_CLOSED`.
///
/// # Safety
/// `name` NULL or NUL-terminated; `data` NULL or readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_p2p_put(
    p: mooncake_p2p_t,
    name: *const c_char,
    data: *const c_void,
    len: usize,
) -> c_int {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated, per the contract.
        let (h, name) = unsafe { node_and_name(p, name) }?;
        if data.is_null() {
            return Err(invalid("data is NULL"));
        }
        // SAFETY: `len` readable bytes, per the contract.
        let data = unsafe { c_slice(data.cast::<u8>(), len, "data") }?;
        h.store.put(&name, data)?;
        Ok(0)
    })
}

/// Copies object `name` into `buf` (`len` bytes) and returns its size. An object the
/// node put or got before is copied from the node's memory; otherwise it is fetched
/// (from every node holding it, as `mooncake_p2p_get_replica`) into memory the node
/// keeps and serves as a replica until `mooncake_p2p_delete_replica(p, name)`.
///
/// Returns the size; -1 for a bad handle, NULL name, NULL `buf` with a non-zero
/// `len`, or a `buf` smaller than the object (nothing written, nothing fetched; the
/// last error gives the size, errno ERANGE; `mooncake_p2p_size` gives it too);
/// `MOONCAKE_P2P_ALREADY_HELD` when the node holds `name` in the caller's memory
/// (registered with `mooncake_p2p_register`, or fetched with
/// `mooncake_p2p_get_replica*`: read it there); `MOONCAKE_P2P_NOT_FOUND`,
/// `MOONCAKE_P2P_NO_SOURCE`, `MOONCAKE_P2P_ENGINE`, `MOONCAKE_P2P_METADATA`,
/// `MOONCAKE_P2P_CLOSED`.
///
/// # Safety
/// `name` NULL or NUL-terminated; `buf` NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mooncake_p2p_get(
    p: mooncake_p2p_t,
    name: *const c_char,
    buf: *mut c_void,
    len: usize,
) -> i64 {
    ffi_boundary!({
        // SAFETY: NULL or NUL-terminated, per the contract.
        let (h, name) = unsafe { node_and_name(p, name) }?;
        if buf.is_null() && len > 0 {
            return Err(invalid(format!("buf is NULL but len is {len}")));
        }
        fits(&name, h.store.size_of(&name)?, len)?;
        let bytes = h.store.get(&name)?;
        // The object may have been replaced since its size was read.
        fits(&name, bytes.len() as u64, len)?;
        // SAFETY: `bytes.len() <= len` bytes, writable per the contract; `bytes` is
        // the node's copy, never the caller's buffer.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len()) };
        Ok(bytes.len() as i64)
    })
}

/// Refuses a buffer of `len` bytes for an object of `size` bytes.
fn fits(name: &str, size: u64, len: usize) -> Result<(), FfiError> {
    if size <= len as u64 {
        return Ok(());
    }
    Err(FfiError::Failed {
        what: format!("'{name}' has {size} bytes; the buffer has {len}"),
        errno: libc::ERANGE,
    })
}
