//! Fuzz target `config`: arbitrary bytes into `iceflight_input::fuzzing::config`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iceflight_input::fuzzing::config(data));
