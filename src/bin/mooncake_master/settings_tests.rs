//! Flag parsing of the master binary: upstream's defaults, overrides, the config file,
//! HA, snapshots, KV events, the disk tier and the refused flags.

use super::*;
use crate::flags::kind_of;
use mooncake::config::flags::settings_from;
use std::path::Path;

fn parse(args: &[&str]) -> Result<Settings, String> {
    settings_from(args, kind_of, settings).map_err(|e| e.to_string())
}

/// The HA settings `args` give (they must turn HA on).
fn ha_of(args: &[&str]) -> HaSettings {
    parse(args).unwrap().ha.unwrap()
}

#[test]
fn upstream_defaults_and_overrides() {
    let s = parse(&[]).unwrap();
    assert_eq!(s.rpc, "0.0.0.0:50051".parse().unwrap());
    assert_eq!(s.metrics, "0.0.0.0:9003".parse().unwrap());
    assert!(s.metadata.is_none());
    let s = parse(&[
        "--port",
        "6000",
        "-rpc_address=127.0.0.1",
        "--enable_http_metadata_server=true",
        "--http_metadata_server_port=8081",
        "--default_kv_lease_ttl=5s",
        "--eviction_high_watermark_ratio=0.95",
        "--enable_ha=false",
        "--cluster_id",
        "x",
    ])
    .unwrap();
    assert_eq!(s.rpc, "127.0.0.1:6000".parse().unwrap());
    assert_eq!(s.metadata, Some("0.0.0.0:8081".parse().unwrap()));
    assert_eq!(s.master.default_kv_lease_ttl, Duration::from_secs(5));
    assert_eq!(
        parse(&["--rpc_port=7000", "--port=1"]).unwrap().rpc.port(),
        7000
    );
    assert_eq!(
        parse(&["--rpc_conn_timeout_seconds=30"])
            .unwrap()
            .rpc_limits
            .idle_timeout,
        Some(Duration::from_secs(30))
    );
    assert_eq!(parse(&[]).unwrap().rpc_limits, RpcLimits::default());
    assert_eq!(
        parse(&[
            "--rpc_max_connections=10",
            "--rpc_max_connections_per_peer=3"
        ])
        .unwrap()
        .rpc_limits
        .connections,
        ConnLimits::new(10, 3)
    );
    assert!(parse(&["--rpc_max_connections=0"]).is_err());
    assert!(parse(&["--rpc_max_connections_per_peer=x"]).is_err());
    assert!(parse(&["--eviction_ratio=2"]).is_err());
    assert!(parse(&["--root_fs_dir="]).is_ok());
    assert!(parse(&["--rpc_address=not-an-ip"]).is_err());
}

#[test]
fn features_it_lacks_are_refused_not_ignored() {
    for args in [
        &[
            "--enable_ha",
            "--ha_backend_type=k8s",
            "--etcd_endpoints=h:1",
        ][..],
        &["--root_fs_dir", "/mnt/ssd"],
        &["--enable_cxl=yes"],
    ] {
        let err = parse(args)
            .err()
            .unwrap_or_else(|| panic!("{args:?} accepted"));
        assert!(err.contains("refusing to start"), "{args:?}: {err}");
    }
    assert!(parse(&["--enable_ha=false", "--enable_snapshot=false"]).is_ok());
}

#[test]
fn disk_tier_flags() {
    let s = parse(&[]).unwrap();
    assert!(!s.master.enable_offload && !s.master.offload_on_evict);
    let s = parse(&[
        "--enable_offload",
        "--offload_on_evict=true",
        "--offload_force_evict",
        "--offloading_queue_limit=7",
        "--offload_cap_ratio=0.25",
        "--promotion_on_hit",
        "--promotion_admission_threshold=1",
        "--promotion_max_per_heartbeat=4",
        "--promotion_queue_limit=9",
    ])
    .unwrap();
    let m = &s.master;
    assert!(m.enable_offload && m.offload_on_evict && m.offload_force_evict);
    assert_eq!((m.offloading_queue_limit, m.offload_cap_ratio), (7, 0.25));
    assert!(m.promotion_on_hit);
    assert_eq!(
        (
            m.promotion_admission_threshold,
            m.promotion_max_per_heartbeat,
            m.promotion_queue_limit
        ),
        (1, 4, 9)
    );
    assert!(parse(&["--offloading_queue_limit=100000001"]).is_err());
    assert!(parse(&["--offload_cap_ratio=1.5"]).is_err());
}

#[test]
fn kv_event_flags_from_the_command_line_and_the_config_file() {
    let s = parse(&[]).unwrap();
    assert_eq!(s.kv_events, KvEventConfig::default());
    let s = parse(&[
        "--enable_kv_events",
        "--kv_events_bind_endpoint=tcp://*:5557",
        "--kv_events_backend_id",
        "node0",
        "--nokv_events_emit_legacy_compat",
        "--kv_events_emit_object_key=false",
        "--kv_events_queue_capacity=0",
        "--kv_events_model_name=llama",
        "--kv_events_block_size=16",
        "--kv_events_dp_rank=1",
        "--kv_events_lora_name=l",
        "--kv_events_additional_salt=s",
        "--kv_events_tenant_id=t",
    ])
    .unwrap();
    // The flags reach the master's KV-event config (what each one means is
    // master::kv_events::config's test).
    assert!(s.kv_events.enabled);
    assert_eq!(s.kv_events.bind_endpoint, "tcp://*:5557");
    assert_eq!(s.kv_events.backend_id, "node0");
    assert_eq!(s.kv_events.queue_capacity, 0);
    assert!(!s.kv_events.emit_legacy_compat && !s.kv_events.emit_object_key);
    assert!(parse(&["--kv_events_block_size=-3"]).is_err());
    assert!(parse(&["--kv_events_queue_capacity=lots"]).is_err());
    let path = std::env::temp_dir().join(format!("mc-master-kv-{}", std::process::id()));
    std::fs::write(
        &path,
        r#"{"enable_kv_events": true, "kv_events_backend_id": "n1",
            "kv_events_queue_capacity": 8, "kv_events_emit_object_key": false}"#,
    )
    .unwrap();
    let s = parse(&["--config_path", &path.to_string_lossy()]).unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(s.kv_events.enabled && !s.kv_events.emit_object_key);
    assert_eq!(s.kv_events.backend_id, "n1");
    assert_eq!(s.kv_events.queue_capacity, 8);
}

#[test]
fn ha_and_snapshot_flags() {
    // Missing what they need: a clear error.
    assert!(parse(&["--enable_ha"])
        .unwrap_err()
        .contains("--etcd_endpoints"));
    assert!(parse(&["--enable_snapshot=1"])
        .unwrap_err()
        .contains("--snapshot_backup_dir"));
    // Each: the flags, then the backend, advertised address, lease TTL (seconds),
    // cluster id and snapshot directory they give. The connection string is
    // upstream's other spelling of the endpoints (a Redis one gains its scheme); the
    // loopback interface names its own address.
    type Ha<'a> = (&'a str, &'a str, u64, &'a str, Option<&'a str>);
    let cases: [(&[&str], Ha); 3] = [
        (
            &[
                "--enable_ha=true",
                "--etcd_endpoints=127.0.0.1:2379;127.0.0.1:2381",
                "--rpc_address=127.0.0.1",
                "--port=6000",
                "--cluster_id=c1",
                "--enable_oplog=true",
                "--enable_snapshot=true",
                "--snapshot_backup_dir=/var/lib/mc",
            ],
            (
                "127.0.0.1:2379;127.0.0.1:2381",
                "127.0.0.1:6000",
                3,
                "c1",
                Some("/var/lib/mc"),
            ),
        ),
        (
            &[
                "--enable_ha",
                "--ha_backend_connstring=127.0.0.1:2379",
                "--rpc_interface=lo",
                "--ha_lease_ttl_sec=5",
            ],
            (
                "127.0.0.1:2379",
                "127.0.0.1:50051",
                5,
                "mooncake_cluster",
                None,
            ),
        ),
        (
            &[
                "--enable_ha",
                "--ha_backend_type=redis",
                "--ha_backend_connstring=10.0.0.1:6379",
                "--rpc_interface=lo",
            ],
            (
                "redis://10.0.0.1:6379",
                "127.0.0.1:50051",
                3,
                "mooncake_cluster",
                None,
            ),
        ),
    ];
    for (args, want) in cases {
        let ha = ha_of(args);
        let got = (
            ha.backend.as_str(),
            ha.rpc_advertised.as_str(),
            ha.lease_ttl.as_secs(),
            ha.cluster_id.as_str(),
            ha.snapshot_dir.as_deref().and_then(Path::to_str),
        );
        assert_eq!(got, want, "{args:?}");
    }
    assert!(parse(&["--enable_ha", "--ha_backend_type=redis"])
        .unwrap_err()
        .contains("redis://"));
}

#[test]
fn config_file_then_command_line() {
    let dir = std::env::temp_dir().join(format!("mc-master-cfg-{}", std::process::id()));
    std::fs::write(
        &dir,
        r#"{"client_ttl": 3, "port": "6001", "metrics_port": 9100}"#,
    )
    .unwrap();
    let path = dir.to_string_lossy().to_string();
    let s = parse(&["--config_path", &path, "--port=6002"]).unwrap();
    assert_eq!(s.master.client_ttl, Duration::from_secs(3));
    assert_eq!(s.rpc.port(), 6002);
    assert_eq!(s.metrics.port(), 9100);
    let _ = std::fs::remove_file(dir);
}
