//! Upstream's `transfer_engine_c.h` (27 functions), one module per C object: the
//! engine ([`engine`]), its segments ([`segment`]), registered memory ([`memory`]),
//! batches and their transfers ([`batch`]) and notifies ([`notify`]). The C types
//! are in [`super::te_types`], the engine handle table in `super::engines`.
//!
//! Return conventions are upstream's (spec §1.2-§1.3): register, segment and notify
//! functions return negative `ERR_*` codes; submitTransfer, submitTransferWithNotify,
//! getTransferStatus and freeBatchID return positive status codes. Where upstream has
//! undefined behaviour (NULL or freed handles, bogus batch ids, NULL arrays), these
//! return the function's failure value instead and record the reason, readable with
//! `mooncake_last_error_message()` from `mooncake_ext.h`.

pub mod batch;
pub mod engine;
pub mod memory;
pub mod notify;
pub mod segment;
