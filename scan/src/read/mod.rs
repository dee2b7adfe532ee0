//! Reading one task: footers, the native Parquet reader, struct evolution, the opener, delete
//! files, the engine's caches, the scan's counters and the workload record. Imports `model`, `pushdown`, `plan`
//! (`README.md`).

pub(crate) mod access_plan;
pub mod caches;
pub mod deletes;
pub mod footer;
pub(crate) mod metrics;
pub mod native_reader;
pub(crate) mod opener;
pub(crate) mod struct_evolution;
pub mod table_access;
