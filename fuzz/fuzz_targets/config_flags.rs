#![no_main]
//! Fuzz target `config_flags`: see `mooncake_fuzz::checks::config_flags`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::config_flags(data));
