//! Connecting to a remote master over coro_rpc.

use crate::wire::master_api::{ErrorCode, MasterApi};
use crate::wire::rpc_client::MasterRpcClient;
use std::sync::Arc;
use std::time::Duration;

/// Connects to the master at `addr` (`host:port`) with the given RPC deadline and
/// connect timeout (`MC_RPC_TIMEOUT_MS`, `MC_RPC_CONNECT_TIMEOUT_MS`); the client
/// checks `ServiceReady` and reconnects by itself after failures.
pub fn connect_master(
    addr: &str,
    rpc_timeout: Duration,
    connect_timeout: Duration,
) -> Result<Arc<dyn MasterApi>, ErrorCode> {
    let client = MasterRpcClient::connect(addr, rpc_timeout, connect_timeout)?;
    Ok(Arc::new(client))
}
