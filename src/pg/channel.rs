//! [`Channel`]: what the collective algorithms need from the wire — exchanging whole
//! messages with several peers at once — so they run over the Transfer Engine
//! ([`super::link`]) in production and over in-memory queues in their unit tests.

use super::error::PgResult;
use crate::codec::code_enum::code_enum;

code_enum! {
    /// What an operation is, carried in every chunk so ranks that disagree fail with a
    /// clear error instead of mixing data.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum OpKind: u32 {
        /// Barrier.
        Barrier = 1,
        /// Broadcast.
        Broadcast = 2,
        /// All-reduce.
        AllReduce = 3,
        /// Reduce.
        Reduce = 4,
        /// All-gather.
        AllGather = 5,
        /// Reduce-scatter.
        ReduceScatter = 6,
        /// All-to-all.
        AllToAll = 7,
        /// Gather.
        Gather = 8,
        /// Scatter.
        Scatter = 9,
        /// Point-to-point send/recv.
        PointToPoint = 10,
    }
}

impl OpKind {
    /// The operation's name, for errors.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Barrier => "barrier",
            OpKind::Broadcast => "broadcast",
            OpKind::AllReduce => "all_reduce",
            OpKind::Reduce => "reduce",
            OpKind::AllGather => "all_gather",
            OpKind::ReduceScatter => "reduce_scatter",
            OpKind::AllToAll => "all_to_all",
            OpKind::Gather => "gather",
            OpKind::Scatter => "scatter",
            OpKind::PointToPoint => "send/recv",
        }
    }
}

/// One message to send: the peer (in-group rank) and the bytes.
pub type Send<'a> = (usize, &'a [u8]);

/// One message to receive: the peer (in-group rank) and its exact length.
pub type Recv = (usize, usize);

/// Moves whole messages between this rank and its peers.
pub trait Channel {
    /// The largest message a single chunk carries: collectives below it take the
    /// one-round (latency-optimal) algorithms.
    fn chunk_bytes(&self) -> usize;

    /// Sends every message of `sends` and receives every message of `recvs`,
    /// interleaved chunk by chunk so that peers doing the same never wait on each
    /// other in a cycle. Each received chunk is handed to `sink(index into recvs,
    /// offset in that message, bytes)` in order within its message. A peer whose
    /// message has another length or another operation kind fails the call
    /// (`Mismatch`); a peer that does not answer in time fails it (`PeerFailed`).
    fn exchange(
        &mut self,
        kind: OpKind,
        sends: &[Send<'_>],
        recvs: &[Recv],
        sink: &mut dyn FnMut(usize, usize, &[u8]),
    ) -> PgResult<()>;
}
