//! Fuzz target `parameters`: arbitrary bytes into `iceflight_input::fuzzing::parameters`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iceflight_input::fuzzing::parameters(data));
