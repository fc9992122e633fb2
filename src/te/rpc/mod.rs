//! The RPC / handshake daemon (spec §3).
