//! What the plan above a scan proves about its dynamic filters: whether waiting for them can
//! help (`iceflight.scan.dynamic_filter_wait`) and whether they reject NULL.
//!
//! ```text
//!   TopK / AggregateExec (no GROUP BY)   ← their filters complete only after the scan below ends
//!     HashJoinExec (Inner)               ← its filter completes when the build side is done
//!       build: …                            (independent of the probe scan)
//!       probe: IcebergScanExec           ← waiting here helps: later rows are pruned
//! ```
//!
//! A scan keeps its wait only when it sits on the probe side of an inner hash join and no TopK or
//! min/max aggregate above it can push a filter to it: waiting on a filter whose producer reads
//! this very scan would always last the whole timeout. DataFusion 54.1 also gives semi, anti,
//! left and mark joins a filter on their probe side (`scan/tests/dynamic_filter_shapes.rs`);
//! their scans use it but do not wait for it. The rule runs after DataFusion's physical optimizer
//! rules (and after `NullSafeJoinFilters`, which removes the filters of null-aware and null-equal
//! joins before any scan could use them).
//!
//! **NULL.** A dynamic filter does not say whether its join is null-equal (`IS NOT DISTINCT
//! FROM`, where a NULL probe key must reach the join, case c04). So the rule decides per scan
//! ([`DynamicNulls`]):
//! - on the subquery side of a null-aware anti join (`NOT IN (subquery)`, where one NULL key
//!   empties the result): the scan uses none of its pushed filters, static ones included
//!   (DataFusion pushes parent filters on the key into that side);
//! - a null-equal hash join above: the dynamic filters prune nothing (unproven);
//! - only inner `=` hash joins above and only they can push to it: a NULL key never joins, NULL
//!   is rejected;
//! - otherwise (TopK, min/max aggregates, other joins above): NULL passes every comparison and
//!   IN list.
//!
//! A scan the rule never saw uses no dynamic filter. Rejecting NULL matters most for nested join
//! keys, whose leaf null counts are never trusted (case c01): a domain that lets NULL pass could
//! prune nothing there.

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::{JoinType, NullEquality};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::sorts::sort::SortExec;

use crate::exec::scan_exec::DynamicNulls;
use crate::exec::scan_exec::IcebergScanExec;

/// Clears the dynamic-filter wait of scans that cannot profit from it and sets what each scan's
/// dynamic filters may assume about NULL (see the module docs).
#[derive(Debug, Default)]
pub struct DynamicFilterRule;

impl PhysicalOptimizerRule for DynamicFilterRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        visit(plan, Above::default())
    }

    fn name(&self) -> &str {
        "iceflight_dynamic_filters"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// What the operators between the root and a node can do to the node's dynamic filters.
#[derive(Debug, Clone, Copy, Default)]
struct Above {
    /// On the probe side of an inner hash join.
    join_probe: bool,
    /// Under a TopK or a min/max aggregate (filters fed by the scan itself).
    scan_fed_filter: bool,
    /// Under a null-equal hash join (`IS NOT DISTINCT FROM`).
    null_equal_join: bool,
    /// Under a hash join that is not an inner `=` join (its filters' NULL handling is not the
    /// join's).
    other_join: bool,
    /// On the subquery (right) side of a null-aware anti join (`NOT IN (subquery)`): a NULL key
    /// there empties the result, so no pushed filter may drop one.
    null_aware_join: bool,
}

fn visit(plan: Arc<dyn ExecutionPlan>, above: Above) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(scan) = plan.downcast_ref::<IcebergScanExec>() {
        if above.null_aware_join {
            return Ok(scan.without_pushed_filters().unwrap_or(plan));
        }
        let only_joins = above.join_probe && !above.scan_fed_filter;
        let mut scan = match scan.without_dynamic_filter_wait().filter(|_| !only_joins) {
            Some(changed) => changed,
            None => Arc::clone(&plan),
        };
        let nulls = if above.null_equal_join {
            DynamicNulls::Unproven
        } else if only_joins && !above.other_join {
            DynamicNulls::Rejected
        } else {
            DynamicNulls::MayPass
        };
        let exec = scan
            .downcast_ref::<IcebergScanExec>()
            .expect("an IcebergScanExec");
        if let Some(changed) = exec.with_dynamic_nulls(nulls) {
            scan = changed;
        }
        return Ok(scan);
    }
    let any: &dyn ExecutionPlan = plan.as_ref();
    let fed = above.scan_fed_filter
        || any
            .downcast_ref::<SortExec>()
            .is_some_and(|s| s.fetch().is_some())
        || any.downcast_ref::<AggregateExec>().is_some_and(|a| {
            // DataFusion 54.1 builds an aggregate filter only for min/max without GROUP BY.
            a.group_expr().is_empty()
                && a.aggr_expr().iter().all(|e| {
                    let name = e.fun().name();
                    name.eq_ignore_ascii_case("min") || name.eq_ignore_ascii_case("max")
                })
        });
    let join = any.downcast_ref::<HashJoinExec>();
    let inner_join = join.is_some_and(|j| *j.join_type() == JoinType::Inner);
    let null_equal = above.null_equal_join
        || join.is_some_and(|j| j.null_equality() == NullEquality::NullEqualsNull);
    let other_join = above.other_join || (join.is_some() && !inner_join);
    // The subquery side of `NOT IN` is the null-aware join's right child; filters pushed to its
    // left (preserved) side keep SQL semantics.
    let null_aware = join.is_some_and(|j| j.null_aware);
    let children: Vec<Arc<dyn ExecutionPlan>> =
        plan.children().into_iter().map(Arc::clone).collect();
    if children.is_empty() {
        return Ok(plan);
    }
    let mut changed = false;
    let mut new_children = Vec::with_capacity(children.len());
    for (i, child) in children.iter().enumerate() {
        let child_above = Above {
            join_probe: above.join_probe || (inner_join && i == 1),
            scan_fed_filter: fed,
            null_equal_join: null_equal,
            other_join,
            null_aware_join: above.null_aware_join || (null_aware && i == 1),
        };
        let new = visit(Arc::clone(child), child_above)?;
        changed |= !Arc::ptr_eq(&new, child);
        new_children.push(new);
    }
    if changed {
        plan.with_new_children(new_children)
    } else {
        Ok(plan)
    }
}
