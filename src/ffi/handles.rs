//! Engine handles: opaque tokens looked up in a process-wide table, never pointers.
//!
//! `createTransferEngine` hands out a token derived from a counter, not the address of
//! anything. Every call looks the token up, so NULL, destroyed and foreign handles are
//! detected and reported instead of being dereferenced. Tokens are never reused. They
//! are non-canonical x86-64 addresses, so they cannot collide with a real pointer, and
//! they are never below 4096 (Go's cgo treats such `unsafe.Pointer` values as invalid).

use super::boundary::FfiError;
use crate::te::TransferEngine;
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// High bits shared by every token ("MCTE"); truncated away on 32-bit targets.
const TOKEN_BASE: u64 = 0x4D43_5445_0000_0000;

static ENGINES: RwLock<BTreeMap<usize, Arc<TransferEngine>>> = RwLock::new(BTreeMap::new());
static NEXT: AtomicUsize = AtomicUsize::new(1);

fn bad_handle(handle: *mut c_void) -> FfiError {
    let what = if handle.is_null() {
        "engine handle is NULL".to_string()
    } else {
        format!(
            "engine handle {handle:p} is not a live engine (already destroyed, or not \
             returned by createTransferEngine)"
        )
    };
    FfiError::Invalid {
        what,
        errno: libc::EBADF,
    }
}

/// Registers an engine and returns its handle.
pub(crate) fn insert(engine: TransferEngine) -> *mut c_void {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let token = (TOKEN_BASE as usize).wrapping_add(0x1000 + n.wrapping_mul(16));
    ENGINES.write().insert(token, Arc::new(engine));
    token as *mut c_void
}

/// The engine behind a handle, kept alive for the duration of the call.
pub(crate) fn get(handle: *mut c_void) -> Result<Arc<TransferEngine>, FfiError> {
    ENGINES
        .read()
        .get(&(handle as usize))
        .cloned()
        .ok_or_else(|| bad_handle(handle))
}

/// Removes a handle; the engine drops once calls still using it return.
pub(crate) fn remove(handle: *mut c_void) -> Result<Arc<TransferEngine>, FfiError> {
    ENGINES
        .write()
        .remove(&(handle as usize))
        .ok_or_else(|| bad_handle(handle))
}

/// Removes every live handle (graceful shutdown).
pub(crate) fn drain() -> Vec<Arc<TransferEngine>> {
    std::mem::take(&mut *ENGINES.write())
        .into_values()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_unknown_handles_are_rejected() {
        assert!(get(std::ptr::null_mut()).is_err());
        // Addresses without provenance: never dereferenced, only looked up.
        let token = |n: usize| std::ptr::null_mut::<c_void>().wrapping_byte_add(n);
        assert!(get(token(0x1234)).is_err());
        assert!(remove(token(TOKEN_BASE as usize)).is_err());
    }
}
