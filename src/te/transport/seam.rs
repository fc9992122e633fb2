//! The one seam every installed transport implements: its name, its part of the
//! published segment descriptor, registered memory, the handshake it answers, and
//! shutdown. Moving bytes stays on each transport's own typed API, reached per batch
//! by the engine's router.

use crate::error::Result;
use crate::metadata::SegmentDesc;
use crate::te::memory::Range;
use serde_json::Value;
use std::any::Any;

/// An installed transport, as the engine's registry holds it.
pub trait Transport: Any + Send + Sync {
    /// The protocol name `install` and `has_transport` use (`tcp`, `rdma`, `same_host`).
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
}
