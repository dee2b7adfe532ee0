//! Which scans may wait for their dynamic filters (`iceflight.scan.dynamic_filter_wait`).
//!
//! ```text
//!   TopK / AggregateExec (no GROUP BY)   ← their filters complete only after the scan below ends
//!     HashJoinExec (Inner)               ← its filter completes when the build side is done
//!       build: …                            (independent of the probe scan)
//!       probe: IcebergScanExec           ← waiting here helps: later rows are pruned
//! ```
//!
//! A scan keeps its wait only when it sits on the probe side of an inner hash join (the only
//! join type with a dynamic filter in DataFusion 53.1) and no TopK or min/max aggregate above it
//! can push a filter to it: waiting on a filter whose producer reads this very scan would always
//! last the whole timeout. The rule runs after DataFusion's physical optimizer rules.

use std::sync::Arc;

use datafusion::common::JoinType;
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::sorts::sort::SortExec;

use crate::IcebergScanExec;

/// Clears the dynamic-filter wait of scans that cannot profit from it (see the module docs).
#[derive(Debug, Default)]
pub struct DynamicFilterWaitRule;

impl PhysicalOptimizerRule for DynamicFilterWaitRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        visit(plan, false, false)
    }

    fn name(&self) -> &str {
        "iceflight_dynamic_filter_wait"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

fn visit(
    plan: Arc<dyn ExecutionPlan>,
    join_probe: bool,
    under_scan_fed_filter: bool,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(scan) = plan.as_any().downcast_ref::<IcebergScanExec>() {
        if !join_probe || under_scan_fed_filter {
            if let Some(changed) = scan.without_dynamic_filter_wait() {
                return Ok(changed);
            }
        }
        return Ok(plan);
    }
    let any = plan.as_any();
    let fed = under_scan_fed_filter
        || any
            .downcast_ref::<SortExec>()
            .is_some_and(|s| s.fetch().is_some())
        || any.downcast_ref::<AggregateExec>().is_some_and(|a| {
            // DataFusion 53.1 builds an aggregate filter only for min/max without GROUP BY.
            a.group_expr().is_empty()
                && a.aggr_expr()
                    .iter()
                    .all(|e| matches!(e.fun().name(), "min" | "max"))
        });
    let inner_join = any
        .downcast_ref::<HashJoinExec>()
        .is_some_and(|j| *j.join_type() == JoinType::Inner);
    let children: Vec<Arc<dyn ExecutionPlan>> =
        plan.children().into_iter().map(Arc::clone).collect();
    if children.is_empty() {
        return Ok(plan);
    }
    let mut changed = false;
    let mut new_children = Vec::with_capacity(children.len());
    for (i, child) in children.iter().enumerate() {
        let probe = join_probe || (inner_join && i == 1);
        let new = visit(Arc::clone(child), probe, fed)?;
        changed |= !Arc::ptr_eq(&new, child);
        new_children.push(new);
    }
    if changed {
        plan.with_new_children(new_children)
    } else {
        Ok(plan)
    }
}
