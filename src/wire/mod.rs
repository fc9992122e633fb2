//! Master protocols: the coro_rpc framing, the struct_pack codec, and the master's
//! RPC surface as Rust types.
//!
//! * [`struct_pack`]: the codec (type literals, hashes, payloads).
//! * [`coro_rpc`]: headers, function ids, the method table, frame I/O.
//! * [`master_rpcs`]: the RPC table, each master RPC declared once; the traits, the
//!   codec's markers, the client stubs, the dispatch arms and the forwarders are made
//!   from it ([`wire_arg`] converts the arguments).
//! * [`master_types`]: the RPCs' argument and result types ([`master_api`] re-exports
//!   them with the [`master_api::MasterApi`] trait).
//! * [`codec`]: encodings of the [`master_api`] types and every RPC's signature.
//! * [`disk_tier_api`]: the disk-tier RPCs ([`disk_tier_api::DiskTierApi`]).
//! * [`dispatch`]: the server side (decode, call a [`master_api::MasterApi`], encode).
//! * [`kv_key_hash`]: the block hash a store key stands for (KV events, conductor).
//! * [`master_view`]: where an HA cluster names its leader (master and clients).
//! * [`offload_rpc`]: the RPCs a client's SSD tier serves to readers.
//! * [`rpc_client`]: [`rpc_client::MasterRpcClient`], a `MasterApi` over TCP.

pub mod codec;
pub mod coro_rpc;
pub mod disk_tier_api;
pub mod dispatch;
pub mod kv_key_hash;
pub mod master_api;
pub(crate) mod master_rpcs;
pub mod master_types;
pub mod master_view;
pub mod offload_rpc;
pub mod rpc_client;
pub mod rpc_metrics;
pub mod struct_pack;
mod struct_pack_std;
pub mod task_payload;
pub mod wire_arg;

#[cfg(test)]
mod codec_tests;
#[cfg(test)]
mod struct_pack_tests;
