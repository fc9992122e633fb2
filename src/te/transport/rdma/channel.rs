//! How the RDMA transport reaches peers' RPC daemons: the channel the engine provides
//! for QP handshakes and for peers' published devices.

use crate::error::Result;
use serde_json::Value;

/// How the transport reaches peers' RPC daemons (the engine provides it).
pub trait HandshakeChannel: Send + Sync {
    /// Sends `msg` as a type-0 RPC to the daemon of segment `segment` and returns the
    /// reply.
    fn exchange(&self, segment: &str, msg: &Value) -> Result<Value>;
    /// `(gid, lid)` of `device` as segment `segment` publishes it.
    fn peer_device(&self, segment: &str, device: &str) -> Option<(String, u16)>;
}
