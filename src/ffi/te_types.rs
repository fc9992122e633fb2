//! The C types and constants of `transfer_engine_c.h`, laid out exactly as upstream's
//! (x86-64 and aarch64 LP64). cbindgen reads this file and the modules of `te/` to
//! generate the header.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

/// A segment id (`int32_t`). In the C header this is a `#define`, as upstream's is.
pub type segment_id_t = i32;
/// Same as `segment_id_t` (`int32_t`); a `#define` in the C header.
pub type segment_handle_t = i32;
/// A batch id (`uint64_t`); a `#define` in the C header.
pub type batch_id_t = u64;

/// The engine's own segment: its name always opens as id 0.
pub const LOCAL_SEGMENT: segment_id_t = 0;
/// Returned by allocateBatchID when no batch could be created.
pub const INVALID_BATCH: batch_id_t = u64::MAX;

/// transfer_request.opcode: copy from the target segment into `source`.
pub const OPCODE_READ: c_int = 0;
/// transfer_request.opcode: copy from `source` into the target segment.
pub const OPCODE_WRITE: c_int = 1;

/// One transfer: `length` bytes between local `source` and `target_offset` in segment
/// `target_id`. `target_offset` is an absolute virtual address in the target process.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct transfer_request {
    /// OPCODE_READ or OPCODE_WRITE.
    pub opcode: c_int,
    /// Local buffer.
    pub source: *mut c_void,
    /// Target segment id from openSegment (LOCAL_SEGMENT for this engine).
    pub target_id: segment_id_t,
    /// Absolute address in the target process.
    pub target_offset: u64,
    /// Number of bytes.
    pub length: u64,
}

/// Typedef of struct transfer_request.
pub type transfer_request_t = transfer_request;

/// A notification: two NUL-terminated strings, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct notify_msg {
    /// Sender-chosen name.
    pub name: *mut c_char,
    /// Message body.
    pub msg: *mut c_char,
}

/// Typedef of struct notify_msg.
pub type notify_msg_t = notify_msg;

/// Task still in flight.
pub const STATUS_WAITING: c_int = 0;
/// Never reported by this engine.
pub const STATUS_PENDING: c_int = 1;
/// Never reported by this engine.
pub const STATUS_INVALID: c_int = 2;
/// A task cancelled through the TENT API (`tent_cancel_task`) before all of it moved;
/// terminal. Never reported otherwise.
pub const STATUS_CANCELED: c_int = 3;
/// Task finished; every byte is at the destination.
pub const STATUS_COMPLETED: c_int = 4;
/// A slice passed its deadline; not terminal.
pub const STATUS_TIMEOUT: c_int = 5;
/// Task failed.
pub const STATUS_FAILED: c_int = 6;

/// State of one task, filled in by getTransferStatus.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct transfer_status {
    /// One of the STATUS_* values.
    pub status: c_int,
    /// Bytes moved so far (the full length once COMPLETED, 0 when FAILED over TCP).
    pub transferred_bytes: u64,
}

/// The `rdma` member of segment_desc's union.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct segment_desc_rdma {
    /// Base address.
    pub addr: *mut c_void,
    /// Size in bytes.
    pub size: u64,
    /// Location tag.
    pub location: *const c_char,
}

/// The `nvmeof` member of segment_desc's union.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct segment_desc_nvmeof {
    /// Backing file.
    pub file_path: *const c_char,
    /// NVMe-oF subsystem name.
    pub subsystem_name: *const c_char,
    /// Fabric protocol.
    pub proto: *const c_char,
    /// Target IP.
    pub ip: *const c_char,
    /// Target port.
    pub port: u64,
}

/// The union inside segment_desc.
#[repr(C)]
#[derive(Clone, Copy)]
pub union segment_desc_union {
    /// RAM segment.
    pub rdma: segment_desc_rdma,
    /// NVMe-oF segment.
    pub nvmeof: segment_desc_nvmeof,
}

/// A segment description (kept for header compatibility; no function uses it).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct segment_desc {
    /// RDMA or NVMe-oF.
    pub r#type: c_int,
    /// The description itself.
    pub desc_: segment_desc_union,
}

/// Typedef of struct transfer_status.
pub type transfer_status_t = transfer_status;

/// One region for registerLocalMemoryBatch.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct buffer_entry {
    /// Base address.
    pub addr: *mut c_void,
    /// Length in bytes.
    pub length: usize,
}

/// Typedef of struct buffer_entry.
pub type buffer_entry_t = buffer_entry;

/// Typedef of struct segment_desc.
pub type segment_desc_t = segment_desc;
/// An engine handle from createTransferEngine (opaque).
pub type transfer_engine_t = *mut c_void;
/// A transport handle from installTransport (opaque, borrowed from the engine).
pub type transport_t = *mut c_void;

/// Per-NIC load figures reported by getNicLoadStats.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nic_load_stat {
    /// NUL-terminated device name.
    pub device_name: [c_char; 64],
    /// Bytes posted and not yet completed.
    pub inflight_bytes: u64,
    /// Smoothed bandwidth in bytes per second.
    pub ewma_bandwidth_bps: f64,
}

/// Typedef of struct nic_load_stat.
pub type nic_load_stat_t = nic_load_stat;

#[cfg(all(test, target_pointer_width = "64"))]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_upstream_lp64() {
        assert_eq!(size_of::<transfer_request>(), 40);
        assert_eq!(offset_of!(transfer_request, source), 8);
        assert_eq!(offset_of!(transfer_request, target_id), 16);
        assert_eq!(offset_of!(transfer_request, target_offset), 24);
        assert_eq!(offset_of!(transfer_request, length), 32);
        assert_eq!(size_of::<transfer_status>(), 16);
        assert_eq!(offset_of!(transfer_status, transferred_bytes), 8);
        assert_eq!(size_of::<buffer_entry>(), 16);
        assert_eq!(size_of::<notify_msg>(), 16);
        assert_eq!(size_of::<nic_load_stat>(), 80);
        assert_eq!(offset_of!(nic_load_stat, inflight_bytes), 64);
        assert_eq!(offset_of!(nic_load_stat, ewma_bandwidth_bps), 72);
        assert_eq!(size_of::<segment_desc>(), 48);
        assert_eq!(offset_of!(segment_desc, desc_), 8);
    }
}
