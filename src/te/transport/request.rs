//! What every transport moves: a direction and one request already resolved to a peer.

/// Direction of a request, seen from the initiator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// The initiator reads from the target.
    Read,
    /// The initiator writes to the target.
    Write,
}

/// One transfer already resolved to a peer: the same shape for every transport.
#[derive(Debug, Clone, Copy)]
pub struct PeerRequest {
    /// Read or write, seen from the initiator.
    pub op: Op,
    /// Local address.
    pub local: u64,
    /// Absolute remote address.
    pub remote: u64,
    /// Length in bytes.
    pub len: u64,
}
