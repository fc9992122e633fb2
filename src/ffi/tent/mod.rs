//! Upstream's TENT C API (`tent/transfer_engine.h`, 33 functions) over the same
//! engine as the classic API: a `tent_engine_t` is an engine handle, so one engine can
//! be driven through either API, and TENT and classic engines (ours or upstream's)
//! move bytes between each other. One module per C object: configuration and the
//! engine ([`config`], [`engine`]), segments ([`segment`]), memory ([`memory`]),
//! batches and their tasks ([`batch`]) and notifications ([`notify`]). The C types
//! are in [`super::tent_types`].
//!
//! Return conventions are TENT's: 0 on success, -1 on any failure (the reason is in
//! the thread's last error, `mooncake_last_error_message()`); `tent_allocate_batch`
//! returns `UINT64_MAX` on failure; `tent_available` 1 or 0. Where TENT leaves
//! outputs unset or reads NULL (a NULL notification name, an empty result), these
//! write NULL/0 and accept NULL as "".

pub mod batch;
pub mod config;
pub mod engine;
pub mod memory;
pub mod notify;
pub mod segment;

use crate::ffi::fail::{invalid, FfiError};
use crate::ffi::tent_types::tent_segment_id_t;

/// A TENT segment handle as the engine's segment id.
fn segment_id(handle: tent_segment_id_t) -> Result<i32, FfiError> {
    i32::try_from(handle).map_err(|_| {
        invalid(format!(
            "segment handle {handle} was not returned by tent_open_segment"
        ))
    })
}
