//! Master protocols: the coro_rpc framing, the struct_pack codec, and the master's
//! RPC surface as Rust types.

pub mod master_api;
