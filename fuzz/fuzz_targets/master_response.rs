#![no_main]
//! Fuzz target `master_response`: see `mooncake_fuzz::checks::master_response`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::master_response(data));
