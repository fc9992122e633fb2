#![no_main]
//! Fuzz target `kv_event_payload`: see `mooncake_fuzz::checks::kv_event_payload`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::kv_event_payload(data));
