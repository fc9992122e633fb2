//! The data line's router: each request of a submission goes to the first installed
//! transport, by [`Rank`](crate::te::transport::seam::Rank), that reaches its segment (own segment > RDMA > same host >
//! TCP; RDMA looping back to the own segment last); a whole submission to one
//! destination starts as one group, and what a transport cannot take falls back to
//! the next transport that reaches the target (same host to TCP).

use super::request::TransferRequest;
use super::state::{Inner, TransferEngine};
use crate::error::{Error, Result};
use crate::metadata::SegmentDesc;
use crate::te::batch::{CompletionSignal, Task};
use crate::te::segment::LOCAL_SEGMENT_ID;
use crate::te::transport::registry::Installed;
use crate::te::transport::request::PeerRequest;
use crate::te::transport::seam::{
    Destination, Group, Lookup, SegmentKind, Started, Target, Transport,
};
use std::sync::Arc;

impl TransferEngine {
    /// Submits requests into a batch; tasks accumulate in submission order.
    pub fn submit(&self, batch_id: u64, requests: &[TransferRequest]) -> Result<()> {
        self.submit_pinned(batch_id, requests, &[])
    }

    /// [`TransferEngine::submit`] with request `i` pinned to the transport named
    /// `pins[i]` when given (`"tcp"`, `"rdma"`, `"same_host"`, `"local"`): it goes
    /// only there, with no fallback; a pinned transport that does not reach the
    /// request's segment refuses the whole submission.
    pub fn submit_pinned(
        &self,
        batch_id: u64,
        requests: &[TransferRequest],
        pins: &[Option<&'static str>],
    ) -> Result<()> {
        let batch = self.inner.batches.get(batch_id)?;
        let router = Router::new(&self.inner);
        let routes = requests
            .iter()
            .enumerate()
            .map(|(i, r)| router.route(r, pins.get(i).copied().flatten()))
            .collect::<Result<Vec<_>>>()?;
        let mut reservation = batch.reserve(requests.len())?;
        let signal = batch.signal();
        router.start(requests, &routes, &signal, &mut |t| reservation.push(t));
        Ok(())
    }
}

impl Lookup for Inner {
    fn own_descriptor(&self) -> Option<SegmentDesc> {
        self.local.descriptor()
    }

    fn rpc_host(&self, segment: &str) -> Result<String> {
        Ok(self.rpc_address(segment)?.0)
    }
}

/// The segment one request goes to: `None` for the own one, else a peer's name and
/// descriptor.
type Segment = Option<(String, Arc<SegmentDesc>)>;

/// A transport that reaches a segment: its place in the ranked list for the
/// segment's kind, and its destination there.
struct Hop {
    at: usize,
    to: Destination,
}

/// Where one request goes: its segment (kept for a fallback), the first transport
/// that reaches it, and the transport it is pinned to (no fallback then).
struct Route {
    segment: Segment,
    hop: Hop,
    pin: Option<&'static str>,
}

/// The transports installed when a submission started (ranked for each kind of
/// segment when they were installed) and the engine they route for: taken once per
/// submission, not per request.
struct Router<'a> {
    inner: &'a Inner,
    installed: Arc<Installed>,
}

impl<'a> Router<'a> {
    fn new(inner: &'a Inner) -> Router<'a> {
        Router {
            inner,
            installed: inner.local.transports.ranked(),
        }
    }

    /// The transports for `segment`, best first.
    fn ranked(&self, segment: &Segment) -> &[Arc<dyn Transport>] {
        self.installed.ranked(match segment {
            None => SegmentKind::Own,
            Some(_) => SegmentKind::Peer,
        })
    }

    /// The first transport from place `from` on (named `pin`, when given) that
    /// reaches `segment`.
    fn reach(
        &self,
        segment: &Segment,
        from: usize,
        pin: Option<&'static str>,
    ) -> Result<Option<Hop>> {
        let target = Target {
            name: segment
                .as_ref()
                .map_or(&self.inner.local.name, |(name, _)| name),
            desc: segment.as_ref().map(|(_, desc)| desc),
            lookup: self.inner,
        };
        for (at, transport) in self.ranked(segment).iter().enumerate().skip(from) {
            if pin.is_some_and(|p| p != transport.name()) {
                continue;
            }
            if let Some(to) = transport.reach(&target)? {
                return Ok(Some(Hop { at, to }));
            }
        }
        Ok(None)
    }

    fn route(&self, req: &TransferRequest, pin: Option<&'static str>) -> Result<Route> {
        if req.length > 0 && req.source == 0 {
            return Err(Error::InvalidArgument("request source is NULL".into()));
        }
        let inner = self.inner;
        let segment = if req.target_id == LOCAL_SEGMENT_ID {
            None
        } else {
            let (name, desc) = inner.segment(req.target_id)?;
            let desc = if inner.config.disable_metacache {
                let fresh = Arc::new(inner.fetch_descriptor(&name)?);
                inner.segments.replace(&name, fresh.clone());
                fresh
            } else {
                desc
            };
            Some((name, desc))
        };
        match (self.reach(&segment, 0, pin)?, &segment) {
            (Some(hop), _) => Ok(Route { segment, hop, pin }),
            (None, _) if pin.is_some() => Err(Error::NotSupportedTransport(format!(
                "transport '{}' does not reach segment '{}'",
                pin.unwrap_or_default(),
                segment
                    .as_ref()
                    .map_or(inner.local.name.as_str(), |(name, _)| name.as_str())
            ))),
            (None, None) => Err(Error::NotSupportedTransport(
                "no transport installed for the local segment".into(),
            )),
            (None, Some((name, desc))) => Err(Error::NotSupportedTransport(format!(
                "segment '{name}' uses protocol '{}', which is not installed here",
                desc.protocol
            ))),
        }
    }

    /// Starts every request on its route, `push`ing one task per request in order: a
    /// submission of several requests to one destination as one group, else each on
    /// its own.
    fn start(
        &self,
        requests: &[TransferRequest],
        routes: &[Route],
        signal: &Arc<CompletionSignal>,
        push: &mut dyn FnMut(Arc<Task>),
    ) {
        let mut started = Vec::with_capacity(requests.len());
        let Some(first) = routes.first() else {
            return;
        };
        let one_destination = routes.iter().all(|r| {
            r.segment.is_some() == first.segment.is_some()
                && r.hop.at == first.hop.at
                && r.hop.to == first.hop.to
        });
        if requests.len() >= 2 && one_destination {
            let peer: Vec<PeerRequest> = requests.iter().map(PeerRequest::from).collect();
            let group = Group {
                to: &first.hop.to,
                requests: &peer,
                signal,
                alone: false,
            };
            self.ranked(&first.segment)[first.hop.at]
                .clone()
                .start(&group, &mut started);
            for ((req, route), outcome) in requests.iter().zip(routes).zip(started) {
                push(self.settle(req, route, outcome, signal));
            }
            return;
        }
        let alone = requests.len() == 1;
        for (req, route) in requests.iter().zip(routes) {
            let outcome =
                self.start_alone(req, &route.segment, &route.hop, signal, alone, &mut started);
            push(self.settle(req, route, outcome, signal));
        }
    }

    /// Starts one request on its own on the transport of `hop` for `segment`.
    fn start_alone(
        &self,
        req: &TransferRequest,
        segment: &Segment,
        hop: &Hop,
        signal: &Arc<CompletionSignal>,
        alone: bool,
        scratch: &mut Vec<Started>,
    ) -> Started {
        let peer = PeerRequest::from(req);
        let group = Group {
            to: &hop.to,
            requests: std::slice::from_ref(&peer),
            signal,
            alone,
        };
        self.ranked(segment)[hop.at].clone().start(&group, scratch);
        let outcome = scratch.pop();
        scratch.clear();
        outcome.unwrap_or_else(|| Started::Task(Task::failed(req.length)))
    }

    /// The task of a request its transport started; one that fell back is started on
    /// the next transport that reaches its segment, and so on.
    fn settle(
        &self,
        req: &TransferRequest,
        route: &Route,
        outcome: Started,
        signal: &Arc<CompletionSignal>,
    ) -> Arc<Task> {
        let mut outcome = outcome;
        let mut at = route.hop.at;
        let mut scratch = Vec::new();
        loop {
            let alone = match outcome {
                Started::Task(task) => return task,
                Started::FallBack { alone } => alone,
            };
            if route.pin.is_some() {
                // Pinned: no other transport may take it.
                return Task::failed(req.length);
            }
            let next = match self.reach(&route.segment, at + 1, None) {
                Ok(Some(next)) => next,
                Ok(None) => return Task::failed(req.length),
                Err(e) => {
                    log::warn!("no transport to fall back to: {e}");
                    return Task::failed(req.length);
                }
            };
            at = next.at;
            outcome = self.start_alone(req, &route.segment, &next, signal, alone, &mut scratch);
        }
    }
}
