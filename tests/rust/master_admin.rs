//! The master's admin HTTP routes, served by the real HTTP layer on 127.0.0.1:0.

use mooncake::master::admin::AdminHandler;
use mooncake::master::{MasterConfig, MasterService};
use mooncake::util::http_server::HttpServer;
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
