//! Physical optimizer rule: a partial aggregate over an inner hash join aggregates its probe
//! side first, grouped by the probe side's group columns and join keys (eager aggregation,
//! Yan and Larson's "group-by before join").
//!
//! ```text
//!   AggregateExec(Partial, group by G = G_build ∪ G_probe, aggs over probe columns only)
//!     [ProjectionExec …]
//!       HashJoinExec(Inner, CollectLeft, on build.k = probe.k, no filter)
//!         build B                        probe P
//!   ──►
//!   AggregateExec(PartialReduce, group by G, same aggs)      merges states, same output schema
//!     ProjectionExec(G, states)                               (alone where G holds build.k)
//!       HashJoinExec(Inner, CollectLeft, on build.k = K.k)
//!         build B      AggregateExec(Partial, group by K = G_probe ∪ {probe.k}, same aggs)
//!                        probe P
//! ```
//!
//! **Why.** TPC-DS q04, q11 and q74 group a sales fact joined to `customer` by seven customer
//! columns (six of them strings) and the year. Joined first, each of the ~1 M probe rows that
//! survive the date filter gathers those strings out of the build side, and the partial
//! aggregate hashes all eight columns per row. Grouped first by `(ss_customer_sk, d_year)`,
//! the probe side shrinks to one row per customer and year before it reaches the join, and the
//! strings are gathered and hashed once per group.
//!
//! **Same answer.** Every output row of an inner equi-join pairs one build row with one probe
//! row whose keys are equal. Grouping the probe rows by their keys and their own group columns
//! first puts together exactly the rows that join the same build rows and fall into the same
//! final groups; a pre-aggregated row joins each of those build rows once, as each of its
//! rows did. The aggregates are DataFusion's own accumulators: the lower node computes their
//! partial states, the upper merges them (what its `Final` does after a `Partial`), so
//! result types and rounding are unchanged. Merging one state once per matching build row is
//! the same as aggregating its rows once per matching build row for `sum`, `count` and `avg`
//! (linear in their rows) and for `min` and `max` (idempotent); other aggregates, `DISTINCT`,
//! `FILTER` and ordered aggregates are left alone, as are aggregates whose arguments read a
//! build column or a group expression that reads both sides.
//!
//! When the keys do not reduce the probe side (about one row per key), the lower partial
//! aggregate stops grouping after DataFusion's probe rows
//! (`datafusion.execution.skip_partial_aggregation_probe_*`) and passes its rows on as states.
//!
//! **When it pays.** Only where the build side is a whole table (no filter, no join below the
//! join): then the join drops no probe row whose key has a match, and grouping first is pure
//! saving. A filtered build side drops probe rows in the join, and grouping them first is work
//! the join would have saved: TPC-H q03 (lineitem grouped by `l_orderkey` before the join with
//! filtered orders) took 1.57× its time that way, TPC-DS q79 1.42×, in the same-run A/B of
//! `bench/reports/issue49-progress3-20261207.md`.
//!
//! Not applied to partitioned joins (their repartitioned probe side would need its hash
//! expressions rewritten, and the sanity check requires the partitioning the join expects),
//! nor on a distributed coordinator (its stages would cut between the two aggregates).
//! `SET iceflight.optimizer.eager_aggregation = false` keeps DataFusion's plan.

use std::sync::Arc;

use datafusion::common::JoinSide;
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::logical_expr::JoinType;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::{PhysicalExpr, PhysicalExprRef};
use datafusion::physical_expr_common::physical_expr::is_volatile;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::joins::utils::build_join_schema;
use datafusion::physical_plan::joins::{HashJoinExec, HashJoinExecBuilder, PartitionMode};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning};

use iceflight_options::IceflightOptions;

/// Aggregate functions whose partial states merge correctly however often a join repeats them
/// (module docs): DataFusion's names.
const MERGEABLE: [&str; 5] = ["sum", "count", "avg", "min", "max"];

/// The rule (module docs); switched by `iceflight.optimizer.eager_aggregation`.
#[derive(Debug, Default)]
pub struct EagerAggregation;

impl PhysicalOptimizerRule for EagerAggregation {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !IceflightOptions::of(config).optimizer.eager_aggregation {
            return Ok(plan);
        }
        // Bottom-up: a lower aggregate this rule adds is not visited again, so each planned
        // aggregate moves below one join at most.
        plan.transform_up(|node| {
            Ok(match eager(&node)? {
                Some(rewritten) => Transformed::yes(rewritten),
                None => Transformed::no(node),
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "iceflight_eager_aggregation"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Which input of the join an expression reads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    /// No column at all (`count(*)`'s literal).
    Neither,
    Build,
    Probe,
    Both,
}

impl Side {
    fn and(self, other: Side) -> Side {
        match (self, other) {
            (Side::Neither, s) | (s, Side::Neither) => s,
            (a, b) if a == b => a,
            _ => Side::Both,
        }
    }
}

/// The join's output columns as (side, index in that side's schema).
struct JoinColumns {
    columns: Vec<(Side, usize)>,
}

impl JoinColumns {
    fn of(join: &HashJoinExec) -> Self {
        // DataFusion's own column mapping of a join's output, before the join's projection.
        let (_, unprojected) = build_join_schema(
            &join.left().schema(),
            &join.right().schema(),
            join.join_type(),
        );
        let unprojected: Vec<(Side, usize)> = unprojected
            .iter()
            .map(|c| match c.side {
                JoinSide::Left => (Side::Build, c.index),
                _ => (Side::Probe, c.index),
            })
            .collect();
        let columns = match &join.projection {
            Some(projection) => projection.iter().map(|&i| unprojected[i]).collect(),
            None => unprojected,
        };
        Self { columns }
    }

    /// The side `expr` (over the join's output) reads.
    fn side(&self, expr: &Arc<dyn PhysicalExpr>) -> Side {
        collect_columns(expr)
            .iter()
            .fold(Side::Neither, |side, c| side.and(self.columns[c.index()].0))
    }

    /// `expr` over the join's output, rewritten over one side's schema (`expr` reads only
    /// that side).
    fn onto_side(
        &self,
        expr: &Arc<dyn PhysicalExpr>,
        schema: &datafusion::arrow::datatypes::Schema,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        Arc::clone(expr)
            .transform(|e| {
                Ok(match e.downcast_ref::<Column>() {
                    Some(c) => {
                        let index = self.columns[c.index()].1;
                        Transformed::yes(
                            Arc::new(Column::new(schema.field(index).name(), index)) as _
                        )
                    }
                    None => Transformed::no(e),
                })
            })
            .map(|t| t.data)
    }
}

/// `expr` over the output of stacked projections (outermost first), rewritten over the
/// innermost one's input (DataFusion's `unproject_expr`, one projection at a time).
fn through_projection(
    expr: &Arc<dyn PhysicalExpr>,
    projections: &[&ProjectionExec],
) -> Result<Arc<dyn PhysicalExpr>> {
    projections
        .iter()
        .try_fold(Arc::clone(expr), |expr, projection| {
            projection.projection_expr().unproject_expr(&expr)
        })
}

/// The rewritten subtree for a partial aggregate that can group its join's probe side first.
fn eager(node: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(aggregate) = node.downcast_ref::<AggregateExec>() else {
        return Ok(None);
    };
    let group_by = aggregate.group_expr();
    if *aggregate.mode() != AggregateMode::Partial
        || !group_by.is_single()
        || group_by.expr().is_empty()
        || aggregate.limit_options().is_some()
        || aggregate.filter_expr().iter().any(Option::is_some)
        || !aggregate.aggr_expr().iter().all(|a| mergeable(a))
    {
        return Ok(None);
    }
    let input = aggregate.input();
    // Projections between the aggregate and the join (DataFusion leaves a column pruning one
    // and, where it swapped the join's inputs, the one restoring their order), outermost first,
    // and a round-robin repartition where the join's output is one partition (it spreads the
    // aggregate over the cores; it moves rows, never columns, and is put back above the join).
    let mut projections = Vec::new();
    let mut round_robin = None;
    let mut join_plan = input;
    loop {
        if let Some(projection) = join_plan.downcast_ref::<ProjectionExec>() {
            projections.push(projection);
            join_plan = projection.input();
        } else if let Some(repartition) = join_plan.downcast_ref::<RepartitionExec>()
            && matches!(repartition.partitioning(), Partitioning::RoundRobinBatch(_))
            && round_robin.is_none()
        {
            round_robin = Some(join_plan);
            join_plan = repartition.input();
        } else {
            break;
        }
    }
    let projection = projections.as_slice();
    let Some(join) = join_plan.downcast_ref::<HashJoinExec>() else {
        return Ok(None);
    };
    if *join.join_type() != JoinType::Inner
        || join.filter().is_some()
        || *join.partition_mode() != PartitionMode::CollectLeft
        || join.fetch().is_some()
        || !whole_table(join.left())
    {
        return Ok(None);
    }
    let columns = JoinColumns::of(join);
    let build = join.left();
    let probe = join.right();
    let probe_schema = probe.schema();

    // Group expressions and aggregate arguments over the join's output.
    let groups = group_by
        .expr()
        .iter()
        .map(|(e, name)| Ok((through_projection(e, projection)?, name.clone())))
        .collect::<Result<Vec<_>>>()?;
    let group_sides: Vec<Side> = groups.iter().map(|(e, _)| columns.side(e)).collect();
    if group_sides.contains(&Side::Both) || !group_sides.contains(&Side::Build) {
        return Ok(None);
    }
    let mut probe_aggregates = Vec::with_capacity(aggregate.aggr_expr().len());
    for a in aggregate.aggr_expr() {
        let mut args = Vec::new();
        for arg in a.expressions() {
            let arg = through_projection(&arg, projection)?;
            // A volatile argument (`random()`) is evaluated per joined row: not once per
            // probe row instead.
            if matches!(columns.side(&arg), Side::Build | Side::Both) || is_volatile(&arg) {
                return Ok(None);
            }
            args.push(columns.onto_side(&arg, &probe_schema)?);
        }
        let Some(moved) = a.with_new_expressions(args, vec![]) else {
            return Ok(None);
        };
        probe_aggregates.push(Arc::new(moved));
    }

    // The probe side's grouping: its own group expressions, then its join keys.
    let mut keys: Vec<(Arc<dyn PhysicalExpr>, String)> = Vec::new();
    let mut group_at = Vec::with_capacity(groups.len());
    for (expr, side) in groups.iter().map(|(e, _)| e).zip(&group_sides) {
        if *side == Side::Build {
            group_at.push(None);
            continue;
        }
        let expr = columns.onto_side(expr, &probe_schema)?;
        group_at.push(Some(position_or_push(&mut keys, expr, &probe_schema)));
    }
    let key_at: Vec<usize> = join
        .on()
        .iter()
        .map(|(_, probe_key)| position_or_push(&mut keys, Arc::clone(probe_key), &probe_schema))
        .collect();
    let states = aggregate.schema().fields().len() - groups.len();
    let lower = Arc::new(AggregateExec::try_new(
        AggregateMode::Partial,
        PhysicalGroupBy::new_single(keys.clone()),
        probe_aggregates,
        vec![None; aggregate.aggr_expr().len()],
        Arc::clone(probe),
        Arc::clone(&probe_schema),
    )?) as Arc<dyn ExecutionPlan>;
    let lower_schema = lower.schema();
    if lower_schema.fields().len() != keys.len() + states {
        return Ok(None);
    }

    let on = join
        .on()
        .iter()
        .zip(&key_at)
        .map(|((build_key, _), &at)| {
            (
                Arc::clone(build_key),
                Arc::new(Column::new(lower_schema.field(at).name(), at)) as PhysicalExprRef,
            )
        })
        .collect();
    let joined = HashJoinExecBuilder::new(Arc::clone(build), lower, on, JoinType::Inner)
        .with_partition_mode(PartitionMode::CollectLeft)
        .with_null_equality(join.null_equality())
        .build_exec()?;
    let joined_schema = joined.schema();
    let build_len = build.schema().fields().len();

    // The partial aggregate's output shape again: its group columns, then the states.
    let output = aggregate.schema();
    let mut exprs = Vec::with_capacity(output.fields().len());
    for ((expr, name), at) in groups.iter().zip(&group_at) {
        let expr = match at {
            Some(at) => {
                let index = build_len + at;
                Arc::new(Column::new(joined_schema.field(index).name(), index)) as _
            }
            None => columns.onto_side(expr, &build.schema())?,
        };
        exprs.push(ProjectionExpr {
            expr,
            alias: name.clone(),
        });
    }
    for state in 0..states {
        let index = build_len + keys.len() + state;
        exprs.push(ProjectionExpr {
            expr: Arc::new(Column::new(joined_schema.field(index).name(), index)),
            alias: output.field(groups.len() + state).name().clone(),
        });
    }
    let mut projected = Arc::new(ProjectionExec::try_new(exprs, joined)?) as Arc<dyn ExecutionPlan>;
    if let Some(round_robin) = round_robin {
        projected = Arc::clone(round_robin).with_new_children(vec![projected])?;
    }
    // Grouped by every build-side join key, the groups are the lower aggregate's own (a key
    // joins its own build rows only): merging again would hash every row for nothing, and a
    // lower aggregate that stopped grouping (no reduction) would have its rows hashed anyway.
    let build_schema = build.schema();
    let build_groups: Vec<Arc<dyn PhysicalExpr>> = groups
        .iter()
        .zip(&group_sides)
        .filter(|(_, side)| **side == Side::Build)
        .map(|((e, _), _)| columns.onto_side(e, &build_schema))
        .collect::<Result<_>>()?;
    let keyed = join
        .on()
        .iter()
        .all(|(k, _)| build_groups.iter().any(|g| g.as_ref() == k.as_ref()));
    let top = if keyed {
        projected
    } else {
        Arc::new(AggregateExec::try_new(
            AggregateMode::PartialReduce,
            group_by.as_final(),
            aggregate.aggr_expr().to_vec(),
            vec![None; aggregate.aggr_expr().len()],
            projected,
            aggregate.input_schema(),
        )?)
    };
    let same_shape = top.schema().fields().len() == output.fields().len()
        && top
            .schema()
            .fields()
            .iter()
            .zip(output.fields())
            .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
    Ok(same_shape.then_some(top))
}

/// Whether `plan` reads a whole table: a leaf without `fetch` under nodes that move or
/// project rows but drop none. Filters stay above the scans that take them (ours and
/// DataFusion's answer `No` to a pushed filter, or keep an exact `FilterExec`), so a filtered
/// build side fails this.
fn whole_table(plan: &Arc<dyn ExecutionPlan>) -> bool {
    if plan.fetch().is_some() {
        return false;
    }
    let children = plan.children();
    if children.is_empty() {
        return true;
    }
    let moves_rows = plan.is::<CoalescePartitionsExec>()
        || plan.is::<RepartitionExec>()
        || plan.is::<ProjectionExec>()
        || plan.is::<CooperativeExec>();
    moves_rows && children.len() == 1 && whole_table(children[0])
}

/// Whether `a`'s partial states can be merged once per matching build row (module docs).
fn mergeable(a: &AggregateFunctionExpr) -> bool {
    MERGEABLE.contains(&a.fun().name()) && !a.is_distinct() && a.order_bys().is_empty()
}

/// Index of `expr` among `keys`, appending it when absent. A probe column keeps its own name;
/// anything else gets a name the probe side does not have: DataFusion carries a filter (a
/// join's dynamic filter, a TopK bound) through an aggregate to its input by column name
/// (`FilterRemapper`), so a group column named after another probe column (an alias
/// `k AS y` while the probe side has its own `y`) would hand that filter to the wrong column.
fn position_or_push(
    keys: &mut Vec<(Arc<dyn PhysicalExpr>, String)>,
    expr: Arc<dyn PhysicalExpr>,
    probe_schema: &datafusion::arrow::datatypes::Schema,
) -> usize {
    if let Some(at) = keys.iter().position(|(k, _)| k.as_ref() == expr.as_ref()) {
        return at;
    }
    let own = expr
        .downcast_ref::<Column>()
        .filter(|c| probe_schema.index_of(c.name()).ok() == Some(c.index()))
        .map(|c| c.name().to_string());
    let name = own.unwrap_or_else(|| {
        (keys.len()..)
            .map(|n| format!("__eager_group_{n}"))
            .find(|n| probe_schema.index_of(n).is_err() && keys.iter().all(|(_, k)| k != n))
            .unwrap_or_default()
    });
    keys.push((expr, name));
    keys.len() - 1
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Decimal128Array, Float64Array, Int32Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use datafusion::datasource::MemTable;
    use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
    use datafusion::physical_plan::joins::HashJoinExec;
    use datafusion::physical_plan::{ExecutionPlan, displayable};
    use datafusion::prelude::{SessionConfig, SessionContext};

    use super::EagerAggregation;
    use crate::test_rows::{answer, sequence};

    /// `fact`: 4 000 rows, key `k` in 0..60 (a tenth NULL), year `y`, nullable int, double
    /// and decimal values. `dim`: 80 rows whose keys repeat (keys 0..50, some twice, one
    /// NULL), with a name and a group. Two partitions each; `fact1`, `fact`'s rows in one.
    fn tables() -> (Arc<MemTable>, Arc<MemTable>, Arc<MemTable>) {
        let mut next = sequence(0x2545_f491_4f6c_dd1d);
        let n = 4_000;
        let (mut k, mut y, mut i, mut f, mut d) = (vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..n {
            k.push((next(10) != 0).then(|| next(60) as i32));
            y.push(1998 + next(3) as i32);
            i.push((next(7) != 0).then(|| next(1000) as i32 - 500));
            f.push((next(7) != 0).then(|| next(10_000) as f64 / 8.0));
            d.push((next(7) != 0).then(|| next(1_000_000) as i128 - 500_000));
        }
        let fact_schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int32, true),
            Field::new("y", DataType::Int32, false),
            Field::new("i", DataType::Int32, true),
            Field::new("f", DataType::Float64, true),
            Field::new("d", DataType::Decimal128(9, 2), true),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(k)),
            Arc::new(Int32Array::from(y)),
            Arc::new(Int32Array::from(i)),
            Arc::new(Float64Array::from(f)),
            Arc::new(
                Decimal128Array::from(d)
                    .with_precision_and_scale(9, 2)
                    .unwrap(),
            ),
        ];
        let fact = RecordBatch::try_new(Arc::clone(&fact_schema), columns).unwrap();
        let (mut dk, mut name, mut group) = (vec![], vec![], vec![]);
        for j in 0..80 {
            dk.push((j != 7).then(|| next(50) as i32));
            name.push(format!("name-{}", next(20)));
            group.push(["a", "b", "c"][next(3) as usize]);
        }
        let dim_schema = Arc::new(Schema::new(vec![
            Field::new("dk", DataType::Int32, true),
            Field::new("name", DataType::Utf8, false),
            Field::new("grp", DataType::Utf8, false),
        ]));
        let dim = RecordBatch::try_new(
            Arc::clone(&dim_schema),
            vec![
                Arc::new(Int32Array::from(dk)),
                Arc::new(StringArray::from(name)),
                Arc::new(StringArray::from(group)),
            ],
        )
        .unwrap();
        let (fact_schema_again, fact_whole) = (Arc::clone(&fact_schema), fact.clone());
        let halves = |b: RecordBatch| {
            let n = b.num_rows();
            vec![vec![b.slice(0, n / 2)], vec![b.slice(n / 2, n - n / 2)]]
        };
        (
            Arc::new(MemTable::try_new(fact_schema, halves(fact)).unwrap()),
            Arc::new(MemTable::try_new(dim_schema, halves(dim)).unwrap()),
            Arc::new(MemTable::try_new(fact_schema_again, vec![vec![fact_whole]]).unwrap()),
        )
    }

    fn context(rule: bool) -> SessionContext {
        let mut rules = datafusion::physical_optimizer::optimizer::PhysicalOptimizer::new().rules;
        if rule {
            let at = rules
                .iter()
                .position(|r| r.name() == "CombinePartialFinalAggregate")
                .unwrap();
            rules.insert(at + 1, Arc::new(EagerAggregation));
        }
        let config = SessionConfig::new()
            .with_target_partitions(2)
            .with_option_extension(iceflight_options::IceflightOptions::default());
        let ctx = crate::test_rows::session(config, rules);
        let (fact, dim, fact_one_partition) = tables();
        ctx.register_table("fact", fact).unwrap();
        ctx.register_table("fact1", fact_one_partition).unwrap();
        ctx.register_table("dim", dim).unwrap();
        ctx
    }

    /// Partial aggregates whose input is not a join (the ones this rule put below a join).
    fn partials_below_joins(plan: &Arc<dyn ExecutionPlan>, under_join: bool) -> usize {
        let own = plan.downcast_ref::<AggregateExec>().is_some_and(|a| {
            *a.mode() == AggregateMode::Partial
                && under_join
                && a.input().downcast_ref::<HashJoinExec>().is_none()
        });
        let join = plan.downcast_ref::<HashJoinExec>().is_some();
        usize::from(own)
            + plan
                .children()
                .into_iter()
                .map(|c| partials_below_joins(c, join))
                .sum::<usize>()
    }

    /// The rewritten plan of a fact grouped by a dimension's columns: the fact is grouped by
    /// its key and year below the join, the join's output merged above it.
    #[tokio::test]
    async fn fact_is_grouped_by_its_key_below_the_join() {
        let sql = "SELECT name, grp, y, sum(d), count(*) FROM fact JOIN dim ON k = dk \
                   GROUP BY name, grp, y";
        let (_, plan) = answer(&context(true), sql).await;
        let text = displayable(plan.as_ref()).indent(false).to_string();
        insta::assert_snapshot!("fact_grouped_below_join", text);
        assert_eq!(partials_below_joins(&plan, false), 1, "{text}");
        assert!(text.contains("mode=PartialReduce"), "{text}");
        // Grouped by the build-side key too: the join's output goes to the repartition as it is.
        let sql = "SELECT dk, name, y, sum(d) FROM fact JOIN dim ON k = dk GROUP BY dk, name, y";
        let (_, plan) = answer(&context(true), sql).await;
        let text = displayable(plan.as_ref()).indent(false).to_string();
        assert_eq!(partials_below_joins(&plan, false), 1, "{text}");
        assert!(!text.contains("mode=PartialReduce"), "{text}");
        // The fact in one partition: DataFusion spreads the join's output round-robin before
        // the aggregate; the rule looks through that repartition and puts it back.
        let sql = "SELECT * FROM (SELECT name, y, sum(d), count(*) FROM fact1 JOIN dim ON k = dk \
                   GROUP BY name, y) ORDER BY 1, 2";
        let (a, plan) = answer(&context(true), sql).await;
        let text = displayable(plan.as_ref()).indent(false).to_string();
        assert!(text.contains("RoundRobinBatch"), "{text}");
        assert_eq!(partials_below_joins(&plan, false), 1, "{text}");
        assert_eq!(a, answer(&context(false), sql).await.0, "{sql}");
    }

    /// Random groupings and aggregates over the join answer as DataFusion's plan does, on
    /// duplicate and NULL keys; the rule applies to every query whose aggregates only read
    /// the fact, whose groups include a dimension column and whose dimension is not filtered,
    /// and to no other.
    #[tokio::test]
    async fn answers_equal_datafusions_plan() {
        let (with, without) = (context(true), context(false));
        let mut next = sequence(7);
        // (aggregate, reads only the fact and merges)
        let aggregates = [
            ("count(*)", true),
            ("count(i)", true),
            ("sum(i)", true),
            ("min(i)", true),
            ("max(f)", true),
            ("round(avg(i), 9)", true),
            ("round(sum(f), 6)", true),
            ("sum(d)", true),
            ("avg(d)", true),
            ("min(d)", true),
            ("max(d)", true),
            ("max(name)", false),
            ("sum(i + dk)", false),
        ];
        // (group key, from the dimension)
        let keys = [
            ("name", true),
            ("grp", true),
            ("y", false),
            ("k % 3", false),
            ("upper(grp)", true),
            ("i", false),
            // The build-side key: no merge between the join and the repartition.
            ("dk", true),
        ];
        let mut rewritten = 0;
        for _ in 0..40 {
            let mut chosen_keys = vec![];
            let mut chosen_aggregates = vec![];
            for (key, _) in &keys {
                if next(2) == 0 {
                    chosen_keys.push(*key);
                }
            }
            if chosen_keys.is_empty() {
                chosen_keys.push("name");
            }
            for _ in 0..1 + next(4) {
                let (a, _) = aggregates[next(aggregates.len() as u64) as usize];
                if !chosen_aggregates.contains(&a) {
                    chosen_aggregates.push(a);
                }
            }
            let expected = chosen_keys
                .iter()
                .any(|c| keys.iter().any(|(k, dim)| k == c && *dim))
                && chosen_aggregates
                    .iter()
                    .all(|c| aggregates.iter().any(|(a, ok)| a == c && *ok));
            let filter = ["", "WHERE y > 1998", "WHERE grp <> 'b'"][next(3) as usize];
            // A filtered build side drops probe rows in the join: left alone.
            let expected = expected && !filter.contains("grp");
            let columns = chosen_keys.len() + chosen_aggregates.len();
            let order: Vec<String> = (1..=columns).map(|i| i.to_string()).collect();
            let sql = format!(
                "SELECT * FROM (SELECT {}, {} FROM fact JOIN dim ON k = dk {filter} GROUP BY {}) \
                 ORDER BY {}",
                chosen_keys.join(", "),
                chosen_aggregates.join(", "),
                chosen_keys.join(", "),
                order.join(", ")
            );
            let (a, plan) = answer(&with, &sql).await;
            let (b, _) = answer(&without, &sql).await;
            assert_eq!(a, b, "{sql}");
            assert!(a.lines().count() > 5, "{sql}\n{a}");
            let moved = partials_below_joins(&plan, false);
            let text = displayable(plan.as_ref()).indent(false).to_string();
            assert_eq!(moved, usize::from(expected), "{sql}\n{text}");
            rewritten += moved;
        }
        assert!(rewritten >= 10, "{rewritten} of 40 rewritten");
        // A DISTINCT accumulator stays above the join; DataFusion plans one DISTINCT argument
        // as an inner aggregate grouped by it, whose partial the rule moves.
        for (distinct, moved) in [
            ("count(DISTINCT i), sum(d)", 1),
            ("count(DISTINCT i), count(DISTINCT f)", 0),
            ("count(DISTINCT i)", 1),
        ] {
            let sql = format!(
                "SELECT * FROM (SELECT name, {distinct} FROM fact JOIN dim ON k = dk \
                 GROUP BY name) ORDER BY 1"
            );
            let (a, plan) = answer(&with, &sql).await;
            assert_eq!(a, answer(&without, &sql).await.0, "{sql}");
            assert_eq!(partials_below_joins(&plan, false), moved, "{sql}");
        }
    }
}
