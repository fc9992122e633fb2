//! Where an HA cluster names its leader, as upstream: the key
//! `mooncake-store/<cluster_id>/master_view` in etcd or Redis holds the leader's RPC
//! `ip:port`. The master's election writes it and clients following the leader read
//! it, so both take it from here.

/// Upstream's default `--cluster_id` (and `MC_STORE_CLUSTER_ID`).
pub const DEFAULT_CLUSTER_ID: &str = "mooncake_cluster";

/// The `master_view` key of cluster `cluster_id`.
pub fn master_view_key(cluster_id: &str) -> String {
    format!("mooncake-store/{cluster_id}/master_view")
}
