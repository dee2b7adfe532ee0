//! Reading one task: footers, the native Parquet reader, struct evolution, the opener, delete
//! files, the engine's caches and the scan's counters. Imports `model`, `pushdown`, `plan`
//! (`README.md`).

pub(crate) mod access_plan;
pub mod caches;
pub mod deletes;
pub mod footer;
pub(crate) mod metrics;
pub mod native_reader;
pub(crate) mod opener;
pub(crate) mod struct_evolution;
