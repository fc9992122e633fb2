#![no_main]
//! Fuzz target `same_host_wire`: see `mooncake_fuzz::checks::same_host_wire`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::same_host_wire(data));
