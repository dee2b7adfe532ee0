//! Fuzz target `jwt`: arbitrary bytes into `iceflight_input::fuzzing::jwt`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iceflight_input::fuzzing::jwt(data));
