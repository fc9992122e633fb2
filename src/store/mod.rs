//! Mooncake Store client: a safe Rust API over the master ([`MasterApi`]) and the
//! Transfer Engine, with upstream `RealClient`'s behaviour and return codes
//! (spec store.md §1-§2). The C ABI (`store_c.h`) is a thin layer over it in
//! `ffi::store`.
//!
//! A [`Client`] is set up with [`Client::setup`] (master over coro_rpc) or
//! [`Client::setup_with_master`] (any [`MasterApi`], e.g. the in-process master).
//! Operations fail with a [`StoreError`]: upstream's numeric code ([`ErrorCode`], what
//! C and Python callers get back) and its cause; [`Client::setup`] returns the code
//! alone.
//!
//! [`MasterApi`]: crate::wire::master_api::MasterApi

pub mod api;
mod client;
pub mod config;
mod connect;
pub mod disk_tier;
pub mod dummy;
pub mod error;
mod heartbeat;
pub mod host_memory;
mod http;
pub mod leader;
pub mod memory;
pub mod metrics;
mod ops;
mod read;
pub mod segments;
mod sessions;
mod state;
mod tasks;
#[cfg(test)]
pub(crate) mod test_support;
mod transfer;
mod vocab;
mod write;

pub use crate::wire::master_api::{ErrorCode, ReplicateConfig, SoftPinAction};
pub use api::StoreApi;
pub use client::{Client, Health};
pub use config::SetupConfig;
pub use connect::connect_master;
pub use disk_tier::config::DiskTierConfig;
pub use dummy::{DummyClient, DummyServer};
pub use error::{Code, StoreError, StoreResult};
pub use transfer::MAX_SLICE;
pub use vocab::{
    BatchWrite, Fragments, Pieces, Range, RangedRead, RangedResults, ReadTarget, WriteMode,
};
