//! Decimal arithmetic on 64-bit values where every operand of a batch proves it exact.
//!
//! ```text
//!   BinaryExpr(l  +  −  ×  r), both Decimal128          (projections, filters, aggregate arguments)
//!     ──► DecimalArithmeticExpr(op, l, r)                 same result type, same display
//!   evaluate(batch):
//!     every l and r value of the batch fits in i64        (one vectorised pass per operand)
//!       × ──► l · r as one 64×64→128-bit multiply          |l·r| ≤ 2^126: no i128 overflow
//!       ± ──► l·10^a ± r·10^b (a, b ≤ 18)                  |each term| < 2^123: no overflow
//!     otherwise (or a NULL scalar, or two scalars)
//!       ──► arrow's decimal kernel, as BinaryExpr would   (its overflow error included)
//! ```
//!
//! **Why.** arrow-arith 58's decimal kernels (`numeric.rs`, `decimal_op`) compute every row with
//! `i128::mul_checked`/`add_checked`, also in their `_wrapping` variants, and rescale each operand
//! by a checked multiply per row. On TPC-H q01 that was about a fifth of the query's CPU
//! (`sum(l_extendedprice * (1 - l_discount) * (1 + l_tax))` over 5.9 M rows, each `(1 - x)` a
//! rescale and a subtraction). TPC-H's decimals are `decimal(15, 2)`: every value fits in 64
//! bits, and so does every product the queries form, so none of those checks can fail.
//!
//! **Same answer.** The result type is arrow's for the operation (Hive's rules, as in
//! `decimal_op`), checked equal to the planned `BinaryExpr`'s type before a rewrite. The fast
//! path runs only when the bounds above prove that the checked kernel would not overflow on
//! any row; arrow's decimal kernels never round and never check the result against its
//! declared precision, so the values are identical. Anything else is handed to arrow's kernel
//! unchanged. Division is left to arrow (it rescales by up to 10^(s+4) and truncates; the divide
//! itself is what costs, which the 64-bit path would not speed up).
//!
//! Not on a distributed coordinator: its stages go to workers, whose codec does not carry this
//! expression (`SET iceflight.optimizer.decimal_arithmetic = false` plans arrow's kernel).

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use datafusion::arrow::buffer::{NullBuffer, ScalarBuffer};
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::interval_arithmetic::Interval;
use datafusion::logical_expr::sort_properties::ExprProperties;
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::BinaryExpr;
use datafusion::physical_expr_common::datum::apply;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;

/// Largest power of ten a rescale may multiply by on the 64-bit path (10^18 < 2^60).
const MAX_RESCALE_DIGITS: i8 = 18;

/// Physical optimizer rule: decimal `+`, `−`, `×` of projections, filters and aggregate
/// arguments become [`DecimalArithmeticExpr`] (module docs).
#[derive(Debug, Default)]
pub struct DecimalArithmetic;

impl PhysicalOptimizerRule for DecimalArithmetic {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !iceflight_options::IceflightOptions::of(config)
            .optimizer
            .decimal_arithmetic
        {
            return Ok(plan);
        }
        crate::expr_rewrite::rewrite_plan(plan, &rewrite_expr)
    }

    fn name(&self) -> &str {
        "decimal_arithmetic"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `expr` with every decimal `+`, `−`, `×` it holds (at any depth) rewritten; `schema` is the
/// schema the expression is evaluated on.
pub fn rewrite_expr(
    expr: Arc<dyn PhysicalExpr>,
    schema: &Schema,
) -> Result<Transformed<Arc<dyn PhysicalExpr>>> {
    expr.transform_up(|e| {
        let Some(binary) = e.downcast_ref::<BinaryExpr>() else {
            return Ok(Transformed::no(e));
        };
        if let Some(new) = DecimalArithmeticExpr::try_new(binary, schema)? {
            return Ok(Transformed::yes(Arc::new(new) as Arc<dyn PhysicalExpr>));
        }
        // A `BinaryExpr` left as it is (`/`, a comparison) puts parentheses only around
        // children it sees as `BinaryExpr`s: a rewritten child of lower precedence carries them.
        let precedence = binary.op().precedence();
        let mut marked = false;
        let children = [binary.left(), binary.right()].map(|c| {
            match c.downcast_ref::<DecimalArithmeticExpr>() {
                Some(d) if !d.parenthesized && needs_parentheses(d.op, precedence) => {
                    marked = true;
                    Arc::new(DecimalArithmeticExpr {
                        parenthesized: true,
                        ..d.clone()
                    }) as Arc<dyn PhysicalExpr>
                }
                _ => Arc::clone(c),
            }
        });
        if !marked {
            return Ok(Transformed::no(e));
        }
        Ok(Transformed::yes(
            Arc::clone(&e).with_new_children(children.to_vec())?,
        ))
    })
}

/// Whether `BinaryExpr`'s display puts a child with operator `op` in parentheses under a
/// parent of `precedence` (datafusion-physical-expr 54.1, `binary.rs`, `write_child`).
fn needs_parentheses(op: Operator, precedence: u8) -> bool {
    let p = op.precedence();
    p == 0 || p < precedence
}

/// Decimal `+`, `−` or `×` of two `Decimal128` operands, computed on 64-bit values where the
/// batch's values prove it exact and by arrow's checked kernel otherwise (module docs). The
/// result type and display are the `BinaryExpr`'s it replaces.
#[derive(Debug, Clone, Eq)]
pub struct DecimalArithmeticExpr {
    op: Operator,
    left: Arc<dyn PhysicalExpr>,
    right: Arc<dyn PhysicalExpr>,
    /// Result precision and scale (arrow's rule for `op`).
    precision: u8,
    scale: i8,
    /// Operand scales.
    left_scale: i8,
    right_scale: i8,
    /// Displayed in parentheses (its parent is a `BinaryExpr` of higher precedence).
    parenthesized: bool,
}

impl PartialEq for DecimalArithmeticExpr {
    fn eq(&self, other: &Self) -> bool {
        self.op == other.op
            && self.left.eq(&other.left)
            && self.right.eq(&other.right)
            && (
                self.precision,
                self.scale,
                self.left_scale,
                self.right_scale,
            ) == (
                other.precision,
                other.scale,
                other.left_scale,
                other.right_scale,
            )
    }
}

impl Hash for DecimalArithmeticExpr {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.op.hash(state);
        self.left.hash(state);
        self.right.hash(state);
        (
            self.precision,
            self.scale,
            self.left_scale,
            self.right_scale,
        )
            .hash(state);
    }
}

impl DecimalArithmeticExpr {
    /// The expression for `binary`, or `None` when it is not a decimal `+`, `−`, `×` of two
    /// `Decimal128` operands whose result type under arrow's rule equals the planned one.
    pub fn try_new(binary: &BinaryExpr, schema: &Schema) -> Result<Option<Self>> {
        let op = *binary.op();
        if !matches!(op, Operator::Plus | Operator::Minus | Operator::Multiply) {
            return Ok(None);
        }
        let (
            DataType::Decimal128(p1, s1),
            DataType::Decimal128(p2, s2),
            DataType::Decimal128(p, s),
        ) = (
            binary.left().data_type(schema)?,
            binary.right().data_type(schema)?,
            binary.data_type(schema)?,
        )
        else {
            return Ok(None);
        };
        if arrow_result_type(op, (p1, s1), (p2, s2)) != Some((p, s)) {
            return Ok(None);
        }
        Ok(Some(Self {
            op,
            left: Arc::clone(binary.left()),
            right: Arc::clone(binary.right()),
            precision: p,
            scale: s,
            left_scale: s1,
            right_scale: s2,
            parenthesized: false,
        }))
    }

    /// The operator: `+`, `−` or `×`.
    pub fn op(&self) -> Operator {
        self.op
    }

    /// The `BinaryExpr` this replaces, nested ones included (`BinaryExpr`'s display puts
    /// parentheses by its children's operators, which it finds only on `BinaryExpr`s).
    fn as_binary(&self) -> BinaryExpr {
        let back = |e: &Arc<dyn PhysicalExpr>| match e.downcast_ref::<Self>() {
            Some(d) => Arc::new(d.as_binary()) as Arc<dyn PhysicalExpr>,
            None => Arc::clone(e),
        };
        BinaryExpr::new(back(&self.left), self.op, back(&self.right))
    }

    /// `write` of the `BinaryExpr` this replaces (its display or its SQL), in parentheses
    /// where the parent needs them.
    fn write(
        &self,
        f: &mut fmt::Formatter<'_>,
        write: impl Fn(&BinaryExpr, &mut fmt::Formatter<'_>) -> fmt::Result,
    ) -> fmt::Result {
        if self.parenthesized {
            write!(f, "(")?;
            write(&self.as_binary(), f)?;
            write!(f, ")")
        } else {
            write(&self.as_binary(), f)
        }
    }

    /// arrow's checked kernel on already evaluated operands (as `BinaryExpr` evaluates).
    fn arrow(&self, l: &ColumnarValue, r: &ColumnarValue) -> Result<ColumnarValue> {
        match self.op {
            Operator::Plus => apply(l, r, numeric::add),
            Operator::Minus => apply(l, r, numeric::sub),
            _ => apply(l, r, numeric::mul),
        }
    }

    /// `array` as the `Decimal128` of `scale` the plan said it is, or `None` (arrow's kernel
    /// then answers, errors included).
    fn operand<'a>(
        &self,
        array: &'a ArrayRef,
        scale: i8,
    ) -> Option<&'a PrimitiveArray<Decimal128Type>> {
        match array.data_type() {
            DataType::Decimal128(_, s) if *s == scale => array.as_primitive_opt(),
            _ => None,
        }
    }

    /// The 64-bit path, or `None` where a value does not fit in i64 (or an operand is a NULL
    /// scalar, or both are scalars).
    fn narrow(&self, l: &ColumnarValue, r: &ColumnarValue) -> Option<ArrayRef> {
        let (lm, rm) = match self.op {
            Operator::Multiply => (1, 1),
            _ => (
                power_of_ten(self.scale - self.left_scale)?,
                power_of_ten(self.scale - self.right_scale)?,
            ),
        };
        let op = self.op;
        let combine = move |a: i64, b: i64| -> i128 {
            let (a, b) = (a as i128, b as i128);
            match op {
                Operator::Multiply => a * b,
                Operator::Plus => a * lm + b * rm,
                _ => a * lm - b * rm,
            }
        };
        let narrow = |v: i128| v as i64;
        let (values, nulls): (Vec<i128>, Option<NullBuffer>) = match (l, r) {
            (ColumnarValue::Array(a), ColumnarValue::Array(b)) => {
                let a = self.operand(a, self.left_scale)?;
                let b = self.operand(b, self.right_scale)?;
                if !fits_i64(a.values()) || !fits_i64(b.values()) {
                    return None;
                }
                let v = (a.values().iter().zip(b.values().iter()))
                    .map(|(&x, &y)| combine(narrow(x), narrow(y)))
                    .collect();
                (v, NullBuffer::union(a.nulls(), b.nulls()))
            }
            (ColumnarValue::Scalar(s), ColumnarValue::Array(b)) => {
                let x = narrow_scalar(s, self.left_scale)?;
                let b = self.operand(b, self.right_scale)?;
                if !fits_i64(b.values()) {
                    return None;
                }
                let v = b.values().iter().map(|&y| combine(x, narrow(y))).collect();
                (v, b.nulls().cloned())
            }
            (ColumnarValue::Array(a), ColumnarValue::Scalar(s)) => {
                let y = narrow_scalar(s, self.right_scale)?;
                let a = self.operand(a, self.left_scale)?;
                if !fits_i64(a.values()) {
                    return None;
                }
                let v = a.values().iter().map(|&x| combine(narrow(x), y)).collect();
                (v, a.nulls().cloned())
            }
            _ => return None,
        };
        let array = PrimitiveArray::<Decimal128Type>::new(ScalarBuffer::from(values), nulls)
            .with_precision_and_scale(self.precision, self.scale)
            .ok()?;
        Some(Arc::new(array))
    }
}

/// The result (precision, scale) arrow-arith 58 gives `op` on two `Decimal128` operands
/// (`numeric.rs`, `decimal_op`: Hive's rules), or `None` where it would fail.
fn arrow_result_type(op: Operator, (p1, s1): (u8, i8), (p2, s2): (u8, i8)) -> Option<(u8, i8)> {
    const MAX_PRECISION: u8 = 38;
    const MAX_SCALE: i8 = 38;
    match op {
        Operator::Plus | Operator::Minus => {
            let scale = s1.max(s2);
            let digits = (p1 as i8 - s1).max(p2 as i8 - s2);
            let precision = (scale.saturating_add(digits) as u8)
                .saturating_add(1)
                .min(MAX_PRECISION);
            (scale >= s1 && scale >= s2).then_some((precision, scale))
        }
        Operator::Multiply => {
            let scale = s1.saturating_add(s2);
            let precision = p1.saturating_add(p2 + 1).min(MAX_PRECISION);
            (scale <= MAX_SCALE).then_some((precision, scale))
        }
        _ => None,
    }
}

/// 10^`digits` for a rescale the 64-bit path allows (0 ≤ digits ≤ 18).
fn power_of_ten(digits: i8) -> Option<i128> {
    (0..=MAX_RESCALE_DIGITS)
        .contains(&digits)
        .then(|| 10i128.pow(digits as u32))
}

/// Whether every value fits in i64. Null slots count too: their values are whatever the
/// producer left there, and the 64-bit path computes every slot. One pass without early exit,
/// which compiles to vector compares.
fn fits_i64(values: &[i128]) -> bool {
    values
        .iter()
        .fold(true, |ok, &v| ok & (v == v as i64 as i128))
}

/// A non-NULL `Decimal128` scalar of `scale` as i64, or `None`.
fn narrow_scalar(s: &ScalarValue, scale: i8) -> Option<i64> {
    match s {
        ScalarValue::Decimal128(Some(v), _, s) if *s == scale => i64::try_from(*v).ok(),
        _ => None,
    }
}

impl fmt::Display for DecimalArithmeticExpr {
    /// As the `BinaryExpr` it replaces (`a * b`, with parentheses around nested operators of
    /// lower precedence), so plans read the same with the rule on or off.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, fmt::Display::fmt)
    }
}

impl PhysicalExpr for DecimalArithmeticExpr {
    fn data_type(&self, _input_schema: &Schema) -> Result<DataType> {
        Ok(DataType::Decimal128(self.precision, self.scale))
    }

    fn nullable(&self, input_schema: &Schema) -> Result<bool> {
        Ok(self.left.nullable(input_schema)? || self.right.nullable(input_schema)?)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let l = self.left.evaluate(batch)?;
        let r = self.right.evaluate(batch)?;
        match self.narrow(&l, &r) {
            Some(array) => Ok(ColumnarValue::Array(array)),
            None => self.arrow(&l, &r),
        }
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![&self.left, &self.right]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        let [left, right] = <[_; 2]>::try_from(children).map_err(|c| {
            datafusion::common::internal_datafusion_err!(
                "decimal arithmetic takes 2 children, got {}",
                c.len()
            )
        })?;
        Ok(Arc::new(Self {
            left,
            right,
            ..(*self).clone()
        }))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, |b, f| b.fmt_sql(f))
    }

    fn get_properties(&self, children: &[ExprProperties]) -> Result<ExprProperties> {
        self.as_binary().get_properties(children)
    }

    fn evaluate_bounds(&self, children: &[&Interval]) -> Result<Interval> {
        self.as_binary().evaluate_bounds(children)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Decimal128Array;
    use datafusion::arrow::datatypes::Field;
    use datafusion::physical_expr::expressions::{col, lit};

    fn batch(a: Vec<Option<i128>>, b: Vec<Option<i128>>) -> RecordBatch {
        let a = Decimal128Array::from(a)
            .with_precision_and_scale(15, 2)
            .unwrap();
        let b = Decimal128Array::from(b)
            .with_precision_and_scale(15, 4)
            .unwrap();
        let schema = Schema::new(vec![
            Field::new("a", a.data_type().clone(), true),
            Field::new("b", b.data_type().clone(), true),
        ]);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(a), Arc::new(b)]).unwrap()
    }

    /// Both paths against `BinaryExpr` on the same batch: same type, same values, same errors.
    fn same_as_binary(batch: &RecordBatch, l: Arc<dyn PhysicalExpr>, r: Arc<dyn PhysicalExpr>) {
        for op in [Operator::Plus, Operator::Minus, Operator::Multiply] {
            let binary = BinaryExpr::new(Arc::clone(&l), op, Arc::clone(&r));
            let ours = DecimalArithmeticExpr::try_new(&binary, &batch.schema())
                .unwrap()
                .expect("decimal operands are rewritten");
            let expected = binary
                .evaluate(batch)
                .and_then(|v| v.into_array(batch.num_rows()));
            let got = ours
                .evaluate(batch)
                .and_then(|v| v.into_array(batch.num_rows()));
            match (expected, got) {
                (Ok(e), Ok(g)) => assert_eq!(e.as_ref(), g.as_ref(), "{op}"),
                (Err(e), Err(g)) => assert_eq!(e.to_string(), g.to_string(), "{op}"),
                (e, g) => panic!("{op}: BinaryExpr {e:?}, ours {g:?}"),
            }
            assert_eq!(
                binary.data_type(&batch.schema()).unwrap(),
                ours.data_type(&batch.schema()).unwrap()
            );
            assert_eq!(binary.to_string(), ours.to_string());
        }
    }

    #[test]
    fn small_values_take_the_64_bit_path_with_the_same_answer() {
        let b = batch(
            vec![Some(90100), None, Some(-10_494_950), Some(0)],
            vec![Some(1000), Some(7), None, Some(-99_999_999)],
        );
        let l = col("a", &b.schema()).unwrap();
        let r = col("b", &b.schema()).unwrap();
        let binary = BinaryExpr::new(Arc::clone(&l), Operator::Multiply, Arc::clone(&r));
        let ours = DecimalArithmeticExpr::try_new(&binary, &b.schema())
            .unwrap()
            .unwrap();
        let (lv, rv) = (l.evaluate(&b).unwrap(), r.evaluate(&b).unwrap());
        assert!(ours.narrow(&lv, &rv).is_some(), "fits in 64 bits");
        same_as_binary(&b, l, r);
    }

    #[test]
    fn scalars_on_either_side_match_binary_expr() {
        let b = batch(vec![Some(5), Some(-7), None], vec![Some(1), None, Some(3)]);
        let one = lit(ScalarValue::Decimal128(Some(1), 20, 0));
        same_as_binary(&b, Arc::clone(&one), col("a", &b.schema()).unwrap());
        same_as_binary(&b, col("b", &b.schema()).unwrap(), one);
        let null = lit(ScalarValue::Decimal128(None, 20, 0));
        same_as_binary(&b, null, col("a", &b.schema()).unwrap());
    }

    #[test]
    fn values_beyond_64_bits_fall_back_to_arrow_including_its_overflow_error() {
        let big = i64::MAX as i128 + 1;
        let b = batch(vec![Some(big), Some(1)], vec![Some(2), Some(3)]);
        let (l, r) = (
            col("a", &b.schema()).unwrap(),
            col("b", &b.schema()).unwrap(),
        );
        let binary = BinaryExpr::new(Arc::clone(&l), Operator::Multiply, Arc::clone(&r));
        let ours = DecimalArithmeticExpr::try_new(&binary, &b.schema())
            .unwrap()
            .unwrap();
        let (lv, rv) = (l.evaluate(&b).unwrap(), r.evaluate(&b).unwrap());
        assert!(ours.narrow(&lv, &rv).is_none());
        same_as_binary(&b, Arc::clone(&l), Arc::clone(&r));
        // i128 overflow: arrow's error, not a wrapped value.
        let huge = batch(vec![Some(i128::MAX / 3)], vec![Some(i128::MAX / 3)]);
        same_as_binary(
            &huge,
            col("a", &huge.schema()).unwrap(),
            col("b", &huge.schema()).unwrap(),
        );
    }

    #[test]
    fn nested_operators_display_as_binary_expr() {
        let b = batch(vec![Some(1)], vec![Some(2)]);
        let (l, r) = (
            col("a", &b.schema()).unwrap(),
            col("b", &b.schema()).unwrap(),
        );
        let one = lit(ScalarValue::Decimal128(Some(1), 20, 0));
        let minus = Arc::new(BinaryExpr::new(one, Operator::Minus, r));
        let times: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(l, Operator::Multiply, minus));
        let ours = rewrite_expr(Arc::clone(&times), &b.schema()).unwrap();
        assert!(ours.transformed);
        assert_eq!(ours.data.to_string(), times.to_string());
        assert!(times.to_string().contains('('), "{times}");
        // Under a parent left as it is (`/`), a rewritten `+` keeps its parentheses.
        let (l, r) = (
            col("a", &b.schema()).unwrap(),
            col("b", &b.schema()).unwrap(),
        );
        let plus = Arc::new(BinaryExpr::new(Arc::clone(&l), Operator::Plus, r));
        let divided: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(plus, Operator::Divide, l));
        let ours = rewrite_expr(Arc::clone(&divided), &b.schema()).unwrap();
        assert!(ours.transformed);
        assert_eq!(ours.data.to_string(), divided.to_string());
        assert_eq!(divided.to_string(), "(a@0 + b@1) / a@0");
        let sql = |e: &Arc<dyn PhysicalExpr>| {
            datafusion::physical_expr_common::physical_expr::fmt_sql(e.as_ref()).to_string()
        };
        assert_eq!(sql(&ours.data), sql(&divided));
    }

    #[test]
    fn only_decimal_plus_minus_times_are_rewritten() {
        let b = batch(vec![Some(1)], vec![Some(2)]);
        let (l, r) = (
            col("a", &b.schema()).unwrap(),
            col("b", &b.schema()).unwrap(),
        );
        for op in [Operator::Divide, Operator::Lt, Operator::Modulo] {
            let binary = BinaryExpr::new(Arc::clone(&l), op, Arc::clone(&r));
            assert!(
                DecimalArithmeticExpr::try_new(&binary, &b.schema())
                    .unwrap()
                    .is_none(),
                "{op}"
            );
        }
    }
}
