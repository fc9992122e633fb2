//! The checked arguments of the calls on keys: one key ([`KeyCall`]), or `count` keys
//! with a results array ([`KeyBatch`], and its per-key results when the store is not
//! set up).

use super::args::{key_arg, keys_arg};
use super::handle::client;
use super::results::{codes, not_set_up};
use crate::ffi::args::c_slice;
use crate::ffi::boundary::FnName;
use crate::ffi::fail::{invalid, FfiError};
use crate::store::{ErrorCode, ReplicateConfig, StoreApi, StoreResult, WriteMode};
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

/// A one-key call's handle and key, checked.
pub(in crate::ffi) struct KeyCall {
    client: Option<Arc<dyn StoreApi>>,
    key: String,
}

impl KeyCall {
    /// Checks in upstream's order: the handle (-1), then the key (-1 when NULL).
    ///
    /// # Safety
    /// `key` must be NULL or NUL-terminated.
    pub(in crate::ffi) unsafe fn read(
        store: *mut std::ffi::c_void,
        key: *const c_char,
    ) -> Result<KeyCall, FfiError> {
        let client = client(store)?;
        // SAFETY: forwarded contract.
        let key = unsafe { key_arg(key) }?;
        Ok(KeyCall { client, key })
    }

    /// The key.
    pub(in crate::ffi) fn key(&self) -> &str {
        &self.key
    }

    /// The set-up client; -600 when the store is not set up.
    pub(in crate::ffi) fn client(&self) -> Result<&dyn StoreApi, FfiError> {
        self.client
            .as_deref()
            .ok_or_else(|| ErrorCode::INVALID_PARAMS.into())
    }
}

/// The body of the writes of a copy of `size` bytes at `value` under `key`: checks in
/// upstream's order (the handle, the key, the value, then the config `config` reads),
/// then puts or upserts; 0 or the store's code.
///
/// # Safety
/// `key` must be NULL or NUL-terminated, `value` NULL or readable for `size` bytes.
pub(in crate::ffi) unsafe fn write_copy(
    mode: WriteMode,
    store: *mut c_void,
    key: *const c_char,
    value: *const c_void,
    size: usize,
    config: impl FnOnce() -> Result<ReplicateConfig, FfiError>,
) -> Result<c_int, FfiError> {
    // SAFETY: forwarded contract.
    let (call, value) = unsafe {
        (
            KeyCall::read(store, key)?,
            c_slice(value.cast::<u8>(), size, "value")?,
        )
    };
    let cfg = config()?;
    let c = call.client()?;
    match mode {
        WriteMode::Put => c.put(call.key(), value, &cfg),
        WriteMode::Upsert => c.upsert(call.key(), value, &cfg),
    }?;
    Ok(0)
}

/// A batch call's handle and keys, checked.
pub(in crate::ffi) struct KeyBatch {
    client: Option<Arc<dyn StoreApi>>,
    keys: Vec<String>,
}

impl KeyBatch {
    /// Checks in upstream's order: the handle (-1), the results array `out` named
    /// `out_name` (-1 when NULL), then the keys (-1 for a NULL array or key).
    ///
    /// # Safety
    /// `keys` must be NULL or hold `count` pointers, each NULL or NUL-terminated.
    pub(in crate::ffi) unsafe fn read<T>(
        store: *mut std::ffi::c_void,
        keys: *const *const c_char,
        count: usize,
        out: *mut T,
        out_name: &str,
    ) -> Result<KeyBatch, FfiError> {
        let client = client(store)?;
        if out.is_null() {
            return Err(invalid(format!("{out_name} is NULL")));
        }
        // SAFETY: forwarded contract.
        let keys = unsafe { keys_arg(keys, count) }?;
        Ok(KeyBatch { client, keys })
    }

    /// The keys, in the caller's order.
    pub(in crate::ffi) fn keys(&self) -> &[String] {
        &self.keys
    }

    /// Runs `op` on the client over the keys; `None` when the store is not set up.
    pub(in crate::ffi) fn with_client<R>(
        &self,
        op: impl FnOnce(&dyn StoreApi, &[&str]) -> R,
    ) -> Option<R> {
        let c = self.client.as_deref()?;
        let refs: Vec<&str> = self.keys.iter().map(String::as_str).collect();
        Some(op(c, &refs))
    }

    /// Runs `op` on the client over the keys. When the store is not set up every key
    /// gets -600, recorded as `function`'s last error when one is given (the
    /// extensions) and silently otherwise (upstream's `store_c.h`).
    pub(in crate::ffi) fn results<R: Clone>(
        &self,
        function: Option<FnName>,
        op: impl FnOnce(&dyn StoreApi, &[&str]) -> Vec<StoreResult<R>>,
    ) -> Vec<Result<R, ErrorCode>> {
        match self.with_client(op) {
            Some(results) => codes(function, results),
            None => match function {
                Some(f) => not_set_up(f, self.keys.len()),
                None => vec![Err(ErrorCode::INVALID_PARAMS); self.keys.len()],
            },
        }
    }
}
