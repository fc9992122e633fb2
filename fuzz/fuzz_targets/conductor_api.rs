#![no_main]
//! Fuzz target `conductor_api`: see `mooncake_fuzz::checks::conductor_api`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::conductor_api(data));
