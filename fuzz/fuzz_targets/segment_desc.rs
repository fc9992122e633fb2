#![no_main]
//! Fuzz target `segment_desc`: see `mooncake_fuzz::checks::segment_desc`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::segment_desc(data));
