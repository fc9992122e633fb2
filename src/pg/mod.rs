//! Mooncake PG on CPU: collectives with dynamic membership over the Transfer Engine.
//!
//! [`Group`] is one rank: it meets the others in a [`Kv`] store, moves data through
//! mailboxes in the peers' registered memory ([`link`]) with the algorithms of
//! [`algo`], and keeps upstream's membership model (rank slots, active ranks,
//! join/activate/deactivate, failures reported with the ranks suspected). The C
//! functions are `mooncake_pg_*` (`ffi/ext_pg.rs`); Python's `mooncake.pg` wraps them.

pub mod agent;
pub mod algo;
pub mod channel;
pub mod dtype;
pub mod error;
pub mod group;
pub mod kv;
pub mod link;

#[cfg(test)]
mod algo_tests;

pub use agent::Agent;
pub use dtype::{DType, ReduceOp};
pub use error::{PgError, PgErrorKind, PgResult};
pub use group::{Group, GroupOptions};
pub use kv::{Kv, MemoryKv, MetadataKv};
