//! The C types and constants of upstream's TENT API (`tent/transfer_engine.h`), laid
//! out exactly as upstream's (LP64). cbindgen reads this file and the modules of
//! `tent/` to generate `include/mooncake/tent/transfer_engine.h`.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

/// A batch id (`uint64_t`); a `#define` in the C header, as upstream's is.
pub type tent_batch_id_t = u64;
/// A segment handle (`uint64_t`); a `#define` in the C header.
pub type tent_segment_id_t = u64;
/// An engine handle (shared with the classic API: a TENT engine is an engine).
pub type tent_engine_t = *mut c_void;

/// tent_request.opcode: copy from the target segment into `source`.
pub const OPCODE_READ: c_int = 0;
/// tent_request.opcode: copy from `source` into the target segment.
pub const OPCODE_WRITE: c_int = 1;

/// Still moving.
pub const STATUS_WAITING: c_int = 0;
/// Not produced by this engine.
pub const STATUS_PENDING: c_int = 1;
/// Not produced by this engine.
pub const STATUS_INVALID: c_int = 2;
/// Cancelled (tent_cancel_task) before all of it moved; terminal.
pub const STATUS_CANCELED: c_int = 3;
/// Every byte is visible at the destination; terminal.
pub const STATUS_COMPLETED: c_int = 4;
/// A slice passed its deadline (not terminal).
pub const STATUS_TIMEOUT: c_int = 5;
/// At least one slice failed; terminal.
pub const STATUS_FAILED: c_int = 6;

/// tent_segment_info.type: a memory segment.
pub const TYPE_MEMORY: c_int = 0;
/// tent_segment_info.type: a file segment (not produced by this engine).
pub const TYPE_FILE: c_int = 1;

/// Registration permission: local use only (accepted; peers can still reach it).
pub const PERM_LOCAL_READ_WRITE: c_int = 0;
/// Registration permission: peers may read (accepted; peers can also write).
pub const PERM_GLOBAL_READ_ONLY: c_int = 1;
/// Registration permission: peers may read and write.
pub const PERM_GLOBAL_READ_WRITE: c_int = 2;

/// Transport hint: follow the engine's policy.
pub const TRANSPORT_UNSPEC: c_int = 0;
/// Transport hint: RDMA.
pub const TRANSPORT_RDMA: c_int = 1;
/// Transport hint: multi-node NVLink (not in this engine).
pub const TRANSPORT_MNNVL: c_int = 2;
/// Transport hint: shared memory (this engine's same-host path).
pub const TRANSPORT_SHM: c_int = 3;
/// Transport hint: NVLink (not in this engine).
pub const TRANSPORT_NVLINK: c_int = 4;
/// Transport hint: GPUDirect Storage (not in this engine).
pub const TRANSPORT_GDS: c_int = 5;
/// Transport hint: io_uring files (not in this engine).
pub const TRANSPORT_IOURING: c_int = 6;
/// Transport hint: TCP.
pub const TRANSPORT_TCP: c_int = 7;
/// Transport hint: Ascend direct (not in this engine).
pub const TRANSPORT_ASCEND_DIRECT: c_int = 8;
/// Transport hint: Sunrise link (not in this engine).
pub const TRANSPORT_SUNRISE_LINK: c_int = 9;
/// Transport hint: TPU (not in this engine).
pub const TRANSPORT_TPU: c_int = 10;
/// Transport hint: UB (not in this engine).
pub const TRANSPORT_UB: c_int = 11;
/// Transport hint: MPComm (not in this engine).
pub const TRANSPORT_MPCOMM: c_int = 12;

/// One transfer: `length` bytes between local `source` and `target_offset` (an
/// absolute address in the target process) of segment `target_id`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tent_request {
    /// OPCODE_READ or OPCODE_WRITE.
    pub opcode: c_int,
    /// Local buffer.
    pub source: *mut c_void,
    /// Target segment from tent_open_segment (LOCAL_SEGMENT_ID: this engine).
    pub target_id: tent_segment_id_t,
    /// Absolute address in the target process.
    pub target_offset: u64,
    /// Number of bytes.
    pub length: u64,
    /// 0 = high, 1 = medium, 2 = low (accepted; requests are served in order).
    pub priority: c_int,
    /// TRANSPORT_UNSPEC (the engine routes), or TRANSPORT_TCP, TRANSPORT_RDMA or
    /// TRANSPORT_SHM to send it only over that transport (others are refused).
    pub transport_hint: c_int,
}

/// Typedef of struct tent_request.
pub type tent_request_t = tent_request;

/// A task's (or a batch's) state and the bytes it moved.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tent_status {
    /// One of the STATUS_* values.
    pub status: c_int,
    /// Bytes moved (the full length once COMPLETED).
    pub transferred_bytes: u64,
}

/// Typedef of struct tent_status.
pub type tent_status_t = tent_status;

/// One buffer of a segment.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tent_buffer_info {
    /// Absolute address in the owning process.
    pub base: u64,
    /// Length in bytes.
    pub length: u64,
    /// NUL-terminated location name.
    pub location: [c_char; 64],
}

/// A segment's buffers, filled by tent_get_segment_info (release with
/// tent_free_segment_info).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tent_segment_info {
    /// TYPE_MEMORY or TYPE_FILE.
    pub r#type: c_int,
    /// Entries in `buffers`.
    pub num_buffers: c_int,
    /// malloc'ed array of `num_buffers` entries (NULL when there are none).
    pub buffers: *mut tent_buffer_info,
}

/// Typedef of struct tent_segment_info.
pub type tent_segment_info_t = tent_segment_info;

/// One received notification.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tent_notifi_record {
    /// The sender's segment (0: not known, as upstream).
    pub handle: tent_segment_id_t,
    /// NUL-terminated name (truncated to 255 bytes).
    pub name: [c_char; 256],
    /// NUL-terminated message (truncated to 4095 bytes).
    pub msg: [c_char; 4096],
}

/// Typedef of struct tent_notifi_record.
pub type tent_notifi_record_t = tent_notifi_record;

/// Notifications drained by tent_recv_notifs (release with tent_free_notifs).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tent_notifi_info {
    /// Entries in `records`.
    pub num_records: c_int,
    /// malloc'ed array of `num_records` entries (NULL when there are none).
    pub records: *mut tent_notifi_record,
}

/// Options of the `_ex` memory functions.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tent_memory_options {
    /// NUL-terminated location ("" or "*": let the engine decide).
    pub location: [c_char; 64],
    /// PERM_* (accepted).
    pub permission: c_int,
    /// TRANSPORT_* (accepted; the engine registers with every transport it has).
    pub transport_type: c_int,
    /// Shared-memory path (accepted and ignored: same-host sharing is the engine's).
    pub shm_path: [c_char; 256],
    /// Offset in `shm_path` (ignored).
    pub shm_offset: usize,
    /// Nonzero: internal memory (accepted and ignored).
    pub internal: c_int,
}

/// Typedef of struct tent_memory_options.
pub type tent_memory_options_t = tent_memory_options;

/// Load of one RDMA NIC.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tent_nic_load_stat {
    /// NUL-terminated device name.
    pub device_name: [c_char; 64],
    /// Bytes posted and not yet completed.
    pub inflight_bytes: u64,
    /// Smoothed bandwidth in bytes per second.
    pub ewma_bandwidth_bps: f64,
}

/// Typedef of struct tent_nic_load_stat.
pub type tent_nic_load_stat_t = tent_nic_load_stat;
