//! The engine's own segment: its name, registered memory, installed transports, the
//! descriptor it publishes, and the RPC answers it gives peers.

use crate::metadata::SegmentDesc;
use crate::te::memory::MemoryRegistry;
use crate::te::rpc::RpcHandler;
use crate::te::transport::registry::Registry;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::Arc;

/// A notify message received from a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notify {
    /// Sender-chosen name.
    pub name: String,
    /// Message body.
    pub msg: String,
}

/// State of the engine's own segment, shared with the RPC daemon.
pub struct LocalSegment {
    /// Segment name peers open.
    pub name: String,
    /// Host published as `tcp_data_host` and in `rpc_meta`.
    pub host: String,
    /// Registered regions.
    pub memory: Arc<MemoryRegistry>,
    /// The installed transports.
    pub transports: Registry,
    /// Received notifies, oldest first.
    pub notifies: Mutex<VecDeque<Notify>>,
}

impl LocalSegment {
    /// The descriptor this engine publishes, each installed transport's part; `None`
    /// until a network transport is installed. With RDMA installed it is an `rdma`
    /// descriptor (which also carries the TCP port when TCP is installed, for peers of
    /// this library without RDMA).
    pub fn descriptor(&self) -> Option<SegmentDesc> {
        self.transports.descriptor(&self.name)
    }

    /// Removes and returns every queued notify.
    pub fn drain_notifies(&self) -> Vec<Notify> {
        self.notifies.lock().drain(..).collect()
    }
}

/// Answers RPCs for a [`LocalSegment`].
pub struct LocalRpcHandler(pub Arc<LocalSegment>);

impl RpcHandler for LocalRpcHandler {
    fn local_descriptor(&self) -> Option<Value> {
        self.0.descriptor().map(|d| d.to_json())
    }

    fn on_notify(&self, name: String, msg: String) {
        self.0.notifies.lock().push_back(Notify { name, msg });
    }

    fn on_connection(&self, request: &Value) -> Value {
        let answer = self
            .0
            .transports
            .all()
            .iter()
            .find_map(|t| t.on_handshake(request));
        answer.unwrap_or_else(|| {
            json!({
                "local_gid": "", "local_lid": 0, "local_nic_path": "", "payload": "",
                "peer_nic_path": "", "qp_num": [], "reply_msg": ""
            })
        })
    }
}
