//! The C ABI: upstream's `transfer_engine_c.h` (27 functions) plus the `mooncake_*`
//! extensions of `mooncake_ext.h`.
//!
//! Rules every exported function follows:
//!
//! * Its body runs inside `boundary::ffi_boundary!`: panics are caught, errors
//!   become upstream's return value for that function, and the reason is kept in a
//!   per-thread last error (see [`ext`]). Nothing unwinds or aborts across the boundary.
//! * NULL pointers and impossible lengths are rejected before anything is read.
//! * Engine handles are opaque tokens looked up in a table (`handles`), never
//!   dereferenced, so NULL, destroyed and foreign handles return the failure value.
//! * Everything a call reads through a pointer is copied before it returns.
//!
//! The headers in `include/mooncake/` are generated from [`te_types`], [`transfer`],
//! [`transfer_engine`] and [`ext`] by cbindgen (`cbindgen.toml`); the `header` test
//! checks the committed copies (`MOONCAKE_BLESS=1 cargo test --test header` rewrites them).

pub(crate) mod boundary;
pub mod ext;
pub mod ext_store;
pub mod ext_te;
mod handles;
mod shutdown;
pub mod store;
pub mod te_types;
pub mod transfer;
pub mod transfer_engine;
