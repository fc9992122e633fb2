//! The master's admin HTTP routes, served by the real HTTP layer on 127.0.0.1:0.

use mooncake::master::admin::AdminHandler;
use mooncake::master::kv_events::{KvEventConfig, KvEvents};
use mooncake::master::{MasterConfig, MasterService};
use mooncake::runtime::http_server::HttpServer;
use mooncake::wire::master_api::{
    MasterApi, ObjectMeta, ReplicaType, ReplicateConfig, Segment, Uuid,
};
use std::sync::Arc;

const T: &str = "default";

fn get(server: &HttpServer, path: &str) -> (u16, String) {
    let url = format!("http://{}{path}", server.local_addr());
    match ureq::get(&url).call() {
        Ok(r) => (r.status(), r.into_string().unwrap()),
        Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap()),
        Err(e) => panic!("{url}: {e}"),
    }
}

#[test]
fn admin_routes_reflect_master_state() {
    let master = MasterService::new(MasterConfig::default());
    let client = Uuid {
        first: 1,
        second: 2,
    };
    let segment = Segment {
        id: Uuid {
            first: 9,
            second: 9,
        },
        name: "127.0.0.1:12345".into(),
        base: 0x7f00_0000_0000,
        size: 1 << 30,
        te_endpoint: "127.0.0.1:12345".into(),
        protocol: "tcp".into(),
        host_id: "h".into(),
    };
    master.mount_segment(&segment, client).unwrap();
    master
        .put_start(client, "key one", 4096, &ReplicateConfig::default(), T)
        .unwrap();
    master
        .put_end(
            client,
            &ObjectMeta {
                key: "key one".into(),
                checksum: None,
            },
            ReplicaType::All,
            T,
        )
        .unwrap();
    let server = HttpServer::start(
        "127.0.0.1:0".parse().unwrap(),
        "admin HTTP",
        Arc::new(AdminHandler(master.clone())),
    )
    .unwrap();

    let (code, body) = get(&server, "/health");
    assert_eq!(code, 200);
    assert!(body.contains(r#""status":"ok""#), "{body}");
    assert_eq!(
        get(&server, "/get_all_segments"),
        (200, "127.0.0.1:12345\n".into())
    );
    assert_eq!(get(&server, "/get_all_keys"), (200, "key one\n".into()));
    let (code, body) = get(&server, "/query_key?key=key%20one");
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["success"], true);
    assert_eq!(v["data"][0]["size_"], 4096);
    assert_eq!(v["data"][0]["transport_endpoint_"], "127.0.0.1:12345");
    let (code, body) = get(&server, "/query_key?key=missing");
    assert_eq!(code, 404);
    assert_eq!(
        body,
        r#"{"error_code":-704,"error_message":"OBJECT_NOT_FOUND","success":false}"#
    );
    assert_eq!(get(&server, "/query_key").0, 400);
    let (code, body) = get(&server, "/batch_query_keys?keys=missing,key%20one,missing");
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["success"], true);
    assert_eq!(v["data"].as_object().unwrap().len(), 2);
    assert_eq!(v["data"]["key one"]["ok"], true);
    assert_eq!(v["data"]["key one"]["values"][0]["size_"], 4096);
    assert_eq!(
        v["data"]["missing"],
        serde_json::json!({"ok": false, "error": "OBJECT_NOT_FOUND", "values": null})
    );
    let (code, body) = get(&server, "/batch_query_keys");
    assert_eq!(code, 400);
    assert!(body.contains("No keys provided"), "{body}");
    assert_eq!(
        get(&server, "/query_segment?segment=127.0.0.1%3A12345"),
        (
            200,
            "127.0.0.1:12345\nUsed(bytes): 4096\nCapacity(bytes) : 1073741824\n".into()
        )
    );
    assert_eq!(
        get(&server, "/query_segment?segment=nowhere"),
        (500, "Failed to query segment".into())
    );
    assert_eq!(get(&server, "/role"), (200, "leader".into()));
    assert_eq!(get(&server, "/ha_status"), (200, "serving".into()));
    assert_eq!(
        get(&server, "/leader"),
        (
            200,
            r#"{"leader_address":null,"present":false,"view_version":null}"#.into()
        )
    );
    let (code, metrics) = get(&server, "/metrics");
    assert_eq!(code, 200);
    assert!(metrics.contains("master_key_count 1"), "{metrics}");
    assert!(
        metrics.contains("master_total_capacity_bytes 1073741824"),
        "{metrics}"
    );
    assert!(
        metrics.contains("master_put_start_requests_total 1"),
        "{metrics}"
    );
    assert!(metrics.contains(r#"segment_allocated_bytes{segment="127.0.0.1:12345"}"#));
    // Batch RPCs count as upstream's: one request per call, its items apart, a call
    // where every item failed as a failure, one where some did as a partial success.
    let keys = |k: &[&str]| k.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let got = master
        .batch_get_replica_list(&keys(&["key one", "missing"]), T)
        .unwrap();
    assert!(got[0].is_ok() && got[1].is_err());
    master
        .batch_get_replica_list(&keys(&["missing", "absent"]), T)
        .unwrap();
    // Our clients' tracked reads count as upstream's BatchGetReplicaList too.
    let read = master.batch_begin_read(&keys(&["key one"]), T).unwrap();
    assert!(read[0].is_ok());
    let (_, metrics) = get(&server, "/metrics");
    for line in [
        "master_batch_get_replica_list_requests_total 3",
        "master_batch_get_replica_list_items_total 5",
        "master_batch_get_replica_list_failed_items_total 3",
        "master_batch_begin_read_requests_total 1",
        "master_batch_get_replica_list_partial_successes_total 1",
        "master_batch_get_replica_list_failures_total 1",
        "master_attempted_evictions_total 0",
        "master_successful_evictions_total 0",
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
    let (_, summary) = get(&server, "/metrics/summary");
    assert!(summary.contains("Keys: 1"), "{summary}");
    let (_, detail) = get(&server, "/get_segments_detail");
    let v: serde_json::Value = serde_json::from_str(&detail).unwrap();
    assert_eq!(v["total_segments"], 1);
    assert_eq!(v["segments"][0]["size_bytes"], 1u64 << 30);
    assert_eq!(v["segments"][0]["base_address"], "0x7f0000000000");
    assert_eq!(v["segments"][0]["status"], "OK");
    assert_eq!(get(&server, "/nope").0, 404);
}

#[test]
fn kv_events_status_off_and_on() {
    let off = MasterService::new(MasterConfig::default());
    let server = HttpServer::start(
        "127.0.0.1:0".parse().unwrap(),
        "admin HTTP",
        Arc::new(AdminHandler(off)),
    )
    .unwrap();
    assert_eq!(
        get(&server, "/kv_events/status"),
        (
            200,
            r#"{"enabled":false,"published_batches":0,"published_events":0,"dropped_events":0,"skipped_unparsed_keys":0}"#
                .into()
        )
    );

    let config = KvEventConfig {
        enabled: true,
        bind_endpoint: "tcp://127.0.0.1:0".into(),
        backend_id: "admin-test".into(),
        ..KvEventConfig::default()
    };
    let events = Arc::new(KvEvents::start(&config, |_| None));
    let master = MasterService::with_kv_events(MasterConfig::default(), events.clone());
    let server = HttpServer::start(
        "127.0.0.1:0".parse().unwrap(),
        "admin HTTP",
        Arc::new(AdminHandler(master.clone())),
    )
    .unwrap();
    let client = Uuid {
        first: 3,
        second: 3,
    };
    let segment = Segment {
        id: Uuid {
            first: 4,
            second: 4,
        },
        name: "127.0.0.1:1".into(),
        base: 1 << 40,
        size: 1 << 24,
        te_endpoint: "127.0.0.1:1".into(),
        protocol: "tcp".into(),
        host_id: String::new(),
    };
    master.mount_segment(&segment, client).unwrap();
    for key in ["42", "not-a-hash"] {
        let meta = ObjectMeta {
            key: key.into(),
            checksum: None,
        };
        master
            .put_start(client, key, 100, &ReplicateConfig::default(), T)
            .unwrap();
        master.put_end(client, &meta, ReplicaType::All, T).unwrap();
    }
    // Published (to nobody) by the worker thread: poll until it has.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while events.stats().published_events < 2 {
        assert!(std::time::Instant::now() < deadline, "{:?}", events.stats());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // One batch, or two when the worker took the first event alone.
    let batches = events.stats().published_batches;
    assert!(batches == 1 || batches == 2);
    assert_eq!(
        get(&server, "/kv_events/status"),
        (
            200,
            format!(
                "{{\"enabled\":true,\"published_batches\":{batches},\"published_events\":2,\
                 \"dropped_events\":0,\"skipped_unparsed_keys\":1}}"
            )
        )
    );
    events.shutdown();
}
