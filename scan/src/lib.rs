//! iceflight's Iceberg scan: a DataFusion `TableProvider` and `ExecutionPlan` that read Iceberg
//! tables with iceberg-rust's Parquet reader and Iceberg semantics (field-id projection, schema
//! evolution, identity-partition constants, positional and null-safe equality deletes).
//!
//! ```text
//!   SQL ──► DataFusion planner ──► IcebergTableProvider::scan ──► IcebergScanExec ──► batches
//!                                   (predicate, plan_files)        (per task reader)
//! ```
//!
//! One concern per module: [`predicate`] (static filter conversion), [`metrics_index`] (manifest
//! metrics and statistics), [`domain`] and [`domain_cache`] (filters as per-column domains),
//! [`gate`] with [`layout`], [`prune`], [`footer`] and [`row_groups`] (what prunes where),
//! [`equality_deletes`], [`provider`], [`exec`]; the engine's caches in [`caches`]: the
//! [`block_cache`] (with its optional [`disk_tier`]) under every read (attributed per scan by [`io_scope`]), footers,
//! manifest metrics. See `README.md`.

pub mod block_cache;
pub mod caches;
pub mod columns;
pub mod disk_tier;
pub mod domain;
pub mod domain_cache;
pub mod dynamic_filter_rule;
pub mod equality_deletes;
pub mod exec;
pub mod footer;
pub mod gate;
pub mod io_scope;
pub mod layout;
pub mod metrics;
pub mod metrics_index;
pub mod native_reader;
pub mod opener;
pub mod options;
pub mod page_index;
pub mod positional_deletes;
pub mod predicate;
pub mod provider;
pub mod prune;
pub mod row_filter;
pub mod row_groups;
pub mod struct_evolution;

pub use dynamic_filter_rule::DynamicFilterRule;
pub use exec::IcebergScanExec;
pub use options::IceflightOptions;
pub use provider::IcebergTableProvider;
