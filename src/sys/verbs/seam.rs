//! [`Verbs`]: the one trait the RDMA transport calls verbs through.

use super::error::{VResult, VerbsError};
use super::types::{
    Access, Completion, Cq, Ctx, DeviceAttr, Dmabuf, GidEntry, Mr, MrKeys, Pd, PortAttr, Qp,
    QpCaps, QpInfo, QpTransition, WorkRequest,
};
use std::os::fd::RawFd;

/// The verbs the RDMA transport uses. Implementations are thread-safe; the transport
/// guarantees each handle is used only while alive.
pub trait Verbs: Send + Sync {
    /// A short description of the provider (library path, or "fake").
    fn provider(&self) -> String;
    /// Names of the RDMA devices present.
    fn device_names(&self) -> VResult<Vec<String>>;
    /// Opens device `name`.
    fn open_device(&self, name: &str) -> VResult<Ctx>;
    /// Closes a device opened by [`Verbs::open_device`].
    fn close_device(&self, ctx: Ctx);
    /// The device's limits.
    fn query_device(&self, ctx: Ctx) -> VResult<DeviceAttr>;
    /// Port `port`'s state.
    fn query_port(&self, ctx: Ctx, port: u8) -> VResult<PortAttr>;
    /// The non-zero GID entries of a port (types and netdevs from sysfs when known).
    fn gid_entries(&self, device: &str, ctx: Ctx, port: u8, table_len: u32) -> Vec<GidEntry>;
    /// Allocates a protection domain.
    fn alloc_pd(&self, ctx: Ctx) -> VResult<Pd>;
    /// Frees a protection domain.
    fn dealloc_pd(&self, pd: Pd);
    /// Registers `[addr, addr + len)`: local write always, remote read/write when
    /// `access.remote`.
    fn reg_mr(&self, pd: Pd, addr: u64, len: u64, access: Access) -> VResult<MrKeys>;
    /// Registers device memory exported as a dma-buf (`ibv_reg_dmabuf_mr`). Providers
    /// without it fail with `ENOSYS`.
    fn reg_dmabuf_mr(&self, pd: Pd, buf: Dmabuf, access: Access) -> VResult<MrKeys> {
        let _ = (pd, buf, access);
        Err(VerbsError::new(
            "ibv_reg_dmabuf_mr",
            libc::ENOSYS,
            "not supported",
        ))
    }
    /// Deregisters a region.
    fn dereg_mr(&self, mr: Mr);
    /// Creates a completion queue of `depth` entries with its own completion channel.
    fn create_cq(&self, ctx: Ctx, depth: u32) -> VResult<Cq>;
    /// Destroys a completion queue (and its channel).
    fn destroy_cq(&self, cq: Cq);
    /// A file descriptor that becomes readable when an armed CQ gets a completion
    /// (`None`: the provider has none, poll instead).
    fn cq_event_fd(&self, cq: Cq) -> Option<RawFd>;
    /// Arms the CQ: its event fd becomes readable at the next completion.
    fn arm_cq(&self, cq: Cq) -> VResult<()>;
    /// Takes and acknowledges pending CQ events without blocking; true if any.
    fn take_cq_events(&self, cq: Cq) -> bool;
    /// Polls up to `out.len()` completions; returns how many were written.
    fn poll_cq(&self, cq: Cq, out: &mut [Completion]) -> VResult<usize>;
    /// Creates an RC queue pair whose send and receive queues complete on `cq`.
    fn create_qp(&self, pd: Pd, cq: Cq, caps: QpCaps) -> VResult<QpInfo>;
    /// Moves a queue pair to another state.
    fn modify_qp(&self, qp: Qp, to: &QpTransition) -> VResult<()>;
    /// Destroys a queue pair.
    fn destroy_qp(&self, qp: Qp);
    /// Posts `wrs` as one linked list; on failure, the index of the first request
    /// not posted and the error.
    fn post_send(&self, qp: Qp, wrs: &[WorkRequest]) -> Result<(), (usize, VerbsError)>;
}
