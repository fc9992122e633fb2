//! The size of every struct in [`super::structs`] and the offset of every field the
//! code relies on, named as the system header names them.

use super::structs::*;
use std::mem::{offset_of, size_of};

/// `(struct size, size)` and `(struct.field, offset)` entries for the structs given as
/// `name { field, header_field: rust_field, ... }`.
macro_rules! layout {
    ($($ty:ident { $($field:ident $(: $rust:ident)?),* })*) => {
        vec![$(
            (concat!(stringify!($ty), " size"), size_of::<$ty>()),
            $((
                concat!(stringify!($ty), ".", stringify!($field)),
                layout!(@offset $ty $field $($rust)?),
            ),)*
        )*]
    };
    (@offset $ty:ident $field:ident) => {
        offset_of!($ty, $field)
    };
    (@offset $ty:ident $field:ident $rust:ident) => {
        offset_of!($ty, $rust)
    };
}

/// `(name, size)` of every struct, and `(struct.field, offset)` of the fields the
/// code relies on, for the layout test against the system header.
pub fn layout_table() -> Vec<(&'static str, usize)> {
    layout! {
        ibv_gid {}
        ibv_device_attr { max_mr_size, max_qp, max_qp_wr, max_sge, max_cqe, max_qp_rd_atom, phys_port_cnt }
        ibv_port_attr { state, active_mtu, gid_tbl_len, lid, link_layer }
        ibv_context_ops { poll_cq, req_notify_cq, post_send, post_recv }
        ibv_context { ops, cmd_fd }
        ibv_pd {}
        ibv_mr { lkey, rkey }
        ibv_comp_channel { fd }
        ibv_cq { channel }
        ibv_qp { qp_num }
        ibv_qp_cap {}
        ibv_qp_init_attr { cap, qp_type, sq_sig_all }
        ibv_global_route {}
        ibv_ah_attr { dlid, is_global, port_num }
        ibv_qp_attr { dest_qp_num, qp_access_flags, ah_attr, pkey_index, max_rd_atomic, min_rnr_timer, port_num, timeout, rnr_retry, rate_limit }
        ibv_sge {}
        ibv_send_wr { num_sge, opcode, send_flags, wr: rdma, qp_type }
        ibv_wc { status, byte_len, qp_num }
    }
}
