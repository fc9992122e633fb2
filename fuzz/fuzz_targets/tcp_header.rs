#![no_main]
//! Fuzz target `tcp_header`: see `mooncake_fuzz::checks::tcp_header`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::tcp_header(data));
