#![no_main]
//! Fuzz target `rpc_frame`: see `mooncake_fuzz::checks::rpc_frame`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::rpc_frame(data));
