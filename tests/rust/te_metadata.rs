//! Engines in HTTP-metadata mode against our in-process metadata server: what is
//! published, when, and what is removed on destroy.

use mooncake::config::Config;
use mooncake::metadata::http_server::HttpMetadataServer;
use mooncake::metadata::SegmentDesc;
use mooncake::te::{Op, TaskStatus, TransferEngine, TransferRequest};
use serde_json::Value;
use std::time::{Duration, Instant};

fn config() -> Config {
    Config {
        advertised_ip: Some("127.0.0.1".into()),
        ..Config::default()
    }
}

fn server() -> (HttpMetadataServer, String) {
    let s = HttpMetadataServer::start("127.0.0.1:0".parse().unwrap()).unwrap();
    let url = format!("http://{}/metadata", s.local_addr());
    (s, url)
}

fn json(s: &HttpMetadataServer, key: &str) -> Option<Value> {
    s.table()
        .get(key)
        .map(|b| serde_json::from_slice(&b).unwrap())
}

#[test]
fn publishes_rpc_meta_and_descriptor_then_removes_them() {
    let (srv, url) = server();
    let e = TransferEngine::with_config(config(), &url, "node-a", false).unwrap();
    let rpc = json(&srv, "mooncake/rpc_meta/node-a").expect("rpc_meta published at init");
    assert_eq!(rpc["ip_or_host_name"], "127.0.0.1");
    assert_eq!(rpc["rpc_port"].as_u64(), Some(u64::from(e.rpc_port())));
    assert_eq!(e.local_ip_and_port(), format!("127.0.0.1:{}", e.rpc_port()));
    assert!(
        srv.table().get("mooncake/ram/node-a").is_none(),
        "no descriptor before a transport"
    );

    let mut buf = vec![0u8; 4096];
    e.register_memory(buf.as_mut_ptr() as u64, 4096, "cpu:0", true)
        .unwrap();
    assert!(srv.table().get("mooncake/ram/node-a").is_none());
    e.install_transport("tcp").unwrap();
    let desc = SegmentDesc::from_slice(&srv.table().get("mooncake/ram/node-a").unwrap()).unwrap();
    assert_eq!(
        desc.buffers.len(),
        1,
        "regions registered before install are published"
    );
    assert_eq!(desc.buffers[0].addr, buf.as_ptr() as u64);
    assert_eq!(desc.tcp_proto_version, 2);
    assert_eq!(desc.tcp_data_host.as_deref(), Some("127.0.0.1"));
    assert_ne!(desc.tcp_data_port, 0);

    e.unregister_memory(buf.as_ptr() as u64).unwrap();
    let desc = SegmentDesc::from_slice(&srv.table().get("mooncake/ram/node-a").unwrap()).unwrap();
    assert!(desc.buffers.is_empty());
    drop(e);
    assert!(
        srv.table().is_empty(),
        "destroy removes both keys: {:?}",
        srv.table().keys()
    );
}

#[test]
fn duplicate_name_fails_and_never_deletes_the_owners_key() {
    let (srv, url) = server();
    let owner = TransferEngine::with_config(config(), &url, "dup", true).unwrap();
    let before = srv.table().get("mooncake/rpc_meta/dup").unwrap();
    let second = TransferEngine::with_config(config(), &url, "dup", true);
    assert!(second.is_err());
    drop(second);
    assert_eq!(srv.table().get("mooncake/rpc_meta/dup").unwrap(), before);
    drop(owner);
}

#[test]
fn cluster_id_prefixes_every_key() {
    let (srv, url) = server();
    let cfg = Config {
        cluster_id: Some("c1".into()),
        ..config()
    };
    let e = TransferEngine::with_config(cfg, &url, "n", true).unwrap();
    assert!(srv.table().get("mooncake/c1/rpc_meta/n").is_some());
    assert!(srv.table().get("mooncake/c1/ram/n").is_some());
    drop(e);
}

#[test]
fn transfer_through_http_metadata_and_refresh() {
    let (_srv, url) = server();
    let target = TransferEngine::with_config(config(), &url, "t", true).unwrap();
    let initiator = TransferEngine::with_config(config(), &url, "i", true).unwrap();
    let mut remote = vec![0u8; 1 << 16];
    let local: Vec<u8> = (0..1 << 16).map(|i| (i % 251) as u8).collect();
    let id = initiator.open_segment("t").unwrap();
    assert_eq!(initiator.segment_descriptor(id).unwrap().buffers.len(), 0);
    target
        .register_memory(remote.as_mut_ptr() as u64, 1 << 16, "cpu:0", true)
        .unwrap();
    assert_eq!(initiator.open_segment_no_cache("t").unwrap(), id);
    assert_eq!(initiator.segment_descriptor(id).unwrap().buffers.len(), 1);
    let batch = initiator.allocate_batch(1);
    let req = TransferRequest {
        op: Op::Write,
        source: local.as_ptr() as u64,
        target_id: id,
        target_offset: remote.as_ptr() as u64,
        length: 1 << 16,
    };
    initiator.submit(batch, &[req]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let (s, _) = initiator.transfer_status(batch, 0).unwrap();
        if s.is_terminal() || Instant::now() > deadline {
            break s;
        }
        std::thread::yield_now();
    };
    assert_eq!(status, TaskStatus::Completed);
    assert_eq!(remote, local);
    assert!(initiator.open_segment("missing").is_err());
}

#[test]
fn unreachable_or_unknown_backends_are_errors_not_aborts() {
    for conn in [
        "etcd://127.0.0.1:1",
        "127.0.0.1:1",
        "redis://127.0.0.1:1",
        "zk://x",
    ] {
        assert!(
            TransferEngine::with_config(config(), conn, "x", false).is_err(),
            "{conn}"
        );
    }
}
