//! Fuzz target `flight_action`: arbitrary bytes into `iceflight_input::fuzzing::flight_action`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iceflight_input::fuzzing::flight_action(data));
