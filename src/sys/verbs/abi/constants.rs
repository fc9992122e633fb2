//! The libibverbs enum and flag values this crate passes (`<infiniband/verbs.h>`).

use std::ffi::{c_int, c_uint};

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
