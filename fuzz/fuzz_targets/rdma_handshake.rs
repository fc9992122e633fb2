#![no_main]
//! Fuzz target `rdma_handshake`: see `mooncake_fuzz::checks::rdma_handshake`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::rdma_handshake(data));
