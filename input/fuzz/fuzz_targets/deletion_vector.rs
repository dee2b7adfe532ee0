//! Fuzz target `deletion_vector`: arbitrary bytes into `iceflight_input::fuzzing::deletion_vector`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iceflight_input::fuzzing::deletion_vector(data));
