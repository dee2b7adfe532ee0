//! The table as DataFusion sees it: the provider façade and `register`. Imports every other
//! folder (`README.md`).

pub mod provider;
pub mod register;
pub mod row_change_target;
