//! [`TransferRequest`]: one request as the C ABI submits it, and its form once
//! resolved to a peer.

use crate::te::transport::request::{Op, PeerRequest};

/// One transfer request (the C `transfer_request_t`, validated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferRequest {
    /// Read from or write to the target.
    pub op: Op,
    /// Local buffer address.
    pub source: u64,
    /// Target segment id (0 = this engine).
    pub target_id: i32,
    /// Absolute address in the target process.
    pub target_offset: u64,
    /// Length in bytes.
    pub length: u64,
}

impl TransferRequest {
    /// A request moving `length` bytes between `source` here and `target_offset` in
    /// segment `target_id`.
    pub const fn new(
        op: Op,
        source: u64,
        target_id: i32,
        target_offset: u64,
        length: u64,
    ) -> TransferRequest {
        TransferRequest {
            op,
            source,
            target_id,
            target_offset,
            length,
        }
    }
}

impl From<&TransferRequest> for PeerRequest {
    fn from(r: &TransferRequest) -> PeerRequest {
        PeerRequest {
            op: r.op,
            local: r.source,
            remote: r.target_offset,
            len: r.length,
        }
    }
}
