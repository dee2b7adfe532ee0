//! iceflight's Iceberg scan: a DataFusion `TableProvider` and `ExecutionPlan` that read Iceberg
//! tables with our Parquet read path on parquet's async reader (iceberg-rust's reader for the
//! files it does not cover) and Iceberg semantics (field-id projection, schema evolution,
//! identity-partition constants, positional and null-safe equality deletes).
//!
//! ```text
//!   SQL ──► DataFusion planner ──► IcebergTableProvider::scan ──► IcebergScanExec ──► batches
//!                                   (predicate, plan_files)        (opener per task)
//! ```
//!
//! One concern per module: [`predicate`] (static filter conversion), [`metrics_index`] (manifest
//! metrics and statistics), [`domain`] and [`domain_cache`] (filters as per-column domains),
//! [`gate`] with [`layout`], [`prune`], [`footer`], [`row_groups`] and [`page_index`] (what
//! prunes where), [`opener`] and [`native_reader`] (reading one task), [`positional_deletes`],
//! [`equality_deletes`] and [`delete_files`], [`row_filter`] (live dynamic filters on rows),
//! [`metrics`], [`provider`], [`exec`]; writes in [`sink`] (appends), [`delete`]
//! (copy-on-write `DELETE`) and [`commit`] (the snapshots iceberg's transactions cannot
//! produce); the engine's caches in [`caches`]: the [`block_cache`]
//! (with its optional [`disk_tier`]) under every read (attributed per scan by [`io_scope`]),
//! footers, manifest metrics. See `README.md`.

pub mod aggregate_reduction;
pub mod block_cache;
pub mod caches;
pub mod codec;
pub(crate) mod columns;
pub mod commit;
pub mod data_file_error;
pub mod decimal_arithmetic;
pub(crate) mod delete;
pub(crate) mod delete_files;
pub mod dictionary_group_by;
pub mod disk_tier;
pub mod domain;
pub(crate) mod domain_cache;
pub(crate) mod dynamic_filter_rule;
pub(crate) mod equality_deletes;
pub(crate) mod exec;
pub(crate) mod expr_rewrite;
pub mod filter_selectivity;
pub mod footer;
pub(crate) mod gate;
pub(crate) mod integer_set;
pub(crate) mod io_scope;
pub mod join_order;
pub mod join_partition_mode;
pub(crate) mod layout;
pub mod like_segments;
pub(crate) mod metrics;
pub mod metrics_index;
pub mod native_reader;
pub(crate) mod opener;
pub(crate) mod options;
pub mod output;
pub(crate) mod page_index;
pub(crate) mod positional_deletes;
pub(crate) mod predicate;
pub(crate) mod provider;
pub(crate) mod prune;
pub(crate) mod row_filter;
pub(crate) mod row_groups;
pub mod shared_subplan;
pub mod sink;
pub(crate) mod struct_evolution;
pub mod time_travel;

pub use dynamic_filter_rule::DynamicFilterRule;

use std::sync::Arc;

use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::prelude::SessionConfig;

/// Registers the scan in a session being built: its settings (`iceflight.*`,
/// [`IceflightOptions`]) and the engine's `caches` in `config`, and its physical optimizer
/// rules in `rules`: [`filter_selectivity::FilterSelectivity`] before DataFusion's
/// `join_selection` (which picks build sides from the estimates it sets), and
/// [`DynamicFilterRule`] last (it needs the dynamic filters DataFusion's last filter-pushdown
/// pass puts in place). Returns the config.
pub fn register(
    config: SessionConfig,
    caches: Arc<caches::ScanCaches>,
    rules: &mut Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>>,
) -> SessionConfig {
    let at = rules
        .iter()
        .position(|r| r.name() == "join_selection")
        .unwrap_or(0);
    rules.insert(at, Arc::new(filter_selectivity::FilterSelectivity));
    rules.push(Arc::new(DynamicFilterRule));
    config
        .with_option_extension(IceflightOptions::default())
        .with_extension(caches)
}
pub use exec::IcebergScanExec;
pub use options::IceflightOptions;
pub use provider::IcebergTableProvider;
