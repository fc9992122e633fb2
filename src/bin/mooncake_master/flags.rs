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
KV events: --enable_kv_events=true --kv_events_bind_endpoint=tcp://*:5557
  --kv_events_backend_id=<id>  --kv_events_emit_legacy_compat=true
  --kv_events_emit_object_key=true  --kv_events_queue_capacity=65536 (0 = unbounded)
  (ZeroMQ PUB; GET /kv_events/status on the metrics port)
SSD offload: --enable_offload=true (clients mount local disks) --offload_on_evict=false
  --offload_force_evict=false --offloading_queue_limit=50000 --offload_cap_ratio=0.5
  --promotion_on_hit=false --promotion_admission_threshold=2
  --promotion_max_per_heartbeat=1 --promotion_queue_limit=50000
Flags that turn on other storage tiers (--root_fs_dir, --enable_cxl) are refused:
this master does not have those features. Other upstream flags are accepted with a
warning.";

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
];

/// Upstream flags accepted for compatibility that change nothing here.
const IGNORED_BOOL_FLAGS: &[&str] = &[
    "rpc_enable_tcp_no_delay",
    "enable_metric_reporting",
    "enable_metadata_cleanup_on_timeout",
    "logtostderr",
    "enable_disk_eviction",
];

/// Upstream flags that turn on a feature this master does not have, with the feature:
/// `(name, is_bool, feature)`. Turning one on (true, or a non-empty value) refuses to
/// start: running without it would silently drop a guarantee the operator asked for.
/// Turned off, they are accepted.
pub(crate) const REFUSED_WHEN_ON: &[(&str, bool, &str)] = &[
    ("root_fs_dir", false, "the shared-file-system storage tier"),
    ("enable_cxl", true, "the CXL memory tier"),
    ("enable_multi_tenants", true, "multi-tenant quotas"),
];

/// The reason a refused flag given as `name=value` stops the master, if it does.
pub(crate) fn refusal(name: &str, value: &str) -> Option<String> {
    let (_, is_bool, feature) = REFUSED_WHEN_ON.iter().find(|(n, _, _)| *n == name)?;
    let on = if *is_bool {
        parse_bool(name, value).unwrap_or(true)
    } else {
        !value.trim().is_empty()
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
                .map(|(_, b, _)| *b)
        })?;
    Some(if is_bool {
        FlagKind::Bool
    } else {
        FlagKind::Value
    })
}
