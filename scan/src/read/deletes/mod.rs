//! Delete files: what positional and equality deletes share, and each kind applied
//! (`../README.md`).

pub(crate) mod delete_files;
pub(crate) mod equality_deletes;
pub(crate) mod positional_deletes;
