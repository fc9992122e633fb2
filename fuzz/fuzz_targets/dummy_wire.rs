#![no_main]
//! Fuzz target `dummy_wire`: see `mooncake_fuzz::checks::dummy_wire`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::dummy_wire(data));
