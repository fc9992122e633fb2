//! [`TransferEngine`], split by job: what it holds ([`state`]), creating and
//! dropping it ([`lifecycle`]), installing transports ([`install`], RDMA in
//! [`rdma`]), publishing its metadata ([`publishing`]), the remote segments it knows
//! ([`segments`]), registering memory ([`registration`]), routing submissions
//! ([`routing`]) and batches and notifies ([`batches`]).

mod batches;
mod install;
mod lifecycle;
mod own_segment;
mod publishing;
mod rdma;
mod registration;
mod request;
mod routing;
mod segments;
mod state;

pub use own_segment::Notify;
pub use publishing::MetadataPublisher;
pub use request::TransferRequest;
pub use state::TransferEngine;
