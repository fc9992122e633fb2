//! The Transfer Engine: a safe Rust API under the C ABI.

pub mod batch;
pub mod memory;
pub mod net;
pub mod rpc;
pub mod segment;
pub mod transport;
