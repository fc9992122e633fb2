#![no_main]
//! Fuzz target `ha_record`: see `mooncake_fuzz::checks::ha_record`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::ha_record(data));
