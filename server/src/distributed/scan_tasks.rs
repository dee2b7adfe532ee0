//! How our scan takes part in datafusion-distributed's plans: how many tasks a scan wants, how
//! it is split among them, and how a worker re-attaches the dynamic filters of a decoded task.
//!
//! ```text
//!   coordinator: IcebergScanExec ──► desired_task_count: bytes to read / (bytes per partition
//!                × partitions per task) ──► scale_up: one scan per task (its share of the data
//!                files and row groups) in a DistributedLeafExec
//!   worker:      decoded task plan ──► relink_dynamic_filters: each scan's dynamic filters
//!                attached to their producers in the task, by expression id
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion_distributed::{
    DesiredTaskCountEvent, DesiredTaskCountEventResponse, DistributedConfig, DistributedLeafExec,
    ScaleUpLeafNodeEvent, ScaleUpLeafNodeEventResponse, WorkerPlanRewriteEvent,
    WorkerPlanRewriteEventResponse,
};
use iceflight_scan::IcebergScanExec;

/// Tasks an [`IcebergScanExec`] wants: the bytes of its data files' planned ranges over
/// `distributed.file_scan_config_bytes_per_partition` (16 MiB by default; the rule
/// datafusion-distributed applies to DataFusion's own file scans), divided by the partitions
/// one task runs (`target_partitions`), at least 1. The planner caps it at the live workers.
pub fn desired_task_count(
    event: DesiredTaskCountEvent<'_>,
) -> Option<Result<DesiredTaskCountEventResponse>> {
    let scan = event.plan.downcast_ref::<IcebergScanExec>()?;
    let per_partition = match DistributedConfig::from_session_config(event.session_config) {
        Ok(c) => c.file_scan_config_bytes_per_partition.max(1) as u64,
        Err(e) => return Some(Err(e)),
    };
    let partitions = event.session_config.target_partitions().max(1) as u64;
    let tasks = scan
        .planned_bytes()
        .div_ceil(per_partition)
        .div_ceil(partitions)
        .max(1);
    Some(Ok(DesiredTaskCountEventResponse::desired(tasks as usize)))
}

/// Splits an [`IcebergScanExec`] among `task_count` tasks
/// ([`IcebergScanExec::split_for_tasks`]); only task `i`'s scan is sent to the worker running
/// task `i`.
pub fn scale_up(event: ScaleUpLeafNodeEvent<'_>) -> Option<Result<ScaleUpLeafNodeEventResponse>> {
    let scan = event.plan.downcast_ref::<IcebergScanExec>()?;
    let variants = scan
        .split_for_tasks(event.task_count)
        .into_iter()
        .map(|s| Arc::new(s) as Arc<dyn ExecutionPlan>);
    Some(
        DistributedLeafExec::try_new(Arc::clone(event.plan), variants)
            .map(|leaf| ScaleUpLeafNodeEventResponse::new(Arc::new(leaf))),
    )
}

/// On a worker: attaches every scan's dynamic filters to their producers (hash joins, TopK
/// sorts, aggregates) in the same decoded task plan, matched by expression id
/// ([`IcebergScanExec::relink_dynamic_filters`]). datafusion-distributed 3.0 decodes a task
/// without datafusion-proto's deduplicating converter, so the scan's copy of a filter and the
/// producer's are separate objects until this runs; a filter whose producer is in another
/// stage is dropped from the scan.
pub fn relink_dynamic_filters(
    event: WorkerPlanRewriteEvent<'_>,
) -> Result<WorkerPlanRewriteEventResponse> {
    let mut producers: HashMap<u64, Arc<dyn PhysicalExpr>> = HashMap::new();
    event.plan.apply(|node| {
        let filter: Option<Arc<dyn PhysicalExpr>> =
            if let Some(join) = node.downcast_ref::<HashJoinExec>() {
                join.dynamic_filter_expr().map(|f| Arc::clone(f) as _)
            } else if let Some(sort) = node.downcast_ref::<SortExec>() {
                sort.dynamic_filter_expr().map(|f| f as _)
            } else if let Some(aggregate) = node.downcast_ref::<AggregateExec>() {
                aggregate.dynamic_filter_expr().map(|f| Arc::clone(f) as _)
            } else {
                None
            };
        if let Some(f) = filter
            && let Some(id) = f.expression_id()
        {
            producers.insert(id, f);
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    let plan = event
        .plan
        .transform_up(|node| {
            let Some(scan) = node.downcast_ref::<IcebergScanExec>() else {
                return Ok(Transformed::no(node));
            };
            Ok(match scan.relink_dynamic_filters(&producers)? {
                Some(linked) => Transformed::yes(Arc::new(linked) as Arc<dyn ExecutionPlan>),
                None => Transformed::no(node),
            })
        })?
        .data;
    Ok(WorkerPlanRewriteEventResponse::new(plan))
}
