//! Physical optimizer rule: an outer join does not pass on the constants of the side it
//! null-extends.
//!
//! ```text
//!   HashJoinExec(Right, on n_nationkey = c_nationkey)         n_name reported constant
//!     FilterExec(n_name = 'GERMANY')   ← nation, null-extended
//!     customer
//!   ──►
//!   HashJoinExec(Right, on n_nationkey = c_nationkey)         no constant
//!     UnionExec
//!       FilterExec(n_name = 'GERMANY')
//!       EmptyExec(one empty partition)
//!     customer
//! ```
//!
//! **Why.** DataFusion 54.1 gives an outer join's output the constants of both inputs
//! (`EquivalenceGroup::join` treats Left, Right and Full like Inner). A filter on the
//! null-extended side makes its column a constant there, but the join's unmatched rows hold
//! NULL in it. Every rule that trusts the constant then goes wrong:
//! `customer LEFT JOIN nation ON c_nationkey = n_nationkey AND n_name = 'GERMANY' ORDER BY
//! n_name NULLS FIRST, c_custkey` sorted by `c_custkey` alone (the sort dropped the "constant"
//! key), so NULL and 'GERMANY' rows came out interleaved and a `LIMIT` took the wrong rows.
//!
//! **How.** The null-extended input goes under a union with an empty input: DataFusion's union
//! keeps only the constants every input shares, and the empty input has none. The rows and
//! columns are the input's own, with one more (empty) partition; its orderings and hash
//! partitioning are forgotten too (`EnforceDistribution` and `EnforceSorting` put back what
//! the join requires). Only inputs that have a constant are wrapped. Runs first among the physical rules, so that the others (sort
//! enforcement, `constant_group_keys`) see the join's true properties.

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::logical_expr::JoinType;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::joins::{
    HashJoinExec, NestedLoopJoinExec, PiecewiseMergeJoinExec, SortMergeJoinExec,
    SymmetricHashJoinExec,
};
use datafusion::physical_plan::union::UnionExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};

/// The rule (module docs). Always on: it changes no row, only what the plan claims.
#[derive(Debug, Default)]
pub struct OuterJoinConstants;

impl PhysicalOptimizerRule for OuterJoinConstants {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(extended) = null_extended(&node) else {
                return Ok(Transformed::no(node));
            };
            let children = node.children();
            let wrap: Vec<bool> = children
                .iter()
                .zip(extended)
                .map(|(child, extended)| extended && has_constants(child))
                .collect();
            if !wrap.contains(&true) {
                return Ok(Transformed::no(node));
            }
            let children = children
                .into_iter()
                .zip(wrap)
                .map(|(child, wrap)| {
                    if !wrap {
                        return Ok(Arc::clone(child));
                    }
                    // One (empty) partition, not none: a sort above the union is pushed
                    // into each input, and DataFusion's sort of an input of no partitions
                    // still outputs one; and the distributed codec rebuilds an `EmptyExec`
                    // with one partition.
                    let empty = Arc::new(EmptyExec::new(child.schema()));
                    UnionExec::try_new(vec![Arc::clone(child), empty])
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Transformed::yes(
                Arc::clone(&node).with_new_children(children)?,
            ))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "iceflight_outer_join_constants"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Which inputs (left, right) of a join node its output null-extends; `None` for any other
/// node. Semi, anti and mark joins null-extend nothing. A piecewise merge join is listed too: it
/// computes its properties the same way.
pub(crate) fn null_extended(node: &Arc<dyn ExecutionPlan>) -> Option<[bool; 2]> {
    let join_type = node
        .downcast_ref::<HashJoinExec>()
        .map(|j| *j.join_type())
        .or_else(|| {
            node.downcast_ref::<SortMergeJoinExec>()
                .map(|j| j.join_type())
        })
        .or_else(|| {
            node.downcast_ref::<NestedLoopJoinExec>()
                .map(|j| *j.join_type())
        })
        .or_else(|| {
            node.downcast_ref::<SymmetricHashJoinExec>()
                .map(|j| *j.join_type())
        })
        .or_else(|| {
            node.downcast_ref::<PiecewiseMergeJoinExec>()
                .map(|j| j.join_type())
        })?;
    Some(match join_type {
        JoinType::Left => [false, true],
        JoinType::Right => [true, false],
        JoinType::Full => [true, true],
        _ => [false, false],
    })
}

/// Whether `plan` reports any constant (`EquivalenceProperties::constants`).
pub(crate) fn has_constants(plan: &Arc<dyn ExecutionPlan>) -> bool {
    !plan.equivalence_properties().constants().is_empty()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Int32Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use datafusion::prelude::{SessionConfig, SessionContext};

    use super::OuterJoinConstants;

    /// `cust(id, nation)`: 40 rows, nations 0..4; `nation(key, name)`: 4 rows.
    fn context(rule: bool) -> SessionContext {
        context_with(rule, SessionConfig::new().with_target_partitions(2))
    }

    fn context_with(rule: bool, config: SessionConfig) -> SessionContext {
        let mut rules = datafusion::physical_optimizer::optimizer::PhysicalOptimizer::new().rules;
        if rule {
            rules.insert(0, Arc::new(OuterJoinConstants));
        }
        let ctx = crate::test_rows::session(config, rules);
        let cust_schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("nation", DataType::Int32, false),
        ]));
        let ids: Vec<i32> = (0..40).collect();
        let nations: Vec<i32> = ids.iter().map(|i| (i * 7) % 4).collect();
        let cust = RecordBatch::try_new(
            Arc::clone(&cust_schema),
            vec![
                Arc::new(Int32Array::from(ids)),
                Arc::new(Int32Array::from(nations)),
            ],
        )
        .unwrap();
        ctx.register_table("cust", crate::test_rows::in_halves(&cust))
            .unwrap();
        let nation = crate::test_rows::labelled(
            "key",
            "name",
            vec![0, 1, 2, 3],
            vec!["FRANCE", "GERMANY", "PERU", "CHINA"],
        );
        ctx.register_table("nation", nation).unwrap();
        ctx
    }

    async fn answer(ctx: &SessionContext, sql: &str) -> String {
        crate::test_rows::answer(ctx, sql).await.0
    }

    /// Per row of a pretty-printed answer, whether it names GERMANY (the header left out).
    fn german(table: &str) -> Vec<bool> {
        table
            .lines()
            .filter(|l| l.starts_with("| "))
            .skip(1)
            .map(|l| l.contains("GERMANY"))
            .collect()
    }

    /// Ordered by the null-extended side's filtered column first: every NULL row before every
    /// 'GERMANY' row, in each join direction. DataFusion's own plan interleaves them (the
    /// assertion on `context(false)` shows the fault this rule exists for).
    #[tokio::test]
    async fn null_rows_sort_apart_from_the_filtered_value() {
        let queries = [
            "SELECT name, id FROM cust LEFT JOIN nation ON nation = key AND name = 'GERMANY' \
             ORDER BY name NULLS FIRST, id",
            "SELECT name, id FROM nation RIGHT JOIN cust ON nation = key AND name = 'GERMANY' \
             ORDER BY name NULLS FIRST, id",
            "SELECT name, id FROM cust FULL JOIN (SELECT * FROM nation WHERE name = 'GERMANY') \
             ON nation = key ORDER BY name NULLS FIRST, id LIMIT 35",
        ];
        // Each answer's `name` column in row order: NULLs, then GERMANY, never back.
        let ordered = |table: &str| {
            let names = german(table);
            !names.is_empty() && names.windows(2).all(|w| w[0] <= w[1])
        };
        let rows = |table: &str| german(table).len();
        let mut wrong_without = 0;
        for (sql, expected) in queries.into_iter().zip([40, 40, 35]) {
            let (table, plan) = crate::test_rows::answer(&context(true), sql).await;
            assert!(ordered(&table), "{sql}\n{table}");
            assert_eq!(rows(&table), expected, "{sql}\n{table}");
            assert_eq!(rows(&table), rows(&answer(&context(false), sql).await));
            let text = datafusion::physical_plan::displayable(plan.as_ref())
                .indent(false)
                .to_string();
            assert!(
                text.contains("UnionExec") && text.contains("EmptyExec"),
                "{text}"
            );
            wrong_without += usize::from(!ordered(&answer(&context(false), sql).await));
        }
        assert!(
            wrong_without > 0,
            "DataFusion's plan no longer shows the fault"
        );
    }

    /// Other join operators a user may switch to: a sort-merge join on one partition (the
    /// sort above the union reaches its empty input too) and a piecewise merge join, whose
    /// outer join keeps the same wrong constant. Each plans, runs and orders its rows.
    #[tokio::test]
    async fn other_join_operators_plan_and_order() {
        let mut merge = SessionConfig::new().with_target_partitions(1);
        merge.options_mut().optimizer.prefer_hash_join = false;
        let mut piecewise = SessionConfig::new().with_target_partitions(2);
        piecewise
            .options_mut()
            .optimizer
            .enable_piecewise_merge_join = true;
        let cases = [
            (
                merge,
                "SELECT name, id FROM cust LEFT JOIN nation ON nation = key AND \
                 name = 'GERMANY' ORDER BY name NULLS FIRST, id",
                40,
            ),
            (
                piecewise,
                "SELECT name, id FROM cust LEFT JOIN (SELECT * FROM nation WHERE \
                 name = 'GERMANY') ON nation < key ORDER BY name NULLS FIRST, id",
                40,
            ),
        ];
        for (config, sql, expected) in cases {
            let table = answer(&context_with(true, config), sql).await;
            let names = german(table.as_str());
            assert_eq!(names.len(), expected, "{sql}\n{table}");
            assert!(names.windows(2).all(|w| w[0] <= w[1]), "{sql}\n{table}");
        }
    }
}
