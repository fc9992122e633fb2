//! `mooncake_master`: the Mooncake Store master (metadata and allocation service) with
//! upstream's flags, the coro_rpc service, the admin/metrics HTTP service and,
//! optionally, the embedded HTTP metadata server.

use mooncake::config::flags::{parse_bool, run_main, FlagKind, Flags};
use mooncake::host::logger;
use mooncake::host::net;
use mooncake::master::admin::AdminHandler;
use mooncake::master::config::{config_pairs, MasterConfig, MASTER_CONFIG_FLAGS};
use mooncake::master::ha::{self, snapshot, HaAdminHandler, HaSettings, HaStatus};
use mooncake::master::kv_events::{KvEventConfig, KvEvents, KV_EVENT_FLAGS};
use mooncake::master::rpc_server::{self, RpcLimits, RpcServer};
use mooncake::master::MasterService;
use mooncake::metadata::http_server::HttpMetadataServer;
use mooncake::runtime::conn_threads::ConnLimits;
use mooncake::runtime::http_server::HttpServer;
use mooncake::runtime::signals;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

const USAGE: &str = "\
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
const SERVER_FLAGS: &[(&str, bool)] = &[
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
const REFUSED_WHEN_ON: &[(&str, bool, &str)] = &[
    ("root_fs_dir", false, "the shared-file-system storage tier"),
    ("enable_cxl", true, "the CXL memory tier"),
    ("enable_multi_tenants", true, "multi-tenant quotas"),
];

/// The reason a refused flag given as `name=value` stops the master, if it does.
fn refusal(name: &str, value: &str) -> Option<String> {
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

fn kind_of(name: &str) -> Option<FlagKind> {
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

/// Everything the binary needs, resolved from the config file and the command line.
#[derive(Debug)]
struct Settings {
    rpc: SocketAddr,
    rpc_limits: RpcLimits,
    metrics: SocketAddr,
    metadata: Option<SocketAddr>,
    master: MasterConfig,
    /// `--enable_kv_events` and `--kv_events_*`.
    kv_events: KvEventConfig,
    /// `--enable_ha`.
    ha: Option<HaSettings>,
    /// `--enable_snapshot` / `--enable_snapshot_restore`: the snapshot directory.
    snapshot: Option<PathBuf>,
}

/// The `ip:port` clients are told: `--rpc_address`, or `--rpc_interface`'s address
/// when binding all interfaces, or the first interface's.
fn advertised(rpc: SocketAddr, interface: &str) -> Result<String, String> {
    let ip = if !rpc.ip().is_unspecified() {
        rpc.ip().to_string()
    } else if !interface.is_empty() {
        net::named_interface_ip(interface, rpc.is_ipv6())
            .ok_or_else(|| format!("--rpc_interface={interface}: no such interface up"))?
    } else {
        net::first_interface_ip(rpc.is_ipv6()).unwrap_or_else(|| "127.0.0.1".into())
    };
    Ok(SocketAddr::new(
        ip.parse()
            .map_err(|_| format!("bad interface address {ip}"))?,
        rpc.port(),
    )
    .to_string())
}

/// The HA settings when `--enable_ha` is on.
fn ha_settings(
    get: &dyn Fn(&str, &str) -> String,
    rpc: SocketAddr,
    rpc_limits: RpcLimits,
    snapshot: Option<PathBuf>,
) -> Result<Option<HaSettings>, String> {
    if !parse_bool("enable_ha", &get("enable_ha", "false"))? {
        return Ok(None);
    }
    let backend = get("ha_backend_type", "etcd");
    let connstring = get("ha_backend_connstring", "");
    let endpoints = match backend.as_str() {
        "etcd" => {
            let list = get("etcd_endpoints", "");
            if list.trim().is_empty() {
                connstring
            } else {
                list
            }
        }
        "redis" => {
            let c = connstring.trim();
            if c.is_empty() || c.starts_with("redis://") {
                c.to_string()
            } else {
                format!("redis://{c}")
            }
        }
        other => {
            return Err(format!(
                "--ha_backend_type={other}: this master elects its leader in etcd or Redis; \
                 refusing to start without HA"
            ))
        }
    };
    if endpoints.trim().is_empty() {
        return Err(format!(
            "--enable_ha=true needs {}",
            if backend == "redis" {
                "--ha_backend_connstring=redis://host:port"
            } else {
                "--etcd_endpoints (or --ha_backend_connstring)"
            }
        ));
    }
    let ttl: u64 = get("ha_lease_ttl_sec", "3")
        .parse()
        .ok()
        .filter(|t| *t >= 1)
        .ok_or("--ha_lease_ttl_sec: a whole number of seconds, at least 1")?;
    Ok(Some(HaSettings {
        backend: endpoints,
        cluster_id: get("cluster_id", ha::election::DEFAULT_CLUSTER_ID),
        rpc_bind: rpc,
        rpc_advertised: advertised(rpc, &get("rpc_interface", ""))?,
        lease_ttl: Duration::from_secs(ttl),
        rpc_limits,
        snapshot_dir: snapshot,
    }))
}

fn socket(host: &str, port: &str, flag: &str) -> Result<SocketAddr, String> {
    let ip: IpAddr = host
        .parse()
        .map_err(|_| format!("--{flag}: '{host}' is not an IP address"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("port '{port}' is not valid"))?;
    Ok(SocketAddr::new(ip, port))
}

/// Reads `--config_path` (a JSON object with flag names as keys) into (name, value) pairs.
fn config_file(path: &str) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("--config_path {path}: {e}"))?;
    config_pairs(&text).map_err(|e| format!("--config_path {path}: {e}"))
}

fn settings(flags: &Flags) -> Result<Settings, String> {
    let mut values: Vec<(String, String)> = match flags.get("config_path") {
        Some(path) if !path.is_empty() => config_file(path)?,
        _ => Vec::new(),
    };
    values.extend(flags.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let mut master = MasterConfig::default();
    let mut kv_events = KvEventConfig::default();
    let mut server = std::collections::HashMap::new();
    let refused: Vec<String> = values
        .iter()
        .filter_map(|(name, value)| refusal(name, value))
        .collect();
    if !refused.is_empty() {
        return Err(refused.join("\n"));
    }
    for (name, value) in values {
        if REFUSED_WHEN_ON.iter().any(|(n, _, _)| *n == name) {
            continue;
        }
        if MASTER_CONFIG_FLAGS.iter().any(|(n, _)| *n == name) {
            master.set(&name, &value)?;
        } else if KV_EVENT_FLAGS.iter().any(|(n, _)| *n == name) {
            kv_events.set(&name, &value)?;
        } else if SERVER_FLAGS.iter().any(|(n, _)| *n == name) {
            server.insert(name, value);
        } else {
            log::warn!("flag --{name} is not implemented by this master; ignored");
        }
    }
    master.validate()?;
    let get =
        |name: &str, default: &str| server.get(name).cloned().unwrap_or_else(|| default.into());
    let rpc_port = match get("rpc_port", "0").as_str() {
        "0" => get("port", "50051"),
        p => p.to_string(),
    };
    let enable_metadata = parse_bool(
        "enable_http_metadata_server",
        &get("enable_http_metadata_server", "false"),
    )?;
    let idle_secs: u64 = get("rpc_conn_timeout_seconds", "0")
        .parse()
        .map_err(|_| "--rpc_conn_timeout_seconds: not a non-negative integer".to_string())?;
    let count = |name: &str, default: usize| -> Result<usize, String> {
        match get(name, &default.to_string()).trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("--{name}: not a positive integer")),
        }
    };
    let rpc_limits = RpcLimits {
        idle_timeout: (idle_secs > 0).then(|| Duration::from_secs(idle_secs)),
        connections: ConnLimits::new(
            count("rpc_max_connections", rpc_server::MAX_CONNECTIONS)?,
            count(
                "rpc_max_connections_per_peer",
                rpc_server::MAX_CONNECTIONS_PER_PEER,
            )?,
        ),
    };
    let rpc = socket(&get("rpc_address", "0.0.0.0"), &rpc_port, "rpc_address")?;
    let snapshot = if parse_bool("enable_snapshot", &get("enable_snapshot", "false"))?
        || parse_bool(
            "enable_snapshot_restore",
            &get("enable_snapshot_restore", "false"),
        )? {
        let dir = get("snapshot_backup_dir", "");
        if dir.trim().is_empty() {
            return Err("--enable_snapshot=true needs --snapshot_backup_dir".into());
        }
        Some(PathBuf::from(dir.trim()))
    } else {
        None
    };
    let ha = ha_settings(&get, rpc, rpc_limits, snapshot.clone())?;
    if ha.is_none() && parse_bool("enable_oplog", &get("enable_oplog", "false"))? {
        log::warn!("--enable_oplog has no effect without --enable_ha");
    }
    Ok(Settings {
        rpc,
        rpc_limits,
        ha,
        snapshot,
        metrics: socket(
            &get("metrics_host", "0.0.0.0"),
            &get("metrics_port", "9003"),
            "metrics_host",
        )?,
        metadata: enable_metadata
            .then(|| {
                socket(
                    &get("http_metadata_server_host", "0.0.0.0"),
                    &get("http_metadata_server_port", "8080"),
                    "http_metadata_server_host",
                )
            })
            .transpose()?,
        master,
        kv_events,
    })
}

/// Starts the KV-event publisher (disabled when off, or when it cannot bind).
fn start_kv_events(config: &KvEventConfig) -> Arc<KvEvents> {
    let events = KvEvents::start(config, |name| {
        net::named_interface_ip(name, false).and_then(|ip| ip.parse().ok())
    });
    if let Some(addr) = events.local_addr() {
        eprintln!("KV events published on {addr}");
    }
    Arc::new(events)
}

/// Runs an HA master (see `mooncake::master::ha`) until a stop signal.
fn run_ha(s: Settings, ha: HaSettings) -> Result<(), String> {
    let _metadata = start_metadata_server(s.metadata)?;
    let status = Arc::new(HaStatus::default());
    let kv_events = start_kv_events(&s.kv_events);
    let _admin = HttpServer::start(
        s.metrics,
        "admin HTTP",
        Arc::new(HaAdminHandler(status.clone(), kv_events.clone())),
    )
    .map_err(|e| format!("admin HTTP on {}: {e}", s.metrics))?;
    let initial = match &s.snapshot {
        Some(dir) => snapshot::load(dir).map_err(|e| format!("{}: {e}", dir.display()))?,
        None => Default::default(),
    };
    eprintln!(
        "mooncake_master (HA, cluster {}, election in {}) will serve on {} when leader, metrics on {}",
        ha.cluster_id, ha.backend, ha.rpc_advertised, s.metrics
    );
    signals::install_stop_handlers();
    let result = ha::run(
        &ha,
        &s.master,
        &kv_events,
        &status,
        initial,
        &signals::stop_requested,
    );
    eprintln!("mooncake_master shutting down");
    kv_events.shutdown();
    result
}

fn start_metadata_server(addr: Option<SocketAddr>) -> Result<Option<HttpMetadataServer>, String> {
    let server = addr
        .map(|addr| {
            HttpMetadataServer::start(addr)
                .map_err(|e| format!("HTTP metadata server on {addr}: {e}"))
        })
        .transpose()?;
    if let Some(m) = &server {
        eprintln!("HTTP metadata server listening on {}", m.local_addr());
    }
    Ok(server)
}

fn run(mut s: Settings) -> Result<(), String> {
    if let Some(ha) = s.ha.take() {
        return run_ha(s, ha);
    }
    let kv_events = start_kv_events(&s.kv_events);
    let master = MasterService::with_kv_events(s.master, kv_events.clone());
    let _snapshot = match &s.snapshot {
        Some(dir) => {
            let state = snapshot::load(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let n = master.restore(&state);
            if n > 0 || !state.segments.is_empty() {
                eprintln!(
                    "restored {n} objects and {} segments from {}",
                    state.segments.len(),
                    dir.display()
                );
            }
            Some(
                snapshot::SnapshotWriter::start(dir, &master)
                    .map_err(|e| format!("snapshot in {}: {e}", dir.display()))?,
            )
        }
        None => None,
    };
    let _metadata = start_metadata_server(s.metadata)?;
    let _admin = HttpServer::start(
        s.metrics,
        "admin HTTP",
        Arc::new(AdminHandler(master.clone())),
    )
    .map_err(|e| format!("admin HTTP on {}: {e}", s.metrics))?;
    let rpc =
        RpcServer::start_with_events(s.rpc, master.clone(), Some(master.clone()), s.rpc_limits)
            .map_err(|e| format!("master RPC on {}: {e}", s.rpc))?;
    eprintln!(
        "mooncake_master listening on {} (rpc), metrics on {}",
        rpc.local_addr(),
        s.metrics
    );
    signals::install_stop_handlers();
    while !signals::stop_requested() {
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("mooncake_master shutting down");
    drop(rpc);
    master.shutdown();
    kv_events.shutdown();
    Ok(())
}

fn main() -> ExitCode {
    logger::install();
    run_main("mooncake_master", USAGE, kind_of, settings, run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Settings, String> {
        let flags = Flags::parse(args.iter().map(|s| s.to_string()), kind_of)?;
        settings(&flags)
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
        assert_eq!(
            s.kv_events,
            KvEventConfig {
                enabled: true,
                bind_endpoint: "tcp://*:5557".into(),
                backend_id: "node0".into(),
                emit_legacy_compat: false,
                emit_object_key: false,
                queue_capacity: 0,
            }
        );
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
        let s = parse(&[
            "--enable_ha=true",
            "--etcd_endpoints=127.0.0.1:2379;127.0.0.1:2381",
            "--rpc_address=127.0.0.1",
            "--port=6000",
            "--cluster_id=c1",
            "--enable_oplog=true",
            "--enable_snapshot=true",
            "--snapshot_backup_dir=/var/lib/mc",
        ])
        .unwrap();
        let ha = s.ha.unwrap();
        assert_eq!(ha.rpc_advertised, "127.0.0.1:6000");
        assert_eq!(ha.cluster_id, "c1");
        assert_eq!(ha.lease_ttl, Duration::from_secs(3));
        assert_eq!(ha.snapshot_dir, Some(PathBuf::from("/var/lib/mc")));
        // The connection string is upstream's other spelling of the endpoints; the
        // loopback interface names its own address.
        let s = parse(&[
            "--enable_ha",
            "--ha_backend_connstring=127.0.0.1:2379",
            "--rpc_interface=lo",
            "--ha_lease_ttl_sec=5",
        ])
        .unwrap();
        let ha = s.ha.unwrap();
        assert_eq!(ha.backend, "127.0.0.1:2379");
        assert_eq!(ha.rpc_advertised, "127.0.0.1:50051");
        assert_eq!(ha.lease_ttl, Duration::from_secs(5));
        assert_eq!(ha.cluster_id, "mooncake_cluster");
        let s = parse(&[
            "--enable_ha",
            "--ha_backend_type=redis",
            "--ha_backend_connstring=10.0.0.1:6379",
        ])
        .unwrap();
        assert_eq!(s.ha.unwrap().backend, "redis://10.0.0.1:6379");
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
}
