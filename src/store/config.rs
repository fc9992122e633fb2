//! What `setup` takes ([`SetupConfig`]) and the `MC_STORE_*` / `MC_RPC_*` environment
//! knobs it reads ([`StoreEnv`]).

use super::disk_tier::config::DiskTierConfig;
use crate::wire::master_api::DEFAULT_RPC_TIMEOUT;
use std::time::Duration;

/// Upstream's default master address.
pub const DEFAULT_MASTER_ADDR: &str = "127.0.0.1:50051";
/// Upstream's default protocol.
pub const DEFAULT_PROTOCOL: &str = "tcp";

/// The arguments of `mooncake_store_setup`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetupConfig {
    /// This client's name: `host` (a free port in 12300-14300 is appended) or
    /// `host:port` (used verbatim). Required.
    pub local_hostname: String,
    /// Transfer Engine metadata: `P2PHANDSHAKE` or an `http://` URL.
    pub metadata_server: String,
    /// Bytes of RAM this client contributes to the store (0 = pure client).
    pub global_segment_size: u64,
    /// Bytes of the staging buffer used by `put` (0 = `put` unavailable).
    pub local_buffer_size: u64,
    /// Transport; only `tcp` is supported. Empty means `tcp`.
    pub protocol: String,
    /// RDMA device list; ignored for `tcp`.
    pub device_name: String,
    /// Master `host:port`. Empty means `127.0.0.1:50051`.
    pub master_server_addr: String,
    /// Keep objects the master offloads on a local disk and serve them to readers
    /// (upstream's `enable_ssd_offload`; the master needs `--enable_offload`).
    pub enable_ssd_offload: bool,
    /// The disk tier's directory; empty means `MOONCAKE_OFFLOAD_FILE_STORAGE_PATH`
    /// (default `/data/file_storage`).
    pub ssd_offload_path: String,
    /// The tenant every object call names (upstream's `tenant_id`); empty means
    /// `default`. A master with `--enable_multi_tenants` keeps each tenant's keys
    /// apart; without it every tenant is `default`.
    pub tenant_id: String,
}

impl SetupConfig {
    /// A copy with upstream's defaults filled in for empty `protocol` and
    /// `master_server_addr` (the C ABI's NULL defaults).
    pub fn with_defaults(&self) -> SetupConfig {
        let mut c = self.clone();
        if c.protocol.is_empty() {
            c.protocol = DEFAULT_PROTOCOL.into();
        }
        if c.master_server_addr.is_empty() {
            c.master_server_addr = DEFAULT_MASTER_ADDR.into();
        }
        c
    }

    /// The disk tier `enable_ssd_offload` asks for, configured from
    /// `MOONCAKE_OFFLOAD_*` and `ssd_offload_path`; `None` when it is off.
    pub fn disk_tier_from_env(&self) -> Option<DiskTierConfig> {
        self.enable_ssd_offload
            .then(|| DiskTierConfig::from_env(|k| std::env::var(k).ok(), &self.ssd_offload_path))
    }
}

/// Environment knobs of the store client, read at each setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreEnv {
    /// `MC_STORE_CLIENT_MIN_PORT` (12300).
    pub min_port: u16,
    /// `MC_STORE_CLIENT_MAX_PORT` (14300).
    pub max_port: u16,
    /// `MC_STORE_CLIENT_SETUP_RETRIES` (20).
    pub setup_retries: u32,
    /// `MC_RPC_TIMEOUT_MS` (30 000, [`DEFAULT_RPC_TIMEOUT`]).
    pub rpc_timeout: Duration,
    /// `MC_RPC_CONNECT_TIMEOUT_MS` (30 000).
    pub connect_timeout: Duration,
    /// `MC_MS_AUTO_DISC` (0 or 1): whether the transfer engine discovers its
    /// transport; unset means "for `rdma` without device names".
    pub auto_discover: Option<bool>,
    /// `MC_MS_FILTERS`: the devices auto-discovery may use (comma-separated).
    pub discover_filters: Vec<String>,
}

const DEFAULT_MIN_PORT: u16 = 12300;
const DEFAULT_MAX_PORT: u16 = 14300;

impl StoreEnv {
    /// Reads the process environment.
    pub fn from_env() -> StoreEnv {
        StoreEnv::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads any variable source (the environment, or a test map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> StoreEnv {
        let num = |name: &str, default: u64, lo: u64, hi: u64| -> u64 {
            crate::config::number_in_range(get(name).as_deref(), name, lo, hi).unwrap_or(default)
        };
        let min = num(
            "MC_STORE_CLIENT_MIN_PORT",
            DEFAULT_MIN_PORT.into(),
            1,
            65535,
        ) as u16;
        let max = num(
            "MC_STORE_CLIENT_MAX_PORT",
            DEFAULT_MAX_PORT.into(),
            1,
            65535,
        ) as u16;
        let (min_port, max_port) = if min <= max {
            (min, max)
        } else {
            log::warn!("MC_STORE_CLIENT_MIN_PORT {min} > MAX_PORT {max}; using defaults");
            (DEFAULT_MIN_PORT, DEFAULT_MAX_PORT)
        };
        // Both deadlines default to the same 30 s.
        let ms = |name: &str| {
            let default = DEFAULT_RPC_TIMEOUT.as_millis() as u64;
            Duration::from_millis(num(name, default, 1, 86_400_000))
        };
        StoreEnv {
            min_port,
            max_port,
            setup_retries: num("MC_STORE_CLIENT_SETUP_RETRIES", 20, 1, 1000) as u32,
            rpc_timeout: ms("MC_RPC_TIMEOUT_MS"),
            connect_timeout: ms("MC_RPC_CONNECT_TIMEOUT_MS"),
            auto_discover: match get("MC_MS_AUTO_DISC").as_deref().map(str::trim) {
                None => None,
                Some("1") => Some(true),
                Some("0") => Some(false),
                Some(other) => {
                    log::warn!("ignoring MC_MS_AUTO_DISC={other}: not 0 or 1");
                    None
                }
            },
            discover_filters: crate::config::comma_list(
                get("MC_MS_FILTERS").as_deref().unwrap_or(""),
            ),
        }
    }
}

/// Splits `host[:port]`; the port is `Some` only when the name carries a valid one
/// (`[v6]:port`, or `host:port` with exactly one colon). Bare IPv6 addresses have none.
pub fn split_explicit_port(name: &str) -> (String, Option<u16>) {
    if let Some(rest) = name.strip_prefix('[') {
        if let Some((host, tail)) = rest.split_once(']') {
            let port = tail.strip_prefix(':').and_then(|p| p.parse::<u16>().ok());
            return (host.to_string(), port.filter(|p| *p != 0));
        }
    }
    if name.matches(':').count() == 1 {
        if let Some((host, port)) = name.split_once(':') {
            if let Ok(p) = port.parse::<u16>() {
                if p != 0 {
                    return (host.to_string(), Some(p));
                }
            }
        }
    }
    (name.to_string(), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn env_defaults_and_overrides() {
        let e = StoreEnv::from_lookup(|_| None);
        assert_eq!(
            (e.min_port, e.max_port, e.setup_retries),
            (12300, 14300, 20)
        );
        assert_eq!(e.rpc_timeout, Duration::from_secs(30));
        let map: HashMap<&str, &str> = [
            ("MC_STORE_CLIENT_MIN_PORT", "20000"),
            ("MC_STORE_CLIENT_MAX_PORT", "10000"),
            ("MC_RPC_TIMEOUT_MS", "250"),
        ]
        .into_iter()
        .collect();
        let e = StoreEnv::from_lookup(|k| map.get(k).map(|v| v.to_string()));
        assert_eq!((e.min_port, e.max_port), (12300, 14300));
        assert_eq!(e.rpc_timeout, Duration::from_millis(250));
    }

    #[test]
    fn explicit_ports() {
        assert_eq!(split_explicit_port("h:5"), ("h".into(), Some(5)));
        assert_eq!(split_explicit_port("h"), ("h".into(), None));
        assert_eq!(split_explicit_port("h:x"), ("h:x".into(), None));
        assert_eq!(split_explicit_port("[::1]:7"), ("::1".into(), Some(7)));
        assert_eq!(split_explicit_port("fe80::1"), ("fe80::1".into(), None));
        let d = SetupConfig::default().with_defaults();
        assert_eq!(
            (d.protocol.as_str(), d.master_server_addr.as_str()),
            ("tcp", DEFAULT_MASTER_ADDR)
        );
    }
}
