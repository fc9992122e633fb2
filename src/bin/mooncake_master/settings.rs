//! [`Settings`]: everything the master binary needs, resolved from the config file
//! (`--config_path`) and the command line.

use crate::flags::{refusal, MEANINGLESS_HERE, REFUSED_WHEN_ON, SERVER_FLAGS};
use mooncake::config::flags::{parse_bool, Flags};
use mooncake::host::net;
use mooncake::master::config::{config_pairs, MasterConfig, MASTER_CONFIG_FLAGS};
use mooncake::master::ha::snapshot::SnapshotPlan;
use mooncake::master::ha::HaSettings;
use mooncake::master::kv_events::{KvEventConfig, KV_EVENT_FLAGS};
use mooncake::master::rpc_server::{self, RpcLimits};
use mooncake::master::tenant_policy::PolicyStore;
use mooncake::runtime::conn_threads::ConnLimits;
use mooncake::wire::master_view::DEFAULT_CLUSTER_ID;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// Everything the binary needs, resolved from the config file and the command line.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) rpc: SocketAddr,
    pub(crate) rpc_limits: RpcLimits,
    pub(crate) metrics: SocketAddr,
    pub(crate) metadata: Option<SocketAddr>,
    pub(crate) master: MasterConfig,
    /// `--enable_kv_events` and `--kv_events_*`.
    pub(crate) kv_events: KvEventConfig,
    /// `--enable_ha`.
    pub(crate) ha: Option<HaSettings>,
    /// `--enable_snapshot` / `--enable_snapshot_restore`: the snapshot directory and
    /// its point-in-time copies.
    pub(crate) snapshot: Option<SnapshotPlan>,
    /// `--enable_metadata_cleanup_on_timeout`: where expired clients' metadata goes.
    pub(crate) metadata_cleanup: Option<CleanupTarget>,
}

/// The HTTP metadata server an expired client's entries are removed from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CleanupTarget {
    /// This master's own (`--enable_http_metadata_server`).
    Colocated,
    /// A separate one, by its connection string (`http://host:port/metadata`).
    Remote(String),
}

/// Where `--enable_metadata_cleanup_on_timeout` removes entries, as upstream decides
/// it: the master's own metadata server, else `MOONCAKE_TE_META_DATA_SERVER`, else the
/// `metadata_server` of the JSON file `MOONCAKE_CONFIG_PATH` names. Without an
/// `http(s)://` server cleanup is off, with a warning (as upstream: etcd, Redis and
/// P2P handshake metadata are not cleaned).
pub(crate) fn cleanup_target(
    enabled: bool,
    colocated: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<CleanupTarget> {
    if !enabled {
        return None;
    }
    if colocated {
        return Some(CleanupTarget::Colocated);
    }
    let from_env =
        env("MOONCAKE_TE_META_DATA_SERVER").filter(|v| !v.is_empty() && v != "P2PHANDSHAKE");
    let server = from_env.or_else(|| {
        let path = env("MOONCAKE_CONFIG_PATH").filter(|p| !p.is_empty())?;
        let text = std::fs::read_to_string(&path)
            .map_err(|e| log::warn!("Cannot read MOONCAKE_CONFIG_PATH ({path}): {e}"))
            .ok()?;
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| log::warn!("Failed to parse MOONCAKE_CONFIG_PATH ({path}): {e}"))
            .ok()?;
        json.get("metadata_server")?.as_str().map(str::to_string)
    });
    match server {
        Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
            Some(CleanupTarget::Remote(url))
        }
        other => {
            log::warn!(
                "--enable_metadata_cleanup_on_timeout: no HTTP metadata server to clean ({}); \
                 enable --enable_http_metadata_server or set \
                 MOONCAKE_TE_META_DATA_SERVER=http://host:port/metadata (or \
                 MOONCAKE_CONFIG_PATH). Metadata cleanup on timeout is off.",
                other.map_or("none configured".to_string(), |s| format!(
                    "{s:?} is not http"
                ))
            );
            None
        }
    }
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
    snapshot: Option<SnapshotPlan>,
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
        cluster_id: get("cluster_id", DEFAULT_CLUSTER_ID),
        rpc_bind: rpc,
        rpc_advertised: advertised(rpc, &get("rpc_interface", ""))?,
        lease_ttl: Duration::from_secs(ttl),
        rpc_limits,
        snapshot,
    }))
}

/// `host:port` as a socket address (`flag` names the host in errors).
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

/// The settings from `--config_path` overridden by the command line.
pub(crate) fn settings(flags: &Flags) -> Result<Settings, String> {
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
        } else if let Some((_, why)) = MEANINGLESS_HERE.iter().find(|(n, _)| *n == name) {
            log::info!("--{name}={value} changes nothing in this master: {why}");
        } else {
            log::warn!("flag --{name} is not implemented by this master; ignored");
        }
    }
    master.validate()?;
    let get =
        |name: &str, default: &str| server.get(name).cloned().unwrap_or_else(|| default.into());
    master.cluster_id = get("cluster_id", DEFAULT_CLUSTER_ID);
    if master.enable_multi_tenants {
        PolicyStore::open(&master)
            .and_then(|store| store.load())
            .map_err(|e| format!("--enable_multi_tenants: {e}"))?;
    }
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
        let number = |name: &str, default: &str| {
            get(name, default)
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("--{name}: not a non-negative integer"))
        };
        Some(SnapshotPlan {
            dir: PathBuf::from(dir.trim()),
            archive_every: Duration::from_secs(number("snapshot_interval_seconds", "600")?.max(1)),
            archive_keep: usize::try_from(number("snapshot_retention_count", "2")?)
                .unwrap_or(usize::MAX),
        })
    } else {
        None
    };
    let metadata_cleanup = cleanup_target(
        parse_bool(
            "enable_metadata_cleanup_on_timeout",
            &get("enable_metadata_cleanup_on_timeout", "false"),
        )?,
        enable_metadata,
        &|name| std::env::var(name).ok(),
    );
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
        metadata_cleanup,
    })
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
