#![no_main]
//! Fuzz target `http_request`: see `mooncake_fuzz::checks::http_request`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::http_request(data));
