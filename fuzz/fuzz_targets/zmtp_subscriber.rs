#![no_main]
//! Fuzz target `zmtp_subscriber`: see `mooncake_fuzz::checks::zmtp_subscriber`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::zmtp_subscriber(data));
