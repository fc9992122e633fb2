//! Connecting to a remote master over coro_rpc: directly (`host:port`), or to the
//! leader named in etcd (`etcd://ep1;ep2`, [`super::leader`]).

use super::error::{Doing, StoreError, StoreResult};
use crate::wire::master_api::{ErrorCode, MasterApi};
use crate::wire::rpc_client::MasterRpcClient;
use std::sync::Arc;
use std::time::Duration;

/// Connects to the master at `addr` (`host:port`) with the given RPC deadline and
/// connect timeout (`MC_RPC_TIMEOUT_MS`, `MC_RPC_CONNECT_TIMEOUT_MS`); the client
/// checks `ServiceReady` and reconnects by itself after failures. `etcd://ep1;ep2`
/// (or `redis://host:port`) follows the leader of cluster `MC_STORE_CLUSTER_ID`
/// (default `mooncake_cluster`).
pub fn connect_master(
    addr: &str,
    rpc_timeout: Duration,
    connect_timeout: Duration,
) -> Result<Arc<dyn MasterApi>, ErrorCode> {
    connect(addr, rpc_timeout, connect_timeout).map_err(StoreError::logged)
}

/// [`connect_master`], the cause of a failure returned with its code.
pub(crate) fn connect(
    addr: &str,
    rpc_timeout: Duration,
    connect_timeout: Duration,
) -> StoreResult<Arc<dyn MasterApi>> {
    if addr.starts_with("etcd://") || addr.starts_with("redis://") {
        let cluster = std::env::var("MC_STORE_CLUSTER_ID")
            .ok()
            .filter(|c| !c.trim().is_empty())
            .unwrap_or_else(|| crate::wire::master_view::DEFAULT_CLUSTER_ID.into());
        let master = super::leader::FollowingMaster::connect(
            addr,
            cluster.trim(),
            rpc_timeout,
            connect_timeout,
        )
        .doing(format_args!("following the master leader in {addr}"))?;
        return Ok(master);
    }
    if let Some((scheme, _)) = addr.split_once("://") {
        return Err(StoreError::invalid(format!(
            "master address '{addr}': '{scheme}://' is not supported (etcd://, redis://)"
        )));
    }
    let client = MasterRpcClient::connect(addr, rpc_timeout, connect_timeout)
        .doing(format_args!("connecting to the master at {addr}"))?;
    Ok(Arc::new(client))
}
