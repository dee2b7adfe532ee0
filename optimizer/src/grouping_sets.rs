//! [`GroupingSetsFromFinest`]: a logical optimizer rule that computes a `ROLLUP`, `CUBE` or
//! `GROUPING SETS` aggregate from one aggregate at its finest grouping, so the input's rows
//! are hashed once instead of once per grouping set.
//!
//! ```text
//!   Aggregate(GROUPING SETS S over g₁…gₙ, aggregates A, input I)
//!   ──► Projection(the original names and types)
//!         Aggregate(GROUPING SETS S over the columns g₁…gₙ, merge of A)
//!           Aggregate(GROUP BY g₁…gₙ, parts of A, input I)
//!   parts and merges:  sum(x) → sum(x), sum      count(x) → count(x), sum
//!                      min(x) → min(x), min      max(x) → max(x), max
//!                      avg(x) (x DOUBLE) → sum(x) and count(x), sum(s) / sum(c)
//! ```
//!
//! **Why.** DataFusion's partial aggregate expands every input row into one row per grouping
//! set before hashing: TPC-DS q22's `ROLLUP` of four item columns hashes 11.7 M inventory rows
//! five times, q67's of eight columns 0.54 M rows nine times. Grouping first by all the
//! columns leaves 18 000 rows for q22's five sets (0.55 → 0.29 s by hand, same files) and
//! still saves a tenth on q67, whose finest groups are almost as many as its rows (1.15 →
//! 1.04 s).
//!
//! **Why it keeps every answer.** Every grouping set is a subset of g₁…gₙ, so each of its
//! groups is a union of finest groups, and the aggregates named above are decomposable: the
//! sum of the groups' sums, the sum of their counts, the min of their mins. A NULL in a group
//! column is a group of its own in both plans; which columns a set rolls up is told by
//! `__grouping_id` in both. `avg` is taken only over `DOUBLE` (DataFusion casts integer input
//! to it), as the sum of the parts' sums over the sum of their counts; a group whose values
//! are all NULL has a NULL sum and stays NULL. Float sums and averages add the same values in
//! another order, so they may differ in the last bits (TPC-H SF 1 `avg(double)` of a rollup:
//! 0.0500014488219496 against …5302), as any change of partitioning makes them. Sums are cast
//! back to the original's type (the merge widens a decimal sum). Any other aggregate,
//! `DISTINCT`, `FILTER`, `ORDER BY` inside an aggregate, or a volatile group expression leaves
//! the plan alone.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, Result};
use datafusion::functions_aggregate::expr_fn::{count, max, min, sum};
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::{
    Aggregate, Expr, ExprSchemable, GroupingSet, LogicalPlan, Projection, cast,
};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};
use iceflight_options::IceflightOptions;

/// Alias prefix of the finest aggregate's parts (also how the rule recognises its own work).
pub const PART_ALIAS: &str = "__iceflight_part";

/// The rule (module docs); switched by `iceflight.optimizer.grouping_sets_from_finest`.
#[derive(Debug, Default)]
pub struct GroupingSetsFromFinest;

impl OptimizerRule for GroupingSetsFromFinest {
    fn name(&self) -> &str {
        "iceflight_grouping_sets_from_finest"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        if !IceflightOptions::of(&config.options())
            .optimizer
            .grouping_sets_from_finest
        {
            return Ok(Transformed::no(plan));
        }
        let LogicalPlan::Aggregate(aggregate) = &plan else {
            return Ok(Transformed::no(plan));
        };
        match from_finest(aggregate)? {
            Some(rewritten) => Ok(Transformed::yes(rewritten)),
            None => Ok(Transformed::no(plan)),
        }
    }
}

/// How one aggregate of the original is computed from the finest aggregate's parts.
enum Merge {
    /// `f(part)`, cast back to the original's type: sum, count (as a sum), min, max.
    Same(fn(Expr) -> Expr, usize),
    /// `sum(part s) / sum(part c)` as DOUBLE: avg.
    Average(usize, usize),
}

/// The rewritten plan of `aggregate` (module docs), or `None` when it does not qualify.
fn from_finest(aggregate: &Aggregate) -> Result<Option<LogicalPlan>> {
    let [Expr::GroupingSet(sets)] = aggregate.group_expr.as_slice() else {
        return Ok(None);
    };
    if matches!(sets, GroupingSet::GroupingSets(s) if s.len() < 2) {
        return Ok(None);
    }
    // Already rewritten (this rule runs in every optimizer pass, and other rules may put a
    // projection between the two aggregates): its aggregates are our merges.
    if aggregate
        .aggr_expr
        .iter()
        .any(|e| matches!(e, Expr::Alias(a) if a.name.starts_with(PART_ALIAS)))
    {
        return Ok(None);
    }
    let keys: Vec<Expr> = sets.distinct_expr().into_iter().cloned().collect();
    if keys.is_empty() || keys.iter().any(Expr::is_volatile) {
        return Ok(None);
    }
    let input_schema = aggregate.input.schema();
    let mut parts: Vec<Expr> = vec![];
    let mut merges: Vec<Merge> = vec![];
    for e in &aggregate.aggr_expr {
        let inner = match e {
            Expr::Alias(a) => a.expr.as_ref(),
            other => other,
        };
        let Expr::AggregateFunction(AggregateFunction { func, params }) = inner else {
            return Ok(None);
        };
        if params.distinct
            || params.filter.is_some()
            || !params.order_by.is_empty()
            || params.null_treatment.is_some()
            || params.args.len() != 1
        {
            return Ok(None);
        }
        let arg = params.args[0].clone();
        let mut part = |e: Expr| {
            parts.push(e.alias(format!("{PART_ALIAS}_{}", parts.len())));
            parts.len() - 1
        };
        let merge = match func.name() {
            "sum" => Merge::Same(sum, part(sum(arg))),
            "count" => Merge::Same(sum, part(count(arg))),
            "min" => Merge::Same(min, part(min(arg))),
            "max" => Merge::Same(max, part(max(arg))),
            "avg" if arg.get_type(input_schema)? == DataType::Float64 => {
                let s = part(sum(arg.clone()));
                let c = part(count(arg));
                Merge::Average(s, c)
            }
            _ => return Ok(None),
        };
        merges.push(merge);
    }
    let finest = LogicalPlan::Aggregate(Aggregate::try_new(
        Arc::clone(&aggregate.input),
        keys.clone(),
        parts,
    )?);
    let finest_schema = Arc::clone(finest.schema());
    let column = |i: usize| Expr::Column(Column::from(finest_schema.qualified_field(i)));
    let key_columns: Vec<Expr> = (0..keys.len()).map(column).collect();
    let by_key = |e: &Expr| -> Expr {
        let i = keys.iter().position(|k| k == e).expect("a distinct key");
        key_columns[i].clone()
    };
    let upper_sets = match sets {
        GroupingSet::Rollup(exprs) => GroupingSet::Rollup(exprs.iter().map(by_key).collect()),
        GroupingSet::Cube(exprs) => GroupingSet::Cube(exprs.iter().map(by_key).collect()),
        GroupingSet::GroupingSets(sets) => GroupingSet::GroupingSets(
            sets.iter()
                .map(|s| s.iter().map(by_key).collect())
                .collect(),
        ),
    };
    let part_column = |i: usize| column(keys.len() + i);
    // The merge aggregates, and each original aggregate as an expression over their outputs
    // (`avg` divides two of them, in the projection above).
    let mut upper_aggregates: Vec<Expr> = vec![];
    let mut finals: Vec<Expr> = vec![];
    let mut merged = |e: Expr| {
        let name = format!("{PART_ALIAS}_merged_{}", upper_aggregates.len());
        upper_aggregates.push(e.alias(&name));
        Expr::Column(Column::from_name(name))
    };
    for m in &merges {
        finals.push(match m {
            Merge::Same(f, p) => merged(f(part_column(*p))),
            Merge::Average(s, c) => {
                let s = merged(sum(part_column(*s)));
                let c = merged(sum(part_column(*c)));
                s / cast(c, DataType::Float64)
            }
        });
    }
    let upper = LogicalPlan::Aggregate(Aggregate::try_new(
        Arc::new(finest),
        vec![Expr::GroupingSet(upper_sets)],
        upper_aggregates,
    )?);
    // The original's fields by position: its group columns and `__grouping_id` as the upper
    // aggregate gives them, then each aggregate cast to its type, all under the original names.
    let original = &aggregate.schema;
    let upper_schema = Arc::clone(upper.schema());
    let n_group = original.fields().len() - aggregate.aggr_expr.len();
    let mut projection = vec![];
    for i in 0..original.fields().len() {
        let (qualifier, field) = original.qualified_field(i);
        let value = if i < n_group {
            Expr::Column(Column::from(upper_schema.qualified_field(i)))
        } else {
            cast(finals[i - n_group].clone(), field.data_type().clone())
        };
        projection.push(value.alias_qualified(qualifier.cloned(), field.name()));
    }
    Ok(Some(LogicalPlan::Projection(Projection::try_new(
        projection,
        Arc::new(upper),
    )?)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Decimal128Array, Float64Array, Int32Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use arrow::util::pretty::pretty_format_batches;
    use datafusion::datasource::MemTable;
    use datafusion::execution::SessionStateBuilder;
    use datafusion::logical_expr::LogicalPlan;
    use datafusion::prelude::{SessionConfig, SessionContext};

    use super::GroupingSetsFromFinest;

    /// 3 000 rows of small keys (a fifth NULL) and nullable int, double and decimal values,
    /// from a fixed linear congruential sequence.
    fn table() -> Arc<MemTable> {
        let mut next = crate::test_rows::sequence(0x2545_f491_4f6c_dd1d);
        let n = 3_000;
        let mut k1 = vec![];
        let mut k2 = vec![];
        let mut k3 = vec![];
        let mut i = vec![];
        let mut f = vec![];
        let mut d = vec![];
        for _ in 0..n {
            k1.push((next(5) != 0).then(|| next(4) as i32));
            k2.push((next(5) != 0).then(|| ["x", "y", "z"][next(3) as usize]));
            k3.push(next(3) as i32);
            i.push((next(7) != 0).then(|| next(1000) as i32 - 500));
            f.push((next(7) != 0).then(|| next(10_000) as f64 / 7.0));
            d.push((next(7) != 0).then(|| next(1_000_000) as i128 - 500_000));
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("k1", DataType::Int32, true),
            Field::new("k2", DataType::Utf8, true),
            Field::new("k3", DataType::Int32, false),
            Field::new("i", DataType::Int32, true),
            Field::new("f", DataType::Float64, true),
            Field::new("d", DataType::Decimal128(9, 2), true),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(k1)),
            Arc::new(StringArray::from(k2)),
            Arc::new(Int32Array::from(k3)),
            Arc::new(Int32Array::from(i)),
            Arc::new(Float64Array::from(f)),
            Arc::new(
                Decimal128Array::from(d)
                    .with_precision_and_scale(9, 2)
                    .unwrap(),
            ),
        ];
        let batch = RecordBatch::try_new(Arc::clone(&schema), columns).unwrap();
        let halves = vec![
            vec![batch.slice(0, n / 2)],
            vec![batch.slice(n / 2, n - n / 2)],
        ];
        Arc::new(MemTable::try_new(schema, halves).unwrap())
    }

    fn context(rule: bool) -> SessionContext {
        let mut builder = SessionStateBuilder::new()
            .with_config(SessionConfig::new().with_target_partitions(2))
            .with_default_features();
        if rule {
            builder = builder.with_optimizer_rule(Arc::new(GroupingSetsFromFinest));
        }
        let ctx = SessionContext::new_with_state(builder.build());
        ctx.register_table("t", table()).unwrap();
        ctx
    }

    fn aggregates(plan: &LogicalPlan) -> usize {
        let own = usize::from(matches!(plan, LogicalPlan::Aggregate(_)));
        own + plan.inputs().into_iter().map(aggregates).sum::<usize>()
    }

    /// Every grouping form, with every aggregate the rule decomposes, answers as DataFusion's
    /// own grouping sets do on the same rows; the rewritten plan has the finest aggregate under
    /// the grouping-set one. `count(DISTINCT …)` is left alone.
    #[tokio::test]
    async fn answers_equal_datafusions_grouping_sets() {
        // Float aggregates rounded: the merge adds the same values in another order.
        let aggregates_sql = "count(*), count(i), sum(i), min(i), max(i), round(avg(i), 9), \
                              round(sum(f), 6), min(f), round(avg(f), 9), sum(d), min(d), \
                              max(d), count(d), min(k2)";
        const AGGREGATES: usize = 14;
        // (keys selected, grouping): `grouping()` of every key, a computed key too.
        let groupings = [
            ("k1, k2, grouping(k1), grouping(k2)", "ROLLUP (k1, k2, k3)"),
            ("k1, k2, grouping(k1), grouping(k2)", "CUBE (k1, k2)"),
            (
                "k1, k2, k3, grouping(k2)",
                "GROUPING SETS ((k1), (k2, k3), ())",
            ),
            ("k3 % 2, k2", "ROLLUP (k3 % 2, k2)"),
        ];
        let (with, without) = (context(true), context(false));
        for (keys, grouping) in groupings {
            let columns = keys.split(", ").count() + AGGREGATES;
            let order: Vec<String> = (1..=columns).map(|i| i.to_string()).collect();
            let sql = format!(
                "SELECT * FROM (SELECT {keys}, {aggregates_sql} FROM t GROUP BY {grouping}) \
                 ORDER BY {}",
                order.join(", ")
            );
            let a = with.sql(&sql).await.unwrap();
            let plan = a.clone().into_optimized_plan().unwrap();
            assert_eq!(aggregates(&plan), 2, "{sql}\n{plan}");
            let a = pretty_format_batches(&a.collect().await.unwrap())
                .unwrap()
                .to_string();
            let b = without.sql(&sql).await.unwrap();
            assert_eq!(aggregates(&b.clone().into_optimized_plan().unwrap()), 1);
            let b = pretty_format_batches(&b.collect().await.unwrap())
                .unwrap()
                .to_string();
            assert_eq!(a, b, "{sql}");
            assert!(a.lines().count() > 8, "{a}");
        }
        let distinct = "SELECT k1, count(DISTINCT k2) FROM t GROUP BY ROLLUP (k1)";
        let plan = with
            .sql(distinct)
            .await
            .unwrap()
            .into_optimized_plan()
            .unwrap();
        assert!(
            !plan
                .display_indent()
                .to_string()
                .contains(super::PART_ALIAS),
            "{plan}"
        );
    }
}
