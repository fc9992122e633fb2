//! Reads: objects scattered over several buffers, whole objects into memory the
//! library allocates (and its release) or the caller's allocator provides.

use super::buffers;
use super::support::multi_items_arg;
use crate::ffi::boundary::ffi_boundary;
use crate::ffi::fail::invalid;
use crate::ffi::last_error::set_last_error;
use crate::ffi::store::args::keys_arg;
use crate::ffi::store::handle::client;
use crate::ffi::store::keys::{KeyBatch, KeyCall};
use crate::ffi::store::mooncake_store_t;
use crate::ffi::store::results::{size_or_code, write_out};
use crate::store::api::{batch_get_alloc, one};
use crate::store::{ErrorCode, ReadTarget};
use std::ffi::{c_char, c_int, c_void};

/// Reads `count` objects, object `i` scattered in order over the next
/// `buffer_counts[i]` entries of `buffers`/`sizes` (capacities). Per key in
/// `results_out`: the object's size, -600 when the buffers hold fewer bytes than the
/// object, -704 missing, -707 lease expired during the read, -800 transfer failure.
/// `prefer_alloc_in_same_node` is accepted for upstream compatibility and has no
/// effect on reads. Returns 0, or -1 (writing nothing) as for the multi-buffer put.
///
/// # Safety
/// As for `mooncake_store_batch_put_from_multi_buffers`, with buffers writable and
/// distinct.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_get_into_multi_buffers(
    store: mooncake_store_t,
    keys: *const *const c_char,
    buffers: *const *mut c_void,
    sizes: *const usize,
    buffer_counts: *const usize,
    count: usize,
    prefer_alloc_in_same_node: c_int,
    results_out: *mut i64,
) -> c_int {
    ffi_boundary!(name = function, {
        let _ = prefer_alloc_in_same_node;
        // SAFETY: per the contract.
        let (batch, items) = unsafe {
            (
                KeyBatch::read(store, keys, count, results_out, "results_out")?,
                multi_items_arg(buffers, sizes, buffer_counts, count)?,
            )
        };
        let results = batch.results(Some(function), |c, keys| {
            // SAFETY: every piece is writable per the contract.
            unsafe { c.batch_get_into_multi_raw(keys, &items) }
        });
        // SAFETY: results_out holds `count` entries.
        unsafe { write_out(results_out, count, results.into_iter().map(size_or_code)) };
        Ok(0)
    })
}

impl ReadTarget for buffers::Buffer {
    fn addr(&mut self) -> u64 {
        buffers::Buffer::addr(self)
    }
}

/// Reads whole objects into memory the library allocates (one master call, one
/// transfer batch). Per key: `results_out[i]` is the object's size and
/// `buffers_out[i]` its bytes (release with `mooncake_store_free_buffer`), or
/// `results_out[i]` is an error code (-704 missing, -703 not complete, -707 lease
/// expired, -800 transfer failure) and `buffers_out[i]` NULL. Returns 0, or -1
/// (writing nothing) for a bad handle or NULL arrays or keys.
///
/// # Safety
/// `keys`, `buffers_out` and `results_out` hold `count` entries; keys
/// NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_batch_get_buffers(
    store: mooncake_store_t,
    keys: *const *const c_char,
    count: usize,
    buffers_out: *mut *mut c_void,
    results_out: *mut i64,
) -> c_int {
    ffi_boundary!(name = function, {
        let h = client(store)?;
        if results_out.is_null() || buffers_out.is_null() {
            return Err(invalid("results_out or buffers_out is NULL"));
        }
        // SAFETY: per the contract.
        let keys = unsafe { keys_arg(keys, count) }?;
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let alloc = |n: u64| buffers::Buffer::new(usize::try_from(n).ok()?);
        let results = match h {
            // SAFETY: a Buffer is writable for the size it was allocated with.
            Some(c) => unsafe { batch_get_alloc(&*c, &refs, alloc) },
            None => {
                let e = ErrorCode::INVALID_PARAMS;
                set_last_error(function.get(), &e.to_string(), 0);
                (0..count).map(|_| Err(e.into())).collect()
            }
        };
        for (i, r) in results.into_iter().enumerate().take(count) {
            let (ptr, res) = match r {
                Ok((target, n)) => (target.into_raw(), n as i64),
                Err(e) => (std::ptr::null_mut(), i64::from(e.code.0)),
            };
            // SAFETY: both arrays hold `count` entries.
            unsafe {
                *buffers_out.add(i) = ptr;
                *results_out.add(i) = res;
            }
        }
        Ok(0)
    })
}

/// The allocator of [`mooncake_store_get_with_allocator`]: given its `ctx` and the
/// object's size, returns that many writable bytes (valid until the call returns), or
/// NULL to skip the read.
#[allow(non_camel_case_types)]
pub type mooncake_store_alloc_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, size: u64) -> *mut c_void>;

/// Memory the caller's allocator provided.
struct CallerMemory(*mut c_void);

impl ReadTarget for CallerMemory {
    fn addr(&mut self) -> u64 {
        self.0 as u64
    }
}

/// Reads the whole object `key` into memory from the caller's allocator, with one
/// master call and no copy: `alloc(ctx, size)` is called once, on the calling thread,
/// when the object's size is known and before any byte moves. Returns the object's
/// size, or an error code: -704 missing, -703 not complete, -707 lease expired during
/// the read, -800 transfer failure, -600 before setup or when `alloc` returned NULL;
/// -1 for a bad handle, a NULL key or a NULL allocator.
///
/// # Safety
/// `key` is NUL-terminated; `alloc` returns NULL or `size` bytes writable until this
/// call returns, and does not unwind.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_get_with_allocator(
    store: mooncake_store_t,
    key: *const c_char,
    alloc: mooncake_store_alloc_fn,
    ctx: *mut c_void,
) -> i64 {
    ffi_boundary!({
        // SAFETY: per the contract.
        let call = unsafe { KeyCall::read(store, key) }?;
        let Some(alloc) = alloc else {
            return Err(invalid("alloc is NULL"));
        };
        let c = call.client()?;
        let provide = |n: u64| {
            // SAFETY: the caller's allocator, per the contract.
            let p = unsafe { alloc(ctx, n) };
            (!p.is_null()).then_some(CallerMemory(p))
        };
        // SAFETY: the allocator's memory is writable for the size it was asked for.
        let result = one(unsafe { batch_get_alloc(c, &[call.key()], provide) });
        Ok(result?.1 as i64)
    })
}

/// Frees a buffer from `mooncake_store_batch_get_buffers`; NULL is ignored. A buffer
/// freed a second time is detected (while its memory is still ours) and ignored, with
/// the thread's last error set.
///
/// # Safety
/// `buffer` must be NULL or a buffer from `mooncake_store_batch_get_buffers` not yet
/// freed.
#[no_mangle]
pub unsafe extern "C" fn mooncake_store_free_buffer(buffer: *mut c_void) {
    ffi_boundary!({
        // SAFETY: per the contract, NULL or a buffer from batch_get_buffers.
        if unsafe { buffers::release(buffer) } {
            Ok(())
        } else {
            Err(invalid("buffer was already freed"))
        }
    })
}
