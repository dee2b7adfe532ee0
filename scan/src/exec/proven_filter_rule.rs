//! A filter every row of an Iceberg scan passes, proven from the planned files' identity
//! partition values, is dropped; the scan then reports what its manifests know exactly, so
//! DataFusion's `AggregateStatistics` answers `count(*)`, `count(col)`, `min` and `max` under a
//! partition filter without opening a data file.
//!
//! ```text
//!   AggregateExec count(*)                     AggregateExec count(*)   ← AggregateStatistics:
//!     FilterExec region = 'EU'         ──►       IcebergScanExec            a literal, no scan
//!       IcebergScanExec                            (exact statistics)
//!         every planned file: region = 'EU' (identity partition value)
//! ```
//!
//! The proof is `IcebergScanExec::proves`: every column the predicate reads is
//! identity-partitioned in each planned file's spec, so each row of the file holds the
//! partition value (the Iceberg spec), and the predicate is true on those values; files that
//! planning pruned hold no row that passes. Dropping such a filter keeps every row it kept. A
//! filter with a projection or a row limit of its own, a volatile one (`random()`), or one
//! over anything but a scan, stays. The rule runs
//! before `AggregateStatistics` (`table/register.rs`).

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;

use crate::exec::scan_exec::IcebergScanExec;

/// Drops a `FilterExec` directly over an [`IcebergScanExec`] that proves its predicate (module
/// docs).
#[derive(Debug, Default)]
pub struct ProvenFilterRule;

impl PhysicalOptimizerRule for ProvenFilterRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(filter) = node.downcast_ref::<FilterExec>() else {
                return Ok(Transformed::no(node));
            };
            let Some(scan) = filter.input().downcast_ref::<IcebergScanExec>() else {
                return Ok(Transformed::no(node));
            };
            if filter.projection().is_some()
                || filter.fetch().is_some()
                || !scan.proves(filter.predicate())
            {
                return Ok(Transformed::no(node));
            }
            Ok(Transformed::yes(
                Arc::new(scan.with_proven_filter()) as Arc<dyn ExecutionPlan>
            ))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "iceflight_proven_filter"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
