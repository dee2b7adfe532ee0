//! Generated data for benchmarks and tests, and its loading into an Iceberg catalog with
//! iceberg's own writer: TPC-H (tpchgen, equal to dbgen's), SSB (from TPC-H), and the
//! nested-field table. `iceflight load`, `iceflight demo`, the benchmarks and the tests use it;
//! the engine never does.
//!
//! ```text
//!   tpch / ssb / nested ──► Arrow batches ──► load (sort, split, write Parquet, commit) ──► catalog
//! ```

pub mod load;
pub mod nested;
pub(crate) mod ssb;
pub(crate) mod tpch;
