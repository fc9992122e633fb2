//! The RDMA transport's `MC_*` variables (spec transfer-engine.md §6.2), with
//! upstream's defaults and ranges; out-of-range values are ignored with a warning.

use super::lookup::{comma_list, number_in_range};

/// RDMA tunables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaConfig {
    /// `MC_IB_PORT` (1-255): the port used on every NIC.
    pub ib_port: u8,
    /// `MC_GID_INDEX` (fallback `NCCL_IB_GID_INDEX`): a fixed GID index; `None` = auto.
    pub gid_index: Option<u8>,
    /// `MC_PKEY_INDEX`.
    pub pkey_index: u16,
    /// `MC_MAX_CQE_PER_CTX`: completion queue depth.
    pub max_cqe: u32,
    /// `MC_MAX_EP_PER_CTX`: endpoints per NIC before the oldest is evicted.
    pub max_endpoints: usize,
    /// `MC_NUM_QP_PER_EP`: queue pairs per endpoint (must match the peer).
    pub qp_per_endpoint: usize,
    /// `MC_MAX_SGE`.
    pub max_sge: u32,
    /// `MC_MAX_WR`: work requests in flight per queue pair.
    pub max_wr: u32,
    /// `MC_MAX_INLINE`.
    pub max_inline: u32,
    /// `MC_MTU` in bytes (512-4096).
    pub mtu: u32,
    /// `MC_WORKERS_PER_CTX` (1-8): worker threads per NIC.
    pub workers_per_nic: usize,
    /// `MC_SLICE_SIZE`: bytes per work request.
    pub slice_size: u64,
    /// Tail merge: a remainder up to this many bytes past a slice joins it
    /// (`MC_FRAGMENT_RATIO`: slice / ratio; default 16384).
    pub fragment_limit: u64,
    /// `MC_RETRY_CNT` (1-127): attempts per slice.
    pub retry_count: u32,
    /// `MC_MAX_MR_SIZE`: largest memory region; longer buffers are split.
    pub max_mr_size: u64,
    /// `MC_IB_TC`: traffic class.
    pub traffic_class: Option<u8>,
    /// `MC_IB_SL`: service level.
    pub service_level: u8,
    /// `MC_IB_PCI_RELAXED_ORDERING` != 0: relaxed ordering where supported.
    pub relaxed_ordering: bool,
    /// `MC_TE_FILTERS`: allow-list of device names for discovery.
    pub device_filter: Vec<String>,
    /// `MC_PATH_ROUNDROBIN`: round-robin NIC choice instead of random.
    pub round_robin: bool,
    /// `MC_RDMA_BIND_ADDRESS`: host used in NIC paths and `rdma_server_name`.
    pub bind_address: Option<String>,
    /// `MC_FORCE_HCA`: install RDMA on auto-discover even without a usable NIC.
    pub force_hca: bool,
    /// `MC_CUSTOM_TOPO_JSON`: a topology file used instead of discovery.
    pub custom_topology: Option<String>,
    /// `MC_SLICE_TIMEOUT` in seconds: a posted slice older than this fails.
    pub slice_timeout_secs: Option<u64>,
    /// `MC_RDMA_COMPLETION_TIMEOUT` in seconds (ours; default 30): a queue pair whose
    /// oldest request has had no completion for this long lost it (the NIC's own
    /// retries give up within seconds); its requests are retried on fresh QPs.
    pub completion_timeout: std::time::Duration,
    /// `MC_RDMA_HANDSHAKE_TIMEOUT` in seconds (ours; default 15): how long an active
    /// QP handshake waits for the peer's reply before the slices try another path.
    pub handshake_timeout: std::time::Duration,
}

impl RdmaConfig {
    /// Reads the variables through `get`.
    pub fn from_lookup(get: &dyn Fn(&str) -> Option<String>) -> RdmaConfig {
        let num = |name: &str, default: i64, lo: i64, hi: i64| -> i64 {
            number_in_range(get(name).as_deref(), name, lo, hi).unwrap_or(default)
        };
        // `-1` (below every range here) means "unset", without a warning.
        let opt = |name: &str, lo: i64, hi: i64| -> Option<i64> {
            let value = get(name);
            if value.as_deref().map(|v| v.trim().parse::<i64>()) == Some(Ok(-1)) {
                return None;
            }
            number_in_range(value.as_deref(), name, lo, hi)
        };
        let slice_size = num("MC_SLICE_SIZE", 65536, 1, 1 << 30) as u64;
        let fragment_limit = match opt("MC_FRAGMENT_RATIO", 1, 1 << 20) {
            Some(ratio) => slice_size / ratio as u64,
            None => 16384,
        };
        let mtu = match num("MC_MTU", 4096, 512, 4096) {
            m @ (512 | 1024 | 2048 | 4096) => m as u32,
            _ => {
                log::warn!("ignoring MC_MTU: not 512, 1024, 2048 or 4096");
                4096
            }
        };
        let flag = |name: &str| {
            get(name).is_some_and(|v| {
                matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "1" | "true" | "yes" | "on"
                )
            })
        };
        RdmaConfig {
            ib_port: num("MC_IB_PORT", 1, 1, 255) as u8,
            gid_index: opt("MC_GID_INDEX", 0, 255)
                .or_else(|| opt("NCCL_IB_GID_INDEX", 0, 255))
                .map(|v| v as u8),
            pkey_index: num("MC_PKEY_INDEX", 0, 0, 65535) as u16,
            max_cqe: num("MC_MAX_CQE_PER_CTX", 4096, 1, 1 << 22) as u32,
            max_endpoints: num("MC_MAX_EP_PER_CTX", 65535, 1, 65535) as usize,
            qp_per_endpoint: num("MC_NUM_QP_PER_EP", 2, 1, 64) as usize,
            max_sge: num("MC_MAX_SGE", 4, 1, 64) as u32,
            max_wr: num("MC_MAX_WR", 256, 1, 65535) as u32,
            max_inline: num("MC_MAX_INLINE", 64, 0, 65535) as u32,
            mtu,
            workers_per_nic: num("MC_WORKERS_PER_CTX", 2, 1, 8) as usize,
            slice_size,
            fragment_limit,
            retry_count: num("MC_RETRY_CNT", 9, 1, 127) as u32,
            max_mr_size: num("MC_MAX_MR_SIZE", 1 << 40, 1 << 20, i64::MAX) as u64,
            traffic_class: opt("MC_IB_TC", 0, 255).map(|v| v as u8),
            service_level: opt("MC_IB_SL", 0, 15).unwrap_or(0) as u8,
            relaxed_ordering: num("MC_IB_PCI_RELAXED_ORDERING", 1, 0, 2) != 0,
            device_filter: get("MC_TE_FILTERS")
                .map(|v| comma_list(&v))
                .unwrap_or_default(),
            round_robin: flag("MC_PATH_ROUNDROBIN"),
            bind_address: get("MC_RDMA_BIND_ADDRESS").filter(|s| !s.trim().is_empty()),
            force_hca: get("MC_FORCE_HCA").is_some(),
            custom_topology: get("MC_CUSTOM_TOPO_JSON").filter(|s| !s.trim().is_empty()),
            slice_timeout_secs: opt("MC_SLICE_TIMEOUT", 1, 86_400).map(|v| v as u64),
            completion_timeout: std::time::Duration::from_secs(num(
                "MC_RDMA_COMPLETION_TIMEOUT",
                30,
                1,
                86_400,
            ) as u64),
            handshake_timeout: std::time::Duration::from_secs(num(
                "MC_RDMA_HANDSHAKE_TIMEOUT",
                15,
                1,
                3600,
            ) as u64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(vars: &[(&str, &str)]) -> RdmaConfig {
        let map: HashMap<&str, &str> = vars.iter().copied().collect();
        RdmaConfig::from_lookup(&|k| map.get(k).map(|v| v.to_string()))
    }

    #[test]
    fn upstream_defaults() {
        let c = with(&[]);
        assert_eq!((c.ib_port, c.gid_index, c.qp_per_endpoint), (1, None, 2));
        assert_eq!(
            (c.max_wr, c.max_sge, c.max_inline, c.mtu),
            (256, 4, 64, 4096)
        );
        assert_eq!(
            (c.slice_size, c.fragment_limit, c.retry_count),
            (65536, 16384, 9)
        );
        assert_eq!((c.workers_per_nic, c.max_cqe), (2, 4096));
        assert_eq!(c.max_mr_size, 1 << 40);
        assert!(c.relaxed_ordering && !c.round_robin && !c.force_hca);
    }

    #[test]
    fn overrides_and_bad_values() {
        let c = with(&[
            ("MC_GID_INDEX", "3"),
            ("MC_NUM_QP_PER_EP", "4"),
            ("MC_SLICE_SIZE", "131072"),
            ("MC_FRAGMENT_RATIO", "4"),
            ("MC_MTU", "1000"),
            ("MC_TE_FILTERS", "mlx5_0, mlx5_1"),
            ("MC_WORKERS_PER_CTX", "99"),
        ]);
        assert_eq!((c.gid_index, c.qp_per_endpoint), (Some(3), 4));
        assert_eq!((c.slice_size, c.fragment_limit), (131072, 32768));
        assert_eq!((c.mtu, c.workers_per_nic), (4096, 2));
        assert_eq!(c.device_filter, vec!["mlx5_0", "mlx5_1"]);
        assert_eq!(with(&[("NCCL_IB_GID_INDEX", "1")]).gid_index, Some(1));
        assert_eq!(with(&[("MC_GID_INDEX", "-1")]).gid_index, None);
    }
}
