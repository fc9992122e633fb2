#![no_main]
//! Fuzz target `coro_rpc_frame`: see `mooncake_fuzz::checks::coro_rpc_frame`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::coro_rpc_frame(data));
