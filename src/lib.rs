//! mooncake-rs: a Rust drop-in for Mooncake's Transfer Engine and Store.
//!
//! Layers, top to bottom: [`ffi`] (the C ABI) and the binaries; [`store`],
//! [`conductor`] and [`p2p`]; the engines [`master`] and [`te`]; [`wire`], [`metadata`] and
//! [`config`]; the plumbing [`codec`], [`runtime`] and [`host`]; then [`error`] and
//! [`sys`] (libraries loaded at run time). Imports point downward only; nothing below
//! `ffi` knows C exists. The map of the code is the repository's `ARCHITECTURE.md`.

pub mod codec;
pub mod conductor;
pub mod config;
pub mod error;
pub mod ffi;
#[doc(hidden)]
pub mod fuzzing;
pub mod host;
pub mod master;
pub mod metadata;
pub mod p2p;
pub mod pg;
pub mod rpc_channel;
pub mod runtime;
pub mod store;
pub mod sys;
pub mod te;
pub mod wire;

pub use error::{Error, Result};

/// The library version, as `major.minor.patch`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
