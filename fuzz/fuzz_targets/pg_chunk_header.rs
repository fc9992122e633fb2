#![no_main]
//! Fuzz target `pg_chunk_header`: see `mooncake_fuzz::checks::pg_chunk_header`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz::checks::pg_chunk_header(data));
