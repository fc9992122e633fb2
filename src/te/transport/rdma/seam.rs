//! The RDMA transport behind the seam: its part of the descriptor, registering
//! memory with the NICs, the handshake it answers, the peers it reaches (those that
//! publish an `rdma` descriptor; the own segment only when nothing else does), and
//! starting requests on the workers.

use super::RdmaTransport;
use crate::error::Result;
use crate::metadata::SegmentDesc;
use crate::te::memory::Range;
use crate::te::transport::seam::{
    Destination, Group, Rank, SegmentKind, Started, Target, Transport,
};
use serde_json::Value;
use std::sync::Arc;

/// A segment reached over RDMA: its name and the descriptor its buffers come from.
struct RdmaPeer {
    segment: String,
    desc: Arc<SegmentDesc>,
}

/// The same segment through the same descriptor (one fetched again is another).
impl PartialEq for RdmaPeer {
    fn eq(&self, other: &RdmaPeer) -> bool {
        self.segment == other.segment && Arc::ptr_eq(&self.desc, &other.desc)
    }
}

impl Transport for RdmaTransport {
    fn name(&self) -> &'static str {
        "rdma"
    }

    /// Protocol `rdma` with the devices, keyed buffers and topology (over whatever
    /// TCP set), and the server name when it differs from the segment's.
    fn describe(&self, desc: &mut SegmentDesc) {
        let part = self.part();
        desc.protocol = "rdma".into();
        desc.buffers = part.plain_buffers();
        desc.rdma_server_name = (self.server() != desc.name).then(|| self.server().to_string());
        desc.rdma = Some(part);
    }

    fn register(
        &self,
        range: Range,
        location: &str,
        device: Option<u32>,
        remote: bool,
    ) -> Result<()> {
        RdmaTransport::register(self, range.addr, range.len, (location, device), remote)
    }

    fn unregister(&self, addr: u64) {
        RdmaTransport::unregister(self, addr);
    }

    fn on_handshake(&self, request: &Value) -> Option<Value> {
        Some(RdmaTransport::on_handshake(self, request))
    }

    fn shutdown(&self) {
        RdmaTransport::shutdown(self);
    }

    /// A peer's segment right after the own one; the own segment (looping back
    /// through the NIC) only when no other transport reaches it.
    fn rank(&self, kind: SegmentKind) -> Rank {
        match kind {
            SegmentKind::Own => Rank::LastResort,
            SegmentKind::Peer => Rank::Rdma,
        }
    }

    /// A peer that publishes an `rdma` descriptor; the own segment through the
    /// descriptor it publishes.
    fn reach(&self, target: &Target<'_>) -> Result<Option<Destination>> {
        let desc = match target.desc {
            Some(desc) if desc.protocol == "rdma" => desc.clone(),
            Some(_) => return Ok(None),
            None => match target.lookup.own_descriptor() {
                Some(own) => Arc::new(own),
                None => return Ok(None),
            },
        };
        Ok(Some(Destination::new(RdmaPeer {
            segment: target.name.to_string(),
            desc,
        })))
    }

    /// Each request on its own, sliced across the workers.
    fn start(self: Arc<Self>, group: &Group<'_>, out: &mut Vec<Started>) {
        let Some(peer) = group.destination::<RdmaPeer>(out) else {
            return;
        };
        for r in group.requests {
            let signal = Some(group.signal.clone());
            let task = self.submit(&peer.segment, &peer.desc, r, signal);
            out.push(Started::Task(task));
        }
    }
}
