//! Fuzz target `auth_header`: arbitrary bytes into `iceflight_input::fuzzing::auth_header`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iceflight_input::fuzzing::auth_header(data));
