//! Physical optimizer rule: a hash join builds one hash table from its whole build side
//! (DataFusion's `PartitionMode::CollectLeft`) unless repartitioning both sides costs less.
//!
//! ```text
//!   HashJoinExec(mode=Auto), estimated rows: build B = the side JoinSelection will build on
//!     (the smaller by bytes, else by rows, where it may swap), probe R = the other
//!     P = datafusion.execution.target_partitions
//!     collect   ≈ B·h            + R·p / P      one build task; P probe tasks on one table
//!     partition ≈ (B + R)·r / P  + B·h / P + R·p / P   both sides hash-repartitioned first
//!     with r ≈ h (a repartition hashes and copies a row; an insert hashes and stores it):
//!     collect when B·(P − 2) ≤ R  ──► mode=CollectLeft (JoinSelection keeps B on the left)
//!     else, or a size unknown     ──► mode=Auto (DataFusion's thresholds decide)
//! ```
//!
//! **Why.** DataFusion 54.1 collects a build side only under 1 MiB (or, its size unknown,
//! 128 Ki rows; `hash_join_single_partition_threshold[_rows]`); above that it
//! hash-repartitions both sides, so at TPC-H SF 10 every lineitem row that reaches a join with orders is hashed and copied
//! once more before the probe. On 2 partitions the collected build side won on every query at
//! SF 10 and all but q18 at SF 1 (same-run A/B, `bench/reports/issue32-progress-20261205.md`:
//! the 22 queries 40.4 against 35.6 s at SF 10, 3.02 against 2.89 s at SF 1; q20 2.22 against
//! 1.32 s, q08 3.09 against 2.39 s; q18 at SF 1 275 against 243 ms, why in the report). A collected build side also hands the probe-side scan one dynamic filter
//! (an IN list or bounds, `row_filter.rs`) instead of one per hash partition inside a `CASE`.
//!
//! With more partitions the serial build leaves P − 1 of them idle for B·h, so large build
//! sides go back to repartitioning; the model's crossover for P > 2 is not measured here (this
//! machine has 2 cores). Memory is the same either way: DataFusion's hash join does not spill,
//! and the partitioned tables together hold the same rows.

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};

/// Marks hash joins whose build side is cheaper collected than repartitioned as
/// `CollectLeft` before DataFusion's `JoinSelection` (module docs). Runs only where
/// `iceflight.optimizer.collect_build_side` is on; a join with either side's row count
/// unknown keeps `Auto`.
#[derive(Debug, Default)]
pub struct JoinPartitionMode;

impl PhysicalOptimizerRule for JoinPartitionMode {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !iceflight_options::IceflightOptions::of(config)
            .optimizer
            .collect_build_side
        {
            return Ok(plan);
        }
        let partitions = config.execution.target_partitions;
        plan.transform_up(|node| {
            let Some(join) = node.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            if *join.partition_mode() != PartitionMode::Auto {
                return Ok(Transformed::no(node));
            }
            let left = join.left().partition_statistics(None)?;
            let right = join.right().partition_statistics(None)?;
            let (Some(&left_rows), Some(&right_rows)) =
                (left.num_rows.get_value(), right.num_rows.get_value())
            else {
                return Ok(Transformed::no(node));
            };
            // The side `JoinSelection` will build on: the left one, swapped when reordering is
            // allowed and the left is larger, by bytes where both are known, else by rows
            // (its `should_swap_join_order`).
            let swap = config.optimizer.join_reordering
                && join.join_type().supports_swap()
                && !join.null_aware
                && match (
                    left.total_byte_size.get_value(),
                    right.total_byte_size.get_value(),
                ) {
                    (Some(l), Some(r)) => l > r,
                    _ => left_rows > right_rows,
                };
            let (build, probe) = if swap {
                (right_rows, left_rows)
            } else {
                (left_rows, right_rows)
            };
            if !collect_pays(build, probe, partitions) {
                return Ok(Transformed::no(node));
            }
            let collected = join
                .builder()
                .with_partition_mode(PartitionMode::CollectLeft)
                .build()?;
            Ok(Transformed::yes(
                Arc::new(collected) as Arc<dyn ExecutionPlan>
            ))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "join_partition_mode"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Whether a build side of `build` rows is cheaper collected into one hash table than both
/// sides repartitioned over `partitions` (`build · (partitions − 2) ≤ probe`, module docs).
/// One or two partitions always collect.
pub fn collect_pays(build: usize, probe: usize, partitions: usize) -> bool {
    (build as u128) * (partitions.saturating_sub(2) as u128) <= probe as u128
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_partitions_always_collect() {
        assert!(collect_pays(15_000_000, 15_000_000, 2));
        assert!(collect_pays(usize::MAX, 1, 1));
    }

    #[test]
    fn more_partitions_collect_only_small_build_sides() {
        // 8 partitions: a build side up to a sixth of the probe side.
        assert!(collect_pays(1_000_000, 6_000_000, 8));
        assert!(!collect_pays(1_000_001, 6_000_000, 8));
        assert!(!collect_pays(usize::MAX, usize::MAX, 64));
    }
}
