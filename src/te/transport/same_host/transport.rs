//! The same-host transport as the engine installs it: the listener that serves this
//! engine's memory to same-host peers, the initiator that copies to theirs, its part
//! of the descriptor (`mc_same_host`), and how a group of requests to one peer starts
//! (host memory all at once; what it cannot take falls back to the next transport).

use super::identity;
use super::target::SameHostTarget;
use super::{Request, SameHostError, SameHostInitiator};
use crate::config::Config;
use crate::error::Result;
use crate::metadata::{SameHostDesc, SegmentDesc};
use crate::te::batch::Task;
use crate::te::memory::MemoryRegistry;
use crate::te::transport::request::PeerRequest;
use crate::te::transport::seam::{
    Destination, Group, Rank, SegmentKind, Started, Target, Transport,
};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

/// How long a same-host target may take to grant a batch before it goes over TCP.
const GRANT_TIMEOUT: Duration = Duration::from_secs(1);

/// The installed same-host transport of one engine.
pub struct SameHostTransport {
    target: Mutex<SameHostTarget>,
    initiator: SameHostInitiator,
    /// The engine's registered memory (which local buffers are GPU memory).
    memory: Arc<MemoryRegistry>,
}

impl SameHostTransport {
    /// Starts serving `memory` to same-host peers; `None` when the path is disabled
    /// (`MC_DISABLE_SAME_HOST`), this host has no identity, or the listener cannot
    /// start (logged: same-host peers then use TCP).
    pub fn install(config: &Config, memory: Arc<MemoryRegistry>) -> Option<SameHostTransport> {
        if config.disable_same_host {
            return None;
        }
        identity::host_identity()?;
        let leases = !config.same_host_no_lease;
        match SameHostTarget::start(memory.clone(), config.inbound_limits(), leases) {
            Ok(target) => Some(SameHostTransport {
                target: Mutex::new(target),
                initiator: SameHostInitiator::new(GRANT_TIMEOUT),
                memory,
            }),
            Err(e) => {
                log::warn!("no same-host listener ({e}); same-host peers use TCP");
                None
            }
        }
    }

    /// The same-host socket of a peer described by `desc`, when it shares this
    /// host (same identity) and has not been found unusable.
    pub fn peer(&self, desc: &SameHostDesc) -> Option<String> {
        let mine = identity::host_identity()?;
        (desc.identity == mine && !self.initiator.is_unavailable(&desc.socket))
            .then(|| desc.socket.clone())
    }

    /// Moves requests to a same-host peer on the calling thread (see
    /// [`SameHostInitiator::transfer_all`]); one result per request.
    pub fn transfer(
        &self,
        socket: &str,
        reqs: &[PeerRequest],
    ) -> Vec<std::result::Result<(), SameHostError>> {
        let reqs: Vec<Request> = reqs
            .iter()
            .map(|r| Request {
                op: r.op,
                remote: r.remote,
                local: r.local,
                len: r.len,
            })
            .collect();
        self.initiator.transfer_all(socket, &reqs)
    }

    /// Bytes this engine moved over the same-host path as an initiator.
    pub fn bytes_moved(&self) -> u64 {
        self.initiator.bytes_moved()
    }

    /// Of [`SameHostTransport::bytes_moved`], those moved through peers' shared
    /// regions mapped here (no round trip to the peer).
    pub fn bytes_moved_mapped(&self) -> u64 {
        self.initiator.bytes_moved_mapped()
    }

    /// Bytes of peers' shared regions mapped here ahead of the copies.
    pub fn bytes_premapped(&self) -> u64 {
        self.initiator.bytes_premapped()
    }

    /// Of [`SameHostTransport::bytes_moved`], those moved through regions peers
    /// leased to this engine (no round trip to the peer).
    pub fn bytes_moved_leased(&self) -> u64 {
        self.initiator.bytes_moved_leased()
    }
}

impl Transport for SameHostTransport {
    fn name(&self) -> &'static str {
        "same_host"
    }

    /// Where same-host peers reach this engine (`mc_same_host`).
    fn describe(&self, desc: &mut SegmentDesc) {
        desc.same_host = identity::host_identity().map(|identity| SameHostDesc {
            identity: identity.to_string(),
            socket: self.target.lock().socket_name().to_string(),
        });
    }

    fn shutdown(&self) {
        self.target.lock().stop();
    }

    fn rank(&self, _kind: SegmentKind) -> Rank {
        Rank::SameHost
    }

    /// A peer on this host ([`SameHostTransport::peer`]): its socket.
    fn reach(&self, target: &Target<'_>) -> Result<Option<Destination>> {
        let same_host = target.desc.and_then(|d| d.same_host.as_ref());
        Ok(same_host.and_then(|sh| self.peer(sh)).map(Destination::new))
    }

    /// Several requests from host memory go in one pipelined exchange; else each on
    /// its own. Empty requests, GPU memory, and what the peer cannot take (no
    /// permission, GPU memory there) fall back.
    fn start(self: Arc<Self>, group: &Group<'_>, out: &mut Vec<Started>) {
        let Some(socket) = group.destination::<String>(out) else {
            return;
        };
        let requests = group.requests;
        let host_memory = |r: &PeerRequest| r.len != 0 && self.memory.gpu_of(r.local).is_none();
        if requests.len() >= 2 && requests.iter().all(&host_memory) {
            let results = self.transfer(socket, requests);
            out.extend(
                results
                    .into_iter()
                    .zip(requests)
                    .map(|(result, r)| outcome(result, r.len, false)),
            );
            return;
        }
        for r in requests {
            if !host_memory(r) {
                out.push(Started::FallBack { alone: group.alone });
                continue;
            }
            let result = self
                .transfer(socket, std::slice::from_ref(r))
                .into_iter()
                .next();
            out.push(match result {
                Some(result) => outcome(result, r.len, true),
                None => Started::Task(Task::failed(r.len)),
            });
        }
    }
}

/// What became of one request of `len` bytes; `alone`: it went on its own.
fn outcome(result: std::result::Result<(), SameHostError>, len: u64, alone: bool) -> Started {
    match result {
        Ok(()) => Started::Task(Task::done(len)),
        Err(SameHostError::Unavailable(_) | SameHostError::UseTcp) => Started::FallBack { alone },
        Err(e) => {
            log::warn!("same-host transfer failed: {e:?}");
            Started::Task(Task::failed(len))
        }
    }
}
