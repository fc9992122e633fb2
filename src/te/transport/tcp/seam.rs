//! The TCP transport behind the seam: its part of the descriptor, the peers it
//! reaches (any that publishes a TCP port; the own segment over loopback), and how a
//! group of requests to one peer starts (small ones together on the calling thread,
//! GPU memory through the stager).

use super::{Endpoint, GpuRequest, TcpTransport, INLINE_MAX_BYTES};
use crate::error::Result;
use crate::metadata::{BufferDesc, SegmentDesc};
use crate::te::transport::seam::{
    Destination, Group, Rank, SegmentKind, Started, Target, Transport,
};
use std::sync::Arc;

impl Transport for TcpTransport {
    fn name(&self) -> &'static str {
        "tcp"
    }

    /// The data port and host, v2 framing; and, as the segment's only network
    /// transport, protocol `tcp` with every registered region as a buffer.
    fn describe(&self, desc: &mut SegmentDesc) {
        desc.tcp_data_port = self.port();
        desc.tcp_proto_version = 2;
        desc.tcp_data_host = Some(self.host.clone());
        if desc.protocol.is_empty() {
            desc.protocol = "tcp".into();
            desc.buffers = self
                .memory
                .ranges()
                .into_iter()
                .map(|r| BufferDesc {
                    name: desc.name.clone(),
                    addr: r.addr,
                    length: r.len,
                })
                .collect();
        }
    }

    fn shutdown(&self) {
        TcpTransport::shutdown(self);
    }

    fn rank(&self, _kind: SegmentKind) -> Rank {
        Rank::Tcp
    }

    /// The own segment over loopback; a peer that publishes a TCP port (an RDMA peer
    /// of this library does too) at its `tcp_data_host`, else its RPC host.
    fn reach(&self, target: &Target<'_>) -> Result<Option<Destination>> {
        let Some(desc) = target.desc else {
            return Ok(Some(Destination::new(Endpoint {
                host: self.loopback.into(),
                port: self.port(),
                v2: !self.force_v1,
            })));
        };
        if desc.protocol != "tcp" && desc.tcp_data_port == 0 {
            return Ok(None);
        }
        let host = match &desc.tcp_data_host {
            Some(h) => h.clone(),
            None => target.lookup.rpc_host(&desc.name)?,
        };
        Ok(Some(Destination::new(Endpoint {
            host,
            port: desc.tcp_data_port,
            v2: desc.tcp_proto_version >= 2 && !self.force_v1,
        })))
    }

    /// Several requests small enough together go as one pipelined run on the calling
    /// thread ([`TcpTransport::submit_small_batch`]); else each on its own, from GPU
    /// memory through the stager.
    fn start(self: Arc<Self>, group: &Group<'_>, out: &mut Vec<Started>) {
        let Some(endpoint) = group.destination::<Endpoint>(out) else {
            return;
        };
        let requests = group.requests;
        let total: u64 = requests.iter().map(|r| r.len).sum();
        if requests.len() >= 2
            && total <= INLINE_MAX_BYTES
            && !requests
                .iter()
                .any(|r| self.memory.gpu_of(r.local).is_some())
        {
            let tasks = self.submit_small_batch(endpoint, requests, group.signal);
            out.extend(tasks.into_iter().map(Started::Task));
            return;
        }
        for r in requests {
            let signal = Some(group.signal.clone());
            let task = match self.memory.gpu_of(r.local) {
                Some(gpu) => {
                    let job = GpuRequest {
                        endpoint,
                        req: r,
                        signal,
                        gpu,
                    };
                    self.stager.stage(self.clone(), job)
                }
                None => self.submit(endpoint, r, signal, group.alone),
            };
            out.push(Started::Task(task));
        }
    }
}
