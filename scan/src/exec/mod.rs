//! The `IcebergScanExec` node and the physical rules that rewrite it. Imports `model`,
//! `pushdown`, `plan`, `read` (`README.md`).

pub mod dictionary_group_by;
pub(crate) mod dynamic_filter_rule;
pub(crate) mod proven_filter_rule;
pub mod scan_exec;
pub mod shared_subplan;
