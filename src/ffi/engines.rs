//! The table of live Transfer Engines behind `transfer_engine_t` handles.

use super::args::{c_slice, c_str};
use super::fail::FfiError;
use super::handles::HandleTable;
use super::te_types::transfer_engine_t;
use crate::te::TransferEngine;
use std::borrow::Cow;
use std::ffi::{c_char, c_int};
use std::sync::Arc;

/// Every engine `createTransferEngine` or `mooncake_te_create` made and nobody
/// destroyed yet; tokens start with "MCTE".
pub(crate) static ENGINES: HandleTable<TransferEngine> = HandleTable::new(
    0x4D43_5445_0000_0000,
    "engine handle",
    "is not a live engine (already destroyed, or not returned by createTransferEngine)",
);

/// 0 once `engine` is a live engine: the body of the calls that have nothing to do in
/// this build but check their handle.
pub(crate) fn checked_no_op(engine: transfer_engine_t) -> Result<c_int, FfiError> {
    ENGINES.get(engine)?;
    Ok(0)
}

/// The engine behind `engine` and the name argument `name` (called `what` in errors),
/// checked in that order.
///
/// # Safety
/// `name` must be NULL or NUL-terminated, outliving the call.
pub(crate) unsafe fn engine_and_name<'a>(
    engine: transfer_engine_t,
    name: *const c_char,
    what: &str,
) -> Result<(Arc<TransferEngine>, Cow<'a, str>), FfiError> {
    let e = ENGINES.get(engine)?;
    // SAFETY: NULL or NUL-terminated, per the contract.
    let name = unsafe { c_str(name, what) }?;
    Ok((e, name))
}

/// A live engine and a non-empty C array of its call.
pub(crate) type EngineAndList<'a, T> = (Arc<TransferEngine>, &'a [T]);

/// The engine behind `engine` and the C array of `count` entries at `list` (called
/// `what` in errors), checked in that order; `None` for an empty list, which every
/// batch call of upstream's accepts as a successful no-op.
///
/// # Safety
/// `list` must be NULL or point to `count` entries, outliving the call.
pub(crate) unsafe fn engine_and_list<'a, T>(
    engine: transfer_engine_t,
    list: *const T,
    count: usize,
    what: &str,
) -> Result<Option<EngineAndList<'a, T>>, FfiError> {
    let e = ENGINES.get(engine)?;
    // SAFETY: `count` entries at `list`, per the contract.
    let list = unsafe { c_slice(list, count, what) }?;
    Ok((!list.is_empty()).then_some((e, list)))
}
