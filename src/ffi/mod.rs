//! The C ABI: upstream's `transfer_engine_c.h` (27 functions) and `store_c.h`, plus the
//! `mooncake_*` extensions of `mooncake_ext.h`.
//!
//! Rules every exported function follows:
//!
//! * Its body runs inside `boundary::ffi_boundary!`: the function's name is written
//!   once, panics are caught, failures become the return type's failure value
//!   (`fail::FailureValue`) or upstream's code for that function, and the reason is
//!   kept in a per-thread last error (`last_error`, read through [`ext`]). Nothing
//!   unwinds or aborts across the boundary.
//! * NULL pointers and impossible lengths are rejected before anything is read
//!   (`args`).
//! * Engine and store handles are opaque tokens looked up in a `handles::HandleTable`,
//!   never dereferenced, so NULL, destroyed and foreign handles return the failure
//!   value.
//! * Everything a call reads through a pointer is copied before it returns.
//!
//! One module per C object: the engine and its segments, memory, batches and
//! notifies ([`te`], with the extensions in [`ext_te`]), stores ([`store`],
//! [`ext_store`]).
//!
//! The headers in `include/mooncake/` are generated from these modules by cbindgen
//! (`cbindgen.toml`); the `header` test checks the committed copies
//! (`MOONCAKE_BLESS=1 cargo test --test header` rewrites them).

mod args;
pub(crate) mod boundary;
mod engines;
pub mod ext;
pub mod ext_pg;
pub mod ext_store;
pub mod ext_te;
mod fail;
mod handles;
mod last_error;
pub mod p2p;
pub mod rpc_channel;
mod shutdown;
pub mod store;
pub mod te;
pub mod te_types;
pub mod tent;
pub mod tent_types;
