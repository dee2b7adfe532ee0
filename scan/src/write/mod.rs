//! Writes: appends (`INSERT`, `CREATE TABLE AS`) and copy-on-write `DELETE`. Imports `model`,
//! `pushdown`, `plan`, `read`, `exec` (`README.md`).

pub(crate) mod delete;
pub mod sink;
