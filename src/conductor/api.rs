//! The conductor's HTTP contract (JSON; README "Conductor"): instances, their block
//! reports, scheduling, completions, stats, metrics and health, plus the indexer API of
//! upstream's design documents ([`super::indexer`]). A bad request gets 400 with what
//! is wrong and changes nothing.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;

use super::index::medium;
use super::instances::{InstanceSpec, Role};
use super::json_reply::{answer, error, json_reply, Answer, MAX_HASHES};
use super::scheduler::{Completion, Refusal, ScheduleRequest};
use super::{indexer, report, Conductor};
use crate::runtime::http_server::{HttpHandler, HttpReply};

/// Serves the HTTP API of one conductor.
#[derive(Debug, Clone)]
pub struct Api(pub Arc<Conductor>);

impl HttpHandler for Api {
    fn handle(&self, method: &str, target: &str, body: &[u8]) -> HttpReply {
        let path = origin_path(target);
        let c = &self.0;
        let allowed = match path {
            "/v1/instances" => &["GET", "POST"][..],
            p if p.starts_with("/v1/instances/") => &["DELETE"][..],
            "/v1/events" | "/v1/schedule" | "/v1/complete" => &["POST"][..],
            "/v1/stats" | "/metrics" | "/health" => &["GET"][..],
            "/query" | "/query_by_hash" | "/register" | "/unregister" => &["POST"][..],
            "/services" => &["GET"][..],
            _ => return error(404, &format!("no such endpoint: {path}")),
        };
        if !allowed.contains(&method) {
            return error(405, &format!("{path} takes {}", allowed.join(" or ")));
        }
        match (method, path) {
            ("GET", "/v1/instances") => json_reply(200, &report::instances(c)),
            ("POST", "/v1/instances") => answer(body, |b| register(c, b)),
            ("DELETE", p) => unregister(c, &p["/v1/instances/".len()..]),
            (_, "/v1/events") => answer(body, |b| events(c, b)),
            (_, "/v1/schedule") => answer(body, |b| schedule(c, b)),
            (_, "/v1/complete") => answer(body, |b| complete(c, b)),
            (_, "/v1/stats") => json_reply(200, &report::stats(c)),
            (_, "/metrics") => HttpReply {
                status: 200,
                content_type: "text/plain; version=0.0.4",
                body: report::metrics(c).into_bytes(),
            },
            (_, "/health") => json_reply(200, &json!({"status": "ok"})),
            (_, p) => indexer::handle(c, p, body),
        }
    }
}

/// The path of a request target (origin or absolute form), without its query.
fn origin_path(target: &str) -> &str {
    let target = match target.find("://") {
        Some(i) => target[i + 3..]
            .find('/')
            .map_or("/", |j| &target[i + 3 + j..]),
        None => target,
    };
    target.split(['?', '#']).next().unwrap_or("/")
}

/// Refuses the first non-finite or negative time of `times` (name, value if given).
fn check_ms(times: &[(&str, Option<f64>)]) -> Result<(), HttpReply> {
    match times
        .iter()
        .find(|(_, v)| v.is_some_and(|x| !x.is_finite() || x < 0.0))
    {
        Some((name, _)) => Err(error(400, &format!("{name} must be a finite number >= 0"))),
        None => Ok(()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InstanceBody {
    id: String,
    role: String,
    kv_capacity_blocks: u64,
    max_batch: u64,
}

fn register(c: &Conductor, b: InstanceBody) -> Answer {
    if b.id.is_empty() || b.id.len() > 256 || b.id.contains('/') {
        return Err(error(400, "id must be 1-256 characters without '/'"));
    }
    let Some(role) = Role::parse(&b.role) else {
        return Err(error(400, "role must be \"prefill\" or \"decode\""));
    };
    let spec = InstanceSpec {
        id: b.id.clone(),
        role,
        kv_capacity_blocks: b.kv_capacity_blocks,
        max_batch: b.max_batch,
    };
    let now = c.now(None);
    Ok(match c.with(|s| s.register(spec, now)) {
        Ok(created) => json_reply(
            if created { 201 } else { 200 },
            &json!({"id": b.id, "role": role.name(), "created": created}),
        ),
        Err(e) => error(409, &e.to_string()),
    })
}

fn unregister(c: &Conductor, id: &str) -> HttpReply {
    let id = percent_encoding::percent_decode_str(id).decode_utf8_lossy();
    match c.with(|s| s.unregister(&id)) {
        Some((blocks, requests)) => json_reply(
            200,
            &json!({"id": id, "removed_blocks": blocks, "dropped_requests": requests}),
        ),
        None => error(404, &format!("no instance {id:?}")),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsBody {
    instance: String,
    #[serde(default)]
    stored: Vec<u64>,
    #[serde(default)]
    removed: Vec<u64>,
    #[serde(default)]
    medium: Option<String>,
}

fn events(c: &Conductor, b: EventsBody) -> Answer {
    if b.stored.len() + b.removed.len() > MAX_HASHES {
        return Err(error(
            400,
            &format!("at most {MAX_HASHES} block hashes per report"),
        ));
    }
    let (stored_in, removed_from) = match b.medium.as_deref() {
        None => (medium::GPU, medium::ALL),
        Some(m) => match medium::parse(m) {
            Some(m) => (m, m),
            None => return Err(error(400, "medium must be gpu, cpu or disk")),
        },
    };
    Ok(
        match c.with(|s| {
            s.apply_events(
                &b.instance,
                (&b.stored, stored_in),
                (&b.removed, removed_from),
            )
        }) {
            Some(()) => json_reply(
                200,
                &json!({"stored": b.stored.len(), "removed": b.removed.len()}),
            ),
            None => error(404, &format!("no instance {:?}", b.instance)),
        },
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleBody {
    request_id: String,
    hash_ids: Vec<u64>,
    input_length: u64,
    #[serde(default)]
    output_length_hint: Option<u64>,
    #[serde(default)]
    ttft_slo_ms: Option<f64>,
    #[serde(default)]
    tbt_slo_ms: Option<f64>,
    #[serde(default)]
    now_ms: Option<f64>,
}

fn schedule(c: &Conductor, b: ScheduleBody) -> Answer {
    check_ms(&[
        ("ttft_slo_ms", b.ttft_slo_ms),
        ("tbt_slo_ms", b.tbt_slo_ms),
        ("now_ms", b.now_ms),
    ])?;
    if b.hash_ids.len() > MAX_HASHES {
        return Err(error(400, &format!("at most {MAX_HASHES} hash_ids")));
    }
    let req = ScheduleRequest {
        request_id: b.request_id,
        hash_ids: b.hash_ids,
        input_length: b.input_length,
        output_length_hint: b.output_length_hint,
        ttft_slo_ms: b.ttft_slo_ms,
        tbt_slo_ms: b.tbt_slo_ms,
        now_ms: b.now_ms,
    };
    Ok(match c.schedule(&req) {
        Ok(p) => json_reply(200, &p),
        Err(Refusal::Rejected {
            reason,
            est_ttft_ms,
            est_tbt_ms,
        }) => json_reply(
            429,
            &json!({"reason": reason, "est_ttft_ms": est_ttft_ms, "est_tbt_ms": est_tbt_ms}),
        ),
        Err(Refusal::NoInstance(why)) => error(503, &why),
        Err(Refusal::Duplicate(why)) => error(409, &why),
        Err(Refusal::Invalid(why)) => error(400, &why),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompleteBody {
    request_id: String,
    prefill_ms: f64,
    queue_ms: f64,
    transfer_ms: f64,
    ttft_ms: f64,
    tbt_ms: f64,
    output_length: u64,
    #[serde(default)]
    now_ms: Option<f64>,
}

fn complete(c: &Conductor, b: CompleteBody) -> Answer {
    check_ms(&[
        ("prefill_ms", Some(b.prefill_ms)),
        ("queue_ms", Some(b.queue_ms)),
        ("transfer_ms", Some(b.transfer_ms)),
        ("ttft_ms", Some(b.ttft_ms)),
        ("tbt_ms", Some(b.tbt_ms)),
        ("now_ms", b.now_ms),
    ])?;
    let done = Completion {
        request_id: b.request_id,
        prefill_ms: b.prefill_ms,
        queue_ms: b.queue_ms,
        transfer_ms: b.transfer_ms,
        ttft_ms: b.ttft_ms,
        tbt_ms: b.tbt_ms,
        output_length: b.output_length,
        now_ms: b.now_ms,
    };
    Ok(if c.complete(&done) {
        json_reply(
            200,
            &json!({"request_id": done.request_id, "learned": true}),
        )
    } else {
        error(
            404,
            &format!(
                "request {:?} is not placed (or was forgotten)",
                done.request_id
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::origin_path;

    #[test]
    fn paths_of_request_targets() {
        for (target, path) in [
            ("/v1/stats?x=1", "/v1/stats"),
            ("http://h:1/v1/schedule", "/v1/schedule"),
            ("http://h:1", "/"),
        ] {
            assert_eq!(origin_path(target), path, "{target}");
        }
    }
}
