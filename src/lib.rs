//! mooncake-rs: a Rust drop-in for Mooncake's Transfer Engine.
//!
//! Layers, top to bottom: [`ffi`] (the C ABI), [`te`] (the engine, a safe Rust API),
//! [`metadata`] (segment descriptors and their stores), then [`config`], [`error`],
//! [`sys`] (libraries loaded at run time) and [`util`] plumbing. Nothing below `ffi` knows C exists.

pub mod conductor;
pub mod config;
pub mod error;
pub mod ffi;
#[doc(hidden)]
pub mod fuzzing;
pub mod master;
pub mod metadata;
pub mod store;
pub mod sys;
pub mod te;
pub mod util;
pub mod wire;

pub use error::{Error, Result};

/// The library version, as `major.minor.patch`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
