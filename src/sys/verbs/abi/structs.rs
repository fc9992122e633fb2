//! The libibverbs structs this crate reads or fills, laid out as rdma-core's
//! `<infiniband/verbs.h>` lays them out on LP64 Linux.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `pthread_mutex_t` on LP64 glibc (40 bytes, 8-aligned).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct pthread_mutex_t(pub [u8; 40]);

/// `pthread_cond_t` on LP64 glibc (48 bytes, 8-aligned).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct pthread_cond_t(pub [u8; 48]);

/// `union ibv_gid` (8-aligned: the union's other arm is two `__be64`).
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ibv_gid {
    /// The 16 raw bytes.
    pub raw: [u8; 16],
}

/// `struct ibv_device_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr {
    /// Firmware version, a NUL-terminated string.
    pub fw_ver: [c_char; 64],
    /// The node's GUID (network byte order).
    pub node_guid: u64,
    /// The system image GUID (network byte order).
    pub sys_image_guid: u64,
    /// Largest memory region that can be registered, in bytes.
    pub max_mr_size: u64,
    /// Bit mask of the page sizes the device supports.
    pub page_size_cap: u64,
    /// IEEE vendor ID.
    pub vendor_id: u32,
    /// Vendor's part ID.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_ver: u32,
    /// Most queue pairs the device supports.
    pub max_qp: c_int,
    /// Most outstanding work requests on one queue.
    pub max_qp_wr: c_int,
    /// Capability bits (`IBV_DEVICE_*`).
    pub device_cap_flags: c_uint,
    /// Most scatter/gather entries per send or receive work request.
    pub max_sge: c_int,
    /// Most scatter/gather entries per RDMA read work request.
    pub max_sge_rd: c_int,
    /// Most completion queues the device supports.
    pub max_cq: c_int,
    /// Most entries one completion queue can hold.
    pub max_cqe: c_int,
    /// Most memory regions the device supports.
    pub max_mr: c_int,
    /// Most protection domains the device supports.
    pub max_pd: c_int,
    /// Most outstanding RDMA reads and atomics one QP can target (as responder).
    pub max_qp_rd_atom: c_int,
    /// Most outstanding RDMA reads and atomics per EE context (unused).
    pub max_ee_rd_atom: c_int,
    /// Device-wide resources for incoming RDMA reads and atomics.
    pub max_res_rd_atom: c_int,
    /// Most outstanding RDMA reads and atomics one QP can initiate.
    pub max_qp_init_rd_atom: c_int,
    /// Most RDMA reads and atomics an EE context can initiate (unused).
    pub max_ee_init_rd_atom: c_int,
    /// Atomic operation support level (`enum ibv_atomic_cap`).
    pub atomic_cap: c_int,
    /// Most EE contexts (unused by RC).
    pub max_ee: c_int,
    /// Most reliable datagram domains (unused).
    pub max_rdd: c_int,
    /// Most memory windows the device supports.
    pub max_mw: c_int,
    /// Most raw IPv6 datagram QPs.
    pub max_raw_ipv6_qp: c_int,
    /// Most raw Ethertype datagram QPs.
    pub max_raw_ethy_qp: c_int,
    /// Most multicast groups.
    pub max_mcast_grp: c_int,
    /// Most QPs attached to one multicast group.
    pub max_mcast_qp_attach: c_int,
    /// Most QP attachments to multicast groups in total.
    pub max_total_mcast_qp_attach: c_int,
    /// Most address handles the device supports.
    pub max_ah: c_int,
    /// Most fast memory regions (legacy).
    pub max_fmr: c_int,
    /// Most remaps per fast memory region before an unmap (legacy).
    pub max_map_per_fmr: c_int,
    /// Most shared receive queues.
    pub max_srq: c_int,
    /// Most work requests one shared receive queue can hold.
    pub max_srq_wr: c_int,
    /// Most scatter/gather entries per shared receive queue work request.
    pub max_srq_sge: c_int,
    /// Number of partition keys the device supports.
    pub max_pkeys: u16,
    /// Local CA ACK delay (an exponent: 4.096 us * 2^value).
    pub local_ca_ack_delay: u8,
    /// Number of physical ports (numbered from 1).
    pub phys_port_cnt: u8,
}

/// `struct ibv_port_attr` (the exported `ibv_query_port` fills its compat prefix).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_port_attr {
    /// Logical port state (`IBV_PORT_*`; [`IBV_PORT_ACTIVE`] when usable).
    pub state: c_int,
    /// Largest MTU the port supports (`enum ibv_mtu`: 1 = 256 B ... 5 = 4096 B).
    pub max_mtu: c_int,
    /// MTU in use on the port (`enum ibv_mtu`).
    pub active_mtu: c_int,
    /// Number of entries in the port's GID table.
    pub gid_tbl_len: c_int,
    /// Port capability bits (`IBV_PORT_*_SUP`).
    pub port_cap_flags: u32,
    /// Largest message the port can carry, in bytes.
    pub max_msg_sz: u32,
    /// Count of packets dropped for a bad partition key.
    pub bad_pkey_cntr: u32,
    /// Count of Q_Key violations.
    pub qkey_viol_cntr: u32,
    /// Number of entries in the port's partition key table.
    pub pkey_tbl_len: u16,
    /// Base local identifier (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// The subnet manager's LID.
    pub sm_lid: u16,
    /// LID mask control: how many low LID bits select a path.
    pub lmc: u8,
    /// Number of virtual lanes (an encoded value).
    pub max_vl_num: u8,
    /// Service level to use when talking to the subnet manager.
    pub sm_sl: u8,
    /// Subnet propagation delay (an exponent: 4.096 us * 2^value).
    pub subnet_timeout: u8,
    /// Type of initialisation the subnet manager performed.
    pub init_type_reply: u8,
    /// Active link width (encoded: 1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x, ...).
    pub active_width: u8,
    /// Active link speed per lane (encoded: 1 = SDR, 2 = DDR, 4 = QDR, ... 64 = HDR).
    pub active_speed: u8,
    /// Physical port state (5 = link up).
    pub phys_state: u8,
    /// Link layer (`IBV_LINK_LAYER_*`; [`IBV_LINK_LAYER_ETHERNET`] for RoCE).
    pub link_layer: u8,
    /// Port flags (`IBV_QPF_*`, e.g. GRH required).
    pub flags: u8,
    /// More port capability bits (`IBV_PORT_*_SUP` of the second set).
    pub port_cap_flags2: u16,
}

/// The operations table inside `struct ibv_context`: the inline verbs
/// (`ibv_post_send`, `ibv_poll_cq`, ...) call through it, as the header's inline
/// functions do. Slots this crate never calls are opaque.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_context_ops {
    _compat_and_mw: [*mut c_void; 11],
    /// The provider's `ibv_poll_cq`: fills up to N completions, returns the count or < 0.
    pub poll_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int>,
    /// The provider's `ibv_req_notify_cq`: arms the CQ's completion channel (non-zero =
    /// solicited only).
    pub req_notify_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int>,
    _compat_cq_srq: [*mut c_void; 12],
    /// The provider's `ibv_post_send`: posts a send work-request list, setting the bad
    /// one on failure.
    pub post_send:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int>,
    /// The provider's `ibv_post_recv` (receive work requests are opaque here: this crate
    /// posts none).
    pub post_recv:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut c_void, *mut *mut c_void) -> c_int>,
    _compat_ah_mcast_async: [*mut c_void; 5],
}

/// `struct ibv_context`.
#[repr(C)]
pub struct ibv_context {
    /// The `struct ibv_device` this context was opened on (opaque here).
    pub device: *mut c_void,
    /// The provider's operations table the inline verbs call through.
    pub ops: ibv_context_ops,
    /// File descriptor of the uverbs command channel.
    pub cmd_fd: c_int,
    /// File descriptor that delivers asynchronous events.
    pub async_fd: c_int,
    /// Number of completion vectors (interrupt sources) available for CQs.
    pub num_comp_vectors: c_int,
    /// The context's lock (libibverbs' own).
    pub mutex: pthread_mutex_t,
    /// Private to libibverbs (old-ABI compatibility).
    pub abi_compat: *mut c_void,
}

/// `struct ibv_pd`.
#[repr(C)]
pub struct ibv_pd {
    /// The device context the protection domain belongs to.
    pub context: *mut ibv_context,
    /// The kernel's handle for the protection domain.
    pub handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
pub struct ibv_mr {
    /// The device context the region is registered with.
    pub context: *mut ibv_context,
    /// The protection domain the region belongs to.
    pub pd: *mut ibv_pd,
    /// Start of the registered memory.
    pub addr: *mut c_void,
    /// Length of the registered memory, in bytes.
    pub length: usize,
    /// The kernel's handle for the region.
    pub handle: u32,
    /// Local key: goes in `ibv_sge.lkey` for local access to this region.
    pub lkey: u32,
    /// Remote key: peers put it in RDMA work requests to access this region.
    pub rkey: u32,
}

/// `struct ibv_comp_channel`.
#[repr(C)]
pub struct ibv_comp_channel {
    /// The device context the channel belongs to.
    pub context: *mut ibv_context,
    /// File descriptor that becomes readable when an armed CQ gets a completion.
    pub fd: c_int,
    /// Number of CQs using the channel (libibverbs keeps it).
    pub refcnt: c_int,
}

/// `struct ibv_cq`.
#[repr(C)]
pub struct ibv_cq {
    /// The device context the CQ belongs to.
    pub context: *mut ibv_context,
    /// Completion channel that events go to, or NULL.
    pub channel: *mut ibv_comp_channel,
    /// User pointer given at creation, returned with completion events.
    pub cq_context: *mut c_void,
    /// The kernel's handle for the CQ.
    pub handle: u32,
    /// Capacity: the number of entries the CQ holds.
    pub cqe: c_int,
    /// Lock libibverbs uses for the event counters.
    pub mutex: pthread_mutex_t,
    /// Condition libibverbs signals when the event counters change.
    pub cond: pthread_cond_t,
    /// Completion events acknowledged so far (`ibv_ack_cq_events`).
    pub comp_events_completed: u32,
    /// Asynchronous events acknowledged so far.
    pub async_events_completed: u32,
}

/// `struct ibv_qp`.
#[repr(C)]
pub struct ibv_qp {
    /// The device context the QP belongs to.
    pub context: *mut ibv_context,
    /// User pointer given at creation.
    pub qp_context: *mut c_void,
    /// The protection domain the QP belongs to.
    pub pd: *mut ibv_pd,
    /// CQ that send completions go to.
    pub send_cq: *mut ibv_cq,
    /// CQ that receive completions go to.
    pub recv_cq: *mut ibv_cq,
    /// Shared receive queue, or NULL (opaque here).
    pub srq: *mut c_void,
    /// The kernel's handle for the QP.
    pub handle: u32,
    /// The QP number peers address it by.
    pub qp_num: u32,
    /// Last known QP state (`IBV_QPS_*`).
    pub state: c_int,
    /// Transport type (`IBV_QPT_*`; [`IBV_QPT_RC`] here).
    pub qp_type: c_int,
    /// Lock libibverbs uses for the event counter.
    pub mutex: pthread_mutex_t,
    /// Condition libibverbs signals when the event counter changes.
    pub cond: pthread_cond_t,
    /// Asynchronous events acknowledged so far.
    pub events_completed: u32,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_qp_cap {
    /// Most outstanding work requests on the send queue.
    pub max_send_wr: u32,
    /// Most outstanding work requests on the receive queue.
    pub max_recv_wr: u32,
    /// Most scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Most scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Most bytes a send work request may carry inline.
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_init_attr {
    /// User pointer stored in `ibv_qp.qp_context`.
    pub qp_context: *mut c_void,
    /// CQ for send completions.
    pub send_cq: *mut ibv_cq,
    /// CQ for receive completions.
    pub recv_cq: *mut ibv_cq,
    /// Shared receive queue, or NULL.
    pub srq: *mut c_void,
    /// Requested queue sizes; the provider writes back what it granted.
    pub cap: ibv_qp_cap,
    /// Transport type (`IBV_QPT_*`).
    pub qp_type: c_int,
    /// Non-zero: every send work request completes signalled; zero: only those with
    /// `IBV_SEND_SIGNALED`.
    pub sq_sig_all: c_int,
}

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_global_route {
    /// Destination GID (the peer's GID on RoCE).
    pub dgid: ibv_gid,
    /// IPv6 flow label.
    pub flow_label: u32,
    /// Index of the source GID in the local port's GID table.
    pub sgid_index: u8,
    /// Hop limit (IPv6 TTL).
    pub hop_limit: u8,
    /// Traffic class (IPv6 TClass / DSCP+ECN).
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_ah_attr {
    /// Global routing header fields (used when `is_global` is 1, always on RoCE).
    pub grh: ibv_global_route,
    /// Destination LID (InfiniBand; 0 on RoCE).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits (low LID bits, with LMC).
    pub src_path_bits: u8,
    /// Injection rate limit (`enum ibv_rate`; 0 = port rate).
    pub static_rate: u8,
    /// 1 when the GRH in `grh` is used.
    pub is_global: u8,
    /// Local port number (from 1).
    pub port_num: u8,
}

/// `struct ibv_qp_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_qp_attr {
    /// State to move to (`IBV_QPS_*`), with `IBV_QP_STATE`.
    pub qp_state: c_int,
    /// Assumed current state (`IBV_QP_CUR_STATE`).
    pub cur_qp_state: c_int,
    /// Path MTU (`enum ibv_mtu`), with `IBV_QP_PATH_MTU`.
    pub path_mtu: c_int,
    /// Path migration state (`IBV_QP_PATH_MIG_STATE`).
    pub path_mig_state: c_int,
    /// Q_Key (datagram QPs only).
    pub qkey: u32,
    /// Starting packet sequence number of the receive queue, with `IBV_QP_RQ_PSN`.
    pub rq_psn: u32,
    /// Starting packet sequence number of the send queue, with `IBV_QP_SQ_PSN`.
    pub sq_psn: u32,
    /// The peer QP's number, with `IBV_QP_DEST_QPN`.
    pub dest_qp_num: u32,
    /// Remote access allowed (`IBV_ACCESS_REMOTE_*`), with `IBV_QP_ACCESS_FLAGS`.
    pub qp_access_flags: c_uint,
    /// Queue sizes (`IBV_QP_CAP`).
    pub cap: ibv_qp_cap,
    /// Primary path to the peer, with `IBV_QP_AV`.
    pub ah_attr: ibv_ah_attr,
    /// Alternate path (`IBV_QP_ALT_PATH`).
    pub alt_ah_attr: ibv_ah_attr,
    /// Index into the port's partition key table, with `IBV_QP_PKEY_INDEX`.
    pub pkey_index: u16,
    /// Partition key index of the alternate path.
    pub alt_pkey_index: u16,
    /// Non-zero: raise an event when the send queue drains (SQD state).
    pub en_sqd_async_notify: u8,
    /// Non-zero while the send queue is draining (output of query).
    pub sq_draining: u8,
    /// Most outstanding RDMA reads and atomics this QP initiates, with `IBV_QP_MAX_QP_RD_ATOMIC`.
    pub max_rd_atomic: u8,
    /// Most incoming RDMA reads and atomics this QP accepts, with `IBV_QP_MAX_DEST_RD_ATOMIC`.
    pub max_dest_rd_atomic: u8,
    /// Receiver-not-ready NAK delay (encoded `IBV_RNR_TIMER_*`), with `IBV_QP_MIN_RNR_TIMER`.
    pub min_rnr_timer: u8,
    /// Local port number (from 1), with `IBV_QP_PORT`.
    pub port_num: u8,
    /// Local ACK timeout (an exponent: 4.096 us * 2^value; 0 = infinite), with `IBV_QP_TIMEOUT`.
    pub timeout: u8,
    /// Retries after an ACK timeout (0..7), with `IBV_QP_RETRY_CNT`.
    pub retry_cnt: u8,
    /// Retries after a receiver-not-ready NAK (7 = unlimited), with `IBV_QP_RNR_RETRY`.
    pub rnr_retry: u8,
    /// Port number of the alternate path.
    pub alt_port_num: u8,
    /// ACK timeout of the alternate path (same encoding as `timeout`).
    pub alt_timeout: u8,
    /// Packet pacing rate in kbps (`IBV_QP_RATE_LIMIT`; 0 = unlimited).
    pub rate_limit: u32,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_sge {
    /// Start address of the local buffer.
    pub addr: u64,
    /// Length of the local buffer, in bytes.
    pub length: u32,
    /// Local key of the memory region that holds the buffer.
    pub lkey: u32,
}

/// The `rdma` arm of `ibv_send_wr.wr` (the union is 32 bytes: its `atomic` arm).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_send_wr_rdma {
    /// Address in the peer's registered memory to read or write.
    pub remote_addr: u64,
    /// Remote key of the peer's memory region holding `remote_addr`.
    pub rkey: u32,
    _rest_of_union: [u32; 5],
}

impl ibv_send_wr_rdma {
    /// The RDMA arm with these values.
    pub fn new(remote_addr: u64, rkey: u32) -> ibv_send_wr_rdma {
        ibv_send_wr_rdma {
            remote_addr,
            rkey,
            _rest_of_union: [0; 5],
        }
    }
}

/// `struct ibv_send_wr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_send_wr {
    /// Caller's cookie, returned in the completion (`ibv_wc.wr_id`).
    pub wr_id: u64,
    /// Next work request in the list, or NULL.
    pub next: *mut ibv_send_wr,
    /// The local scatter/gather entries (`num_sge` of them).
    pub sg_list: *mut ibv_sge,
    /// Number of entries at `sg_list`.
    pub num_sge: c_int,
    /// Operation (`IBV_WR_*`: [`IBV_WR_RDMA_WRITE`], [`IBV_WR_RDMA_READ`]).
    pub opcode: c_int,
    /// Flags (`IBV_SEND_*`, e.g. [`IBV_SEND_SIGNALED`]).
    pub send_flags: c_uint,
    /// Immediate data (network byte order) for the `*_WITH_IMM` opcodes; also the invalidate rkey.
    pub imm_data: u32,
    /// The `wr.rdma` arm of the operation union: where on the peer to read or write.
    pub rdma: ibv_send_wr_rdma,
    /// The `qp_type` union (`xrc.remote_srqn`) and the padding after it, unused here.
    pub qp_type: [u32; 2],
    /// The trailing union (`bind_mw` / `tso` arms), opaque.
    pub bind_mw_or_tso: [u64; 6],
}

impl Default for ibv_send_wr {
    fn default() -> ibv_send_wr {
        ibv_send_wr {
            wr_id: 0,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 0,
            opcode: 0,
            send_flags: 0,
            imm_data: 0,
            rdma: ibv_send_wr_rdma::default(),
            qp_type: [0; 2],
            bind_mw_or_tso: [0; 6],
        }
    }
}

/// `struct ibv_wc`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_wc {
    /// The `wr_id` of the work request that completed.
    pub wr_id: u64,
    /// Completion status (`enum ibv_wc_status`; 0 = success).
    pub status: c_int,
    /// Operation that completed (`enum ibv_wc_opcode`).
    pub opcode: c_int,
    /// Vendor-specific error syndrome, when `status` is not success.
    pub vendor_err: u32,
    /// Bytes transferred (meaningful for receives and RDMA reads).
    pub byte_len: u32,
    /// Immediate data (network byte order), when `wc_flags` says so.
    pub imm_data: u32,
    /// Number of the local QP the work request was on.
    pub qp_num: u32,
    /// Remote QP number (datagram QPs).
    pub src_qp: u32,
    /// Completion flags (`IBV_WC_*`, e.g. `IBV_WC_GRH`, `IBV_WC_WITH_IMM`).
    pub wc_flags: c_uint,
    /// Partition key index (GSI QPs).
    pub pkey_index: u16,
    /// Source LID (datagram QPs).
    pub slid: u16,
    /// Service level (datagram QPs).
    pub sl: u8,
    /// Destination LID path bits (datagram QPs).
    pub dlid_path_bits: u8,
}
