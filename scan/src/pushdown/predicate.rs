//! Static filter conversion: DataFusion logical [`Expr`] → iceberg [`Predicate`].
//!
//! ```text
//!   WHERE a > 3 AND f(b) = 1 AND c IN ('x','y')
//!          │          │             │
//!          ▼          ▼             ▼
//!       a > 3     (dropped:     c IN ('x','y')      → Predicate::And(..)
//!                 unconvertible,                      used by `TableScan::plan_files`
//!                 stays above)                        for manifest/partition pruning
//! ```
//!
//! Rules (each one only keeps or widens the rows that pass; the engine above still evaluates the
//! original filter, so these filters are reported `Inexact`):
//! - A column is resolved by name in the table's **current** schema, then by **field id** in the
//!   schema the predicate is bound to (the snapshot schema), so renamed columns (case c03) bind
//!   correctly and columns added after the snapshot (case c06) are never referenced.
//! - A literal is used only when its Arrow type is exactly the column's Arrow type; casts are never
//!   stripped and literals never change type. Anything else is not converted.
//! - Only conjuncts at **positive** polarity may be dropped (`a AND <unconvertible>` → `a`); under
//!   `NOT` every part must convert exactly, and `OR` needs both sides.
//! - Float columns (case c02): iceberg bounds leave NaN out, and Arrow orders NaN above every
//!   number and a negative NaN (x86's `0.0 / 0.0`) below -∞, so only `=` and `IN` are converted
//!   on them, nothing on them is converted under `NOT`, and NaN / ±0.0 literals are never used.

use arrow::datatypes::{DataType, Schema as ArrowSchema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Like, Operator, expr::InList};
use iceberg::expr::{Predicate, Reference};
use iceberg::spec::{Datum, PrimitiveType, Schema as IcebergSchema, Type};

use crate::model::literal::scalar_to_datum;

/// Converts DataFusion filters on one table to iceberg predicates.
///
/// `current` is the table's current iceberg schema and `arrow` its Arrow form (the provider's
/// schema, one field per top-level column); `binding` is the schema the predicate will be bound
/// to by `TableScanBuilder::build` (the snapshot schema).
#[derive(Debug, Clone, Copy)]
pub struct PredicateConverter<'a> {
    current: &'a IcebergSchema,
    binding: &'a IcebergSchema,
    arrow: &'a ArrowSchema,
}

/// A resolved column: the name to reference in the binding schema, its iceberg type and the Arrow
/// type literals must have.
struct ColumnRef {
    name: String,
    ty: PrimitiveType,
    arrow_type: DataType,
}

impl ColumnRef {
    fn is_float(&self) -> bool {
        matches!(self.ty, PrimitiveType::Float | PrimitiveType::Double)
    }

    fn reference(&self) -> Reference {
        Reference::new(self.name.clone())
    }
}

impl<'a> PredicateConverter<'a> {
    /// Creates a converter; see the type docs for the three schemas.
    pub fn new(
        current: &'a IcebergSchema,
        binding: &'a IcebergSchema,
        arrow: &'a ArrowSchema,
    ) -> Self {
        Self {
            current,
            binding,
            arrow,
        }
    }

    /// Converts a list of filters (implicitly AND-ed). Returns the conjunction of what converted,
    /// or `None` when nothing did.
    pub fn convert_all(&self, filters: &[Expr]) -> Option<Predicate> {
        filters
            .iter()
            .filter_map(|f| self.convert(f))
            .reduce(Predicate::and)
    }

    /// Converts one filter at positive polarity: the result is implied by `expr` (it keeps every
    /// row `expr` keeps). `None` when no part of it can be expressed.
    pub fn convert(&self, expr: &Expr) -> Option<Predicate> {
        self.convert_polar(expr, true)
    }

    fn convert_polar(&self, expr: &Expr, positive: bool) -> Option<Predicate> {
        match expr {
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
                Operator::And => {
                    let l = self.convert_polar(left, positive);
                    let r = self.convert_polar(right, positive);
                    match (l, r) {
                        (Some(l), Some(r)) => Some(l.and(r)),
                        (Some(one), None) | (None, Some(one)) if positive => Some(one),
                        _ => None,
                    }
                }
                Operator::Or => {
                    let l = self.convert_polar(left, positive)?;
                    let r = self.convert_polar(right, positive)?;
                    Some(l.or(r))
                }
                _ => self.comparison(left, *op, right, positive),
            },
            Expr::Not(inner) => self.convert_polar(inner, !positive).map(Predicate::negate),
            Expr::IsNull(inner) => Some(self.column(inner)?.reference().is_null()),
            Expr::IsNotNull(inner) => Some(self.column(inner)?.reference().is_not_null()),
            Expr::Between(Between {
                expr,
                negated,
                low,
                high,
            }) => {
                let col = self.column(expr)?;
                // A range on a float column: NaN sorts outside every range (case c02).
                if col.is_float() {
                    return None;
                }
                let low = self.literal(&col, low)?;
                let high = self.literal(&col, high)?;
                let p = col
                    .reference()
                    .greater_than_or_equal_to(low)
                    .and(col.reference().less_than_or_equal_to(high));
                Some(if *negated { p.negate() } else { p })
            }
            Expr::InList(InList {
                expr,
                list,
                negated,
            }) => {
                let col = self.column(expr)?;
                if list.is_empty() || (col.is_float() && (*negated || !positive)) {
                    return None;
                }
                let values = list
                    .iter()
                    .map(|e| self.literal(&col, e))
                    .collect::<Option<Vec<_>>>()?;
                Some(if *negated {
                    col.reference().is_not_in(values)
                } else {
                    col.reference().is_in(values)
                })
            }
            Expr::Like(like) => self.like(like),
            Expr::Literal(ScalarValue::Boolean(Some(b)), _) => Some(if *b {
                Predicate::AlwaysTrue
            } else {
                Predicate::AlwaysFalse
            }),
            Expr::Column(_) => {
                let col = self.column(expr)?;
                (col.ty == PrimitiveType::Boolean)
                    .then(|| col.reference().equal_to(Datum::bool(true)))
            }
            _ => None,
        }
    }

    fn comparison(
        &self,
        left: &Expr,
        op: Operator,
        right: &Expr,
        positive: bool,
    ) -> Option<Predicate> {
        // Normalise to `column op literal`.
        let (col_expr, lit_expr, op) = match (left, right) {
            (Expr::Column(_), Expr::Literal(..)) => (left, right, op),
            (Expr::Literal(..), Expr::Column(_)) => (right, left, op.swap()?),
            _ => return None,
        };
        let col = self.column(col_expr)?;
        if col.is_float() {
            // Only `=`: Arrow orders NaN above every number and a negative NaN (x86's
            // `0.0 / 0.0`) below -∞, while bounds leave NaN out (case c02).
            if op != Operator::Eq || !positive {
                return None;
            }
        }
        let datum = self.literal(&col, lit_expr)?;
        let r = col.reference();
        Some(match op {
            Operator::Eq => r.equal_to(datum),
            Operator::NotEq => r.not_equal_to(datum),
            Operator::Lt => r.less_than(datum),
            Operator::LtEq => r.less_than_or_equal_to(datum),
            Operator::Gt => r.greater_than(datum),
            Operator::GtEq => r.greater_than_or_equal_to(datum),
            _ => return None,
        })
    }

    /// `col LIKE 'prefix%'` (no other wildcard, no escape, case-sensitive) → `starts_with`.
    fn like(&self, like: &Like) -> Option<Predicate> {
        if like.case_insensitive || like.escape_char.is_some() {
            return None;
        }
        let col = self.column(&like.expr)?;
        if col.ty != PrimitiveType::String {
            return None;
        }
        let pattern = match like.pattern.as_ref() {
            Expr::Literal(ScalarValue::Utf8(Some(p)), _)
            | Expr::Literal(ScalarValue::LargeUtf8(Some(p)), _)
            | Expr::Literal(ScalarValue::Utf8View(Some(p)), _) => p,
            _ => return None,
        };
        let prefix = pattern.strip_suffix('%')?;
        if prefix.is_empty() || prefix.contains(['%', '_', '\\']) {
            return None;
        }
        let r = col.reference();
        Some(if like.negated {
            r.not_starts_with(Datum::string(prefix))
        } else {
            r.starts_with(Datum::string(prefix))
        })
    }

    /// Resolves a top-level column by name in the current schema and by field id in the binding
    /// schema. Nested fields and columns absent from the binding schema resolve to `None`.
    fn column(&self, expr: &Expr) -> Option<ColumnRef> {
        let Expr::Column(c) = expr else { return None };
        let field = self.current.as_struct().field_by_name(&c.name)?;
        let Type::Primitive(ty) = field.field_type.as_ref() else {
            return None;
        };
        let name = self.binding.name_by_field_id(field.id)?;
        // Only top-level fields: a dotted name would be read as a path by `Reference`.
        self.binding.as_struct().field_by_id(field.id)?;
        let arrow_type = self
            .arrow
            .field_with_name(&c.name)
            .ok()?
            .data_type()
            .clone();
        Some(ColumnRef {
            name: name.to_string(),
            ty: ty.clone(),
            arrow_type,
        })
    }

    fn literal(&self, col: &ColumnRef, expr: &Expr) -> Option<Datum> {
        let Expr::Literal(value, _) = expr else {
            return None;
        };
        scalar_to_datum(value, &col.arrow_type, &col.ty)
    }
}

#[cfg(test)]
mod tests {
    use datafusion::logical_expr::{col, lit};
    use datafusion::prelude::Expr;
    use iceberg::spec::{NestedField, Schema};

    use std::sync::Arc;

    use super::*;

    fn schemas() -> (Schema, Schema, ArrowSchema) {
        let fields = |first: &str| {
            vec![
                Arc::new(NestedField::optional(
                    1,
                    first,
                    Type::Primitive(PrimitiveType::Int),
                )),
                Arc::new(NestedField::optional(
                    2,
                    "s",
                    Type::Primitive(PrimitiveType::String),
                )),
                Arc::new(NestedField::optional(
                    3,
                    "f",
                    Type::Primitive(PrimitiveType::Double),
                )),
                Arc::new(NestedField::optional(
                    4,
                    "d",
                    Type::Primitive(PrimitiveType::Decimal {
                        precision: 15,
                        scale: 2,
                    }),
                )),
                Arc::new(NestedField::optional(
                    5,
                    "dt",
                    Type::Primitive(PrimitiveType::Date),
                )),
            ]
        };
        let current = Schema::builder()
            .with_fields(
                fields("a")
                    .into_iter()
                    .chain([Arc::new(NestedField::optional(
                        6,
                        "added",
                        Type::Primitive(PrimitiveType::Long),
                    ))]),
            )
            .build()
            .unwrap();
        // The snapshot schema still calls field 1 `a_old` and has no field 6.
        let binding = Schema::builder()
            .with_fields(fields("a_old"))
            .build()
            .unwrap();
        let arrow = iceberg::arrow::schema_to_arrow_schema(&current).unwrap();
        (current, binding, arrow)
    }

    fn convert(e: Expr) -> String {
        let (current, binding, arrow) = schemas();
        let conv = PredicateConverter::new(&current, &binding, &arrow);
        match conv.convert(&e) {
            Some(p) => p.to_string(),
            None => "<none>".to_string(),
        }
    }

    fn dec(v: i128) -> Expr {
        lit(ScalarValue::Decimal128(Some(v), 15, 2))
    }

    #[test]
    fn supported_shapes() {
        let cases: Vec<(Expr, &str)> = vec![
            (col("a").eq(lit(3i32)), "a_old = 3"),
            (lit(3i32).lt(col("a")), "a_old > 3"),
            (col("a").not_eq(lit(3i32)), "a_old != 3"),
            (col("a").lt_eq(lit(3i32)), "a_old <= 3"),
            (col("s").eq(lit("x")), "s = \"x\""),
            (col("d").gt_eq(dec(5)), "d >= 0.05"),
            (
                col("a").between(lit(1i32), lit(9i32)),
                "(a_old >= 1) AND (a_old <= 9)",
            ),
            (
                col("a").in_list(vec![lit(1i32), lit(2i32)], false),
                "a_old IN (1, 2)",
            ),
            (
                col("a").in_list(vec![lit(1i32), lit(2i32)], true),
                "a_old NOT IN (1, 2)",
            ),
            (col("a").is_null(), "a_old IS NULL"),
            (col("s").is_not_null(), "s IS NOT NULL"),
            (col("s").like(lit("ab%")), "s STARTS WITH \"ab\""),
            (col("s").not_like(lit("ab%")), "s NOT STARTS WITH \"ab\""),
            (Expr::Not(Box::new(col("a").lt(lit(3i32)))), "a_old >= 3"),
            (
                col("a").eq(lit(1i32)).or(col("s").eq(lit("x"))),
                "(a_old = 1) OR (s = \"x\")",
            ),
            (col("f").eq(lit(2.5f64)), "f = 2.5"),
            (
                col("dt").gt(lit(ScalarValue::Date32(Some(10)))),
                "dt > 1970-01-11",
            ),
            // Positive polarity: the unconvertible conjunct is dropped.
            (
                col("a").eq(lit(1i32)).and(col("a").eq(col("a"))),
                "a_old = 1",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(convert(e.clone()), want, "converting {e}");
        }
    }

    #[test]
    fn refused_shapes() {
        let cases: Vec<Expr> = vec![
            // Float ranges: Arrow orders a negative NaN below -∞ (case c02).
            col("f").lt(lit(2.5f64)),
            col("f").between(lit(1.0f64), lit(2.0f64)),
            // Casts are never stripped.
            Expr::Cast(datafusion::logical_expr::Cast::new(
                Box::new(col("a")),
                DataType::Int64,
            ))
            .eq(lit(3i64)),
            // Literal of another type than the column.
            col("a").eq(lit(3i64)),
            col("d").eq(lit(ScalarValue::Decimal128(Some(5), 10, 2))),
            col("s").eq(lit(1i32)),
            // NOT over something with an unconvertible part.
            Expr::Not(Box::new(col("a").eq(lit(1i32)).and(col("a").eq(col("a"))))),
            // OR needs both sides.
            col("a").eq(lit(1i32)).or(col("a").eq(col("a"))),
            // NaN-unsafe float comparisons (case c02) and unusable float literals.
            col("f").gt(lit(100.0f64)),
            col("f").gt_eq(lit(100.0f64)),
            col("f").not_eq(lit(3.0f64)),
            col("f").in_list(vec![lit(1.0f64)], true),
            Expr::Not(Box::new(col("f").lt(lit(1.0f64)))),
            col("f").eq(lit(f64::NAN)),
            col("f").eq(lit(0.0f64)),
            col("f").eq(lit(-0.0f64)),
            // A column added after the snapshot is not referenced.
            col("added").eq(lit(1i64)),
            // NULL literals, non-prefix LIKE, ILIKE, column vs column.
            col("a").eq(lit(ScalarValue::Int32(None))),
            col("s").like(lit("%ab")),
            col("s").like(lit("a_b%")),
            col("s").ilike(lit("ab%")),
            col("a").eq(col("a")),
        ];
        for e in cases {
            assert_eq!(convert(e.clone()), "<none>", "converting {e}");
        }
    }

    #[test]
    fn convert_all_ands_what_converts() {
        let (current, binding, arrow) = schemas();
        let conv = PredicateConverter::new(&current, &binding, &arrow);
        let p = conv
            .convert_all(&[
                col("a").gt(lit(1i32)),
                col("a").eq(col("a")),
                col("s").eq(lit("x")),
            ])
            .unwrap();
        assert_eq!(p.to_string(), "(a_old > 1) AND (s = \"x\")");
        assert!(conv.convert_all(&[col("a").eq(col("a"))]).is_none());
    }
}
