//! Transports that move bytes: TCP, RDMA, and a validated memcpy for the own segment.

pub mod local;
pub mod rdma;
pub mod same_host;
pub mod staging;
pub mod tcp;

/// One transfer already resolved to a peer: the same shape for every network transport.
#[derive(Debug, Clone, Copy)]
pub struct PeerRequest {
    /// Read or write, seen from the initiator.
    pub op: tcp::Op,
    /// Local address.
    pub local: u64,
    /// Absolute remote address.
    pub remote: u64,
    /// Length in bytes.
    pub len: u64,
}
