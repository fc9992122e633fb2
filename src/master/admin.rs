//! The master's admin / metrics HTTP service (upstream `master_admin_service`):
//! `/health`, `/role`, `/ha_status`, `/leader` ([`super::admin_runtime`]), `/metrics`
//! (Prometheus text), `/metrics/summary`, `/get_all_segments`, `/get_all_keys`,
//! `/query_key?key=`, `/batch_query_keys?keys=`, `/query_segment?segment=`,
//! `/get_segments_detail`, `/kv_events/status`.

use super::admin_runtime::RuntimeView;
use super::kv_events::KvEvents;
use super::MasterService;
use crate::runtime::http_server::{HttpHandler, HttpReply};
use crate::wire::master_api::{ErrorCode, ReplicaDescriptor, ReplicaLocation};
use percent_encoding::percent_decode_str;
use serde_json::{json, Value};
use std::fmt::Write;
use std::sync::Arc;

/// Answers admin requests from a master's state.
pub struct AdminHandler(pub Arc<MasterService>);

impl HttpHandler for AdminHandler {
    fn handle(&self, method: &str, target: &str, _body: &[u8]) -> HttpReply {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if method != "GET" {
            return HttpReply::text(405, "Method not allowed");
        }
        if let Some(reply) = RuntimeView::plain().route(path) {
            return reply;
        }
        let master = &self.0;
        match path {
            "/metrics" => HttpReply {
                status: 200,
                content_type: "text/plain; version=0.0.4",
                body: prometheus(master).into_bytes(),
            },
            "/metrics/summary" => HttpReply::text(200, &summary(master)),
            "/get_all_segments" => {
                let mut names: Vec<String> = master
                    .segments_summary()
                    .into_iter()
                    .map(|s| s.name)
                    .collect();
                names.sort();
                names.dedup();
                HttpReply::text(200, &lines(&names))
            }
            "/get_all_keys" => HttpReply::text(200, &lines(&master.all_keys())),
            "/query_key" => query_key(master, query),
            "/batch_query_keys" => batch_query_keys(master, query),
            "/query_segment" => query_segment(master, query),
            "/get_segments_detail" => segments_detail(master),
            "/kv_events/status" => kv_events_status(master.kv_events()),
            _ => HttpReply::text(404, "Not found"),
        }
    }
}

/// `GET /kv_events/status`: the publisher's counters, `enabled: false` when KV events
/// are off (upstream's shape and field order).
pub fn kv_events_status(events: &KvEvents) -> HttpReply {
    HttpReply {
        status: 200,
        content_type: "application/json",
        body: events.status_json().into_bytes(),
    }
}

fn json_reply(status: u16, value: Value) -> HttpReply {
    HttpReply {
        status,
        content_type: "application/json",
        body: value.to_string().into_bytes(),
    }
}

fn lines(items: &[String]) -> String {
    items.iter().fold(String::new(), |mut out, item| {
        out.push_str(item);
        out.push('\n');
        out
    })
}

/// The percent-decoded value of `name` in a query string (`+` is a space).
fn query_value(query: &str, name: &str) -> Option<String> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .map(|v| {
            percent_decode_str(&v.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        })
}

/// The memory replicas' buffer descriptors, as upstream writes them.
fn memory_buffers(replicas: &[ReplicaDescriptor]) -> Vec<Value> {
    replicas
        .iter()
        .filter_map(|r| match &r.location {
            ReplicaLocation::Memory(b) => Some(json!({
                "size_": b.size, "buffer_address_": b.buffer_address,
                "protocol_": b.protocol, "transport_endpoint_": b.transport_endpoint
            })),
            _ => None,
        })
        .collect()
}

fn query_key(master: &MasterService, query: &str) -> HttpReply {
    let Some(key) = query_value(query, "key").filter(|k| !k.is_empty()) else {
        return HttpReply::text(400, "Missing key parameter");
    };
    match master.query_key(&key) {
        Ok(replicas) => json_reply(
            200,
            json!({ "success": true, "data": memory_buffers(&replicas) }),
        ),
        Err(code) => json_reply(
            404,
            json!({ "success": false, "error_code": code.0, "error_message": error_name(code) }),
        ),
    }
}

/// `GET /batch_query_keys?keys=a,b`: per key (the first of duplicates) its memory
/// buffers or the error's name, keys in sorted order (upstream's shape).
fn batch_query_keys(master: &MasterService, query: &str) -> HttpReply {
    let keys: Vec<String> = query_value(query, "keys")
        .filter(|k| !k.is_empty())
        .map(|k| k.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    if keys.is_empty() {
        return json_reply(
            400,
            json!({"success": false, "error": "No keys provided. Use ?keys=key1,key2,..."}),
        );
    }
    let mut data = serde_json::Map::new();
    for key in keys {
        if data.contains_key(&key) {
            continue;
        }
        let item = match master.query_key(&key) {
            Ok(replicas) => json!({"ok": true, "error": null, "values": memory_buffers(&replicas)}),
            Err(code) => json!({"ok": false, "error": error_name(code), "values": null}),
        };
        data.insert(key, item);
    }
    json_reply(200, json!({"success": true, "data": data}))
}

/// `GET /query_segment?segment=NAME`: the bytes used and mounted under that name, as
/// upstream's text; 500 when no segment has it.
fn query_segment(master: &MasterService, query: &str) -> HttpReply {
    let name = query_value(query, "segment").unwrap_or_default();
    let mounts: Vec<_> = master
        .segments_summary()
        .into_iter()
        .filter(|s| s.name == name)
        .collect();
    if mounts.is_empty() {
        return HttpReply::text(500, "Failed to query segment");
    }
    let used: u64 = mounts.iter().map(|s| s.used).sum();
    let capacity: u64 = mounts.iter().map(|s| s.size).sum();
    HttpReply::text(
        200,
        &format!("{name}\nUsed(bytes): {used}\nCapacity(bytes) : {capacity}\n"),
    )
}

/// `OBJECT_NOT_FOUND` from `OBJECT_NOT_FOUND (-704)`.
fn error_name(code: ErrorCode) -> String {
    let text = code.to_string();
    text.split(' ').next().unwrap_or_default().to_string()
}

/// Upstream's `HttpSegmentsDetailResponse`.
fn segments_detail(master: &MasterService) -> HttpReply {
    let segments: Vec<Value> = master
        .segments_summary()
        .into_iter()
        .map(|s| {
            let percent = if s.size == 0 {
                0.0
            } else {
                s.used as f64 * 100.0 / s.size as f64
            };
            json!({
                "segment_name": s.name,
                "segment_id": s.id.to_string(),
                "client_id": s.client.to_string(),
                "base_address": format!("{:#x}", s.base),
                "size_bytes": s.size,
                "size_human": format!("{} GiB", s.size as f64 / (1u64 << 30) as f64),
                "te_endpoint": s.te_endpoint,
                "protocol": s.protocol,
                "status": if s.draining { "DRAINING" } else { "OK" },
                "allocator_used_bytes": s.used,
                "allocator_capacity_bytes": s.size,
                "allocator_usage_percent": percent,
            })
        })
        .collect();
    json_reply(
        200,
        json!({ "total_segments": segments.len(), "segments": segments }),
    )
}

fn summary(master: &MasterService) -> String {
    let (used, total) = (master.allocated_bytes(), master.total_capacity());
    let pct = if total == 0 {
        0.0
    } else {
        used as f64 * 100.0 / total as f64
    };
    format!(
        "Mem Storage: {used} / {total} bytes ({pct:.1}%) | Keys: {} | Clients: {} | Segments: {}",
        master.key_count(),
        master.active_clients(),
        master.segments_summary().len()
    )
}

fn prometheus(master: &MasterService) -> String {
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, value: u64| {
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
        );
    };
    gauge(
        "master_allocated_bytes",
        "Bytes allocated in mounted segments",
        master.allocated_bytes(),
    );
    gauge(
        "master_total_capacity_bytes",
        "Bytes of mounted segments",
        master.total_capacity(),
    );
    gauge(
        "master_key_count",
        "Objects stored",
        master.key_count() as u64,
    );
    gauge(
        "master_active_clients",
        "Clients with mounted segments",
        master.active_clients() as u64,
    );
    let _ = writeln!(
        out,
        "# HELP segment_allocated_bytes Bytes allocated per segment"
    );
    let _ = writeln!(out, "# TYPE segment_allocated_bytes gauge");
    for s in master.segments_summary() {
        let _ = writeln!(
            out,
            "segment_allocated_bytes{{segment=\"{}\"}} {}",
            escape(&s.name),
            s.used
        );
    }
    let metrics = master.metrics();
    for rpc in &metrics.rpcs {
        let name = snake(rpc.name);
        let _ = writeln!(out, "# TYPE master_{name}_requests_total counter");
        let _ = writeln!(out, "master_{name}_requests_total {}", rpc.requests);
        let _ = writeln!(out, "# TYPE master_{name}_failures_total counter");
        let _ = writeln!(out, "master_{name}_failures_total {}", rpc.failures);
    }
    let _ = writeln!(out, "# TYPE master_eviction_runs_total counter");
    let _ = writeln!(out, "master_eviction_runs_total {}", metrics.eviction_runs);
    let _ = writeln!(out, "# TYPE master_evicted_key_count counter");
    let _ = writeln!(out, "master_evicted_key_count {}", metrics.evicted_objects);
    let _ = writeln!(out, "# TYPE master_put_room_evictions_total counter");
    let _ = writeln!(
        out,
        "master_put_room_evictions_total {}",
        metrics.room_evictions
    );
    for (name, value) in [
        ("master_offload_tasks_queued_total", metrics.offload_queued),
        ("master_offloaded_objects_total", metrics.offloaded),
        ("master_evicted_to_disk_total", metrics.evicted_to_disk),
    ] {
        let _ = writeln!(out, "# TYPE {name} counter");
        let _ = writeln!(out, "{name} {value}");
    }
    let disks = master.local_disks_summary();
    let _ = writeln!(out, "# TYPE master_local_disk_count gauge");
    let _ = writeln!(out, "master_local_disk_count {}", disks.len());
    let _ = writeln!(out, "# TYPE master_offload_queue_length gauge");
    let queued: usize = disks.iter().map(|d| d.queued + d.in_flight).sum();
    let _ = writeln!(out, "master_offload_queue_length {queued}");
    let _ = writeln!(out, "# TYPE master_local_disk_capacity_bytes gauge");
    let capacity: i64 = disks.iter().map(|d| d.capacity.max(0)).sum();
    let _ = writeln!(out, "master_local_disk_capacity_bytes {capacity}");
    out
}

/// `PutStart` -> `put_start`, with upstream's exceptions: `ReMountSegment` ->
/// `remount_segment`, `MarkTaskToComplete` -> `update_task`.
fn snake(name: &str) -> String {
    let name = name
        .replace("ReMount", "Remount")
        .replace("MarkTaskToComplete", "UpdateTask");
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prometheus_friendly() {
        assert_eq!(snake("PutStart"), "put_start");
        assert_eq!(snake("ServiceReady"), "service_ready");
        assert_eq!(snake("ReMountSegment"), "remount_segment");
        assert_eq!(escape("a\"b"), "a\\\"b");
    }
}
