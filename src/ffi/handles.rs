//! Handles: opaque tokens looked up in a process-wide table, never pointers.
//!
//! A table hands out a token derived from a serial number, not the address of
//! anything. Every call looks the token up, so NULL, destroyed and foreign handles are
//! detected and reported instead of being dereferenced. The serial is the handle's
//! generation: it is never reused, so a stale token never matches a later handle. Each
//! table's tokens share high bits of their own (an engine is never taken for a store);
//! they are non-canonical x86-64 addresses, so they cannot collide with a real pointer,
//! and they are never below 4096 (Go's cgo treats such `unsafe.Pointer` values as
//! invalid).

use super::fail::FfiError;
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A table of live `T`s behind opaque handles.
pub(crate) struct HandleTable<T> {
    /// High bits shared by this table's tokens; truncated away on 32-bit targets.
    base: u64,
    /// What a handle is called in errors ("engine handle").
    kind: &'static str,
    /// How errors describe a token that is not live ("is not a live engine (...)").
    not_live: &'static str,
    live: RwLock<BTreeMap<usize, Arc<T>>>,
    next: AtomicUsize,
}

impl<T> HandleTable<T> {
    /// An empty table whose tokens start with `base`.
    pub(crate) const fn new(base: u64, kind: &'static str, not_live: &'static str) -> Self {
        HandleTable {
            base,
            kind,
            not_live,
            live: RwLock::new(BTreeMap::new()),
            next: AtomicUsize::new(1),
        }
    }

    fn bad_handle(&self, handle: *mut c_void) -> FfiError {
        let what = if handle.is_null() {
            format!("{} is NULL", self.kind)
        } else {
            format!("{} {handle:p} {}", self.kind, self.not_live)
        };
        FfiError::Failed {
            what,
            errno: libc::EBADF,
        }
    }

    /// Registers `value` and returns its handle.
    pub(crate) fn insert(&self, value: T) -> *mut c_void {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let token = (self.base as usize).wrapping_add(0x1000 + n.wrapping_mul(16));
        self.live.write().insert(token, Arc::new(value));
        token as *mut c_void
    }

    /// The value behind a handle, kept alive for the duration of the call.
    pub(crate) fn get(&self, handle: *mut c_void) -> Result<Arc<T>, FfiError> {
        self.live
            .read()
            .get(&(handle as usize))
            .cloned()
            .ok_or_else(|| self.bad_handle(handle))
    }

    /// Removes a handle; the value drops once calls still using it return.
    pub(crate) fn remove(&self, handle: *mut c_void) -> Result<Arc<T>, FfiError> {
        self.live
            .write()
            .remove(&(handle as usize))
            .ok_or_else(|| self.bad_handle(handle))
    }

    /// Removes every live handle (graceful shutdown).
    pub(crate) fn drain(&self) -> Vec<Arc<T>> {
        std::mem::take(&mut *self.live.write())
            .into_values()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0x4D43_5445_0000_0000;

    #[test]
    fn null_unknown_and_removed_handles_are_rejected() {
        let table: HandleTable<u32> = HandleTable::new(BASE, "test handle", "is not live");
        assert!(table.get(std::ptr::null_mut()).is_err());
        // Addresses without provenance: never dereferenced, only looked up.
        let token = |n: usize| std::ptr::null_mut::<c_void>().wrapping_byte_add(n);
        assert!(table.get(token(0x1234)).is_err());
        assert!(table.remove(token(BASE as usize)).is_err());
        let h = table.insert(7);
        assert_eq!(*table.get(h).unwrap(), 7);
        assert_eq!(*table.remove(h).unwrap(), 7);
        assert!(table.get(h).is_err());
        let again = table.insert(8);
        assert_ne!(again, h, "a token is never handed out twice");
        assert_eq!(table.drain().len(), 1);
    }
}
