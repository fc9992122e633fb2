//! The one seam every installed transport implements: its name, its part of the
//! published segment descriptor, registered memory, the handshake it answers,
//! shutdown, and the data path: how well it reaches a target segment ([`Rank`],
//! [`Transport::reach`], giving its own [`Destination`]) and starting a group of
//! requests to one destination ([`Transport::start`]). The registry ranks the installed
//! transports whenever one comes or goes; the engine's router takes that ranking once
//! per submission and owns the fallback from one transport to the next.

use crate::error::Result;
use crate::metadata::SegmentDesc;
use crate::te::batch::{CompletionSignal, Task};
use crate::te::memory::Range;
use crate::te::transport::request::PeerRequest;
use serde_json::Value;
use std::any::Any;
use std::sync::Arc;

/// An installed transport, as the engine's registry holds it.
pub trait Transport: Any + Send + Sync {
    /// The protocol name `install` and `has_transport` use (`tcp`, `rdma`,
    /// `same_host`, `local`).
    fn name(&self) -> &'static str;

    /// Writes this transport's fields into the descriptor being published. A network
    /// transport that makes the segment reachable sets `protocol` (RDMA over TCP: TCP
    /// sets it only while it is empty) and the buffer list that goes with it.
    fn describe(&self, desc: &mut SegmentDesc);

    /// Registers a region with the transport's own hardware (the RDMA NICs); memory
    /// served from the engine's registry needs nothing.
    fn register(
        &self,
        _range: Range,
        _location: &str,
        _device: Option<u32>,
        _remote: bool,
    ) -> Result<()> {
        Ok(())
    }

    /// Forgets the region based at `addr` again (a region it never saw: nothing).
    fn unregister(&self, _addr: u64) {}

    /// Answers a peer's connection handshake RPC, when this transport has one.
    fn on_handshake(&self, _request: &Value) -> Option<Value> {
        None
    }

    /// Stops serving and moving: listeners, workers, connections.
    fn shutdown(&self);

    /// Where it stands among the transports for segments of `kind`: the router asks
    /// them from the highest rank down and takes the first that reaches a target.
    fn rank(&self, kind: SegmentKind) -> Rank;

    /// Its destination for `target`, `None` when it does not reach it; an error fails
    /// the whole submission (the peer's address cannot be looked up).
    fn reach(&self, target: &Target<'_>) -> Result<Option<Destination>>;

    /// Starts a group of requests to one of its own destinations: one [`Started`] per
    /// request onto `out`, in order.
    fn start(self: Arc<Self>, group: &Group<'_>, out: &mut Vec<Started>);
}

/// Whose segment a request targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentKind {
    /// The engine's own.
    Own,
    /// A peer's.
    Peer,
}

/// How directly a transport reaches a segment; the router prefers the highest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rank {
    /// Only when nothing else does (RDMA looping back to the own segment).
    LastResort,
    /// Through the peer's TCP listener.
    Tcp,
    /// Copied between two processes of this host.
    SameHost,
    /// Over RDMA, to a peer that publishes an `rdma` descriptor.
    Rdma,
    /// Copied within this process, to the own segment.
    OwnSegment,
}

/// A segment a transport is asked to reach.
pub struct Target<'a> {
    /// The segment's name.
    pub name: &'a str,
    /// Its descriptor; `None` for the engine's own segment.
    pub desc: Option<&'a Arc<SegmentDesc>>,
    /// What the engine looks up for transports on the way.
    pub lookup: &'a dyn Lookup,
}

impl Target<'_> {
    /// Whose segment it is.
    pub fn kind(&self) -> SegmentKind {
        match self.desc {
            Some(_) => SegmentKind::Peer,
            None => SegmentKind::Own,
        }
    }
}

/// What the engine answers a transport reaching a [`Target`].
pub trait Lookup {
    /// The descriptor the engine publishes for its own segment (`None` while no
    /// network transport makes it reachable).
    fn own_descriptor(&self) -> Option<SegmentDesc>;

    /// The host the RPC daemon of segment `segment` listens on.
    fn rpc_host(&self, segment: &str) -> Result<String>;
}

/// Where one transport reaches a target, in that transport's own terms (a TCP
/// endpoint, a same-host socket, an RDMA segment): only the transport that made it
/// reads it. Two are equal when they are of one type and equal as that type.
pub struct Destination(Box<dyn Place>);

impl Destination {
    /// Wraps a transport's own destination.
    pub fn new<T: Any + PartialEq>(place: T) -> Destination {
        Destination(Box::new(place))
    }

    /// The transport's own destination, when it is a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref()
    }
}

impl PartialEq for Destination {
    fn eq(&self, other: &Destination) -> bool {
        self.0.same(other.0.as_ref())
    }
}

/// A transport's own destination type, compared behind [`Destination`].
trait Place: Any {
    fn as_any(&self) -> &dyn Any;
    fn same(&self, other: &dyn Place) -> bool;
}

impl<T: Any + PartialEq> Place for T {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn same(&self, other: &dyn Place) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
}

/// Requests that start together, all to one destination.
pub struct Group<'a> {
    /// Where they go (made by the starting transport's own [`Transport::reach`]).
    pub to: &'a Destination,
    /// The requests, in submission order.
    pub requests: &'a [PeerRequest],
    /// The submission's signal, which their tasks complete.
    pub signal: &'a Arc<CompletionSignal>,
    /// The group is a whole submission of one request: a small one may be moved on
    /// the calling thread.
    pub alone: bool,
}

impl Group<'_> {
    /// The destination as the transport's own `T`; `None` (and every request failed
    /// onto `out`) for one another transport made.
    pub fn destination<T: Any>(&self, out: &mut Vec<Started>) -> Option<&T> {
        let to = self.to.get::<T>();
        if to.is_none() {
            let failed = self.requests.iter().map(|r| Task::failed(r.len));
            out.extend(failed.map(Started::Task));
        }
        to
    }
}

/// What a transport did with one request of a group.
pub enum Started {
    /// It took the request: its task.
    Task(Arc<Task>),
    /// It cannot take it and moved nothing: the router starts it on the next
    /// transport that reaches the target, with `alone` as [`Group::alone`].
    FallBack {
        /// Whether the request may be moved on the calling thread there.
        alone: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_are_equal_only_as_one_type() {
        let socket = Destination::new(String::from("a"));
        assert!(socket == Destination::new(String::from("a")));
        assert!(socket != Destination::new(String::from("b")));
        assert!(Destination::new(1u16) != Destination::new(1u32));
        assert_eq!(socket.get::<String>().map(String::as_str), Some("a"));
        assert!(socket.get::<u16>().is_none());
    }

    #[test]
    fn a_foreign_destination_fails_the_whole_group() {
        let signal = Arc::new(CompletionSignal::default());
        let requests = [PeerRequest {
            op: crate::te::transport::request::Op::Write,
            local: 1,
            remote: 2,
            len: 3,
        }; 2];
        let to = Destination::new(());
        let group = Group {
            to: &to,
            requests: &requests,
            signal: &signal,
            alone: false,
        };
        let mut out = Vec::new();
        assert!(group.destination::<String>(&mut out).is_none());
        assert_eq!(out.len(), 2);
        assert!(group.destination::<()>(&mut Vec::new()).is_some());
    }

    #[test]
    fn ranks_order_as_the_router_prefers() {
        assert!(Rank::OwnSegment > Rank::Rdma);
        assert!(Rank::Rdma > Rank::SameHost);
        assert!(Rank::SameHost > Rank::Tcp);
        assert!(Rank::Tcp > Rank::LastResort);
    }
}
