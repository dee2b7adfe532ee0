//! Planning a scan: manifest metrics and statistics, the tasks of a snapshot, their split
//! across partitions, and the planned scan every `IcebergScanExec` is built from. Imports
//! `model`, `pushdown` (`README.md`).

pub mod metrics_index;
pub mod planned;
pub mod planner;
