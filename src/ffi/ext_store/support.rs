//! Argument readers and answer writers of the Store extensions: the JSON config,
//! flattened multi-buffer batches, replica descriptors as JSON.

use crate::ffi::args::{c_slice, c_str, write_truncated};
use crate::ffi::fail::{invalid, FfiError};
use crate::ffi::store::args::items_arg;
use crate::store::{Pieces, ReplicateConfig, SoftPinAction};
use crate::wire::master_api::{ReplicaDescriptor, ReplicaLocation, Uuid};
use serde::Deserialize;
use serde_json::{json, Value};
use std::ffi::{c_char, c_void};

/// Upstream's Python `ReplicateConfig`, as JSON; a missing field takes upstream's
/// default (one replica, every other field zero, false or empty).
#[derive(Default, Deserialize)]
#[serde(default)]
struct ConfigJson {
    #[serde(default = "one_replica")]
    replica_num: u64,
    nof_replica_num: u64,
    dfs_replica_num: u64,
    soft_pin_action: u8,
    with_soft_pin: Option<bool>,
    soft_pin_ttl_ms: Option<u64>,
    with_hard_pin: bool,
    preferred_segments: Vec<String>,
    preferred_segment: String,
    preferred_nof_segments: Vec<String>,
    prefer_alloc_in_same_node: bool,
    data_type: u8,
    group_ids: Option<Vec<String>>,
}

/// The `replica_num` of a config that does not give one.
fn one_replica() -> u64 {
    ReplicateConfig::default().replica_num
}

/// Parses a config (NULL: defaults); malformed JSON is a shim failure (-1).
///
/// # Safety
/// `json` must be NULL or NUL-terminated.
pub(super) unsafe fn config_arg(json: *const c_char) -> Result<ReplicateConfig, FfiError> {
    if json.is_null() {
        return Ok(ReplicateConfig::default());
    }
    // SAFETY: non-NULL and NUL-terminated per the contract.
    let text = unsafe { c_str(json, "config_json") }?;
    let c: ConfigJson = serde_json::from_str(&text)
        .map_err(|e| invalid(format!("config_json is not a valid config: {e}")))?;
    let mut action = match c.soft_pin_action {
        0 => SoftPinAction::Preserve,
        1 => SoftPinAction::Enable,
        2 => SoftPinAction::Disable,
        n => {
            return Err(invalid(format!(
                "config_json: soft_pin_action {n} is not 0, 1 or 2"
            )))
        }
    };
    if c.with_soft_pin == Some(true) && action == SoftPinAction::Preserve {
        action = SoftPinAction::Enable;
    }
    Ok(ReplicateConfig {
        replica_num: c.replica_num,
        nof_replica_num: c.nof_replica_num,
        dfs_replica_num: c.dfs_replica_num,
        soft_pin_action: action,
        soft_pin_ttl_ms: c.soft_pin_ttl_ms,
        with_hard_pin: c.with_hard_pin,
        preferred_segments: c.preferred_segments,
        preferred_segment: c.preferred_segment,
        preferred_nof_segments: c.preferred_nof_segments,
        prefer_alloc_in_same_node: c.prefer_alloc_in_same_node,
        data_type: c.data_type,
        host_id: String::new(),
        group_ids: c.group_ids,
    })
}

/// Reads the flattened pieces of a multi-buffer batch: key `i` owns the next
/// `buffer_counts[i]` entries of `buffers`/`sizes`.
///
/// # Safety
/// Non-NULL arrays must hold their entries (`count` counts; their sum of buffers).
pub(super) unsafe fn multi_items_arg(
    buffers: *const *mut c_void,
    sizes: *const usize,
    buffer_counts: *const usize,
    count: usize,
) -> Result<Vec<Pieces>, FfiError> {
    if buffer_counts.is_null() && count > 0 {
        return Err(invalid("buffer_counts is NULL"));
    }
    // SAFETY: `count` entries per the contract.
    let counts = unsafe { c_slice(buffer_counts, count, "buffer_counts") }?;
    let total = counts
        .iter()
        .try_fold(0usize, |a, &c| a.checked_add(c))
        .ok_or_else(|| invalid("buffer_counts add up to more than any array"))?;
    // SAFETY: `total` entries each per the contract.
    let flat = unsafe { items_arg(buffers, sizes, total) }?;
    let mut out = Vec::with_capacity(count);
    let mut at = 0;
    for &c in counts {
        out.push(flat[at..at + c].to_vec());
        at += c;
    }
    Ok(out)
}

/// One replica as JSON: `id`, `status` (upstream's `ReplicaStatus` value), `type`,
/// and the fields of its descriptor.
pub(super) fn replica_json(r: &ReplicaDescriptor) -> Value {
    let mut v = match &r.location {
        ReplicaLocation::Memory(d) | ReplicaLocation::Nof(d) => json!({
            "type": if matches!(r.location, ReplicaLocation::Memory(_)) { "memory" } else { "nof" },
            "size": d.size,
            "buffer_address": d.buffer_address,
            "protocol": d.protocol,
            "transport_endpoint": d.transport_endpoint,
        }),
        ReplicaLocation::Disk {
            file_path,
            object_size,
        } => json!({"type": "disk", "file_path": file_path, "object_size": object_size}),
        ReplicaLocation::LocalDisk {
            client_id,
            object_size,
            transport_endpoint,
        } => json!({
            "type": "local_disk",
            "client_id": client_id.to_string(),
            "object_size": object_size,
            "transport_endpoint": transport_endpoint,
        }),
        ReplicaLocation::Dfs {
            file_path,
            offset,
            object_size,
            aligned_size,
            shard_idx,
        } => json!({
            "type": "dfs",
            "file_path": file_path,
            "offset": offset,
            "object_size": object_size,
            "aligned_size": aligned_size,
            "shard_idx": shard_idx,
        }),
    };
    v["id"] = json!(r.id);
    v["status"] = json!(r.status as i32);
    v
}

/// Writes `text` snprintf-style and returns its length.
///
/// # Safety
/// `buf_out` NULL (only with `buf_len == 0`) or writable for `buf_len` bytes.
pub(super) unsafe fn emit(
    buf_out: *mut c_char,
    buf_len: usize,
    text: &str,
) -> Result<i64, FfiError> {
    if buf_out.is_null() && buf_len > 0 {
        return Err(invalid("buf_out is NULL with a non-zero buf_len"));
    }
    // SAFETY: per the contract.
    unsafe { write_truncated(buf_out, buf_len, text) };
    Ok(text.len() as i64)
}

/// Writes `id` to the two entries of `out` (an id's C form: first, second).
///
/// # Safety
/// `out` is writable for two entries.
pub(super) unsafe fn write_id(out: *mut u64, id: Uuid) {
    // SAFETY: two entries per the contract.
    unsafe {
        *out = id.first;
        *out.add(1) = id.second;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_parse_like_upstream_python() {
        // SAFETY: NULL and NUL-terminated literals.
        unsafe {
            for defaults in [std::ptr::null(), c"{}".as_ptr()] {
                assert_eq!(config_arg(defaults).unwrap(), ReplicateConfig::default());
            }
            let c = config_arg(
                cr#"{"replica_num":2,"soft_pin_action":1,"soft_pin_ttl_ms":5,"with_hard_pin":true,
                     "preferred_segments":["a:1"],"preferred_segment":"b:2","group_ids":["g"],
                     "prefer_alloc_in_same_node":true,"unknown":3}"#
                    .as_ptr(),
            )
            .unwrap();
            assert_eq!(c.replica_num, 2);
            assert_eq!(c.soft_pin_action, SoftPinAction::Enable);
            assert_eq!(c.soft_pin_ttl_ms, Some(5));
            assert!(c.with_hard_pin && c.prefer_alloc_in_same_node);
            assert_eq!(c.preferred_segments, vec!["a:1"]);
            assert_eq!(c.preferred_segment, "b:2");
            assert_eq!(c.group_ids, Some(vec!["g".to_string()]));
            let legacy = config_arg(cr#"{"with_soft_pin":true}"#.as_ptr()).unwrap();
            assert_eq!(legacy.soft_pin_action, SoftPinAction::Enable);
            assert!(config_arg(c"{".as_ptr()).is_err());
            assert!(config_arg(cr#"{"soft_pin_action":7}"#.as_ptr()).is_err());
            assert!(config_arg(cr#"{"replica_num":-1}"#.as_ptr()).is_err());
        }
    }

    #[test]
    fn multi_items_split_by_counts() {
        // Addresses without provenance: never dereferenced, only split up.
        let addr = |n: usize| std::ptr::null_mut::<c_void>().wrapping_byte_add(n);
        let bufs = [addr(8), addr(16), addr(24)];
        let sizes = [1usize, 2, 3];
        let counts = [2usize, 0, 1];
        // SAFETY: local arrays of the stated lengths.
        let items =
            unsafe { multi_items_arg(bufs.as_ptr(), sizes.as_ptr(), counts.as_ptr(), 3).unwrap() };
        assert_eq!(items, vec![vec![(8, 1), (16, 2)], vec![], vec![(24, 3)]]);
        // SAFETY: as above; a NULL buffer with a size is rejected before any read.
        unsafe {
            let bad = [std::ptr::null_mut::<c_void>()];
            assert!(
                multi_items_arg(bad.as_ptr(), sizes.as_ptr(), counts[2..].as_ptr(), 1).is_err()
            );
        }
    }

    #[test]
    fn replica_json_has_upstream_fields() {
        use crate::wire::master_api::{BufferDescriptor, ReplicaStatus};
        let r = ReplicaDescriptor {
            id: 7,
            location: ReplicaLocation::Memory(BufferDescriptor {
                size: 5,
                buffer_address: 4096,
                protocol: "tcp".into(),
                transport_endpoint: "h:1".into(),
            }),
            status: ReplicaStatus::Complete,
        };
        let v = replica_json(&r);
        assert_eq!(v["type"], "memory");
        assert_eq!(v["status"], 3);
        assert_eq!(v["size"], 5);
        assert_eq!(v["buffer_address"], 4096);
        assert_eq!(v["transport_endpoint"], "h:1");
    }
}
