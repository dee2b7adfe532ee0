//! Physical optimizer rule: a `GROUP BY` column that a filter or a join has made constant is
//! not grouped by; its value is put back into the aggregate's output as a literal.
//!
//! ```text
//!   AggregateExec(Final, group by [d_year, item, customer])
//!     AggregateExec(Partial, group by [d_year, item, customer])
//!       input: d_year constant, value 2000 (d_year = 2000 on date_dim, through the join)
//!   ──►
//!   ProjectionExec([2000 AS d_year, item, customer, aggregates…])
//!     AggregateExec(Final, group by [item, customer])
//!       AggregateExec(Partial, group by [item, customer])
//!         input
//! ```
//!
//! **Why.** DataFusion 54.1 counts a constant group column as sorted (a constant satisfies
//! every ordering), so the aggregate runs in `PartiallySorted` or `Sorted` mode
//! (`find_longest_permutation` over its input's equivalence properties). In those modes it
//! interns each row's group one at a time (`GroupValuesColumn::<true>`, not the vectorised
//! `GroupValuesColumn::<false>`) and its partial aggregate never switches off grouping where
//! the groups do not reduce the rows (`skip_partial_aggregation_probe_*` requires unordered
//! groups). TPC-DS q78's store-sales aggregate, grouped by `(d_year, ss_item_sk,
//! ss_customer_sk)` with `d_year = 2000`, spent 90 of its 113 ms computing group ids for
//! 499 K rows that made 495 K groups. q05, q27, q31, q42, q49, q52, q66, q76 and q80 group
//! by a year, a state or a `UNION ALL` branch's literal the same way. Without the column,
//! grouping hashes one column less per row as well.
//!
//! **Same answer.** Every input row of the aggregate holds the same value in the column, so
//! grouping by it or not makes the same groups; the value, known from the plan
//! (`AcrossPartitions::Uniform(Some(value))`), is put back as a literal. Only where at least
//! one group column remains: without any, an aggregate answers one row for no input rows,
//! where a grouped one answers none.
//!
//! **Outer joins.** DataFusion 54.1 keeps the constants of an outer join's null-extended side
//! in the join's output (`EquivalenceGroup::join` treats Left, Right and Full like Inner),
//! though the rows that side does not match hold NULL there: `sales LEFT JOIN dates ON y =
//! d_year AND d_year = 2000` reports `d_year` constant 2000. So no aggregate is rewritten
//! whose input has, anywhere below it, a join that null-extends a side with a constant, or
//! a join this rule does not know (a piecewise merge join reports its range predicate as an
//! equality).
//!
//! **Where.** A `Final` or `FinalPartitioned` aggregate directly over its `Partial`
//! aggregate, with one grouping set: the pair DataFusion's planner builds, before
//! `EnforceDistribution` puts a repartition between them (so the repartition hashes the
//! remaining columns) and before `CombinePartialFinalAggregate` merges them. Both are
//! rebuilt with the same aggregates and filters; the partial one's output loses the column,
//! and the final one groups by what the partial one outputs. A constant whose value is not
//! known to the plan, or differs between partitions, stays a group column.
//! `SET iceflight.optimizer.constant_group_keys = false` keeps DataFusion's plan.

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::ScalarValue;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_expr::{AcrossPartitions, PhysicalExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion::physical_plan::joins::CrossJoinExec;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::union::{InterleaveExec, UnionExec};

use crate::outer_join_constants::{has_constants, null_extended};
use iceflight_options::IceflightOptions;

/// The rule (module docs); switched by `iceflight.optimizer.constant_group_keys`. Install it
/// before DataFusion's `EnforceDistribution`.
#[derive(Debug, Default)]
pub struct ConstantGroupKeys;

impl PhysicalOptimizerRule for ConstantGroupKeys {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !IceflightOptions::of(config).optimizer.constant_group_keys {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            Ok(match without_constant_keys(&node)? {
                Some(rewritten) => Transformed::yes(rewritten),
                None => Transformed::no(node),
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "iceflight_constant_group_keys"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The rewritten `Final(Partial(input))` pair under a projection (module docs), or `None`
/// where `node` is not such a pair or none of its group columns is a constant of known
/// value.
fn without_constant_keys(node: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(last) = node.downcast_ref::<AggregateExec>() else {
        return Ok(None);
    };
    if !matches!(
        last.mode(),
        AggregateMode::Final | AggregateMode::FinalPartitioned
    ) {
        return Ok(None);
    }
    let Some(first) = last.input().downcast_ref::<AggregateExec>() else {
        return Ok(None);
    };
    let groups = first.group_expr();
    if *first.mode() != AggregateMode::Partial
        || !groups.is_single()
        || groups.expr().len() != last.group_expr().expr().len()
    {
        return Ok(None);
    }
    if constants_null_extended(first.input()) {
        return Ok(None);
    }
    // The value of each group column that is one constant in every partition of the input.
    let properties = first.input().properties().equivalence_properties();
    let input_schema = first.input().schema();
    let constants = groups
        .expr()
        .iter()
        .map(|(expr, _)| {
            let Some(AcrossPartitions::Uniform(Some(value))) = properties.is_expr_constant(expr)
            else {
                return Ok(None);
            };
            let data_type = expr.data_type(&input_schema)?;
            // A value of another type (a dictionary's value type) is cast, or the column kept.
            Ok(value.cast_to(&data_type).ok())
        })
        .collect::<Result<Vec<Option<ScalarValue>>>>()?;
    let kept = constants.iter().filter(|c| c.is_none()).count();
    if kept == groups.expr().len() || kept == 0 {
        return Ok(None);
    }
    let partial_groups = PhysicalGroupBy::new_single(
        groups
            .expr()
            .iter()
            .zip(&constants)
            .filter(|(_, constant)| constant.is_none())
            .map(|(group, _)| group.clone())
            .collect(),
    );
    let partial = Arc::new(
        AggregateExec::try_new(
            AggregateMode::Partial,
            partial_groups.clone(),
            first.aggr_expr().to_vec(),
            first.filter_expr().to_vec(),
            Arc::clone(first.input()),
            first.input_schema(),
        )?
        .with_limit_options(first.limit_options()),
    );
    // The final aggregate takes the partial one's aggregates, as DataFusion's planner does
    // (building the partial one may reverse `first_value` / `last_value` to match its input).
    let final_aggregate = Arc::new(
        AggregateExec::try_new(
            *last.mode(),
            partial_groups.as_final(),
            partial.aggr_expr().to_vec(),
            last.filter_expr().to_vec(),
            partial,
            last.input_schema(),
        )?
        .with_limit_options(last.limit_options()),
    );
    // Back to the pair's output schema: each dropped column as its literal, in its place.
    let rebuilt = final_aggregate.schema();
    let output = last.schema();
    let mut next = 0;
    let mut exprs = Vec::with_capacity(output.fields().len());
    for (at, field) in output.fields().iter().enumerate() {
        let expr: Arc<dyn PhysicalExpr> = match constants.get(at).cloned().flatten() {
            Some(value) => Arc::new(Literal::new_with_metadata(
                value,
                (!field.metadata().is_empty()).then(|| field.metadata().into()),
            )),
            None => {
                let column = Arc::new(Column::new(rebuilt.field(next).name(), next));
                next += 1;
                column
            }
        };
        exprs.push(ProjectionExpr::new(expr, field.name().clone()));
    }
    Ok(Some(Arc::new(ProjectionExec::try_new(
        exprs,
        final_aggregate,
    )?)))
}

/// Whether `plan` has, at any depth, a join whose null-extended side has a constant (module
/// docs, "Outer joins"), or a join of a kind not known here. Semi, anti and mark joins
/// null-extend nothing; inner and cross joins keep every constant true.
fn constants_null_extended(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let mut found = false;
    let _ = plan.apply(|node| {
        let children = node.children();
        found = match null_extended(node) {
            Some(sides) => children
                .iter()
                .zip(sides)
                .any(|(child, extended)| extended && has_constants(child)),
            // Unions and cross joins null-extend nothing; any other node of two inputs is a
            // join this rule does not know.
            None => {
                children.len() > 1
                    && node.downcast_ref::<UnionExec>().is_none()
                    && node.downcast_ref::<InterleaveExec>().is_none()
                    && node.downcast_ref::<CrossJoinExec>().is_none()
            }
        };
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    found
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int32Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use datafusion::physical_plan::aggregates::AggregateExec;
    use datafusion::physical_plan::{ExecutionPlan, InputOrderMode, displayable};
    use datafusion::prelude::{SessionConfig, SessionContext};

    use super::ConstantGroupKeys;
    use crate::test_rows::{answer, in_halves, sequence};

    /// `sales`: 3 000 rows in two partitions: year `y` (1998–2000), `state` (four values),
    /// nullable key `k` (0..200) and value `v`. `dates`: one row per year with a label.
    fn context(rule: bool) -> SessionContext {
        let mut rules = datafusion::physical_optimizer::optimizer::PhysicalOptimizer::new().rules;
        if rule {
            let at = rules
                .iter()
                .position(|r| r.name() == "EnforceDistribution")
                .unwrap();
            rules.insert(at, Arc::new(ConstantGroupKeys));
        }
        let config = SessionConfig::new()
            .with_target_partitions(2)
            .with_option_extension(iceflight_options::IceflightOptions::default());
        let ctx = crate::test_rows::session(config, rules);
        let mut next = sequence(0x9e37_79b9_7f4a_7c15);
        let n = 3_000;
        let (mut y, mut state, mut k, mut v) = (vec![], vec![], vec![], vec![]);
        for _ in 0..n {
            y.push(1998 + next(3) as i32);
            state.push(["TN", "GA", "OH", "AL"][next(4) as usize]);
            k.push((next(12) != 0).then(|| next(200) as i32));
            v.push(next(1_000) as i64 - 300);
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("y", DataType::Int32, false),
            Field::new("state", DataType::Utf8, false),
            Field::new("k", DataType::Int32, true),
            Field::new("v", DataType::Int64, false),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(y)),
            Arc::new(StringArray::from(state)),
            Arc::new(Int32Array::from(k)),
            Arc::new(Int64Array::from(v)),
        ];
        let sales = RecordBatch::try_new(Arc::clone(&schema), columns).unwrap();
        ctx.register_table("sales", in_halves(&sales)).unwrap();
        let dates = crate::test_rows::labelled(
            "d_year",
            "label",
            vec![1998, 1999, 2000],
            vec!["a", "b", "c"],
        );
        ctx.register_table("dates", dates).unwrap();
        ctx
    }

    /// (aggregates, those not in `Linear` mode, group columns summed over them) in `plan`.
    fn aggregates(plan: &Arc<dyn ExecutionPlan>) -> (usize, usize, usize) {
        let own = plan.downcast_ref::<AggregateExec>().map_or((0, 0, 0), |a| {
            (
                1,
                usize::from(*a.input_order_mode() != InputOrderMode::Linear),
                a.group_expr().expr().len(),
            )
        });
        plan.children()
            .into_iter()
            .map(aggregates)
            .fold(own, |t, c| (t.0 + c.0, t.1 + c.1, t.2 + c.2))
    }

    /// A year fixed by the filter is left out of both aggregates, which then run unordered,
    /// and comes back as a literal.
    #[tokio::test]
    async fn a_filtered_year_is_not_grouped_by() {
        let sql = "SELECT y, k, sum(v), count(*) FROM sales WHERE y = 1999 GROUP BY y, k";
        let (with, plan) = answer(&context(true), sql).await;
        let text = displayable(plan.as_ref()).indent(false).to_string();
        insta::assert_snapshot!("filtered_year_not_grouped", text);
        assert_eq!(aggregates(&plan), (2, 0, 2), "{text}");
        let (without, plan) = answer(&context(false), sql).await;
        assert_eq!(aggregates(&plan), (2, 2, 4));
        assert_eq!(sorted(&with), sorted(&without));
    }

    /// Rows of a pretty-printed table in order, so answers compare without an ORDER BY.
    fn sorted(table: &str) -> Vec<&str> {
        let mut lines: Vec<&str> = table.lines().collect();
        lines.sort_unstable();
        lines
    }

    /// Not rewritten: every group column constant (an empty input must still answer no row),
    /// a constant on the null-extended side of an outer join, and a constant whose value
    /// differs between the branches of a `UNION ALL`.
    #[tokio::test]
    async fn kept_where_dropping_would_change_the_answer() {
        let cases = [
            // All constant; the input is empty.
            "SELECT y, count(*) FROM sales WHERE y = 1999 AND k = -1 GROUP BY y",
            "SELECT y, state, count(*) FROM sales WHERE y = 1999 AND state = 'TN' GROUP BY y, state",
            // The null-extended side's filter: its unmatched rows hold NULL, not 2000
            // (DataFusion still reports the column constant).
            "SELECT d_year, k, count(*) FROM sales LEFT JOIN dates ON y = d_year AND \
             d_year = 2000 GROUP BY d_year, k",
            "SELECT d_year, k, count(*) FROM dates RIGHT JOIN sales ON y = d_year AND \
             d_year = 1999 GROUP BY d_year, k",
            "SELECT d_year, label, count(*) FROM sales FULL JOIN (SELECT * FROM dates \
             WHERE d_year = 1998) ON y = d_year AND v < 0 GROUP BY d_year, label",
            // One literal per branch: constant in each partition, not across them.
            "SELECT c, k, count(*) FROM (SELECT 'x' AS c, k FROM sales UNION ALL \
             SELECT 'y' AS c, k FROM sales WHERE v > 0) GROUP BY c, k",
        ];
        for sql in cases {
            let (with, plan) = answer(&context(true), sql).await;
            let text = displayable(plan.as_ref()).indent(false).to_string();
            let (without, reference) = answer(&context(false), sql).await;
            assert_eq!(sorted(&with), sorted(&without), "{sql}");
            assert_eq!(aggregates(&plan), aggregates(&reference), "{sql}\n{text}");
        }
    }

    /// Random filters that fix a year or a state (directly, or through a join with a filtered
    /// `dates`) and random groupings answer as DataFusion's plan does; the rule rewrites
    /// exactly the queries that group by a fixed column beside an unfixed one.
    #[tokio::test]
    async fn answers_equal_datafusions_plan() {
        let (with, without) = (context(true), context(false));
        let mut next = sequence(11);
        // (filter, the column it fixes)
        let filters = [
            ("y = 2000", Some("y")),
            ("state = 'GA'", Some("state")),
            ("d_year = 1998", Some("y")),
            ("y > 1998", None),
            ("k = 17", Some("k")),
            ("true", None),
        ];
        let keys = ["y", "state", "k", "label"];
        let mut rewritten = 0;
        for _ in 0..24 {
            let (filter, fixed) = filters[next(filters.len() as u64) as usize];
            let mut group: Vec<&str> = keys.iter().copied().filter(|_| next(2) == 0).collect();
            if group.is_empty() {
                group.push(keys[next(keys.len() as u64) as usize]);
            }
            let group = group.join(", ");
            let sql = format!(
                "SELECT {group}, sum(v), min(v), count(k) FROM sales JOIN dates ON y = d_year \
                 WHERE {filter} GROUP BY {group}"
            );
            let (a, plan) = answer(&with, &sql).await;
            let (b, reference) = answer(&without, &sql).await;
            assert_eq!(sorted(&a), sorted(&b), "{sql}");
            let constant = |c: &str| fixed == Some(c);
            let columns: Vec<&str> = group.split(", ").collect();
            let dropped = columns.iter().filter(|c| constant(c)).count();
            let expected = if dropped > 0 && dropped < columns.len() {
                rewritten += 1;
                dropped
            } else {
                0
            };
            let (_, _, ours) = aggregates(&plan);
            let (_, _, theirs) = aggregates(&reference);
            assert_eq!(theirs - ours, 2 * expected, "{sql}");
        }
        assert!(rewritten >= 5, "only {rewritten} queries rewritten");
    }
}
