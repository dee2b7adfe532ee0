//! Floats compare as SQL says: `-0.0 = 0.0`, and every NaN is one value, equal to itself and
//! greater than every number (case c12; DuckDB, PostgreSQL, and IEEE 754 for the zeros).
//!
//! DataFusion 54.1 and arrow compare, hash, group and join floats by their IEEE 754 total order
//! (arrow-ord's comparison kernels, `datafusion_common::hash_utils`, the row format): `-0.0 <
//! 0.0`, two NaNs of different bits differ, and a NaN with its sign bit set is below every
//! number. DataFusion 55 fixes the zeros in some operators and not others (IN lists of four or
//! more values, `CASE`, windows), and neither release the NaNs. No DataFusion hook changes how
//! a kernel compares, so this rule changes what the kernels are given instead: the float values
//! that are compared, hashed or grouped pass through [`canonical_float`] first, which maps
//! `-0.0` to `0.0` and every NaN to one NaN. On those values total order is SQL's order.
//!
//! ```text
//!   a.f = b.f            (join keys)          ─► canonical_float(a.f) = canonical_float(b.f)
//!   GROUP BY f, DISTINCT, count(DISTINCT f)   ─► canonical_float(f) AS f
//!   PARTITION BY / ORDER BY f in a window     ─► canonical_float(f)
//!   f < g, -f = 0.0, f IN (0.0, x), CASE f …  ─► canonical_float(f) < canonical_float(g), …
//!   literals                                  ─► -0.0 as 0.0, NaN as the one NaN
//!   f > 1.5 (f a column read by a scan)       ─► unchanged: kept for pruning
//! ```
//!
//! A comparison of a column straight from a table scan with a literal that is neither zero nor
//! NaN stays as written, so the scan still prunes by it: total order and SQL agree there,
//! because the scan hands out one NaN only (`scan/src/output.rs`) and a zero compares with a
//! non-zero literal the same whatever its sign. Values are not changed where they are only
//! returned: `SELECT f` shows `-0.0` as stored; `min`/`max` may answer either zero, as IEEE
//! allows; `ORDER BY f` puts `-0.0` before `0.0` (equal values, either order is right).
//! Not covered: array functions that compare elements (`array_distinct`, `array_union`, …)
//! and `GROUPING SETS` keys.
//!
//! The rule runs last among the optimizer rules, so it sees the joins that decorrelated
//! subqueries, `INTERSECT` and `EXCEPT` become and the aggregates `DISTINCT` and `UNION` become;
//! it is idempotent (a wrapped value is not wrapped again), so the optimizer's passes converge.

use std::sync::{Arc, LazyLock};

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, FieldRef, Float32Type, Float64Type};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result, ScalarValue, exec_err};
use datafusion::logical_expr::expr::{
    AggregateFunction, Between, InList, ScalarFunction, WindowFunction,
};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    Aggregate, BinaryExpr, Case, ColumnarValue, Expr, ExprSchemable, GroupingSet, Join,
    LogicalPlan, Operator, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility, Window,
};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

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
        DataType::Float64 => {
            let values = array.as_primitive::<Float64Type>();
            let odd = |v: f64| {
                v.to_bits() == (-0.0f64).to_bits()
                    || (v.is_nan() && v.to_bits() != f64::NAN.to_bits())
            };
            if !values.values().iter().any(|v| odd(*v)) {
                return Ok(Arc::clone(array));
            }
            Arc::new(values.unary::<_, Float64Type>(canonical_f64))
        }
        DataType::Float32 => {
            let values = array.as_primitive::<Float32Type>();
            let odd = |v: f32| {
                v.to_bits() == (-0.0f32).to_bits()
                    || (v.is_nan() && v.to_bits() != f32::NAN.to_bits())
            };
            if !values.values().iter().any(|v| odd(*v)) {
                return Ok(Arc::clone(array));
            }
            Arc::new(values.unary::<_, Float32Type>(canonical_f32))
        }
        other => return exec_err!("{CANONICAL_FLOAT} takes REAL or DOUBLE, not {other}"),
    })
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
        let schema = input_schema(&plan)?;
        let from_scan = matches!(&plan, LogicalPlan::Filter(f) if matches!(f.input.as_ref(), LogicalPlan::TableScan(_)));
        let keyed = match plan {
            LogicalPlan::Join(join) => canonical_join_keys(join, &schema)?,
            LogicalPlan::Aggregate(aggregate) => canonical_group_keys(aggregate, &schema)?,
            LogicalPlan::Window(window) => canonical_window_keys(window, &schema)?,
            other => Transformed::no(other),
        };
        keyed.transform_data(|plan| {
            let names = NamePreserver::new(&plan);
            plan.map_expressions(|e| {
                let name = names.save(&e);
                Ok(comparisons(e, &schema, from_scan)?.update_data(|e| name.restore(e)))
            })
        })
    }
}

/// The columns a node's expressions can reference: its inputs' schemas merged.
fn input_schema(plan: &LogicalPlan) -> Result<DFSchema> {
    let mut schema = DFSchema::empty();
    for input in plan.inputs() {
        schema.merge(input.schema());
    }
    Ok(schema)
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

/// `expr` (a float) canonical: a literal rewritten, anything else wrapped once.
fn canonical(expr: Expr) -> Transformed<Expr> {
    match expr {
        Expr::Literal(v, m) => {
            let c = canonical_scalar(&v);
            match c == v {
                true => Transformed::no(Expr::Literal(v, m)),
                false => Transformed::yes(Expr::Literal(c, m)),
            }
        }
        e if is_canonical_call(&e) => Transformed::no(e),
        e => Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(
            canonical_float(),
            vec![e],
        ))),
    }
}

/// `expr` canonical when it is a float, else unchanged.
fn canonical_if_float(expr: Expr, schema: &DFSchema) -> Transformed<Expr> {
    match is_float(&expr, schema) {
        true => canonical(expr),
        false => Transformed::no(expr),
    }
}

/// A literal whose total order agrees with SQL against any float: not NULL, zero or NaN.
fn plain_literal(expr: &Expr) -> bool {
    match expr {
        Expr::Literal(ScalarValue::Float64(Some(v)), _) => *v != 0.0 && !v.is_nan(),
        Expr::Literal(ScalarValue::Float32(Some(v)), _) => *v != 0.0 && !v.is_nan(),
        _ => false,
    }
}

/// The comparisons inside `expr` on canonical values (module docs); `from_scan`: columns are a
/// table scan's, whose NaNs are canonical already.
fn comparisons(expr: Expr, schema: &DFSchema, from_scan: bool) -> Result<Transformed<Expr>> {
    let kept = |e: &Expr| from_scan && matches!(e, Expr::Column(_));
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
            let (l, r) = (canonical(*left), canonical(*right));
            let changed = l.transformed || r.transformed;
            let e = Expr::BinaryExpr(BinaryExpr::new(Box::new(l.data), op, Box::new(r.data)));
            Ok(if changed {
                Transformed::yes(e)
            } else {
                Transformed::no(e)
            })
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
            let mut changed = false;
            let expr = canonical(*expr);
            changed |= expr.transformed;
            let list = list
                .into_iter()
                .map(|item| {
                    let item = canonical(item);
                    changed |= item.transformed;
                    item.data
                })
                .collect();
            let e = Expr::InList(InList::new(Box::new(expr.data), list, negated));
            Ok(if changed {
                Transformed::yes(e)
            } else {
                Transformed::no(e)
            })
        }
        Expr::Between(Between {
            expr,
            negated,
            low,
            high,
        }) if is_float(&expr, schema) => {
            let (expr, low, high) = (canonical(*expr), canonical(*low), canonical(*high));
            let changed = expr.transformed || low.transformed || high.transformed;
            let e = Expr::Between(Between::new(
                Box::new(expr.data),
                negated,
                Box::new(low.data),
                Box::new(high.data),
            ));
            Ok(if changed {
                Transformed::yes(e)
            } else {
                Transformed::no(e)
            })
        }
        Expr::Case(Case {
            expr: Some(base),
            when_then_expr,
            else_expr,
        }) if is_float(&base, schema) => {
            let base = canonical(*base);
            let mut changed = base.transformed;
            let when_then_expr = when_then_expr
                .into_iter()
                .map(|(when, then)| {
                    let when = canonical(*when);
                    changed |= when.transformed;
                    (Box::new(when.data), then)
                })
                .collect();
            let e = Expr::Case(Case {
                expr: Some(Box::new(base.data)),
                when_then_expr,
                else_expr,
            });
            Ok(if changed {
                Transformed::yes(e)
            } else {
                Transformed::no(e)
            })
        }
        Expr::ScalarFunction(f)
            if f.func.name() == "nullif" && f.args.iter().any(|a| is_float(a, schema)) =>
        {
            let mut changed = false;
            let args = f
                .args
                .into_iter()
                .map(|a| {
                    let a = canonical(a);
                    changed |= a.transformed;
                    a.data
                })
                .collect();
            let e = Expr::ScalarFunction(ScalarFunction::new_udf(f.func, args));
            Ok(if changed {
                Transformed::yes(e)
            } else {
                Transformed::no(e)
            })
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
fn canonical_join_keys(mut join: Join, _schema: &DFSchema) -> Result<Transformed<LogicalPlan>> {
    let mut changed = false;
    let (left, right) = (join.left.schema(), join.right.schema());
    join.on = std::mem::take(&mut join.on)
        .into_iter()
        .map(|(l, r)| {
            if !(is_float(&l, left) || is_float(&r, right)) {
                return (l, r);
            }
            let (l, r) = (canonical(l), canonical(r));
            changed |= l.transformed || r.transformed;
            (l.data, r.data)
        })
        .collect();
    let plan = LogicalPlan::Join(join);
    Ok(if changed {
        Transformed::yes(plan)
    } else {
        Transformed::no(plan)
    })
}

/// An aggregate grouping by canonical float keys, under their names, and whose `DISTINCT`
/// aggregates take canonical float arguments. Grouping sets are left as they are.
fn canonical_group_keys(
    aggregate: Aggregate,
    schema: &DFSchema,
) -> Result<Transformed<LogicalPlan>> {
    if aggregate.group_expr.iter().any(|e| {
        matches!(
            e,
            Expr::GroupingSet(
                GroupingSet::Cube(_) | GroupingSet::Rollup(_) | GroupingSet::GroupingSets(_)
            )
        )
    }) {
        return Ok(Transformed::no(LogicalPlan::Aggregate(aggregate)));
    }
    let names = NamePreserver::new_for_projection();
    let mut changed = false;
    let group_expr: Vec<Expr> = aggregate
        .group_expr
        .iter()
        .cloned()
        .map(|e| {
            let name = names.save(&e);
            let inner = match e {
                Expr::Alias(a) => *a.expr,
                e => e,
            };
            let c = canonical_if_float(inner, schema);
            changed |= c.transformed;
            name.restore(c.data)
        })
        .collect();
    let aggr_expr: Vec<Expr> = aggregate
        .aggr_expr
        .iter()
        .cloned()
        .map(|e| {
            let name = names.save(&e);
            let c = e.transform_up(|e| match e {
                Expr::AggregateFunction(mut f) if f.params.distinct => {
                    let mut any = false;
                    f.params.args = std::mem::take(&mut f.params.args)
                        .into_iter()
                        .map(|a| {
                            let a = canonical_if_float(a, schema);
                            any |= a.transformed;
                            a.data
                        })
                        .collect();
                    let e = Expr::AggregateFunction(AggregateFunction { ..f });
                    Ok(if any {
                        Transformed::yes(e)
                    } else {
                        Transformed::no(e)
                    })
                }
                other => Ok(Transformed::no(other)),
            })?;
            changed |= c.transformed;
            Ok(name.restore(c.data))
        })
        .collect::<Result<_>>()?;
    if !changed {
        return Ok(Transformed::no(LogicalPlan::Aggregate(aggregate)));
    }
    let rebuilt = Aggregate::try_new(aggregate.input, group_expr, aggr_expr)?;
    Ok(Transformed::yes(LogicalPlan::Aggregate(rebuilt)))
}

/// A window whose float partition and order keys are canonical (rows of `-0.0` and `0.0` in
/// one partition, and ties in `rank()`).
fn canonical_window_keys(window: Window, schema: &DFSchema) -> Result<Transformed<LogicalPlan>> {
    let names = NamePreserver::new_for_projection();
    let mut changed = false;
    let window_expr: Vec<Expr> = window
        .window_expr
        .iter()
        .cloned()
        .map(|e| {
            let name = names.save(&e);
            let c = e.transform_up(|e| match e {
                Expr::WindowFunction(f) => {
                    let mut f: WindowFunction = *f;
                    let mut any = false;
                    f.params.partition_by = std::mem::take(&mut f.params.partition_by)
                        .into_iter()
                        .map(|p| {
                            let p = canonical_if_float(p, schema);
                            any |= p.transformed;
                            p.data
                        })
                        .collect();
                    for sort in &mut f.params.order_by {
                        let s = canonical_if_float(sort.expr.clone(), schema);
                        any |= s.transformed;
                        sort.expr = s.data;
                    }
                    let e = Expr::WindowFunction(Box::new(f));
                    Ok(if any {
                        Transformed::yes(e)
                    } else {
                        Transformed::no(e)
                    })
                }
                other => Ok(Transformed::no(other)),
            })?;
            changed |= c.transformed;
            Ok(name.restore(c.data))
        })
        .collect::<Result<_>>()?;
    if !changed {
        return Ok(Transformed::no(LogicalPlan::Window(window)));
    }
    let rebuilt = Window::try_new(window_expr, window.input)?;
    Ok(Transformed::yes(LogicalPlan::Window(rebuilt)))
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
