//! Slices: the pieces a transfer is cut into (at most `MC_SLICE_SIZE`, a short tail
//! merged into the last one, never crossing a registered chunk on either side), each
//! one RDMA work request; and the peer a slice goes to.

use super::memory::Hold;
use super::topology::Topology;
use crate::metadata::RdmaPart;
use crate::sys::verbs::RdmaOp;
use crate::te::batch::Task;
use std::sync::Arc;
use std::time::Instant;

/// A remote RDMA segment, as a slice needs it.
#[derive(Debug)]
pub struct Target {
    /// The segment name.
    pub segment: String,
    /// The server part of its NIC paths (`rdma_server_name`, else the name).
    pub server: String,
    /// Its devices and keyed buffers.
    pub rdma: RdmaPart,
    /// Its topology matrix.
    pub topology: Topology,
    /// NIC path of each of its devices, in `devices[]` order.
    pub paths: Vec<Arc<str>>,
    /// GID bytes of each device.
    pub gids: Vec<[u8; 16]>,
}

/// One work request's worth of a transfer.
#[derive(Debug)]
pub struct Slice {
    /// The task it completes a part of.
    pub task: Arc<Task>,
    /// WRITE or READ.
    pub op: RdmaOp,
    /// Local address.
    pub local: u64,
    /// Remote address.
    pub remote: u64,
    /// Bytes.
    pub len: u32,
    /// Keeps the local region registered while the slice lives.
    pub hold: Hold,
    /// Where it goes.
    pub target: Arc<Target>,
    /// Attempts made so far (0 on the first).
    pub attempt: u32,
    /// Our NIC for this attempt.
    pub nic: usize,
    /// The local key on that NIC.
    pub lkey: u32,
    /// The peer device index for this attempt.
    pub peer_dev: usize,
    /// The remote key on that device.
    pub rkey: u32,
    /// When it was last posted.
    pub posted_at: Option<Instant>,
}

/// Cuts `[0, len)` into slice lengths (upstream's rule): while more than
/// `slice + fragment` remains take `slice`, then the rest in one piece. `limits`
/// gives, for an offset, how many bytes may follow in one piece (chunk boundaries).
pub fn cut(len: u64, slice: u64, fragment: u64, limits: impl Fn(u64) -> u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut at = 0;
    let slice = slice.max(1);
    while at < len {
        let remaining = len - at;
        let mut n = if remaining <= slice + fragment {
            remaining
        } else {
            slice
        };
        n = n.min(limits(at).max(1)).min(u64::from(u32::MAX));
        out.push((at, n));
        at += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_slicing() {
        let unlimited = |_| u64::MAX;
        assert_eq!(cut(0, 64, 16, unlimited), vec![]);
        assert_eq!(cut(80, 64, 16, unlimited), vec![(0, 80)]);
        assert_eq!(cut(81, 64, 16, unlimited), vec![(0, 64), (64, 17)]);
        assert_eq!(
            cut(200, 64, 16, unlimited),
            vec![(0, 64), (64, 64), (128, 72)]
        );
        // A chunk boundary at 100 splits the piece across it.
        let limits = |at: u64| if at < 100 { 100 - at } else { u64::MAX };
        assert_eq!(cut(150, 64, 16, limits), vec![(0, 64), (64, 36), (100, 50)]);
    }
}
