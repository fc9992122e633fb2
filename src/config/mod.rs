//! Upstream's `MC_*` environment variables, read once into one [`Config`] value, and the
//! gflags-style command-line parser of the binaries ([`flags`]).

pub mod flags;
mod lookup;
mod rdma;

use crate::host::parallel_copy::MAX_HELPERS;
pub use lookup::comma_list;
pub(crate) use lookup::number_in_range;
pub use rdma::RdmaConfig;
use std::sync::OnceLock;

/// Every tunable the Transfer Engine honours, with upstream's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `MC_METADATA_CLUSTER_ID`: extra key segment after `mooncake/`.
    pub cluster_id: Option<String>,
    /// `MC_TCP_BIND_ADDRESS`: the advertised IP (not a bind address).
    pub advertised_ip: Option<String>,
    /// `MC_LEGACY_RPC_PORT_BINDING`: take the RPC host and port from the segment name.
    pub legacy_rpc_port_binding: bool,
    /// `MC_FORCE_TCP`: install TCP at init.
    pub force_tcp: bool,
    /// `MC_MIN_RPC_PORT` (alias `MC_MIN_PRC_PORT`).
    pub min_rpc_port: u16,
    /// `MC_MAX_RPC_PORT` (alias `MC_MAX_PRC_PORT`).
    pub max_rpc_port: u16,
    /// `MC_HANDSHAKE_PORT`: default port when a name has none.
    pub handshake_port: u16,
    /// `MC_USE_IPV6`: IPv6 sockets and interface discovery.
    pub use_ipv6: bool,
    /// `MC_HANDSHAKE_CONNECT_TIMEOUT` in seconds.
    pub handshake_connect_timeout_secs: u64,
    /// `MC_HANDSHAKE_LISTEN_BACKLOG`.
    pub handshake_listen_backlog: i32,
    /// `MC_HANDSHAKE_MAX_LENGTH`: largest accepted RPC frame.
    pub handshake_max_length: u64,
    /// `MC_DISABLE_METACACHE`: refetch remote descriptors on every lookup.
    pub disable_metacache: bool,
    /// `MC_TE_METADATA_REFRESH_INTERVAL_SECONDS`: background cache refresh (0 = off).
    pub metadata_refresh_interval_secs: u64,
    /// `MC_TCP_PROTO=1`: force v1 framing on the initiator.
    pub tcp_force_v1: bool,
    /// `MC_TCP_STATUS_TIMEOUT_SEC`: v2 status-frame deadline.
    pub tcp_status_timeout_secs: u64,
    /// `MC_TCP_PROGRESS_TIMEOUT_SEC`: sliding progress deadline on a data socket.
    pub tcp_progress_timeout_secs: u64,
    /// `MC_TCP_LANES_PER_PEER` (alias `MC_TCP_MAX_CONNECTIONS_PER_PEER`): 1-16
    /// persistent connections per peer (ours defaults to 8, upstream to 4).
    pub tcp_lanes_per_peer: usize,
    /// `MC_TCP_IDLE_TIMEOUT_SEC` (ours): a data connection that carries no request for
    /// this long is closed by the target (the initiator reconnects on its next slice);
    /// checked every `MC_TCP_PROGRESS_TIMEOUT_SEC`; 0 = never. Default 600.
    pub tcp_idle_timeout_secs: u64,
    /// `MC_PEER_IDLE_SEC` (ours): what an engine keeps about a peer it did not use for
    /// this long (the peer may be gone for good: a restarted one gets a new name) is
    /// dropped: its TCP lanes (connections and threads) and the cached descriptor of
    /// its segment (fetched again on next use; the segment's id stays valid). Looked
    /// for every 10 s at most; 0 = as soon as it is not in use. Default 60.
    pub peer_idle_secs: u64,
    /// `MC_MAX_INBOUND_CONNECTIONS` (ours): connections each listening socket of an
    /// engine (RPC daemon, TCP data port, same-host socket, a real client's dummy
    /// socket) serves at once. Default 1024.
    pub max_inbound_connections: usize,
    /// `MC_MAX_INBOUND_PER_PEER` (ours): how many of those one peer host (one local
    /// process for the Unix sockets) may hold. Default 256.
    pub max_inbound_per_peer: usize,
    /// `MC_DISABLE_LOCAL_COPY` (ours): send transfers to the own segment over TCP too.
    pub disable_local_copy: bool,
    /// `MC_DISABLE_SAME_HOST` (ours): never copy directly between processes on one
    /// host; peers there are reached over TCP like any other.
    pub disable_same_host: bool,
    /// `MC_SAME_HOST_NO_LEASE` (ours): this engine does not lease its registered
    /// caller memory to same-host peers; they ask it per batch (the grant path).
    pub same_host_no_lease: bool,
    /// `MC_BUSY_POLL_US` (ours): how long a thread that expects a reply any moment
    /// (an RPC to the master, a small transfer), or a master's connection thread
    /// that is the only one serving, busy-polls its socket before sleeping in the
    /// kernel; 0 turns busy-polling off. Default 100.
    pub busy_poll_us: u64,
    /// `MC_COPY_HELPERS` (ours): threads that take part in each copy of 512 KiB or
    /// more between two buffers of this process (a same-host transfer through a peer's
    /// mapped segment, the own segment, the store's staging), 0 to 3; 0 copies on the
    /// calling thread only. Unset (`None`): one fewer than the CPUs, at most 3.
    pub copy_helpers: Option<usize>,
    /// The RDMA transport's variables.
    pub rdma: RdmaConfig,
}

const DEFAULT_MIN_RPC_PORT: u16 = 15000;
/// Lanes per peer when unset. Upstream uses 4; the connection policy is internal
/// (spec §11.2) and 8 measured ~20% faster on loopback with 64 KiB-1 MiB blocks.
const DEFAULT_TCP_LANES: i64 = 8;
/// Busy-poll budget when unset: a loopback or same-rack reply takes 20-60 us, and
/// waking a sleeping thread on another CPU costs about as much again on a VM.
const DEFAULT_BUSY_POLL_US: i64 = 100;
const DEFAULT_MAX_RPC_PORT: u16 = 17000;
const MIN_HANDSHAKE_LENGTH: u64 = 1 << 20;
const MAX_HANDSHAKE_LENGTH: u64 = 128 << 20;

impl Default for Config {
    fn default() -> Self {
        Config::from_lookup(|_| None)
    }
}

impl Config {
    /// The busy-poll budget of socket waits (`MC_BUSY_POLL_US`).
    pub fn busy_poll_budget(&self) -> std::time::Duration {
        std::time::Duration::from_micros(self.busy_poll_us)
    }

    /// The process-wide configuration, read from the environment on first use.
    pub fn global() -> &'static Config {
        static CONFIG: OnceLock<Config> = OnceLock::new();
        CONFIG.get_or_init(|| Config::from_lookup(|name| std::env::var(name).ok()))
    }

    /// Builds a configuration from any variable source (the environment, or a test map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Config {
        let rdma = RdmaConfig::from_lookup(&get);
        let get = |names: &[&str]| names.iter().find_map(|n| get(n));
        let set = |names: &[&str]| get(names).is_some();
        let num = |names: &[&str], default: i64, lo: i64, hi: i64| -> i64 {
            number_in_range(get(names).as_deref(), names[0], lo, hi).unwrap_or(default)
        };
        let (min_rpc_port, max_rpc_port) = rpc_port_range(
            num(
                &["MC_MIN_RPC_PORT", "MC_MIN_PRC_PORT"],
                DEFAULT_MIN_RPC_PORT.into(),
                0,
                65535,
            ),
            num(
                &["MC_MAX_RPC_PORT", "MC_MAX_PRC_PORT"],
                DEFAULT_MAX_RPC_PORT.into(),
                0,
                65535,
            ),
        );
        Config {
            cluster_id: get(&["MC_METADATA_CLUSTER_ID"]).filter(|s| !s.is_empty()),
            advertised_ip: get(&["MC_TCP_BIND_ADDRESS"]).filter(|s| !s.is_empty()),
            legacy_rpc_port_binding: set(&["MC_LEGACY_RPC_PORT_BINDING"]),
            force_tcp: set(&["MC_FORCE_TCP"]),
            min_rpc_port,
            max_rpc_port,
            handshake_port: num(&["MC_HANDSHAKE_PORT"], 12001, 1, 65535) as u16,
            use_ipv6: set(&["MC_USE_IPV6"]),
            handshake_connect_timeout_secs: num(&["MC_HANDSHAKE_CONNECT_TIMEOUT"], 5, 1, 3600)
                as u64,
            handshake_listen_backlog: num(&["MC_HANDSHAKE_LISTEN_BACKLOG"], 128, 1, 65535) as i32,
            handshake_max_length: num(
                &["MC_HANDSHAKE_MAX_LENGTH"],
                MIN_HANDSHAKE_LENGTH as i64,
                MIN_HANDSHAKE_LENGTH as i64,
                MAX_HANDSHAKE_LENGTH as i64,
            ) as u64,
            disable_metacache: set(&["MC_DISABLE_METACACHE"]),
            metadata_refresh_interval_secs: num(
                &["MC_TE_METADATA_REFRESH_INTERVAL_SECONDS"],
                0,
                0,
                86400,
            ) as u64,
            peer_idle_secs: num(&["MC_PEER_IDLE_SEC"], 60, 0, 86400) as u64,
            tcp_force_v1: get(&["MC_TCP_PROTO"]).is_some_and(|v| v.trim() == "1"),
            tcp_status_timeout_secs: num(&["MC_TCP_STATUS_TIMEOUT_SEC"], 30, 1, 86400) as u64,
            tcp_progress_timeout_secs: num(&["MC_TCP_PROGRESS_TIMEOUT_SEC"], 30, 1, 86400) as u64,
            tcp_lanes_per_peer: num(
                &["MC_TCP_LANES_PER_PEER", "MC_TCP_MAX_CONNECTIONS_PER_PEER"],
                DEFAULT_TCP_LANES,
                1,
                16,
            ) as usize,
            tcp_idle_timeout_secs: num(&["MC_TCP_IDLE_TIMEOUT_SEC"], 600, 0, 86400 * 30) as u64,
            max_inbound_connections: num(&["MC_MAX_INBOUND_CONNECTIONS"], 1024, 1, 1 << 20)
                as usize,
            max_inbound_per_peer: num(&["MC_MAX_INBOUND_PER_PEER"], 256, 1, 1 << 20) as usize,
            disable_local_copy: get(&["MC_DISABLE_LOCAL_COPY"])
                .is_some_and(|v| !matches!(v.trim(), "" | "0" | "false" | "no")),
            disable_same_host: get(&["MC_DISABLE_SAME_HOST"])
                .is_some_and(|v| !matches!(v.trim(), "" | "0" | "false" | "no")),
            same_host_no_lease: get(&["MC_SAME_HOST_NO_LEASE"])
                .is_some_and(|v| !matches!(v.trim(), "" | "0" | "false" | "no")),
            busy_poll_us: num(&["MC_BUSY_POLL_US"], DEFAULT_BUSY_POLL_US, 0, 100_000) as u64,
            copy_helpers: number_in_range(
                get(&["MC_COPY_HELPERS"]).as_deref(),
                "MC_COPY_HELPERS",
                0,
                MAX_HELPERS as i64,
            )
            .map(|n| n as usize),
            rdma,
        }
    }
}

impl Config {
    /// The limits every listening socket of an engine applies.
    pub fn inbound_limits(&self) -> crate::runtime::conn_threads::ConnLimits {
        crate::runtime::conn_threads::ConnLimits::new(
            self.max_inbound_connections,
            self.max_inbound_per_peer,
        )
    }

    /// How long a TCP data connection may carry nothing before the target closes it.
    pub fn tcp_idle_timeout(&self) -> Option<std::time::Duration> {
        (self.tcp_idle_timeout_secs > 0)
            .then(|| std::time::Duration::from_secs(self.tcp_idle_timeout_secs))
    }
}

/// Applies upstream's validity rule to the RPC port range: below 1024, inside the
/// kernel's ephemeral range 32768-60999, or min > max falls back to the defaults.
fn rpc_port_range(min: i64, max: i64) -> (u16, u16) {
    let ephemeral = |p: i64| (32768..=60999).contains(&p);
    if min < 1024 || max < 1024 || min > max || ephemeral(min) || ephemeral(max) {
        if (min, max) != (DEFAULT_MIN_RPC_PORT.into(), DEFAULT_MAX_RPC_PORT.into()) {
            log::warn!("invalid MC_MIN_RPC_PORT/MC_MAX_RPC_PORT {min}-{max}; using defaults");
        }
        return (DEFAULT_MIN_RPC_PORT, DEFAULT_MAX_RPC_PORT);
    }
    (min as u16, max as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(vars: &[(&str, &str)]) -> Config {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_match_upstream() {
        let c = Config::default();
        assert_eq!((c.min_rpc_port, c.max_rpc_port), (15000, 17000));
        assert_eq!(c.handshake_port, 12001);
        assert_eq!(c.handshake_max_length, 1 << 20);
        assert_eq!(c.tcp_lanes_per_peer, DEFAULT_TCP_LANES as usize);
        assert!(!c.tcp_force_v1 && !c.force_tcp && c.cluster_id.is_none());
        assert_eq!(c.busy_poll_us, 100);
        assert_eq!(with(&[("MC_BUSY_POLL_US", "0")]).busy_poll_us, 0);
        assert_eq!(with(&[("MC_BUSY_POLL_US", "-5")]).busy_poll_us, 100);
        assert_eq!(c.copy_helpers, None);
        assert_eq!(with(&[("MC_COPY_HELPERS", "0")]).copy_helpers, Some(0));
        assert_eq!(with(&[("MC_COPY_HELPERS", "9")]).copy_helpers, None);
    }

    #[test]
    fn invalid_port_ranges_fall_back() {
        let c = with(&[("MC_MIN_RPC_PORT", "40000"), ("MC_MAX_RPC_PORT", "41000")]);
        assert_eq!((c.min_rpc_port, c.max_rpc_port), (15000, 17000));
        let c = with(&[("MC_MIN_PRC_PORT", "20000"), ("MC_MAX_PRC_PORT", "20010")]);
        assert_eq!((c.min_rpc_port, c.max_rpc_port), (20000, 20010));
    }

    #[test]
    fn out_of_range_values_are_ignored() {
        let c = with(&[
            ("MC_HANDSHAKE_MAX_LENGTH", "10"),
            ("MC_TCP_LANES_PER_PEER", "99"),
        ]);
        assert_eq!(c.handshake_max_length, 1 << 20);
        assert_eq!(c.tcp_lanes_per_peer, DEFAULT_TCP_LANES as usize);
        let c = with(&[
            ("MC_TCP_MAX_CONNECTIONS_PER_PEER", "8"),
            ("MC_TCP_PROTO", "1"),
        ]);
        assert_eq!(c.tcp_lanes_per_peer, 8);
        assert!(c.tcp_force_v1);
    }
}
