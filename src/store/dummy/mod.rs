//! Dummy and real clients (upstream's `DummyClient` / `mooncake_client`): several
//! processes of one host share one real client, which owns the segment, the Transfer
//! Engine and the master connection. Dummies forward their operations over a Unix
//! socket; their data moves through shared memory both map ([`DummyServer`] on the
//! real client's side, [`DummyClient`] in each dummy process).
//!
//! The protocol is this project's own (`wire.rs`): upstream's dummy speaks coro_rpc
//! over TCP with ~45 handlers and cannot talk to this real client, nor ours to
//! upstream's.

pub mod address;
mod client;
mod data;
mod link;
mod server;
mod shared_memory;
pub mod wire;

pub use client::DummyClient;
pub use server::DummyServer;
