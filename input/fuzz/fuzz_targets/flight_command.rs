//! Fuzz target `flight_command`: arbitrary bytes into `iceflight_input::fuzzing::flight_command`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iceflight_input::fuzzing::flight_command(data));
