//! The Transfer Engine: a safe Rust API under the C ABI.

pub mod batch;
pub mod engine;
pub mod memory;
pub mod region_leases;
pub mod rpc;
pub mod segment;
pub mod shared_regions;
pub mod transport;

pub use batch::TaskStatus;
pub use engine::{MetadataPublisher, Notify, TransferEngine, TransferRequest};
pub use memory::Range;
pub use transport::request::Op;
