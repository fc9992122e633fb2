//! The master's command-line flags: the usage text, the flags the binary handles
//! itself, the upstream flags accepted and ignored, and those refused when turned on.

use mooncake::config::flags::{parse_bool, FlagKind};
use mooncake::master::config::MASTER_CONFIG_FLAGS;
use mooncake::master::kv_events::KV_EVENT_FLAGS;

pub(crate) const USAGE: &str = "\
usage: mooncake_master [flags]
  --port=50051 (--rpc_port overrides when non-zero)  --rpc_address=0.0.0.0
  --metrics_port=9003  --metrics_host=0.0.0.0
  --enable_http_metadata_server=false  --http_metadata_server_port=8080
  --http_metadata_server_host=0.0.0.0
  --rpc_conn_timeout_seconds=0 (idle RPC connections closed after; 0 = never)
  --rpc_max_connections=4096  --rpc_max_connections_per_peer=1024
  --default_kv_lease_ttl=10000  --default_kv_soft_pin_ttl=1800000
  --max_kv_soft_pin_ttl=86400000  --allow_evict_soft_pinned_objects=true
  --eviction_ratio=0.05  --eviction_high_watermark_ratio=0.90  --client_ttl=10
  --put_start_discard_timeout_sec=30  --put_start_release_timeout_sec=600
  --allocation_strategy=random|free_ratio_first  --memory_allocator=offset|cachelib
  --config_path=<json file with the same keys>
HA: --enable_ha=true --etcd_endpoints=h1:2379,h2:2379 (or --ha_backend_connstring), or
  --ha_backend_type=redis --ha_backend_connstring=redis://host:port
  --cluster_id=mooncake_cluster  --rpc_interface=<nic> (the address clients are told
  when --rpc_address is 0.0.0.0)  --ha_lease_ttl_sec=3  --ha_sync_timeout_ms=2000
Snapshots: --enable_snapshot=true --snapshot_backup_dir=<dir> (restored at start)
  --snapshot_interval_seconds=600 --snapshot_retention_count=2 (point-in-time copies
  kept in <dir>/archive/<unix ms>/; each restores as a --snapshot_backup_dir)
KV events: --enable_kv_events=true --kv_events_bind_endpoint=tcp://*:5557
  --kv_events_backend_id=<id>  --kv_events_emit_legacy_compat=true
  --kv_events_emit_object_key=true  --kv_events_queue_capacity=65536 (0 = unbounded)
  (ZeroMQ PUB; GET /kv_events/status on the metrics port)
SSD offload: --enable_offload=true (clients mount local disks) --offload_on_evict=false
  --offload_force_evict=false --offloading_queue_limit=50000 --offload_cap_ratio=0.5
  --promotion_on_hit=false --promotion_admission_threshold=2
  --promotion_max_per_heartbeat=1 --promotion_queue_limit=50000
Hot objects: --dynamic_replication_mode=off|observe|enforce
  --dynamic_replication_heat_window_seconds=10 --dynamic_replication_admission_qps_threshold=0.8
  --dynamic_replication_max_memory_replicas=2
Tenants: --enable_multi_tenants=true --tenant_quota_connector_type=file|etcd
  --tenant_quota_connector_uri=<policy.yaml or etcd endpoints> (the policy must load)
Upstream flags that turn on a feature this master does not have (--root_fs_dir,
--enable_cxl, --quota_bytes,
S3 or Redis snapshot stores)
refuse to start; those that change nothing here are accepted and say why (README
\"The master's flags\").";

/// Flags this binary handles itself (beyond the cache-policy ones of MasterConfig).
pub(crate) const SERVER_FLAGS: &[(&str, bool)] = &[
    ("port", false),
    ("rpc_port", false),
    ("rpc_address", false),
    ("metrics_port", false),
    ("metrics_host", false),
    ("enable_http_metadata_server", true),
    ("http_metadata_server_port", false),
    ("http_metadata_server_host", false),
    ("config_path", false),
    ("rpc_conn_timeout_seconds", false),
    ("rpc_max_connections", false),
    ("rpc_max_connections_per_peer", false),
    ("help", true),
    ("enable_ha", true),
    ("ha_backend_type", false),
    ("etcd_endpoints", false),
    ("ha_backend_connstring", false),
    ("cluster_id", false),
    ("rpc_interface", false),
    ("ha_lease_ttl_sec", false),
    ("enable_oplog", true),
    ("enable_snapshot", true),
    ("enable_snapshot_restore", true),
    ("snapshot_backup_dir", false),
    ("snapshot_interval_seconds", false),
    ("snapshot_retention_count", false),
    ("enable_metadata_cleanup_on_timeout", true),
];

/// Upstream flags accepted for compatibility that change nothing here.
const IGNORED_BOOL_FLAGS: &[&str] = &[
    "rpc_enable_tcp_no_delay",
    "enable_metric_reporting",
    "logtostderr",
];

/// The values that leave a refused flag off.
pub(crate) enum Off {
    /// A boolean: false.
    Bool,
    /// These values (compared trimmed, ignoring case).
    Values(&'static [&'static str]),
}

/// Upstream flags that turn on a feature this master does not have, with the feature.
/// Turning one on refuses to start: running without it would silently drop a
/// guarantee the operator asked for. Turned off, they are accepted.
pub(crate) const REFUSED_WHEN_ON: &[(&str, Off, &str)] = &[
    (
        "root_fs_dir",
        Off::Values(&[""]),
        "the shared-file-system storage tier",
    ),
    ("enable_cxl", Off::Bool, "the CXL memory tier"),
    ("quota_bytes", Off::Values(&["", "0"]), "a storage quota"),
    (
        "snapshot_object_store_type",
        Off::Values(&["", "local"]),
        "a snapshot store in S3",
    ),
    (
        "snapshot_payload_store_type",
        Off::Values(&["", "local"]),
        "a snapshot store in S3",
    ),
    (
        "snapshot_payload_backend_type",
        Off::Values(&["", "local"]),
        "a snapshot store in S3",
    ),
    (
        "snapshot_catalog_store_type",
        Off::Values(&["", "embedded", "payload"]),
        "a Redis snapshot catalog",
    ),
    (
        "snapshot_catalog_backend_type",
        Off::Values(&["", "embedded", "payload"]),
        "a Redis snapshot catalog",
    ),
    (
        "snapshot_catalog_store_connstring",
        Off::Values(&[""]),
        "a Redis snapshot catalog",
    ),
    (
        "snapshot_catalog_backend_connstring",
        Off::Values(&[""]),
        "a Redis snapshot catalog",
    ),
];

/// Upstream flags that configure something this master does not have or does
/// otherwise, so that they change nothing here, with why: accepted (logged once).
pub(crate) const MEANINGLESS_HERE: &[(&str, &str)] = &[
    ("batch_oplog_retry_timeout_sec", OPLOG),
    ("oplog_batch_max_entries", OPLOG),
    ("oplog_poll_interval_ms", OPLOG),
    (
        "cxl_path",
        "it configures the CXL tier, refused with --enable_cxl",
    ),
    (
        "cxl_size",
        "it configures the CXL tier, refused with --enable_cxl",
    ),
    (
        "global_file_segment_size",
        "it sizes the shared-file-system tier, refused with --root_fs_dir",
    ),
    ("nof_eviction_high_watermark_ratio", NOF),
    ("nof_eviction_ratio", NOF),
    ("nof_heartbeat_failures_threshold", NOF),
    ("nof_heartbeat_interval_sec", NOF),
    ("nof_heartbeat_probe_timeout_ms", NOF),
    ("pod_name", K8S),
    ("pod_namespace", K8S),
    ("rpc_thread_num", THREADS),
    ("max_threads", THREADS),
    (
        "snapshot_child_timeout_seconds",
        "snapshots are journaled by a thread of the master, not a child process",
    ),
];

const OPLOG: &str = "HA replication streams from the leader; there is no etcd oplog to poll";
const NOF: &str = "no NVMe-oF segment is ever mounted here";
const K8S: &str = "it names the pod for --ha_backend_type=k8s, which is refused";
const THREADS: &str = "each client connection has a thread of its own; there is no pool to size";

/// The reason a refused flag given as `name=value` stops the master, if it does.
pub(crate) fn refusal(name: &str, value: &str) -> Option<String> {
    let (_, off, feature) = REFUSED_WHEN_ON.iter().find(|(n, _, _)| *n == name)?;
    let on = match off {
        Off::Bool => parse_bool(name, value).unwrap_or(true),
        Off::Values(values) => !values.iter().any(|v| v.eq_ignore_ascii_case(value.trim())),
    };
    on.then(|| {
        format!(
            "--{name}={value}: {feature} is not available in this master; refusing to \
             start without it (drop the flag to run without {feature})"
        )
    })
}

/// Whether flag `name` is a boolean or takes a value (`None`: not a flag of this
/// master).
pub(crate) fn kind_of(name: &str) -> Option<FlagKind> {
    let is_bool = SERVER_FLAGS
        .iter()
        .chain(MASTER_CONFIG_FLAGS)
        .chain(KV_EVENT_FLAGS)
        .find(|(n, _)| *n == name)
        .map(|(_, b)| *b)
        .or_else(|| IGNORED_BOOL_FLAGS.contains(&name).then_some(true))
        .or_else(|| {
            REFUSED_WHEN_ON
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, off, _)| matches!(off, Off::Bool))
        })
        .or_else(|| {
            (MEANINGLESS_HERE.iter().any(|(n, _)| *n == name) || name == "snapshot_retention_count")
                .then_some(false)
        })?;
    Some(if is_bool {
        FlagKind::Bool
    } else {
        FlagKind::Value
    })
}
