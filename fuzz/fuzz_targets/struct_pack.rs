#![no_main]
//! Fuzz target `struct_pack`: see `mooncake_fuzz::checks::struct_pack_any`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::struct_pack_any(data));
