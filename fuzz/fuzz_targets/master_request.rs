#![no_main]
//! Fuzz target `master_request`: see `mooncake_fuzz::checks::master_request`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::master_request(data));
