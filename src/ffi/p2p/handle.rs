//! The table of live P2P nodes behind `mooncake_p2p_t` handles, what one handle holds
//! (the node and its agent), and the readers every P2P function shares.

use super::mooncake_p2p_t;
use crate::ffi::args::c_str;
use crate::ffi::fail::{invalid, FfiError};
use crate::ffi::handles::HandleTable;
use crate::p2p::{Agent, P2pError, P2pStore};
use crate::store::ErrorCode;
use parking_lot::Mutex;
use std::borrow::Cow;
use std::ffi::c_char;
use std::sync::Arc;

/// One node: the store, and its agent once started.
pub(super) struct P2pHandle {
    /// The node (shared with its agent).
    pub(super) store: Arc<P2pStore>,
    /// The agent, once `mooncake_p2p_start_agent` started it.
    pub(super) agent: Mutex<Option<Agent>>,
}

impl P2pHandle {
    /// A handle over `store`, with no agent.
    pub(super) fn new(store: P2pStore) -> P2pHandle {
        P2pHandle {
            store: Arc::new(store),
            agent: Mutex::new(None),
        }
    }

    /// Stops the agent (unpublishing its address) and withdraws every copy the node
    /// holds; later calls through other references fail with `MOONCAKE_P2P_CLOSED`.
    pub(super) fn close(&self) {
        drop(self.agent.lock().take());
        self.store.close();
    }
}

impl Drop for P2pHandle {
    fn drop(&mut self) {
        self.close();
    }
}

/// Every node `mooncake_p2p_create*` made and nobody destroyed yet; tokens start with
/// "MCP2", so a P2P handle is never taken for an engine ("MCTE") or a store ("MCST").
pub(super) static NODES: HandleTable<P2pHandle> = HandleTable::new(
    0x4D43_5032_0000_0000,
    "P2P store handle",
    "is not a live P2P store (destroyed, or not from mooncake_p2p_create)",
);

/// Closes every live node (graceful shutdown): agents stop and copies are withdrawn
/// before the process exits.
pub(crate) fn close_all_nodes() {
    for node in NODES.drain() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || node.close()));
    }
}

/// A P2P Store error is returned as its `MOONCAKE_P2P_*` code, the cause kept as the
/// thread's last error.
impl From<P2pError> for FfiError {
    fn from(e: P2pError) -> FfiError {
        FfiError::Code {
            code: ErrorCode(e.code()),
            what: e.to_string(),
        }
    }
}

/// The node behind `p`.
pub(super) fn node(p: mooncake_p2p_t) -> Result<Arc<P2pHandle>, FfiError> {
    NODES.get(p)
}

/// The node behind `p` and the object name `name`, checked in that order.
///
/// # Safety
/// `name` must be NULL or NUL-terminated, outliving the call.
pub(super) unsafe fn node_and_name<'a>(
    p: mooncake_p2p_t,
    name: *const c_char,
) -> Result<(Arc<P2pHandle>, Cow<'a, str>), FfiError> {
    let h = node(p)?;
    // SAFETY: NULL or NUL-terminated, per the contract.
    let name = unsafe { c_str(name, "name") }?;
    Ok((h, name))
}

/// Writes `text` snprintf-style (at most `len - 1` bytes and a NUL) and returns its
/// full length; `buf` may be NULL only with `len` 0 (asking for the length).
///
/// # Safety
/// `buf` NULL or writable for `len` bytes.
pub(super) unsafe fn emit(buf: *mut c_char, len: usize, text: &str) -> Result<i64, FfiError> {
    if buf.is_null() && len > 0 {
        return Err(invalid(format!("buf is NULL but len is {len}")));
    }
    // SAFETY: writable for `len` bytes, per the contract.
    unsafe { crate::ffi::args::write_truncated(buf, len, text) };
    Ok(text.len() as i64)
}

/// Writes `text` and its NUL into `buf` when all of it fits, else fails (writing
/// nothing) with the size needed.
///
/// # Safety
/// `buf` NULL or writable for `len` bytes.
pub(super) unsafe fn write_whole(
    buf: *mut c_char,
    len: usize,
    text: &str,
    what: &str,
) -> Result<(), FfiError> {
    if buf.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    if text.len() >= len {
        return Err(FfiError::Failed {
            what: format!(
                "{what} has {len} bytes; '{text}' needs {} with its NUL",
                text.len() + 1
            ),
            errno: libc::ERANGE,
        });
    }
    // SAFETY: `text.len() + 1 <= len` bytes, writable per the contract.
    unsafe { crate::ffi::args::write_truncated(buf, len, text) };
    Ok(())
}
