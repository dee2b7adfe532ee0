//! Writes: appends (`INSERT`, `CREATE TABLE AS`) and copy-on-write `DELETE`. Imports `model`,
//! `pushdown`, `plan`, `read`, `exec` (`README.md`).

pub(crate) mod delete;
pub mod delete_files;
pub mod overwrite;
pub mod row_change;
pub mod sink;
pub mod write_mode;
