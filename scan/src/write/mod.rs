//! Writes: appends (`INSERT`, `CREATE TABLE AS`), `INSERT OVERWRITE`, copy-on-write `DELETE`,
//! and the row changes of `UPDATE`, `MERGE` and merge-on-read `DELETE`. Imports `model`,
//! `pushdown`, `plan`, `read`, `exec` (`README.md`).

pub mod data_files;
pub(crate) mod delete;
pub mod delete_files;
pub mod not_null;
pub mod optimize;
pub mod overwrite;
pub mod row_change;
pub mod sink;
pub mod write_mode;
pub mod zorder;
