//! The master's admin / metrics HTTP service (upstream `master_admin_service`):
//! `/health`, `/role`, `/ha_status`, `/leader` ([`super::admin_runtime`]), `/metrics`
//! (Prometheus text), `/metrics/summary`, `/get_all_segments`, `/get_all_keys`,
//! `/query_key?key=`, `/batch_query_keys?keys=`, `/query_segment?segment=`,
//! `/get_segments_detail`, `/kv_events/status`.

use super::admin_runtime::RuntimeView;
use super::kv_events::KvEvents;
use super::metrics::VALUE_SIZE_BOUNDS;
use super::tenants::TenantSnapshot;
use super::{MasterMetrics, MasterService, RpcMetric};
use crate::runtime::http_server::{HttpHandler, HttpReply};
use crate::wire::master_api::{ErrorCode, ReplicaDescriptor, ReplicaLocation};
use percent_encoding::percent_decode_str;
use serde_json::{json, Value};
use std::fmt::Write;
use std::sync::Arc;

/// Answers admin requests from a master's state.
pub struct AdminHandler(pub Arc<MasterService>);

impl HttpHandler for AdminHandler {
    fn handle(&self, method: &str, target: &str, body: &[u8]) -> HttpReply {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if path == TENANT_QUOTAS {
            return tenant_quotas(&self.0, method, query, body);
        }
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

/// The tenant quota API's path.
const TENANT_QUOTAS: &str = "/api/v1/tenant_quotas";

/// Upstream's admin error body, with its status (-600 400; -704, -1701 404; -1011,
/// -1010, -1702 409; else 500).
fn admin_error(code: ErrorCode, message: &str) -> HttpReply {
    let status = match code.0 {
        -600 => 400,
        -704 | -1701 => 404,
        -1011 | -1010 | -1702 => 409,
        _ => 500,
    };
    HttpReply {
        status,
        content_type: "application/json",
        body: format!(
            "{{\"success\":false,\"error_code\":{},\"error_message\":{}}}",
            code.0,
            Value::from(message)
        )
        .into_bytes(),
    }
}

/// A tenant's snapshot as upstream's JSON text (its field order).
fn snapshot_json(s: &TenantSnapshot) -> String {
    format!(
        "{{\"tenant_id\":{},\"requested_quota_bytes\":{},\"effective_quota_bytes\":{},\
         \"charged_bytes\":{},\"admission_closed\":{},\"over_quota\":{},\
         \"has_explicit_policy\":{}}}",
        Value::from(s.tenant_id.as_str()),
        s.requested_quota_bytes,
        s.effective_quota_bytes,
        s.charged_bytes,
        s.admission_closed,
        s.over_quota,
        s.has_explicit_policy
    )
}

/// `GET /api/v1/tenant_quotas[?tenant_id=T]`, `PUT ...?tenant_id=T` with
/// `{"requested_quota_bytes": N}`, `DELETE ...?tenant_id=T` (upstream's API).
fn tenant_quotas(master: &MasterService, method: &str, query: &str, body: &[u8]) -> HttpReply {
    let tenant = query_value(query, "tenant_id");
    let code_name = |c: ErrorCode| c.name().to_string();
    let result = match (method, tenant.as_deref()) {
        ("GET", None) => master.tenant_quota_snapshots().map(|all| {
            format!(
                "[{}]",
                all.iter().map(snapshot_json).collect::<Vec<_>>().join(",")
            )
        }),
        ("GET", Some(t)) => master.tenant_quota_snapshot(t).map(|s| snapshot_json(&s)),
        ("PUT", t) => {
            let Some(t) = t.filter(|t| !t.is_empty()) else {
                return admin_error(ErrorCode::INVALID_PARAMS, "Missing or invalid tenant_id");
            };
            let bytes = match serde_json::from_slice::<Value>(body) {
                Ok(v) => v.get("requested_quota_bytes").and_then(Value::as_u64),
                Err(e) => {
                    return admin_error(
                        ErrorCode::INVALID_PARAMS,
                        &format!("Invalid JSON body: {e}"),
                    )
                }
            };
            let Some(bytes) = bytes.filter(|b| *b > 0 && *b <= i64::MAX as u64) else {
                return admin_error(
                    ErrorCode::INVALID_PARAMS,
                    "Tenant quota must be in [1, 2^63 - 1] bytes",
                );
            };
            master.set_tenant_quota(t, bytes).map(|s| snapshot_json(&s))
        }
        ("DELETE", Some(t)) => master.delete_tenant_quota(t).map(|()| "null".to_string()),
        ("DELETE", None) => Err(ErrorCode::INVALID_PARAMS),
        _ => return HttpReply::text(405, "Method not allowed"),
    };
    match result {
        Ok(data) => HttpReply {
            status: 200,
            content_type: "application/json",
            body: format!("{{\"success\":true,\"data\":{data}}}").into_bytes(),
        },
        Err(c) if c == ErrorCode::INVALID_PARAMS => admin_error(c, "Invalid tenant_id"),
        Err(c) => admin_error(c, &code_name(c)),
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
        // Upstream counts batch upserts with the batch puts; our clients' tracked
        // reads (BatchBeginRead, an extension) are its BatchGetReplicaList.
        let folded = match rpc.name {
            "BatchGetReplicaList" => metrics.rpc("BatchBeginRead"),
            other => other
                .strip_prefix("BatchPut")
                .and_then(|rest| metrics.rpc(&format!("BatchUpsert{rest}"))),
        };
        let with_folded = |f: fn(&RpcMetric) -> u64| f(rpc) + folded.as_ref().map_or(0, f);
        let mut families = vec![
            ("requests", with_folded(|m| m.requests)),
            ("failures", with_folded(|m| m.failures)),
        ];
        if rpc.name.starts_with("Batch") {
            families.extend([
                ("partial_successes", with_folded(|m| m.partial_successes)),
                ("items", with_folded(|m| m.items)),
                ("failed_items", with_folded(|m| m.failed_items)),
            ]);
        }
        for (family, value) in families {
            let _ = writeln!(out, "# TYPE master_{name}_{family}_total counter");
            let _ = writeln!(out, "master_{name}_{family}_total {value}");
        }
    }
    let census = master.census();
    let promotion = master.promotion_metrics();
    const C: &str = "counter";
    const G: &str = "gauge";
    // Upstream's names for the eviction runs, and (upstream after 0.3.13) the same
    // for the memory pool alone: the only pool this master evicts from.
    let simple = [
        ("master_eviction_runs_total", C, metrics.eviction_runs),
        ("master_attempted_evictions_total", C, metrics.eviction_runs),
        ("master_attempted_evictions_mem", C, metrics.eviction_runs),
        (
            "master_successful_evictions_total",
            C,
            metrics.successful_evictions,
        ),
        (
            "master_successful_evictions_mem",
            C,
            metrics.successful_evictions,
        ),
        ("master_evicted_key_count", C, metrics.evicted_objects),
        ("master_evicted_key_count_mem", C, metrics.evicted_objects),
        ("master_evicted_size_bytes", C, metrics.evicted_bytes),
        ("master_evicted_size_bytes_mem", C, metrics.evicted_bytes),
        (
            "master_put_start_discard_cnt",
            C,
            metrics.put_start_discards,
        ),
        (
            "master_put_start_release_cnt",
            C,
            metrics.put_start_releases,
        ),
        (
            "master_put_start_discarded_staging_size",
            G,
            metrics.discarded_staging_bytes,
        ),
        (
            "master_put_start_alloc_failures_total",
            C,
            metrics.put_start_alloc_failures,
        ),
        (
            "master_put_start_partial_allocations_total",
            C,
            metrics.put_start_partial_allocations,
        ),
        ("master_soft_pin_key_count", G, census.soft_pinned),
        ("mem_cache_nums_", G, census.in_memory),
        ("file_cache_nums_", G, census.on_disk),
        ("total_get_nums_", C, metrics.gets),
        ("valid_get_nums_", C, metrics.valid_gets),
        ("mem_cache_hit_nums_", C, metrics.memory_hits),
        ("mem_cache_hit_bytes_total", C, metrics.memory_hit_bytes),
        ("file_cache_hit_nums_", C, metrics.disk_hits),
        ("file_cache_hit_bytes_total", C, metrics.disk_hit_bytes),
        ("master_promotion_in_flight", G, promotion.in_flight),
        ("master_promotion_admitted_total", C, promotion.admitted),
        ("master_promotion_completed_total", C, promotion.completed),
        (
            "master_promotion_completed_bytes_total",
            C,
            promotion.completed_bytes,
        ),
        ("master_promotion_expired_total", C, promotion.expired),
        ("master_promotion_failed_total", C, promotion.failed),
        ("master_promotion_cancelled_total", C, promotion.cancelled),
        (
            "master_promotion_rejected_frequency_total",
            C,
            promotion.rejected_frequency,
        ),
        (
            "master_promotion_rejected_watermark_total",
            C,
            promotion.rejected_watermark,
        ),
        (
            "master_promotion_rejected_cap_total",
            C,
            promotion.rejected_cap,
        ),
        ("master_put_room_evictions_total", C, metrics.room_evictions),
        (
            "master_offload_tasks_queued_total",
            C,
            metrics.offload_queued,
        ),
        ("master_offloaded_objects_total", C, metrics.offloaded),
        ("master_evicted_to_disk_total", C, metrics.evicted_to_disk),
    ];
    for (name, kind, value) in simple {
        let _ = writeln!(out, "# TYPE {name} {kind}");
        let _ = writeln!(out, "{name} {value}");
    }
    value_size_histogram(&metrics, &mut out);
    let disks = master.local_disks_summary();
    let _ = writeln!(out, "# TYPE master_local_disk_count gauge");
    let _ = writeln!(out, "master_local_disk_count {}", disks.len());
    let _ = writeln!(out, "# TYPE master_offload_queue_length gauge");
    let queued: usize = disks.iter().map(|d| d.queued + d.in_flight).sum();
    let _ = writeln!(out, "master_offload_queue_length {queued}");
    let _ = writeln!(out, "# TYPE master_local_disk_capacity_bytes gauge");
    let capacity: i64 = disks.iter().map(|d| d.capacity.max(0)).sum();
    let _ = writeln!(out, "master_local_disk_capacity_bytes {capacity}");
    tenant_metrics(master, &mut out);
    out
}

/// `master_value_size_bytes`: the value sizes of the objects puts created.
fn value_size_histogram(metrics: &MasterMetrics, out: &mut String) {
    let name = "master_value_size_bytes";
    let _ = writeln!(out, "# HELP {name} Distribution of object value sizes");
    let _ = writeln!(out, "# TYPE {name} histogram");
    let mut cumulative = 0u64;
    for (i, count) in metrics.value_sizes.iter().enumerate() {
        cumulative += count;
        match VALUE_SIZE_BOUNDS.get(i) {
            Some(bound) => {
                let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
            }
            None => {
                let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
            }
        }
    }
    let _ = writeln!(out, "{name}_sum {}", metrics.value_size_sum);
    let _ = writeln!(out, "{name}_count {cumulative}");
}

/// Upstream's tenant families: the quota gauges (multi-tenancy only) and the
/// rejection and eviction counters (once they have a value).
fn tenant_metrics(master: &MasterService, out: &mut String) {
    let rejects = master.tenant_quota_rejects();
    if !rejects.is_empty() {
        let name = "mooncake_tenant_quota_reject_total";
        let _ = writeln!(
            out,
            "# HELP {name} Total number of tenant quota admission rejects"
        );
        let _ = writeln!(out, "# TYPE {name} counter");
        for (t, n) in rejects {
            let _ = writeln!(
                out,
                "{name}{{tenant_id=\"{}\",reason=\"quota_exceeded\"}} {n}",
                escape(&t)
            );
        }
    }
    let evicted = master.tenant_quota_evicted();
    if !evicted.is_empty() {
        let name = "mooncake_tenant_evict_bytes_total";
        let _ = writeln!(
            out,
            "# HELP {name} Total bytes evicted by tenant-scoped quota eviction"
        );
        let _ = writeln!(out, "# TYPE {name} counter");
        for (t, n) in evicted {
            let _ = writeln!(out, "{name}{{tenant_id=\"{}\"}} {n}", escape(&t));
        }
    }
    let Ok(snaps) = master.tenant_quota_snapshots() else {
        return;
    };
    let families = [
        ("requested_bytes", "Requested tenant quota policy in bytes"),
        ("effective_bytes", "Effective tenant quota in bytes"),
        ("charged_bytes", "Tenant quota charge in bytes"),
        ("admission_closed", "Tenant quota admission-closed flag"),
        ("over_quota", "Tenant over-quota flag"),
        ("explicit_policy", "Tenant explicit policy flag"),
        (
            "allocatable_capacity_bytes",
            "Global tenant quota allocatable capacity in bytes",
        ),
        (
            "requested_bytes_sum",
            "Global requested tenant quota sum in bytes",
        ),
        (
            "effective_bytes_sum",
            "Global effective tenant quota sum in bytes",
        ),
    ];
    for (f, help) in families {
        let _ = writeln!(out, "# HELP mooncake_tenant_quota_{f} {help}");
        let _ = writeln!(out, "# TYPE mooncake_tenant_quota_{f} gauge");
    }
    for s in &snaps {
        let t = escape(&s.tenant_id);
        for (f, v) in [
            ("requested_bytes", s.requested_quota_bytes),
            ("effective_bytes", s.effective_quota_bytes),
            ("charged_bytes", s.charged_bytes),
            ("admission_closed", u64::from(s.admission_closed)),
            ("over_quota", u64::from(s.over_quota)),
            ("explicit_policy", u64::from(s.has_explicit_policy)),
        ] {
            let _ = writeln!(out, "mooncake_tenant_quota_{f}{{tenant_id=\"{t}\"}} {v}");
        }
    }
    let requested: u64 = snaps.iter().map(|s| s.requested_quota_bytes).sum();
    let effective: u64 = snaps.iter().map(|s| s.effective_quota_bytes).sum();
    for (f, v) in [
        ("allocatable_capacity_bytes", master.total_capacity()),
        ("requested_bytes_sum", requested),
        ("effective_bytes_sum", effective),
    ] {
        let _ = writeln!(out, "mooncake_tenant_quota_{f} {v}");
    }
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
