//! The RPC / handshake daemon (spec §3).
//!
//! One TCP connection carries exactly one request frame and one reply frame:
//! `u64 LE length | u8 type | compact JSON + "\n"` (see [`frame`]). The server
//! ([`RpcServer`]) answers the four message types through an [`RpcHandler`] supplied by
//! the engine; the client ([`RpcClient`]) sends one request and reads one reply.
//!
//! Upstream serves connections one at a time; this daemon serves them concurrently on a
//! small bounded worker pool, so a slow or silent peer cannot stall the others.

pub mod client;
pub mod frame;
pub mod server;

pub use client::RpcClient;
pub use frame::{encode_json, Frame, DEFAULT_MAX_FRAME_LEN};
pub use server::{RpcHandler, RpcServer};

/// The message type carried in a frame's type byte (spec §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MsgType {
    /// RDMA QP handshake (`HandShakeDesc`); also what a legacy untyped frame means.
    Connection = 0,
    /// P2P segment descriptor exchange.
    Metadata = 1,
    /// A notification message.
    Notify = 2,
    /// Liveness probe.
    Probe = 3,
}

impl MsgType {
    /// The type for a type byte, or `None` when the byte is not a known type (> 3).
    pub fn from_u8(byte: u8) -> Option<MsgType> {
        match byte {
            0 => Some(MsgType::Connection),
            1 => Some(MsgType::Metadata),
            2 => Some(MsgType::Notify),
            3 => Some(MsgType::Probe),
            _ => None,
        }
    }

    /// The wire value of this type.
    pub fn as_u8(self) -> u8 {
        self as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msg_type_round_trips() {
        for b in 0u8..=255 {
            match MsgType::from_u8(b) {
                Some(t) => assert_eq!(t.as_u8(), b),
                None => assert!(b > 3),
            }
        }
    }
}
