#![no_main]
//! Fuzz target `resp_reply`: see `mooncake_fuzz::checks::resp_reply`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::resp_reply(data));
