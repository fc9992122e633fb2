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
mod msg_type;
pub mod server;

pub use client::RpcClient;
pub use frame::{encode_json, Frame, DEFAULT_MAX_FRAME_LEN};
pub use msg_type::MsgType;
pub use server::{RpcHandler, RpcServer};
