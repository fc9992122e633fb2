//! Flag parsing of the master binary: upstream's defaults, overrides, the config file,
//! HA, snapshots, KV events, the disk tier and the refused flags.

use super::*;
use crate::flags::kind_of;
use mooncake::config::flags::settings_from;

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
        &["--quota_bytes=1073741824"],
        &["--snapshot_object_store_type=s3"],
        &["--snapshot_catalog_store_type=redis"],
    ] {
        let err = parse(args)
            .err()
            .unwrap_or_else(|| panic!("{args:?} accepted"));
        assert!(err.contains("refusing to start"), "{args:?}: {err}");
    }
    assert!(parse(&["--enable_ha=false", "--enable_snapshot=false"]).is_ok());
    // Off, they are accepted.
    assert!(parse(&[
        "--quota_bytes=0",
        "--snapshot_object_store_type=local",
        "--snapshot_catalog_store_type=embedded",
        "--rpc_thread_num=8",
        "--max_total_pending_tasks=10",
        "--nof_heartbeat_interval_sec=5",
    ])
    .is_ok());
}

/// Every flag upstream 0.3.13's `mooncake_master --help` lists from master.cpp (a run
/// of the wheel's binary).
const UPSTREAM_MASTER_FLAGS: &[&str] = &[
    "allocation_strategy",
    "allow_evict_soft_pinned_objects",
    "batch_oplog_retry_timeout_sec",
    "client_ttl",
    "cluster_id",
    "config_path",
    "cxl_path",
    "cxl_size",
    "default_kv_lease_ttl",
    "default_kv_soft_pin_ttl",
    "dynamic_replication_admission_qps_threshold",
    "dynamic_replication_heat_window_seconds",
    "dynamic_replication_max_memory_replicas",
    "dynamic_replication_mode",
    "enable_cxl",
    "enable_disk_eviction",
    "enable_ha",
    "enable_http_metadata_server",
    "enable_kv_events",
    "enable_metadata_cleanup_on_timeout",
    "enable_metric_reporting",
    "enable_multi_tenants",
    "enable_offload",
    "enable_oplog",
    "enable_snapshot",
    "enable_snapshot_restore",
    "etcd_endpoints",
    "eviction_high_watermark_ratio",
    "eviction_ratio",
    "global_file_segment_size",
    "ha_backend_connstring",
    "ha_backend_type",
    "http_metadata_server_host",
    "http_metadata_server_port",
    "kv_events_additional_salt",
    "kv_events_backend_id",
    "kv_events_bind_endpoint",
    "kv_events_block_size",
    "kv_events_dp_rank",
    "kv_events_emit_legacy_compat",
    "kv_events_emit_object_key",
    "kv_events_lora_name",
    "kv_events_model_name",
    "kv_events_queue_capacity",
    "kv_events_tenant_id",
    "max_kv_soft_pin_ttl",
    "max_retry_attempts",
    "max_threads",
    "max_total_finished_tasks",
    "max_total_pending_tasks",
    "max_total_processing_tasks",
    "memory_allocator",
    "metrics_host",
    "metrics_port",
    "nof_eviction_high_watermark_ratio",
    "nof_eviction_ratio",
    "nof_heartbeat_failures_threshold",
    "nof_heartbeat_interval_sec",
    "nof_heartbeat_probe_timeout_ms",
    "offload_cap_ratio",
    "offload_force_evict",
    "offload_on_evict",
    "offloading_queue_limit",
    "oplog_batch_max_entries",
    "oplog_poll_interval_ms",
    "pending_task_timeout_sec",
    "pod_name",
    "pod_namespace",
    "port",
    "processing_task_timeout_sec",
    "promotion_admission_threshold",
    "promotion_max_per_heartbeat",
    "promotion_on_hit",
    "promotion_queue_limit",
    "put_start_discard_timeout_sec",
    "put_start_release_timeout_sec",
    "quota_bytes",
    "root_fs_dir",
    "rpc_address",
    "rpc_conn_timeout_seconds",
    "rpc_enable_tcp_no_delay",
    "rpc_interface",
    "rpc_port",
    "rpc_thread_num",
    "snapshot_backup_dir",
    "snapshot_catalog_backend_connstring",
    "snapshot_catalog_backend_type",
    "snapshot_catalog_store_connstring",
    "snapshot_catalog_store_type",
    "snapshot_child_timeout_seconds",
    "snapshot_interval_seconds",
    "snapshot_object_store_type",
    "snapshot_payload_backend_type",
    "snapshot_payload_store_type",
    "snapshot_retention_count",
    "tenant_quota_connector_type",
    "tenant_quota_connector_uri",
];

#[test]
fn every_upstream_flag_is_handled_refused_or_accepted_as_meaningless() {
    let unknown: Vec<&str> = UPSTREAM_MASTER_FLAGS
        .iter()
        .copied()
        .filter(|f| crate::flags::kind_of(f).is_none())
        .collect();
    assert!(
        unknown.is_empty(),
        "upstream flags this master does not know: {unknown:?}"
    );
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
    let s = parse(&[
        "--enable_snapshot",
        "--snapshot_backup_dir=/var/lib/mc",
        "--snapshot_interval_seconds=60",
        "--snapshot_retention_count=5",
    ])
    .unwrap();
    let plan = s.snapshot.unwrap();
    assert_eq!(
        (
            plan.dir.to_str(),
            plan.archive_every.as_secs(),
            plan.archive_keep
        ),
        (Some("/var/lib/mc"), 60, 5)
    );
    let plan = parse(&["--enable_snapshot", "--snapshot_backup_dir=/d"])
        .unwrap()
        .snapshot
        .unwrap();
    assert_eq!((plan.archive_every.as_secs(), plan.archive_keep), (600, 2));
    assert!(parse(&[
        "--enable_snapshot",
        "--snapshot_backup_dir=/d",
        "--snapshot_retention_count=x"
    ])
    .is_err());
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
            ha.snapshot.as_ref().and_then(|p| p.dir.to_str()),
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

#[test]
fn tenants_start_only_with_a_policy_that_loads() {
    let dir = std::env::temp_dir().join(format!("mc-tenant-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.yaml");
    std::fs::write(&good, "version: 1\ntenants:\n  - name: a\n    quota: 1GB\n").unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "version: 1\ntenants:\n  - name: _a\n    quota: 1GB\n").unwrap();
    let uri = |p: &std::path::Path| format!("--tenant_quota_connector_uri={}", p.display());
    let s = parse(&[
        "--enable_multi_tenants=true",
        &uri(&good),
        "--cluster_id=c9",
    ])
    .unwrap();
    assert!(s.master.enable_multi_tenants);
    assert_eq!(s.master.cluster_id, "c9");
    for (args, why) in [
        (
            vec!["--enable_multi_tenants=true".to_string()],
            "non-empty uri",
        ),
        (
            vec!["--enable_multi_tenants=true".into(), uri(&bad)],
            "invalid tenant name '_a'",
        ),
        (
            vec![
                "--enable_multi_tenants=true".into(),
                uri(&dir.join("missing.yaml")),
            ],
            "failed to open",
        ),
        (
            vec![
                "--enable_multi_tenants=true".into(),
                uri(&good),
                "--tenant_quota_connector_type=foo".into(),
            ],
            "unsupported tenant quota connector type 'foo'",
        ),
    ] {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let Err(err) = parse(&refs) else {
            panic!("{args:?} accepted");
        };
        assert!(err.contains(why), "{args:?}: {err}");
    }
    // Off, the connector flags are accepted and change nothing.
    assert!(parse(&["--tenant_quota_connector_uri=/nowhere.yaml"]).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn metadata_cleanup_targets_the_servers_upstream_picks() {
    let none = |_: &str| None;
    assert_eq!(cleanup_target(false, true, &none), None);
    assert_eq!(
        cleanup_target(true, true, &none),
        Some(CleanupTarget::Colocated)
    );
    assert_eq!(cleanup_target(true, false, &none), None);
    let env_url = |name: &str| {
        (name == "MOONCAKE_TE_META_DATA_SERVER").then(|| "http://m:8080/metadata".to_string())
    };
    assert_eq!(
        cleanup_target(true, false, &env_url),
        Some(CleanupTarget::Remote("http://m:8080/metadata".into()))
    );
    // The embedded server wins over the variable.
    assert_eq!(
        cleanup_target(true, true, &env_url),
        Some(CleanupTarget::Colocated)
    );
    // etcd, Redis and P2P handshake metadata are not cleaned.
    for value in ["etcd://127.0.0.1:2379", "redis://r:6379", "P2PHANDSHAKE"] {
        let env = |name: &str| (name == "MOONCAKE_TE_META_DATA_SERVER").then(|| value.to_string());
        assert_eq!(cleanup_target(true, false, &env), None, "{value}");
    }

    // Else the `metadata_server` of MOONCAKE_CONFIG_PATH's file.
    let dir = std::env::temp_dir().join(format!("mc-cleanup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mooncake.json");
    std::fs::write(
        &file,
        r#"{"local_hostname":"h","metadata_server":"http://meta:9000/metadata"}"#,
    )
    .unwrap();
    let path = file.to_str().unwrap().to_string();
    let from_file = |name: &str| (name == "MOONCAKE_CONFIG_PATH").then(|| path.clone());
    assert_eq!(
        cleanup_target(true, false, &from_file),
        Some(CleanupTarget::Remote("http://meta:9000/metadata".into()))
    );
    // P2P handshake in the variable falls through to the file.
    let both = |name: &str| match name {
        "MOONCAKE_TE_META_DATA_SERVER" => Some("P2PHANDSHAKE".to_string()),
        "MOONCAKE_CONFIG_PATH" => Some(path.clone()),
        _ => None,
    };
    assert_eq!(
        cleanup_target(true, false, &both),
        Some(CleanupTarget::Remote("http://meta:9000/metadata".into()))
    );
    std::fs::write(&file, "not json").unwrap();
    assert_eq!(cleanup_target(true, false, &from_file), None);
    let missing =
        |name: &str| (name == "MOONCAKE_CONFIG_PATH").then(|| "/nonexistent/x.json".into());
    assert_eq!(cleanup_target(true, false, &missing), None);
    std::fs::remove_dir_all(&dir).unwrap();

    // The flag itself is a boolean the master reads.
    assert!(parse(&[
        "--enable_metadata_cleanup_on_timeout=true",
        "--enable_http_metadata_server=true"
    ])
    .unwrap()
    .metadata_cleanup
    .is_some());
    assert!(parse(&["--enable_metadata_cleanup_on_timeout=maybe"]).is_err());
}
