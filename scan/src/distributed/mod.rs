//! The scan across processes: the codec that sends a planned scan to a worker. Imports
//! `model`, `pushdown`, `plan`, `read`, `exec` (`README.md`).

pub mod codec;
