#![no_main]
//! Fuzz target `size_strings`: see `mooncake_fuzz::checks::size_strings`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::size_strings(data));
