//! Hash-join dynamic filters that would drop rows the join needs, removed before execution.
//!
//! DataFusion 54.1 builds a hash join's dynamic filter (build-side bounds and value set, pushed
//! to the probe scan) for every join type whose probe side is preserved, as if a NULL key matched
//! nothing. Two kinds of join need the probe side's NULL keys, and a scan that applies the filter
//! (row-group statistics or a row filter) drops them:
//!
//! - a **null-aware anti join** (`x NOT IN (subquery)`): one NULL in the subquery makes the
//!   result empty (`docs/cases.md`, c08); a filter that drops it, or that drops every subquery row
//!   while the outer side holds NULL, returns rows;
//! - a **null-equal join** (`IS NOT DISTINCT FROM`, `INTERSECT`): a NULL probe key matches a NULL
//!   build key (c04, c09).
//!
//! ```text
//!   HashJoinExec (null-aware or null-equal)  ── dynamic filter ──►  probe scan
//!       rebuilt without it: the scan keeps a filter that stays `true` (never updated)
//! ```
//!
//! Our scan already ignores these filters (`scan/src/exec/dynamic_filter_rule.rs`); this rule makes
//! DataFusion's own Parquet path (and anything else under such a join) right as well.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{NullEquality, Result};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::joins::HashJoinExec;

/// Rebuilds every null-aware or null-equal [`HashJoinExec`] that carries a dynamic filter without
/// it (see the module docs). Runs after DataFusion's filter pushdown, which installs the filters.
#[derive(Debug, Default)]
pub struct NullSafeJoinFilters;

impl PhysicalOptimizerRule for NullSafeJoinFilters {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(join) = node.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            let needs_nulls =
                join.null_aware || join.null_equality() == NullEquality::NullEqualsNull;
            if needs_nulls && join.dynamic_filter_expr().is_some() {
                Ok(Transformed::yes(join.builder().reset_state().build_exec()?))
            } else {
                Ok(Transformed::no(node))
            }
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "iceflight_null_safe_join_filters"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
