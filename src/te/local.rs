//! The engine's own segment: its name, registered memory, installed transports, the
//! descriptor it publishes, and the RPC answers it gives peers.

use crate::metadata::{BufferDesc, SegmentDesc};
use crate::te::memory::MemoryRegistry;
use crate::te::rpc::RpcHandler;
use crate::te::transport::rdma::RdmaTransport;
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
    /// The RDMA transport, once installed.
    pub rdma: RwLock<Option<Arc<RdmaTransport>>>,
    /// Received notifies, oldest first.
    pub notifies: Mutex<VecDeque<Notify>>,
}

impl LocalSegment {
    /// The descriptor this engine publishes; `None` until a transport is installed.
    /// With RDMA installed it is an `rdma` descriptor (which also carries the TCP port
    /// when TCP is installed, for peers of this library without RDMA).
    pub fn descriptor(&self) -> Option<SegmentDesc> {
        let tcp_port = self.tcp.read().as_ref().map(|t| t.port());
        let same_host = self.tcp.read().as_ref().and_then(|t| t.same_host_desc());
        if let Some(rdma) = self.rdma.read().as_ref() {
            let part = rdma.describe();
            let buffers = part.plain_buffers();
            return Some(SegmentDesc {
                name: self.name.clone(),
                protocol: "rdma".into(),
                tcp_data_port: tcp_port.unwrap_or(0),
                tcp_proto_version: if tcp_port.is_some() { 2 } else { 1 },
                tcp_data_host: tcp_port.map(|_| self.host.clone()),
                rdma_server_name: (rdma.server() != self.name).then(|| rdma.server().to_string()),
                buffers,
                rdma: Some(part),
                same_host,
            });
        }
        let port = tcp_port?;
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
            rdma: None,
            buffers,
            same_host,
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

    fn on_connection(&self, request: &Value) -> Value {
        if let Some(rdma) = self.0.rdma.read().clone() {
            return rdma.on_handshake(request);
        }
        json!({
            "local_gid": "", "local_lid": 0, "local_nic_path": "", "payload": "",
            "peer_nic_path": "", "qp_num": [], "reply_msg": ""
        })
    }
}
