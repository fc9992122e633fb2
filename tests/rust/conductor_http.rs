//! The conductor's HTTP contract (README "Conductor"): every endpoint's answers, bad
//! input answered 400 with what is wrong and nothing changed, wrong methods 405, 429
//! bodies, 503 without instances, stats and Prometheus metrics, the indexer API's
//! shapes; and the `mooncake_conductor` binary serving it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use mooncake::conductor::api::Api;
use mooncake::conductor::{Conductor, ConductorConfig, Policy};
use mooncake::runtime::http_server::HttpServer;
use serde_json::{json, Value};

struct Server {
    server: Option<HttpServer>,
    base: String,
}

impl Server {
    fn start(config: ConductorConfig) -> Server {
        let conductor = Conductor::new(config);
        let server = HttpServer::start(
            "127.0.0.1:0".parse().unwrap(),
            "conductor",
            Arc::new(Api(conductor)),
        )
        .unwrap();
        let base = format!("http://{}", server.local_addr());
        Server {
            server: Some(server),
            base,
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let req = ureq::request(method, &url).timeout(Duration::from_secs(30));
        let result = match body {
            Some(b) => req.set("Content-Type", "application/json").send_string(b),
            None => req.call(),
        };
        let response = match result {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{method} {url}: {e}"),
        };
        let status = response.status();
        let text = response.into_string().unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.call("POST", path, Some(&body.to_string()))
    }

    fn stats(&self) -> Value {
        let (status, v) = self.call("GET", "/v1/stats", None);
        assert_eq!(status, 200);
        v
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
    }
}

fn least_loaded() -> ConductorConfig {
    ConductorConfig {
        policy: Policy::LeastLoaded,
        ..ConductorConfig::default()
    }
}

fn instance(id: &str, role: &str) -> Value {
    json!({"id": id, "role": role, "kv_capacity_blocks": 1000, "max_batch": 8})
}

fn schedule_body(id: &str) -> Value {
    json!({"request_id": id, "hash_ids": [1, 2, 3], "input_length": 1500,
           "output_length_hint": null, "ttft_slo_ms": null, "tbt_slo_ms": null, "now_ms": 0})
}

#[test]
fn instances_register_update_conflict_and_leave() {
    let s = Server::start(least_loaded());
    assert_eq!(
        s.post("/v1/instances", &instance("p0", "prefill")),
        (201, json!({"id": "p0", "role": "prefill", "created": true}))
    );
    assert_eq!(s.post("/v1/instances", &instance("p0", "prefill")).0, 200);
    assert_eq!(s.post("/v1/instances", &instance("p0", "decode")).0, 409);
    let (status, list) = s.call("GET", "/v1/instances", None);
    assert_eq!(status, 200);
    assert_eq!(list["instances"][0]["id"], "p0");
    assert_eq!(list["instances"][0]["kv_capacity_blocks"], 1000);
    let (status, gone) = s.call("DELETE", "/v1/instances/p0", None);
    assert_eq!(status, 200);
    assert_eq!(gone["id"], "p0");
    assert_eq!(s.call("DELETE", "/v1/instances/p0", None).0, 404);
}

#[test]
fn bad_requests_are_refused_and_change_nothing() {
    let s = Server::start(least_loaded());
    s.post("/v1/instances", &instance("p0", "prefill"));
    s.post("/v1/instances", &instance("d0", "decode"));
    let before = s.stats();
    let bad: [(&str, &str); 14] = [
        ("/v1/instances", "{not json"),
        ("/v1/instances", r#"{"id": "x", "role": "prefill"}"#),
        (
            "/v1/instances",
            r#"{"id": "x", "role": "router", "kv_capacity_blocks": 1, "max_batch": 1}"#,
        ),
        (
            "/v1/instances",
            r#"{"id": "", "role": "decode", "kv_capacity_blocks": 1, "max_batch": 1}"#,
        ),
        (
            "/v1/instances",
            r#"{"id": "x", "role": "decode", "kv_capacity_blocks": -1, "max_batch": 1}"#,
        ),
        ("/v1/events", r#"{"instance": "p0", "stored": ["a"]}"#),
        (
            "/v1/events",
            r#"{"instance": "p0", "stored": [1], "medium": "tape"}"#,
        ),
        (
            "/v1/events",
            r#"{"instance": "p0", "stored": [1], "extra": 1}"#,
        ),
        ("/v1/schedule", r#"{"request_id": "r", "input_length": 10}"#),
        (
            "/v1/schedule",
            r#"{"request_id": "r", "hash_ids": [1], "input_length": 0}"#,
        ),
        (
            "/v1/schedule",
            r#"{"request_id": "r", "hash_ids": [1], "input_length": 5, "ttft_slo_ms": -3}"#,
        ),
        (
            "/v1/schedule",
            r#"{"request_id": "", "hash_ids": [1], "input_length": 5}"#,
        ),
        ("/v1/complete", r#"{"request_id": "r"}"#),
        (
            "/v1/complete",
            r#"{"request_id": "r", "prefill_ms": 1, "queue_ms": 0, "transfer_ms": 0, "ttft_ms": -1, "tbt_ms": 0, "output_length": 1}"#,
        ),
    ];
    for (path, body) in bad {
        let (status, v) = s.call("POST", path, Some(body));
        assert_eq!(status, 400, "{path} {body}: {v}");
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
    }
    assert_eq!(s.stats(), before);
    let (_, list) = s.call("GET", "/v1/instances", None);
    assert_eq!(list["instances"].as_array().unwrap().len(), 2);
}

#[test]
fn wrong_methods_and_paths() {
    let s = Server::start(least_loaded());
    assert_eq!(s.call("GET", "/v1/schedule", None).0, 405);
    assert_eq!(s.call("POST", "/v1/stats", Some("{}")).0, 405);
    assert_eq!(s.call("GET", "/v1/nothing", None).0, 404);
    assert_eq!(s.call("PUT", "/v1/instances/x", Some("{}")).0, 405);
    assert_eq!(
        s.call("GET", "/health", None),
        (200, json!({"status": "ok"}))
    );
}

#[test]
fn schedule_complete_and_stats() {
    let s = Server::start(least_loaded());
    let (status, v) = s.post("/v1/schedule", &schedule_body("r0"));
    assert_eq!(status, 503, "{v}");
    assert!(v["error"].as_str().unwrap().contains("prefill"));
    s.post("/v1/instances", &instance("p0", "prefill"));
    s.post("/v1/instances", &instance("d0", "decode"));
    assert_eq!(
        s.post(
            "/v1/events",
            &json!({"instance": "p0", "stored": [1, 2], "removed": []})
        ),
        (200, json!({"stored": 2, "removed": 0}))
    );
    assert_eq!(
        s.post("/v1/events", &json!({"instance": "ghost", "stored": [1]}))
            .0,
        404
    );
    let (status, p) = s.post("/v1/schedule", &schedule_body("r0"));
    assert_eq!(status, 200, "{p}");
    let keys: Vec<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
    let mut want = vec![
        "decode",
        "est_tbt_ms",
        "est_ttft_ms",
        "prefill",
        "prefix_blocks",
        "transfer_blocks",
        "transfer_from",
    ];
    want.sort();
    assert_eq!(keys, want);
    assert_eq!((&p["prefill"], &p["decode"]), (&json!("p0"), &json!("d0")));
    assert_eq!(p["prefix_blocks"], 2);
    assert_eq!(p["transfer_from"], Value::Null);
    assert!(p["est_ttft_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(s.post("/v1/schedule", &schedule_body("r0")).0, 409);
    let done = json!({"request_id": "r0", "prefill_ms": 150.0, "queue_ms": 0.0,
                      "transfer_ms": 0.0, "ttft_ms": 150.0, "tbt_ms": 20.0,
                      "output_length": 30, "now_ms": 1000.0});
    assert_eq!(s.post("/v1/complete", &done).0, 200);
    assert_eq!(s.post("/v1/complete", &done).0, 404);
    let st = s.stats();
    assert_eq!(st["scheduled"], 1);
    assert_eq!(st["completed"], 1);
    assert_eq!(st["request_blocks"], 3);
    assert_eq!(st["prefix_blocks"], 2);
    assert_eq!(st["policy"], "least_loaded");
    assert_eq!(st["prediction"]["ttft"]["samples"], 1);
    let (status, metrics) = s.call("GET", "/metrics", None);
    assert_eq!(status, 200);
    let text = metrics.as_str().unwrap();
    assert!(text.contains("conductor_scheduled_total 1"), "{text}");
    assert!(text.contains("conductor_instance_queue_ms{instance=\"p0\",role=\"prefill\"}"));
    assert!(text.contains("# TYPE conductor_rejected_total counter"));
}

#[test]
fn refusals_are_429_with_the_estimates() {
    let s = Server::start(ConductorConfig {
        ttft_slo_ms: 1.0,
        ..least_loaded()
    });
    s.post("/v1/instances", &instance("p0", "prefill"));
    s.post("/v1/instances", &instance("d0", "decode"));
    let (status, v) = s.post("/v1/schedule", &schedule_body("r0"));
    assert_eq!(status, 429, "{v}");
    assert!(v["reason"].as_str().unwrap().contains("TTFT"));
    assert!(v["est_ttft_ms"].as_f64().unwrap() > 1.0);
    assert!(v["est_tbt_ms"].as_f64().unwrap() > 0.0);
    // A request's own SLO overrides the default.
    let mut lenient = schedule_body("r1");
    lenient["ttft_slo_ms"] = json!(1e9);
    assert_eq!(s.post("/v1/schedule", &lenient).0, 200);
    assert_eq!(s.stats()["rejected"]["ttft_slo"], 1);
}

#[test]
fn indexer_api_answers_in_the_documented_shape() {
    let s = Server::start(least_loaded());
    s.post("/v1/instances", &instance("p0", "prefill"));
    s.post(
        "/v1/events",
        &json!({"instance": "p0", "stored": [7, 8], "medium": "cpu"}),
    );
    s.post(
        "/v1/events",
        &json!({"instance": "p0", "stored": [7], "medium": "gpu"}),
    );
    let q = json!({"model": "m", "seq_hashes": [7, 8, 9], "block_size": 16});
    assert_eq!(
        s.post("/query_by_hash", &q),
        (
            200,
            json!({"default": {"p0": {"longest_matched": 32, "GPU": 16, "CPU": 32, "DISK": 0, "DP": {"0": 32}}}})
        )
    );
    // Tokens are hashed with the documented XXH3 chain.
    let tokens: Vec<u32> = (0..32).collect();
    let hashes = mooncake::conductor::indexer::block_hashes(&tokens, 16, 0);
    s.post("/v1/events", &json!({"instance": "p0", "stored": hashes}));
    let (status, v) = s.post(
        "/query",
        &json!({"model": "m", "token_ids": tokens, "block_size": 16, "tenant_id": "t1"}),
    );
    assert_eq!(status, 200);
    assert_eq!(v["t1"]["p0"]["longest_matched"], 32);
    assert_eq!(
        s.post("/query", &json!({"model": "m", "block_size": 16})).0,
        400
    );
    // A source registration names an endpoint; a bad one is refused, a good one listed.
    let reg = json!({"endpoint": "tcp://127.0.0.1:1", "type": "Mooncake", "modelname": "m",
                     "instance_id": "pool", "block_size": 16, "dp_rank": 0});
    assert_eq!(
        s.post("/register", &reg),
        (
            200,
            json!({"status": "registered successfully", "instance_id": "pool"})
        )
    );
    assert_eq!(s.post("/register", &reg).0, 409);
    let mut bad = reg.clone();
    bad["endpoint"] = json!("ipc:///tmp/x");
    bad["instance_id"] = json!("other");
    assert_eq!(s.post("/register", &bad).0, 400);
    let (_, services) = s.call("GET", "/services", None);
    assert_eq!(services["services"][0]["key"], "pool|default|0");
    let unreg = json!({"instance_id": "pool", "dp_rank": 0});
    assert_eq!(
        s.post("/unregister", &unreg),
        (
            200,
            json!({"status": "unregistered successfully", "removed_instances": ["pool|default|0"]})
        )
    );
    assert_eq!(s.post("/unregister", &unreg).0, 404);
    // The store-only instance left with its source.
    let (_, list) = s.call("GET", "/v1/instances", None);
    assert_eq!(list["instances"].as_array().unwrap().len(), 1);
}

/// A child process killed by PID when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_binary_serves_the_api_on_the_port_it_prints() {
    let mut child = Running(
        Command::new(env!("CARGO_BIN_EXE_mooncake_conductor"))
            .args(["--host=127.0.0.1", "--port=0", "--policy=round_robin"])
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stderr = child.0.stderr.take().unwrap();
    let mut line = String::new();
    let mut reader = BufReader::new(stderr);
    while !line.contains("listening on") {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "exited early");
    }
    let addr = line
        .split_whitespace()
        .find(|w| w.starts_with("127.0.0.1:"))
        .unwrap()
        .to_string();
    let s = Server {
        server: None,
        base: format!("http://{addr}"),
    };
    assert_eq!(s.call("GET", "/health", None).0, 200);
    assert_eq!(s.stats()["policy"], "round_robin");
    let bad = Command::new(env!("CARGO_BIN_EXE_mooncake_conductor"))
        .args(["--policy=best"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown policy"));
}
