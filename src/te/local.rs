//! The engine's own segment: its name, registered memory, installed TCP transport,
//! the descriptor it publishes, and the RPC answers it gives peers.

use crate::metadata::{BufferDesc, SegmentDesc};
use crate::te::memory::MemoryRegistry;
use crate::te::rpc::RpcHandler;
use crate::te::transport::tcp::TcpTransport;
use parking_lot::{Mutex, RwLock};
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
    /// The TCP transport, once installed.
    pub tcp: RwLock<Option<Arc<TcpTransport>>>,
    /// Received notifies, oldest first.
    pub notifies: Mutex<VecDeque<Notify>>,
}

impl LocalSegment {
    /// The descriptor this engine publishes; `None` until a transport is installed.
    pub fn descriptor(&self) -> Option<SegmentDesc> {
        let port = self.tcp.read().as_ref()?.port();
        let buffers = self
            .memory
            .ranges()
            .into_iter()
            .map(|r| BufferDesc {
                name: self.name.clone(),
                addr: r.addr,
                length: r.len,
            })
            .collect();
        Some(SegmentDesc {
            name: self.name.clone(),
            protocol: "tcp".into(),
            tcp_data_port: port,
            tcp_proto_version: 2,
            tcp_data_host: Some(self.host.clone()),
            rdma_server_name: None,
            buffers,
        })
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

    fn on_connection(&self, _request: &Value) -> Value {
        json!({
            "local_gid": "", "local_lid": 0, "local_nic_path": "", "payload": "",
            "peer_nic_path": "", "qp_num": [], "reply_msg": ""
        })
    }
}
