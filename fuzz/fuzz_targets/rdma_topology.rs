#![no_main]
//! Fuzz target `rdma_topology`: see `mooncake_fuzz::checks::rdma_topology`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::rdma_topology(data));
