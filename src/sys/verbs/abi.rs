//! The libibverbs C ABI this crate uses (rdma-core 44+, LP64 Linux), written out by
//! hand so that building needs no rdma-core headers. `tests/rust/verbs_layout.rs`
//! compares every size and offset here with the system's `<infiniband/verbs.h>` when
//! it is installed.
//!
//! Only what the RDMA transport touches is spelled out; unions whose other arms are
//! never used are kept as opaque, correctly sized padding.

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
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_port_attr` (the exported `ibv_query_port` fills its compat prefix).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_port_attr {
    pub state: c_int,
    pub max_mtu: c_int,
    pub active_mtu: c_int,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// The operations table inside `struct ibv_context`: the inline verbs
/// (`ibv_post_send`, `ibv_poll_cq`, ...) call through it, as the header's inline
/// functions do. Slots this crate never calls are opaque.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_context_ops {
    _compat_and_mw: [*mut c_void; 11],
    pub poll_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int>,
    pub req_notify_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int>,
    _compat_cq_srq: [*mut c_void; 12],
    pub post_send:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int>,
    pub post_recv:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut c_void, *mut *mut c_void) -> c_int>,
    _compat_ah_mcast_async: [*mut c_void; 5],
}

/// `struct ibv_context`.
#[repr(C)]
pub struct ibv_context {
    pub device: *mut c_void,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: pthread_mutex_t,
    pub abi_compat: *mut c_void,
}

/// `struct ibv_pd`.
#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_comp_channel`.
#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_cq`.
#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_qp`.
#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
    pub state: c_int,
    pub qp_type: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub cap: ibv_qp_cap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
}

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_qp_attr {
    pub qp_state: c_int,
    pub cur_qp_state: c_int,
    pub path_mtu: c_int,
    pub path_mig_state: c_int,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// The `rdma` arm of `ibv_send_wr.wr` (the union is 32 bytes: its `atomic` arm).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_send_wr_rdma {
    pub remote_addr: u64,
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
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: c_int,
    pub send_flags: c_uint,
    pub imm_data: u32,
    pub rdma: ibv_send_wr_rdma,
    pub qp_type: [u32; 2],
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
    pub wr_id: u64,
    pub status: c_int,
    pub opcode: c_int,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `IBV_ACCESS_LOCAL_WRITE`.
pub const IBV_ACCESS_LOCAL_WRITE: c_int = 1;
/// `IBV_ACCESS_REMOTE_WRITE`.
pub const IBV_ACCESS_REMOTE_WRITE: c_int = 1 << 1;
/// `IBV_ACCESS_REMOTE_READ`.
pub const IBV_ACCESS_REMOTE_READ: c_int = 1 << 2;
/// `IBV_ACCESS_REMOTE_ATOMIC`.
pub const IBV_ACCESS_REMOTE_ATOMIC: c_int = 1 << 3;
/// `IBV_ACCESS_RELAXED_ORDERING` (an optional flag: only `ibv_reg_mr_iova2` takes it).
pub const IBV_ACCESS_RELAXED_ORDERING: c_int = 1 << 20;

/// `IBV_QPT_RC`.
pub const IBV_QPT_RC: c_int = 2;
/// `IBV_QPS_RESET`.
pub const IBV_QPS_RESET: c_int = 0;
/// `IBV_QPS_INIT`.
pub const IBV_QPS_INIT: c_int = 1;
/// `IBV_QPS_RTR`.
pub const IBV_QPS_RTR: c_int = 2;
/// `IBV_QPS_RTS`.
pub const IBV_QPS_RTS: c_int = 3;
/// `IBV_QPS_ERR`.
pub const IBV_QPS_ERR: c_int = 6;

/// `IBV_QP_STATE`.
pub const IBV_QP_STATE: c_int = 1;
/// `IBV_QP_ACCESS_FLAGS`.
pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
/// `IBV_QP_PKEY_INDEX`.
pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
/// `IBV_QP_PORT`.
pub const IBV_QP_PORT: c_int = 1 << 5;
/// `IBV_QP_AV`.
pub const IBV_QP_AV: c_int = 1 << 7;
/// `IBV_QP_PATH_MTU`.
pub const IBV_QP_PATH_MTU: c_int = 1 << 8;
/// `IBV_QP_TIMEOUT`.
pub const IBV_QP_TIMEOUT: c_int = 1 << 9;
/// `IBV_QP_RETRY_CNT`.
pub const IBV_QP_RETRY_CNT: c_int = 1 << 10;
/// `IBV_QP_RNR_RETRY`.
pub const IBV_QP_RNR_RETRY: c_int = 1 << 11;
/// `IBV_QP_RQ_PSN`.
pub const IBV_QP_RQ_PSN: c_int = 1 << 12;
/// `IBV_QP_MAX_QP_RD_ATOMIC`.
pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
/// `IBV_QP_MIN_RNR_TIMER`.
pub const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
/// `IBV_QP_SQ_PSN`.
pub const IBV_QP_SQ_PSN: c_int = 1 << 16;
/// `IBV_QP_MAX_DEST_RD_ATOMIC`.
pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
/// `IBV_QP_DEST_QPN`.
pub const IBV_QP_DEST_QPN: c_int = 1 << 20;

/// `IBV_WR_RDMA_WRITE`.
pub const IBV_WR_RDMA_WRITE: c_int = 0;
/// `IBV_WR_RDMA_READ`.
pub const IBV_WR_RDMA_READ: c_int = 4;
/// `IBV_SEND_SIGNALED`.
pub const IBV_SEND_SIGNALED: c_uint = 1 << 1;

/// `IBV_PORT_ACTIVE`.
pub const IBV_PORT_ACTIVE: c_int = 4;
/// `IBV_LINK_LAYER_ETHERNET`.
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;

/// `(name, size)` of every struct above, and `(struct.field, offset)` of the fields the
/// code relies on, for the layout test against the system header.
pub fn layout_table() -> Vec<(&'static str, usize)> {
    use std::mem::{offset_of, size_of};
    vec![
        ("ibv_gid size", size_of::<ibv_gid>()),
        ("ibv_device_attr size", size_of::<ibv_device_attr>()),
        (
            "ibv_device_attr.max_mr_size",
            offset_of!(ibv_device_attr, max_mr_size),
        ),
        (
            "ibv_device_attr.max_qp",
            offset_of!(ibv_device_attr, max_qp),
        ),
        (
            "ibv_device_attr.max_qp_wr",
            offset_of!(ibv_device_attr, max_qp_wr),
        ),
        (
            "ibv_device_attr.max_sge",
            offset_of!(ibv_device_attr, max_sge),
        ),
        (
            "ibv_device_attr.max_cqe",
            offset_of!(ibv_device_attr, max_cqe),
        ),
        (
            "ibv_device_attr.max_qp_rd_atom",
            offset_of!(ibv_device_attr, max_qp_rd_atom),
        ),
        (
            "ibv_device_attr.phys_port_cnt",
            offset_of!(ibv_device_attr, phys_port_cnt),
        ),
        ("ibv_port_attr size", size_of::<ibv_port_attr>()),
        ("ibv_port_attr.state", offset_of!(ibv_port_attr, state)),
        (
            "ibv_port_attr.active_mtu",
            offset_of!(ibv_port_attr, active_mtu),
        ),
        (
            "ibv_port_attr.gid_tbl_len",
            offset_of!(ibv_port_attr, gid_tbl_len),
        ),
        ("ibv_port_attr.lid", offset_of!(ibv_port_attr, lid)),
        (
            "ibv_port_attr.link_layer",
            offset_of!(ibv_port_attr, link_layer),
        ),
        ("ibv_context_ops size", size_of::<ibv_context_ops>()),
        (
            "ibv_context_ops.poll_cq",
            offset_of!(ibv_context_ops, poll_cq),
        ),
        (
            "ibv_context_ops.req_notify_cq",
            offset_of!(ibv_context_ops, req_notify_cq),
        ),
        (
            "ibv_context_ops.post_send",
            offset_of!(ibv_context_ops, post_send),
        ),
        (
            "ibv_context_ops.post_recv",
            offset_of!(ibv_context_ops, post_recv),
        ),
        ("ibv_context size", size_of::<ibv_context>()),
        ("ibv_context.ops", offset_of!(ibv_context, ops)),
        ("ibv_context.cmd_fd", offset_of!(ibv_context, cmd_fd)),
        ("ibv_pd size", size_of::<ibv_pd>()),
        ("ibv_mr size", size_of::<ibv_mr>()),
        ("ibv_mr.lkey", offset_of!(ibv_mr, lkey)),
        ("ibv_mr.rkey", offset_of!(ibv_mr, rkey)),
        ("ibv_comp_channel size", size_of::<ibv_comp_channel>()),
        ("ibv_comp_channel.fd", offset_of!(ibv_comp_channel, fd)),
        ("ibv_cq size", size_of::<ibv_cq>()),
        ("ibv_cq.channel", offset_of!(ibv_cq, channel)),
        ("ibv_qp size", size_of::<ibv_qp>()),
        ("ibv_qp.qp_num", offset_of!(ibv_qp, qp_num)),
        ("ibv_qp_cap size", size_of::<ibv_qp_cap>()),
        ("ibv_qp_init_attr size", size_of::<ibv_qp_init_attr>()),
        ("ibv_qp_init_attr.cap", offset_of!(ibv_qp_init_attr, cap)),
        (
            "ibv_qp_init_attr.qp_type",
            offset_of!(ibv_qp_init_attr, qp_type),
        ),
        (
            "ibv_qp_init_attr.sq_sig_all",
            offset_of!(ibv_qp_init_attr, sq_sig_all),
        ),
        ("ibv_global_route size", size_of::<ibv_global_route>()),
        ("ibv_ah_attr size", size_of::<ibv_ah_attr>()),
        ("ibv_ah_attr.dlid", offset_of!(ibv_ah_attr, dlid)),
        ("ibv_ah_attr.is_global", offset_of!(ibv_ah_attr, is_global)),
        ("ibv_ah_attr.port_num", offset_of!(ibv_ah_attr, port_num)),
        ("ibv_qp_attr size", size_of::<ibv_qp_attr>()),
        (
            "ibv_qp_attr.dest_qp_num",
            offset_of!(ibv_qp_attr, dest_qp_num),
        ),
        (
            "ibv_qp_attr.qp_access_flags",
            offset_of!(ibv_qp_attr, qp_access_flags),
        ),
        ("ibv_qp_attr.ah_attr", offset_of!(ibv_qp_attr, ah_attr)),
        (
            "ibv_qp_attr.pkey_index",
            offset_of!(ibv_qp_attr, pkey_index),
        ),
        (
            "ibv_qp_attr.max_rd_atomic",
            offset_of!(ibv_qp_attr, max_rd_atomic),
        ),
        (
            "ibv_qp_attr.min_rnr_timer",
            offset_of!(ibv_qp_attr, min_rnr_timer),
        ),
        ("ibv_qp_attr.port_num", offset_of!(ibv_qp_attr, port_num)),
        ("ibv_qp_attr.timeout", offset_of!(ibv_qp_attr, timeout)),
        ("ibv_qp_attr.rnr_retry", offset_of!(ibv_qp_attr, rnr_retry)),
        (
            "ibv_qp_attr.rate_limit",
            offset_of!(ibv_qp_attr, rate_limit),
        ),
        ("ibv_sge size", size_of::<ibv_sge>()),
        ("ibv_send_wr size", size_of::<ibv_send_wr>()),
        ("ibv_send_wr.num_sge", offset_of!(ibv_send_wr, num_sge)),
        ("ibv_send_wr.opcode", offset_of!(ibv_send_wr, opcode)),
        (
            "ibv_send_wr.send_flags",
            offset_of!(ibv_send_wr, send_flags),
        ),
        ("ibv_send_wr.wr", offset_of!(ibv_send_wr, rdma)),
        ("ibv_send_wr.qp_type", offset_of!(ibv_send_wr, qp_type)),
        ("ibv_wc size", size_of::<ibv_wc>()),
        ("ibv_wc.status", offset_of!(ibv_wc, status)),
        ("ibv_wc.byte_len", offset_of!(ibv_wc, byte_len)),
        ("ibv_wc.qp_num", offset_of!(ibv_wc, qp_num)),
    ]
}
