//! Readers of the store functions' C arguments: keys, `(buffer, size)` batches and
//! `mooncake_store_setup`'s strings, validated and copied during the call.

use crate::ffi::args::{c_slice, c_str, c_str_or};
use crate::ffi::fail::{invalid, FfiError};
use crate::store::SetupConfig;
use std::ffi::{c_char, c_void};

/// Reads a key; NULL is a shim failure (-1).
///
/// # Safety
/// `key` must be NULL or NUL-terminated.
pub(in crate::ffi) unsafe fn key_arg(key: *const c_char) -> Result<String, FfiError> {
    // SAFETY: forwarded contract.
    Ok(unsafe { c_str(key, "key") }?.into_owned())
}

/// Reads `count` keys; a NULL array or NULL entry is a shim failure (-1).
///
/// # Safety
/// `keys` must be NULL or hold `count` pointers, each NULL or NUL-terminated.
pub(in crate::ffi) unsafe fn keys_arg(
    keys: *const *const c_char,
    count: usize,
) -> Result<Vec<String>, FfiError> {
    if keys.is_null() {
        return Err(invalid("keys is NULL"));
    }
    // SAFETY: `count` entries per the contract.
    let ptrs = unsafe { c_slice(keys, count, "keys") }?;
    // SAFETY: each entry is NULL (rejected) or NUL-terminated.
    ptrs.iter().map(|&k| unsafe { key_arg(k) }).collect()
}

/// Reads the `(buffer, size)` pairs of a batch; NULL arrays, or a NULL buffer with a
/// non-zero size, are shim failures (-1).
///
/// # Safety
/// Non-NULL arrays must hold `count` entries.
pub(in crate::ffi) unsafe fn items_arg(
    buffers: *const *mut c_void,
    sizes: *const usize,
    count: usize,
) -> Result<Vec<(u64, u64)>, FfiError> {
    if buffers.is_null() || sizes.is_null() {
        return Err(invalid("buffers or sizes is NULL"));
    }
    // SAFETY: `count` entries each, per the contract.
    let (bufs, lens) = unsafe {
        (
            c_slice(buffers, count, "buffers")?,
            c_slice(sizes, count, "sizes")?,
        )
    };
    bufs.iter()
        .zip(lens)
        .enumerate()
        .map(|(i, (&b, &n))| {
            if b.is_null() && n > 0 {
                return Err(invalid(format!(
                    "buffers[{i}] is NULL but sizes[{i}] is {n}"
                )));
            }
            Ok((b as u64, n as u64))
        })
        .collect()
}

/// `mooncake_store_setup`'s arguments as the C caller passed them (the setup
/// extensions take the same ones first).
pub(in crate::ffi) struct SetupArgs {
    /// The client's `host[:port]`; NULL means `""`.
    pub(in crate::ffi) local_hostname: *const c_char,
    /// The metadata server; NULL means `""`.
    pub(in crate::ffi) metadata_server: *const c_char,
    /// Bytes of segment the client mounts.
    pub(in crate::ffi) global_segment_size: u64,
    /// Bytes of local staging buffer.
    pub(in crate::ffi) local_buffer_size: u64,
    /// The transport; NULL means `"tcp"`.
    pub(in crate::ffi) protocol: *const c_char,
    /// The RDMA devices; NULL means `""`.
    pub(in crate::ffi) device_name: *const c_char,
    /// The master; NULL means `"127.0.0.1:50051"`.
    pub(in crate::ffi) master_server_addr: *const c_char,
}

impl SetupArgs {
    /// The [`SetupConfig`] of the arguments, NULL strings replaced by upstream's
    /// defaults.
    ///
    /// # Safety
    /// The strings must be NULL or NUL-terminated.
    pub(in crate::ffi) unsafe fn config(&self) -> SetupConfig {
        // SAFETY: forwarded contract.
        unsafe {
            SetupConfig {
                local_hostname: c_str_or(self.local_hostname, "").into_owned(),
                metadata_server: c_str_or(self.metadata_server, "").into_owned(),
                global_segment_size: self.global_segment_size,
                local_buffer_size: self.local_buffer_size,
                protocol: c_str_or(self.protocol, "tcp").into_owned(),
                device_name: c_str_or(self.device_name, "").into_owned(),
                master_server_addr: c_str_or(self.master_server_addr, "127.0.0.1:50051")
                    .into_owned(),
                ..SetupConfig::default()
            }
        }
    }
}
