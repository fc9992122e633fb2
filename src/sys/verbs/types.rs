//! The verbs vocabulary: opaque handles, device and port attributes, queue pair
//! sizes and transitions, work requests and completions, and the MTU codes.

use std::os::fd::RawFd;

macro_rules! handle {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u64);
    )*};
}

handle! {
    /// An open device (`ibv_context`).
    Ctx;
    /// A protection domain.
    Pd;
    /// A completion queue with its completion channel.
    Cq;
    /// A queue pair.
    Qp;
    /// A registered memory region.
    Mr;
}

/// The device limits the transport sizes itself by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeviceAttr {
    /// Largest memory region.
    pub max_mr_size: u64,
    /// Queue pairs.
    pub max_qp: u32,
    /// Work requests per queue.
    pub max_qp_wr: u32,
    /// Scatter/gather entries per work request.
    pub max_sge: u32,
    /// Completion queue depth.
    pub max_cqe: u32,
    /// Outstanding RDMA reads per queue pair.
    pub max_qp_rd_atom: u32,
    /// Physical ports.
    pub phys_port_cnt: u8,
}

/// One port's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortAttr {
    /// `IBV_PORT_ACTIVE`.
    pub active: bool,
    /// Active MTU as the verbs enum (1 = 256 ... 5 = 4096).
    pub active_mtu: u32,
    /// LID (0 on RoCE).
    pub lid: u16,
    /// Entries in the GID table.
    pub gid_table_len: u32,
    /// Ethernet link layer (RoCE), else InfiniBand.
    pub ethernet: bool,
}

/// The kind of a GID table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GidKind {
    /// RoCE v2 (routable, UDP encapsulated).
    RoceV2,
    /// RoCE v1 or InfiniBand.
    IbRoceV1,
    /// Not known (no sysfs information).
    Unknown,
}

/// One GID table entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidEntry {
    /// Its index.
    pub index: u32,
    /// The 16 bytes.
    pub gid: [u8; 16],
    /// Its type.
    pub kind: GidKind,
    /// The network device it belongs to, when any.
    pub netdev: Option<String>,
}

/// A registered memory region and its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrKeys {
    /// The region.
    pub mr: Mr,
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
}

/// Memory access a region grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// Peers may RDMA-read and -write it.
    pub remote: bool,
    /// Ask for PCIe relaxed ordering where the library supports it.
    pub relaxed_ordering: bool,
}

/// Device memory exported as a dma-buf, as `ibv_reg_dmabuf_mr` registers it: `len`
/// bytes at `offset` into the buffer behind `fd`, addressed by peers as `iova`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dmabuf {
    /// The dma-buf's file descriptor.
    pub fd: RawFd,
    /// Where the region starts in the buffer.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The address peers name it by.
    pub iova: u64,
}

/// Queue pair sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCaps {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per request.
    pub max_sge: u32,
    /// Inline data bytes.
    pub max_inline: u32,
}

/// A new queue pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInfo {
    /// Its handle.
    pub qp: Qp,
    /// Its number, which the peer addresses.
    pub qp_num: u32,
}

/// The peer a queue pair is connected to (INIT -> RTR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemotePath {
    /// Path MTU as the verbs enum.
    pub path_mtu: u32,
    /// The peer's queue pair number.
    pub dest_qp_num: u32,
    /// The peer's GID.
    pub gid: [u8; 16],
    /// The peer's LID.
    pub lid: u16,
    /// Local GID index.
    pub sgid_index: u8,
    /// Port number.
    pub port: u8,
    /// Traffic class (`MC_IB_TC`), when set.
    pub traffic_class: Option<u8>,
    /// Service level (`MC_IB_SL`).
    pub service_level: u8,
    /// Incoming RDMA reads in flight (`max_dest_rd_atomic`).
    pub max_dest_rd_atomic: u8,
}

/// A queue pair state change, with upstream's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpTransition {
    /// RESET -> INIT: port, pkey index; local write and remote read/write/atomic.
    Init {
        /// Port number.
        port: u8,
        /// P_Key index.
        pkey_index: u16,
    },
    /// INIT -> RTR toward `RemotePath` (rq_psn 0, min_rnr_timer 12, GRH hop limit 16).
    Rtr(RemotePath),
    /// RTR -> RTS (timeout 14, retry 7, rnr retry 7, sq_psn 0).
    Rts {
        /// Outgoing RDMA reads in flight (`max_rd_atomic`).
        max_rd_atomic: u8,
    },
    /// Any state -> ERROR: flushes what is outstanding.
    Error,
}

/// RDMA WRITE or READ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RdmaOp {
    /// Local -> remote.
    Write,
    /// Remote -> local.
    Read,
}

/// One work request: a single-SGE RDMA WRITE or READ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkRequest {
    /// Echoed in the completion.
    pub wr_id: u64,
    /// WRITE or READ.
    pub op: RdmaOp,
    /// Local address.
    pub local_addr: u64,
    /// Bytes.
    pub len: u32,
    /// Local key of the local address.
    pub lkey: u32,
    /// Remote address.
    pub remote_addr: u64,
    /// Remote key of the remote address.
    pub rkey: u32,
    /// Produce a completion (selective signalling: errors always do).
    pub signaled: bool,
}

/// `ibv_wc_status` values the transport distinguishes.
pub mod wc {
    /// Success.
    pub const SUCCESS: u32 = 0;
    /// Flushed because the queue pair went to the error state.
    pub const WR_FLUSH_ERR: u32 = 5;
    /// Remote access error (bad rkey, range or rights).
    pub const REM_ACCESS_ERR: u32 = 10;
    /// Transport retries exhausted (peer unreachable).
    pub const RETRY_EXC_ERR: u32 = 12;
}

/// One work completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Completion {
    /// The request's id.
    pub wr_id: u64,
    /// `ibv_wc_status` (0 = success).
    pub status: u32,
    /// The queue pair it belongs to.
    pub qp_num: u32,
    /// Vendor error code.
    pub vendor_err: u32,
}

/// Path MTU in bytes for the verbs enum value (1..=5), 0 when unknown.
pub fn mtu_bytes(code: u32) -> u32 {
    match code {
        1..=5 => 128 << code,
        _ => 0,
    }
}

/// The verbs enum value for an MTU in bytes (256..4096), `None` when not one.
pub fn mtu_code(bytes: u32) -> Option<u32> {
    (1..=5).find(|&c| mtu_bytes(c) == bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_codes() {
        assert_eq!(mtu_bytes(1), 256);
        assert_eq!(mtu_bytes(5), 4096);
        assert_eq!(mtu_bytes(0), 0);
        assert_eq!(mtu_code(1024), Some(3));
        assert_eq!(mtu_code(1000), None);
    }
}
