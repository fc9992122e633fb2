//! [`RdmaError`]: why a step of the RDMA transport failed (registering memory,
//! starting a worker, making an endpoint, a handshake, probing a device), with what
//! it was about; [`RouteError`]: why a slice found no path. The transport turns it into a
//! [`crate::Error`] of the variant each caller always used.

use crate::error::Error;
use crate::sys::cuda::GpuError;
use crate::sys::verbs::VerbsError;

/// Results of the RDMA transport's steps.
pub type RdmaResult<T> = Result<T, RdmaError>;

/// A failed step of the RDMA transport.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RdmaError {
    /// A verbs call failed.
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    /// Device memory could not be registered, directly or as a dma-buf.
    #[error("{direct}; as dma-buf: {dmabuf}")]
    DeviceMemory {
        /// Why `ibv_reg_mr` refused it.
        direct: VerbsError,
        /// Why the dma-buf registration failed too.
        dmabuf: Box<RdmaError>,
    },
    /// Device memory needs a GPU runtime for its dma-buf, and there is none.
    #[error("no GPU runtime")]
    NoGpuRuntime,
    /// The GPU runtime exported no dma-buf for the range.
    #[error("{0}")]
    Dmabuf(#[from] GpuError),
    /// A registration thread panicked.
    #[error("registration panicked")]
    RegistrationPanicked,
    /// A worker's eventfd could not be made.
    #[error("eventfd: {}", std::io::Error::from_raw_os_error(*errno))]
    EventFd {
        /// `errno` of `eventfd`.
        errno: i32,
    },
    /// A worker thread could not be started (the spawn error).
    #[error("starting a worker thread: {0}")]
    WorkerThread(String),
    /// The workers are not started yet.
    #[error("workers not started")]
    WorkersNotStarted,
    /// Every endpoint of the NIC has work outstanding, so none can be evicted.
    #[error("{nic} has {count} busy endpoints")]
    BusyEndpoints {
        /// Our NIC.
        nic: String,
        /// Its endpoints.
        count: usize,
    },
    /// The two sides of an endpoint have different numbers of queue pairs.
    #[error(
        "the peer has {peer} QPs per endpoint and this side {ours} (MC_NUM_QP_PER_EP must match)"
    )]
    QpCountMismatch {
        /// The peer's.
        peer: usize,
        /// Ours.
        ours: usize,
    },
    /// A peer NIC path that is not `<server>@<device>`.
    #[error("malformed peer NIC path '{0}'")]
    MalformedPeerPath(String),
    /// The endpoint was removed from its NIC.
    #[error("the endpoint was retired")]
    Retired,
    /// The handshake RPC to the peer failed.
    #[error("handshake with {server}: {source}")]
    Exchange {
        /// The peer server.
        server: String,
        /// The RPC's error.
        source: Error,
    },
    /// The peer answered with other QPs than the ones it connected to ours.
    #[error("{server} answered with other QPs than it connected; retrying")]
    OtherQps {
        /// The peer server.
        server: String,
    },
    /// The peer rejected the handshake.
    #[error("{server} rejected the handshake: {reason}")]
    Rejected {
        /// The peer server.
        server: String,
        /// Its reply message.
        reason: String,
    },
    /// The peer answered for other NIC paths than the ones asked for.
    #[error(
        "{server} answered for {answered_local} -> {answered_peer} instead of {peer_path} -> \
         {nic_path} (a TCP-only peer, or an RDMA device it does not have)"
    )]
    OtherPaths {
        /// The peer server.
        server: String,
        /// The NIC path it answered from.
        answered_local: String,
        /// The NIC path it answered to.
        answered_peer: String,
        /// The peer NIC path asked for.
        peer_path: String,
        /// Our NIC path.
        nic_path: String,
    },
    /// The peer publishes no such device.
    #[error("{server} published no device {device}")]
    NoPeerDevice {
        /// The peer server.
        server: String,
        /// The device asked for.
        device: String,
    },
    /// The peer's GID does not parse.
    #[error("{server} sent an invalid GID '{gid}'")]
    InvalidGid {
        /// The peer server.
        server: String,
        /// What it sent.
        gid: String,
    },
    /// Our QPs could not be connected to the peer's.
    #[error("connecting QPs to {peer_path}: {source}")]
    ConnectQps {
        /// The peer NIC path.
        peer_path: String,
        /// Why.
        source: Box<RdmaError>,
    },
    /// The peer refused the ready ACK.
    #[error("{server} refused the ready ACK: {reason}")]
    AckRefused {
        /// The peer server.
        server: String,
        /// Its reply message.
        reason: String,
    },
    /// The ready ACK could not be sent.
    #[error("sending the ready ACK to {server}: {source}")]
    AckNotSent {
        /// The peer server.
        server: String,
        /// The RPC's error.
        source: Error,
    },
    /// The endpoint got new QPs while the handshake was under way.
    #[error("the endpoint was rebuilt during the handshake")]
    Rebuilt,
    /// The transport is shutting down: no new handshakes are started.
    #[error("the transport is shutting down")]
    ShuttingDown,
    /// A device's port is down.
    #[error("port {0} is not active")]
    PortInactive(u8),
    /// A device's port has an empty GID table.
    #[error("port {0} has no GID table")]
    NoGidTable(u8),
}

/// Why a slice found no path (small, names boxed: it travels back with the slice).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The transport is stopping: no new slices are routed.
    #[error("the transport is stopping")]
    Stopping,
    /// The topology names no local NIC for the buffer's location.
    #[error("no local NIC for the buffer's location")]
    NoLocalNic,
    /// The topology's local NIC is not one we opened.
    #[error("local NIC {0} is not open")]
    LocalNicNotOpen(Box<str>),
    /// The local address is in no chunk of its region.
    #[error("the local buffer has no chunk")]
    NoLocalChunk,
    /// The remote range is in no buffer the peer published.
    #[error("no remote buffer")]
    NoRemoteBuffer,
    /// The peer's topology names no NIC for the buffer's location.
    #[error("the peer's topology has no NIC for the buffer")]
    NoPeerNic,
    /// The peer's topology names a device it does not publish.
    #[error("the peer publishes no device {0}")]
    PeerDeviceUnknown(Box<str>),
    /// The peer's buffer has no key for the chosen device.
    #[error("the peer buffer has no key for that device")]
    NoRemoteKey,
}
