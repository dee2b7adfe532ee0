//! Floats compare as SQL says: `-0.0 = 0.0`, and every NaN is one value, equal to itself and
//! greater than every number (case c12; DuckDB, PostgreSQL, and IEEE 754 for the zeros).
//!
//! DataFusion 54.1 and arrow compare, hash, group and join floats by their IEEE 754 total order
//! (arrow-ord's comparison kernels, `datafusion_common::hash_utils`, the row format): `-0.0 <
//! 0.0`, two NaNs of different bits differ, and a NaN with its sign bit set is below every
//! number. DataFusion 55 fixes the zeros in some operators and not others (IN lists of four or
//! more values, `CASE`, windows), and neither release the NaNs. No DataFusion hook changes how
//! a kernel compares, so this rule changes what the kernels are given instead: the float values
//! that are compared, hashed, grouped or sorted pass through [`canonical_float`] first, which
//! maps `-0.0` to `0.0` and every NaN to one NaN. On those values total order is SQL's order.
//!
//! ```text
//!   a.f = b.f            (join keys)          ─► canonical_float(a.f) = canonical_float(b.f)
//!   GROUP BY f, DISTINCT, count(DISTINCT f)   ─► canonical_float(f) AS f
//!   PARTITION BY / ORDER BY f in a window     ─► canonical_float(f)
//!   f < g, -f = 0.0, f IN (0.0, x), CASE f …  ─► canonical_float(f) < canonical_float(g), …
//!   ORDER BY -f, min(-f), max(-f)             ─► canonical_float(-f) (not a scan's column)
//!   literals                                  ─► -0.0 as 0.0, NaN as the one NaN
//!   f > 1.5 (f a column of an Iceberg scan)   ─► unchanged: kept for pruning
//! ```
//!
//! A comparison of a column straight from an Iceberg scan (through filters, aliases and
//! projections of columns) with a literal that is neither zero nor NaN stays as written, so the scan still prunes by it: total order and SQL agree there,
//! because that scan hands out one NaN only (`scan/src/model/output.rs`) and a zero compares with a
//! non-zero literal the same whatever its sign. A `DELETE`'s condition gets the same rewrite
//! ([`delete_condition`]). Values are not changed where they are only returned: `SELECT f`
//! shows `-0.0` as stored (a group key or a `DISTINCT` value shows `0.0`, the group's value);
//! `min`/`max` of a column may answer either zero, as IEEE allows; `ORDER BY f` of a scan's
//! column puts `-0.0` before `0.0` (equal values, either order is right). Not covered: array functions that
//! compare elements (`array_distinct`, …), `greatest`/`least`, `GROUPING SETS` keys, and keys of
//! struct or list type holding floats.
//!
//! The rule runs last among the optimizer rules, so it sees the joins that decorrelated
//! subqueries, `INTERSECT` and `EXCEPT` become and the aggregates `DISTINCT` and `UNION` become.
//! It leaves its own output alone (a wrapped value is not wrapped again); when a later pass's
//! common-subexpression elimination names a wrapped value as a column, that column is wrapped
//! once more, which changes no answer.

use std::sync::{Arc, LazyLock};

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{ArrowPrimitiveType, DataType, FieldRef, Float32Type, Float64Type};
use datafusion::catalog::default_table_source::source_as_provider;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeIterator};
use datafusion::common::{Column, DFSchema, JoinType, Result, ScalarValue, exec_err};
use datafusion::logical_expr::expr::{
    AggregateFunction, Between, InList, ScalarFunction, WindowFunction,
};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    Aggregate, BinaryExpr, Case, ColumnarValue, Expr, ExprSchemable, Join, LogicalPlan, Operator,
    ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Sort, Volatility,
    Window,
};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};
use iceflight_scan::IcebergTableProvider;

/// The name of [`CanonicalFloat`] in plans.
pub const CANONICAL_FLOAT: &str = "canonical_float";

/// `canonical_float(x)`: `x` (`REAL` or `DOUBLE`) with `-0.0` as `0.0` and every NaN as the
/// canonical NaN (`f32::NAN`, `f64::NAN`); every other value, NULL included, unchanged. An array
/// without either is passed on without a copy.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct CanonicalFloat {
    signature: Signature,
}

impl Default for CanonicalFloat {
    fn default() -> Self {
        Self {
            signature: Signature::uniform(
                1,
                vec![DataType::Float32, DataType::Float64],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for CanonicalFloat {
    fn name(&self) -> &str {
        CANONICAL_FLOAT
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(args[0].clone())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        Ok(Arc::clone(&args.arg_fields[0]))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        match args.args.first() {
            Some(ColumnarValue::Array(a)) => Ok(ColumnarValue::Array(canonical_array(a)?)),
            Some(ColumnarValue::Scalar(s)) => Ok(ColumnarValue::Scalar(canonical_scalar(s))),
            None => exec_err!("{CANONICAL_FLOAT} takes one argument"),
        }
    }
}

/// The [`CanonicalFloat`] function, as sessions register it and the rule calls it.
pub fn canonical_float() -> Arc<ScalarUDF> {
    static UDF: LazyLock<Arc<ScalarUDF>> =
        LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(CanonicalFloat::default())));
    Arc::clone(&UDF)
}

fn canonical_array(array: &ArrayRef) -> Result<ArrayRef> {
    Ok(match array.data_type() {
        DataType::Float64 => canonical_values::<Float64Type>(
            array,
            |v| v.to_bits() != canonical_f64(v).to_bits(),
            canonical_f64,
        ),
        DataType::Float32 => canonical_values::<Float32Type>(
            array,
            |v| v.to_bits() != canonical_f32(v).to_bits(),
            canonical_f32,
        ),
        other => return exec_err!("{CANONICAL_FLOAT} takes REAL or DOUBLE, not {other}"),
    })
}

/// `array` with `canonical` applied to every value, or unchanged (no copy) when no value is
/// `changed` by it.
fn canonical_values<T: ArrowPrimitiveType>(
    array: &ArrayRef,
    changed: fn(T::Native) -> bool,
    canonical: fn(T::Native) -> T::Native,
) -> ArrayRef {
    let values = array.as_primitive::<T>();
    if !values.values().iter().any(|v| changed(*v)) {
        return Arc::clone(array);
    }
    Arc::new(values.unary::<_, T>(canonical))
}

fn canonical_f64(v: f64) -> f64 {
    if v.is_nan() {
        f64::NAN
    } else if v == 0.0 {
        0.0
    } else {
        v
    }
}

fn canonical_f32(v: f32) -> f32 {
    if v.is_nan() {
        f32::NAN
    } else if v == 0.0 {
        0.0
    } else {
        v
    }
}

fn canonical_scalar(value: &ScalarValue) -> ScalarValue {
    match value {
        ScalarValue::Float64(Some(v)) => ScalarValue::Float64(Some(canonical_f64(*v))),
        ScalarValue::Float32(Some(v)) => ScalarValue::Float32(Some(canonical_f32(*v))),
        other => other.clone(),
    }
}

/// The optimizer rule of the module docs.
#[derive(Debug, Default)]
pub struct FloatSemantics;

impl OptimizerRule for FloatSemantics {
    fn name(&self) -> &str {
        "iceflight_float_semantics"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        // A scan's filters are the scan's to answer; the filter above it is rewritten.
        if matches!(plan, LogicalPlan::TableScan(_)) {
            return Ok(Transformed::no(plan));
        }
        let schema = input_schema(&plan);
        // The columns of a single input that come straight from an Iceberg scan.
        let scanned: Vec<bool> = match plan.inputs().as_slice() {
            [input] => (0..input.schema().fields().len())
                .map(|i| from_iceberg_scan(input, i))
                .collect(),
            _ => vec![],
        };
        let from_scan = |c: &Column| {
            schema
                .index_of_column(c)
                .is_ok_and(|i| scanned.get(i).copied().unwrap_or(false))
        };
        let keyed = match plan {
            LogicalPlan::Join(join) => canonical_join_keys(join)?,
            LogicalPlan::Aggregate(aggregate) => {
                canonical_group_keys(aggregate, &schema, &from_scan)?
            }
            LogicalPlan::Window(window) => canonical_window_keys(window, &schema)?,
            LogicalPlan::Sort(sort) => canonical_sort_keys(sort, &schema, &from_scan)?,
            other => Transformed::no(other),
        };
        keyed.transform_data(|plan| {
            let names = NamePreserver::new(&plan);
            plan.map_expressions(|e| {
                let name = names.save(&e);
                Ok(comparisons(e, &schema, &from_scan)?.update_data(|e| name.restore(e)))
            })
        })
    }
}

/// `condition` of a `DELETE` on an Iceberg table (over the columns of `schema`, as written) with
/// its float comparisons made as the rule makes a filter's: the condition is evaluated on the
/// rows of an Iceberg scan.
///
/// Errors: none in practice (the rewrite only wraps expressions); DataFusion's tree errors.
pub fn delete_condition(condition: Expr, schema: &DFSchema) -> Result<Expr> {
    Ok(comparisons(condition, schema, &|_| true)?.data)
}

/// Whether output column `index` of `plan` is a column of an Iceberg table read by a scan,
/// passed up unchanged (whose NaNs are canonical, `scan/src/model/output.rs`): through filters,
/// sorts, limits, aliases, joins and projections of bare columns.
fn from_iceberg_scan(plan: &LogicalPlan, index: usize) -> bool {
    match plan {
        LogicalPlan::TableScan(scan) => source_as_provider(&scan.source)
            .is_ok_and(|p| p.downcast_ref::<IcebergTableProvider>().is_some()),
        LogicalPlan::Filter(f) => from_iceberg_scan(&f.input, index),
        LogicalPlan::Sort(s) => from_iceberg_scan(&s.input, index),
        LogicalPlan::Limit(l) => from_iceberg_scan(&l.input, index),
        LogicalPlan::SubqueryAlias(a) => from_iceberg_scan(&a.input, index),
        LogicalPlan::Join(j) => {
            let left = j.left.schema().fields().len();
            match j.join_type {
                JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark => {
                    index < left && from_iceberg_scan(&j.left, index)
                }
                JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark => {
                    from_iceberg_scan(&j.right, index)
                }
                _ if index < left => from_iceberg_scan(&j.left, index),
                _ => from_iceberg_scan(&j.right, index - left),
            }
        }
        LogicalPlan::Projection(p) => {
            let column = match p.expr.get(index) {
                Some(Expr::Column(c)) => c,
                Some(Expr::Alias(a)) => match a.expr.as_ref() {
                    Expr::Column(c) => c,
                    _ => return false,
                },
                _ => return false,
            };
            p.input
                .schema()
                .index_of_column(column)
                .is_ok_and(|i| from_iceberg_scan(&p.input, i))
        }
        _ => false,
    }
}

/// The columns a node's expressions can reference: its inputs' schemas merged.
fn input_schema(plan: &LogicalPlan) -> DFSchema {
    let mut schema = DFSchema::empty();
    for input in plan.inputs() {
        schema.merge(input.schema());
    }
    schema
}

fn is_float(expr: &Expr, schema: &DFSchema) -> bool {
    matches!(
        expr.get_type(schema),
        Ok(DataType::Float32 | DataType::Float64)
    )
}

fn is_canonical_call(expr: &Expr) -> bool {
    match expr {
        Expr::ScalarFunction(f) => f.func.name() == CANONICAL_FLOAT,
        Expr::Alias(a) => is_canonical_call(&a.expr),
        _ => false,
    }
}

/// `expr` canonical when it is a float: a literal rewritten, anything else wrapped once.
fn canonical(expr: Expr, schema: &DFSchema) -> Transformed<Expr> {
    if !is_float(&expr, schema) {
        return Transformed::no(expr);
    }
    match expr {
        Expr::Literal(v, m) => {
            let c = canonical_scalar(&v);
            let changed = c != v;
            Transformed::new_transformed(Expr::Literal(c, m), changed)
        }
        e if is_canonical_call(&e) => Transformed::no(e),
        e => Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(
            canonical_float(),
            vec![e],
        ))),
    }
}

/// `exprs`, each [`canonical`].
fn canonical_all(exprs: Vec<Expr>, schema: &DFSchema) -> Result<Transformed<Vec<Expr>>> {
    exprs
        .into_iter()
        .map_until_stop_and_collect(|e| Ok(canonical(e, schema)))
}

/// A literal whose total order agrees with SQL against any float: not NULL, zero or NaN.
fn plain_literal(expr: &Expr) -> bool {
    match expr {
        Expr::Literal(ScalarValue::Float64(Some(v)), _) => *v != 0.0 && !v.is_nan(),
        Expr::Literal(ScalarValue::Float32(Some(v)), _) => *v != 0.0 && !v.is_nan(),
        _ => false,
    }
}

/// The comparisons inside `expr` on canonical values (module docs); `from_scan`: whether a
/// column comes straight from an Iceberg scan, whose NaNs are canonical already.
fn comparisons(
    expr: Expr,
    schema: &DFSchema,
    from_scan: &dyn Fn(&Column) -> bool,
) -> Result<Transformed<Expr>> {
    let kept = |e: &Expr| matches!(e, Expr::Column(c) if from_scan(c));
    expr.transform_up(|e| match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if is_comparison(op) && (is_float(&left, schema) || is_float(&right, schema)) =>
        {
            if (kept(&left) && plain_literal(&right)) || (kept(&right) && plain_literal(&left)) {
                return Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr {
                    left,
                    op,
                    right,
                })));
            }
            let (l, r) = (canonical(*left, schema), canonical(*right, schema));
            let changed = l.transformed || r.transformed;
            let e = Expr::BinaryExpr(BinaryExpr::new(Box::new(l.data), op, Box::new(r.data)));
            Ok(Transformed::new_transformed(e, changed))
        }
        Expr::InList(InList {
            expr,
            list,
            negated,
        }) if is_float(&expr, schema) => {
            if kept(&expr) && list.iter().all(plain_literal) {
                return Ok(Transformed::no(Expr::InList(InList::new(
                    expr, list, negated,
                ))));
            }
            let expr = canonical(*expr, schema);
            let list = canonical_all(list, schema)?;
            let changed = expr.transformed || list.transformed;
            let e = Expr::InList(InList::new(Box::new(expr.data), list.data, negated));
            Ok(Transformed::new_transformed(e, changed))
        }
        Expr::Between(Between {
            expr,
            negated,
            low,
            high,
        }) if is_float(&expr, schema) => {
            let parts = canonical_all(vec![*expr, *low, *high], schema)?;
            let changed = parts.transformed;
            let [expr, low, high]: [Expr; 3] = parts.data.try_into().expect("three parts");
            let e = Expr::Between(Between::new(
                Box::new(expr),
                negated,
                Box::new(low),
                Box::new(high),
            ));
            Ok(Transformed::new_transformed(e, changed))
        }
        Expr::Case(Case {
            expr: Some(base),
            when_then_expr,
            else_expr,
        }) if is_float(&base, schema) => {
            let base = canonical(*base, schema);
            let mut changed = base.transformed;
            let when_then_expr = when_then_expr
                .into_iter()
                .map(|(when, then)| {
                    let when = canonical(*when, schema);
                    changed |= when.transformed;
                    (Box::new(when.data), then)
                })
                .collect();
            let e = Expr::Case(Case {
                expr: Some(Box::new(base.data)),
                when_then_expr,
                else_expr,
            });
            Ok(Transformed::new_transformed(e, changed))
        }
        Expr::ScalarFunction(f) if f.func.name() == "nullif" => {
            let args = canonical_all(f.args, schema)?;
            let e = Expr::ScalarFunction(ScalarFunction::new_udf(f.func, args.data));
            Ok(Transformed::new_transformed(e, args.transformed))
        }
        other => Ok(Transformed::no(other)),
    })
}

fn is_comparison(op: Operator) -> bool {
    matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
            | Operator::IsDistinctFrom
            | Operator::IsNotDistinctFrom
    )
}

/// A join whose float keys are compared and hashed canonical.
fn canonical_join_keys(mut join: Join) -> Result<Transformed<LogicalPlan>> {
    let (left, right) = (
        Arc::clone(join.left.schema()),
        Arc::clone(join.right.schema()),
    );
    let mut changed = false;
    join.on = std::mem::take(&mut join.on)
        .into_iter()
        .map(|(l, r)| {
            if !(is_float(&l, &left) || is_float(&r, &right)) {
                return (l, r);
            }
            let (l, r) = (canonical(l, &left), canonical(r, &right));
            changed |= l.transformed || r.transformed;
            (l.data, r.data)
        })
        .collect();
    Ok(Transformed::new_transformed(
        LogicalPlan::Join(join),
        changed,
    ))
}

/// `exprs` (a node's output expressions) each rewritten by `f` under its own name.
fn renamed(
    exprs: &[Expr],
    mut f: impl FnMut(Expr) -> Result<Transformed<Expr>>,
) -> Result<Transformed<Vec<Expr>>> {
    let names = NamePreserver::new_for_projection();
    exprs.iter().cloned().map_until_stop_and_collect(|e| {
        let name = names.save(&e);
        Ok(f(e)?.update_data(|e| name.restore(e)))
    })
}

/// An aggregate grouping by canonical float keys, under their names; its `DISTINCT`
/// aggregates take canonical float arguments, and `min`/`max` too unless of a scan's column.
/// Grouping sets are left as they are.
fn canonical_group_keys(
    aggregate: Aggregate,
    schema: &DFSchema,
    from_scan: &dyn Fn(&Column) -> bool,
) -> Result<Transformed<LogicalPlan>> {
    if aggregate
        .group_expr
        .iter()
        .any(|e| matches!(e, Expr::GroupingSet(_)))
    {
        return Ok(Transformed::no(LogicalPlan::Aggregate(aggregate)));
    }
    let group_expr = renamed(&aggregate.group_expr, |e| {
        Ok(match e {
            Expr::Alias(a) => canonical(*a.expr, schema),
            e => canonical(e, schema),
        })
    })?;
    let aggr_expr = renamed(&aggregate.aggr_expr, |e| {
        e.transform_up(|e| match e {
            Expr::AggregateFunction(mut f) if keyed_arguments(&f) => {
                // min/max order NaNs only: a scan's column has one NaN already.
                let ordering_only = !f.params.distinct;
                let args = std::mem::take(&mut f.params.args)
                    .into_iter()
                    .map_until_stop_and_collect(|a| match &a {
                        Expr::Column(c) if ordering_only && from_scan(c) => Ok(Transformed::no(a)),
                        _ => Ok(canonical(a, schema)),
                    })?;
                f.params.args = args.data;
                let e = Expr::AggregateFunction(AggregateFunction { ..f });
                Ok(Transformed::new_transformed(e, args.transformed))
            }
            other => Ok(Transformed::no(other)),
        })
    })?;
    if !(group_expr.transformed || aggr_expr.transformed) {
        return Ok(Transformed::no(LogicalPlan::Aggregate(aggregate)));
    }
    let rebuilt = Aggregate::try_new(aggregate.input, group_expr.data, aggr_expr.data)?;
    Ok(Transformed::yes(LogicalPlan::Aggregate(rebuilt)))
}

/// Whether an aggregate compares its arguments' values: a `DISTINCT` one, `min` and `max`.
fn keyed_arguments(f: &AggregateFunction) -> bool {
    f.params.distinct || matches!(f.func.name(), "min" | "max")
}

/// A window whose float partition and order keys are canonical (rows of `-0.0` and `0.0` in
/// one partition, and ties in `rank()`).
fn canonical_window_keys(window: Window, schema: &DFSchema) -> Result<Transformed<LogicalPlan>> {
    let window_expr = renamed(&window.window_expr, |e| {
        e.transform_up(|e| match e {
            Expr::WindowFunction(f) => {
                let mut f: WindowFunction = *f;
                let partition_by =
                    canonical_all(std::mem::take(&mut f.params.partition_by), schema)?;
                let mut changed = partition_by.transformed;
                f.params.partition_by = partition_by.data;
                for sort in &mut f.params.order_by {
                    let key = canonical(sort.expr.clone(), schema);
                    changed |= key.transformed;
                    sort.expr = key.data;
                }
                let e = Expr::WindowFunction(Box::new(f));
                Ok(Transformed::new_transformed(e, changed))
            }
            other => Ok(Transformed::no(other)),
        })
    })?;
    if !window_expr.transformed {
        return Ok(Transformed::no(LogicalPlan::Window(window)));
    }
    let rebuilt = Window::try_new(window_expr.data, window.input)?;
    Ok(Transformed::yes(LogicalPlan::Window(rebuilt)))
}

/// A sort whose float keys are canonical (a NaN with its sign bit set sorts last, as every
/// NaN), except the columns of an Iceberg scan, whose values sort as they are (module docs).
fn canonical_sort_keys(
    mut sort: Sort,
    schema: &DFSchema,
    from_scan: &dyn Fn(&Column) -> bool,
) -> Result<Transformed<LogicalPlan>> {
    let mut changed = false;
    for key in &mut sort.expr {
        if matches!(&key.expr, Expr::Column(c) if from_scan(c)) {
            continue;
        }
        let c = canonical(key.expr.clone(), schema);
        changed |= c.transformed;
        key.expr = c.data;
    }
    Ok(Transformed::new_transformed(
        LogicalPlan::Sort(sort),
        changed,
    ))
}

#[cfg(test)]
mod tests {
    use arrow::array::Float64Array;

    use super::*;

    /// `-0.0` becomes `0.0` and a NaN of any bits the canonical NaN; nothing else changes, and
    /// an array with neither is the same array.
    #[test]
    fn canonical_values() {
        let negative_nan = f64::from_bits(f64::NAN.to_bits() | (1 << 63));
        let a: ArrayRef = Arc::new(Float64Array::from(vec![
            Some(-0.0),
            Some(negative_nan),
            None,
            Some(-1.5),
        ]));
        let c = canonical_array(&a).unwrap();
        let c = c.as_primitive::<Float64Type>();
        assert_eq!(c.value(0).to_bits(), 0.0f64.to_bits());
        assert_eq!(c.value(1).to_bits(), f64::NAN.to_bits());
        assert!(c.is_null(2));
        assert_eq!(c.value(3), -1.5);
        let plain: ArrayRef = Arc::new(Float64Array::from(vec![1.0, 0.0, f64::NAN]));
        assert!(Arc::ptr_eq(&plain, &canonical_array(&plain).unwrap()));
        assert_eq!(
            canonical_scalar(&ScalarValue::Float32(Some(-0.0))),
            ScalarValue::Float32(Some(0.0))
        );
    }
}
