//! Fuzz target `sql_rewrites`: arbitrary bytes into `iceflight_input::fuzzing::sql_rewrites`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iceflight_input::fuzzing::sql_rewrites(data));
