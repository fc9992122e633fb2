//! What the conductor tells about itself: `/v1/stats` and `/v1/instances` as JSON,
//! `/metrics` in Prometheus' text format.

use std::fmt::Write;

use serde_json::{json, Value};

use super::Conductor;

/// Every instance with the conductor's view of its load.
pub fn instances(c: &Conductor) -> Value {
    let now = c.now(None);
    c.with(|s| {
        let now = now.max(s.now_ms());
        let list: Vec<Value> = s
            .instances
            .iter()
            .map(|(slot, i)| {
                json!({
                    "id": i.spec.id,
                    "role": i.spec.role.name(),
                    "kv_capacity_blocks": i.spec.kv_capacity_blocks,
                    "max_batch": i.spec.max_batch,
                    "cached_blocks": s.index.blocks_of(slot),
                    "queue_ms": i.queue_ms(now),
                    "prefills": i.prefills,
                    "decoding": i.decode.requests,
                    "decode_blocks": i.decode.blocks,
                })
            })
            .collect();
        json!({ "instances": list })
    })
}

/// Counters, hit rate, prediction errors and the learned cost model.
pub fn stats(c: &Conductor) -> Value {
    let sources = c.sources.stats();
    c.with(|s| {
        let k = &s.counters;
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let errors = |log: &super::predict::ErrorLog| {
            json!({
                "samples": log.count(),
                "mean_error": log.mean_all(),
                "median_error_after_warmup": log.steady_quantile(0.5),
                "p90_error_after_warmup": log.steady_quantile(0.9),
            })
        };
        let p = &s.predictors;
        json!({
            "policy": s.config().policy.name(),
            "block_tokens": s.config().block_tokens,
            "scheduled": k.scheduled,
            "rejected": {
                "ttft_slo": k.rejected_ttft,
                "tbt_slo": k.rejected_tbt,
                "no_decode_room": k.rejected_no_room,
            },
            "completed": k.completed,
            "unknown_completions": k.unknown_completions,
            "expired_assignments": k.expired,
            "pending": s.pending(),
            "request_blocks": k.request_blocks,
            "prefix_blocks": k.prefix_blocks,
            "transfer_blocks": k.transfer_blocks,
            "cache_hit_rate": ratio(k.prefix_blocks, k.request_blocks),
            "index": {
                "distinct_blocks": s.index.distinct_blocks(),
                "events_stored": k.events_stored,
                "events_removed": k.events_removed,
                "evicted_by_capacity": k.evicted,
            },
            "prediction": {
                "warmup_requests": s.config().warmup_requests,
                "ttft": errors(&s.ttft_errors),
                "prefill": errors(&s.prefill_errors),
                "tbt": errors(&s.tbt_errors),
                "model": {
                    "prefill_ms": p.prefill.weights(),
                    "transfer_ms": p.transfer.weights(),
                    "tbt_ms": p.decode.weights(),
                },
            },
            "kv_event_sources": sources,
        })
    })
}

/// The Prometheus exposition.
pub fn metrics(c: &Conductor) -> String {
    let now = c.now(None);
    let sources = c.sources.totals();
    c.with(|s| {
        let now = now.max(s.now_ms());
        let k = &s.counters;
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, v) in samples {
                let _ = writeln!(out, "{name}{labels} {v}");
            }
        };
        let one = |v: u64| vec![(String::new(), v as f64)];
        metric(
            "conductor_scheduled_total",
            "counter",
            "Requests placed.",
            &one(k.scheduled),
        );
        metric(
            "conductor_rejected_total",
            "counter",
            "Requests refused, by reason.",
            &[
                ("{reason=\"ttft_slo\"}".into(), k.rejected_ttft as f64),
                ("{reason=\"tbt_slo\"}".into(), k.rejected_tbt as f64),
                (
                    "{reason=\"no_decode_room\"}".into(),
                    k.rejected_no_room as f64,
                ),
            ],
        );
        for (name, kind, help, value) in [
            (
                "conductor_completed_total",
                "counter",
                "Completions learned from.",
                k.completed,
            ),
            (
                "conductor_request_blocks_total",
                "counter",
                "Prompt blocks of placed requests.",
                k.request_blocks,
            ),
            (
                "conductor_prefix_blocks_total",
                "counter",
                "Prompt blocks not recomputed (cached or pulled).",
                k.prefix_blocks,
            ),
            (
                "conductor_transfer_blocks_total",
                "counter",
                "Prompt blocks pulled from another instance.",
                k.transfer_blocks,
            ),
            (
                "conductor_index_blocks",
                "gauge",
                "Distinct blocks in the prefix index.",
                s.index.distinct_blocks() as u64,
            ),
            (
                "conductor_pending_requests",
                "gauge",
                "Placed requests not yet completed.",
                s.pending() as u64,
            ),
            (
                "conductor_kv_events_total",
                "counter",
                "KV events received from subscriptions.",
                sources.0,
            ),
            (
                "conductor_kv_events_lost_total",
                "counter",
                "KV event batches missed (sequence gaps).",
                sources.1,
            ),
        ] {
            metric(name, kind, help, &one(value));
        }
        let ttft = s.ttft_errors.steady_quantile(0.5).unwrap_or(0.0);
        metric(
            "conductor_ttft_prediction_error_median",
            "gauge",
            "Median relative TTFT prediction error after warm-up.",
            &[(String::new(), ttft)],
        );
        let per = |f: &dyn Fn(&super::instances::Instance) -> f64| -> Vec<(String, f64)> {
            s.instances
                .iter()
                .map(|(_, i)| {
                    let labels = format!(
                        "{{instance=\"{}\",role=\"{}\"}}",
                        escape(&i.spec.id),
                        i.spec.role.name()
                    );
                    (labels, f(i))
                })
                .collect()
        };
        metric(
            "conductor_instance_queue_ms",
            "gauge",
            "Predicted prefill queue per instance.",
            &per(&|i| i.queue_ms(now)),
        );
        metric(
            "conductor_instance_decoding",
            "gauge",
            "Requests decoding per instance.",
            &per(&|i| i.decode.requests as f64),
        );
        out
    })
}

/// A Prometheus label value with `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
