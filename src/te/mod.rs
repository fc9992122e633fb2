//! The Transfer Engine: a safe Rust API under the C ABI.

pub mod rpc;
