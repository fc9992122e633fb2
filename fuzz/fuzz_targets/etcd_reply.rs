#![no_main]
//! Fuzz target `etcd_reply`: see `mooncake_fuzz::checks::etcd_reply`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::etcd_reply(data));
