//! Dynamic-filter domains: a filter expression compacted into one domain per column (the rules
//! below; where the scan uses them: `scan/README.md`).
//!
//! ```text
//!   k@0 >= 3 AND k@0 <= 1200 AND k@0 IN (SET) ([3, 5, 7, 5, 1200])          (CollectLeft join)
//!   CASE hash_repartition % 4 WHEN 0 THEN … WHEN 2 THEN … ELSE false END    (Partitioned join)
//!            │ normalise
//!            ▼
//!   k: [3, 1200] ∩ {3, 5, 7, 1200}, NULL may not pass
//! ```
//!
//! Rules (each only keeps or widens the rows that pass):
//! - AND intersects (an empty intersection makes the whole filter false); OR and CASE branches
//!   union: the range spans the branches, NULL passes if it passes in any, a value set survives
//!   only if every branch has one and the union stays within the cap, a column unconstrained in
//!   any branch is unconstrained. A false or NULL branch adds nothing; CASE's WHEN operands are
//!   ignored; a missing ELSE is NULL.
//! - Unconvertible parts (hash lookups, casts, NOT, column against column, literals of another
//!   type, float NaN / ±0.0 literals, IN lists holding any such) constrain nothing.
//! - `struct(a, b) IN (...)` gives one constraint per column (wider than the tuples).
//! - A column is what [`ColumnResolver`] resolves: an output column, or a struct leaf reached by
//!   `get_field` (`s.a`, `s['a']['b']`) — the same rules apply to both.
//! - Value sets larger than the cap keep only their range. The cap is
//!   `datafusion.optimizer.hash_join_inlist_pushdown_max_distinct_values` (DataFusion's default
//!   150; iceflight's sessions 1024, `server/src/session.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::Array;
use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::ScalarFunctionExpr;
use datafusion::physical_expr::expressions::{
    BinaryExpr, CaseExpr, DynamicFilterPhysicalExpr, InListExpr, IsNullExpr, Literal,
};

use crate::model::columns::ColumnResolver;

/// The values of one column that may pass a filter.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDomain {
    /// Inclusive bounds of the non-null values that may pass; `None` when no non-null value may
    /// pass.
    pub range: Option<(ScalarValue, ScalarValue)>,
    /// The exact non-null values that may pass (sorted, distinct, within the range), if known.
    pub values: Option<Vec<ScalarValue>>,
    /// Whether NULL may pass.
    pub null_allowed: bool,
}

impl ColumnDomain {
    fn is_empty(&self) -> bool {
        self.range.is_none() && !self.null_allowed
    }

    fn range(min: ScalarValue, max: ScalarValue) -> Self {
        Self {
            range: Some((min, max)),
            values: None,
            null_allowed: false,
        }
    }

    fn only_null() -> Self {
        Self {
            range: None,
            values: None,
            null_allowed: true,
        }
    }

    fn from_values(mut values: Vec<ScalarValue>, cap: usize) -> Self {
        values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        values.dedup();
        let range = match (values.first(), values.last()) {
            (Some(a), Some(b)) => Some((a.clone(), b.clone())),
            _ => None,
        };
        Self {
            range,
            values: (values.len() <= cap).then_some(values),
            null_allowed: false,
        }
    }

    fn intersect(&self, other: &Self) -> Self {
        let range = match (&self.range, &other.range) {
            (Some((a0, a1)), Some((b0, b1))) => {
                let lo = max(a0, b0);
                let hi = min(a1, b1);
                (lo <= hi).then(|| (lo.clone(), hi.clone()))
            }
            _ => None,
        };
        let values = match (&self.values, &other.values) {
            (Some(a), Some(b)) => Some(a.iter().filter(|v| b.contains(v)).cloned().collect()),
            (Some(a), None) | (None, Some(a)) => Some(a.clone()),
            (None, None) => None,
        };
        let null_allowed = self.null_allowed && other.null_allowed;
        // A set restricted to the range; the range then tightened to the set.
        let values: Option<Vec<ScalarValue>> = values.map(|vs| {
            vs.into_iter()
                .filter(|v| range.as_ref().is_some_and(|(lo, hi)| v >= lo && v <= hi))
                .collect()
        });
        let range = match &values {
            Some(vs) => vs
                .first()
                .zip(vs.last())
                .map(|(a, b)| (a.clone(), b.clone())),
            None => range,
        };
        Self {
            range,
            values,
            null_allowed,
        }
    }

    fn union(&self, other: &Self, cap: usize) -> Self {
        let range = match (&self.range, &other.range) {
            (Some((a0, a1)), Some((b0, b1))) => Some((min(a0, b0).clone(), max(a1, b1).clone())),
            (Some(r), None) | (None, Some(r)) => Some(r.clone()),
            (None, None) => None,
        };
        // A branch with no non-null value contributes an empty set.
        let set_of = |d: &Self| match (&d.values, &d.range) {
            (Some(v), _) => Some(v.clone()),
            (None, None) => Some(vec![]),
            (None, Some(_)) => None,
        };
        let values = match (set_of(self), set_of(other)) {
            (Some(mut a), Some(b)) => {
                a.extend(b);
                let d = Self::from_values(a, cap);
                d.values
            }
            _ => None,
        };
        Self {
            range,
            values,
            null_allowed: self.null_allowed || other.null_allowed,
        }
    }
}

fn min<'a>(a: &'a ScalarValue, b: &'a ScalarValue) -> &'a ScalarValue {
    if b < a { b } else { a }
}

fn max<'a>(a: &'a ScalarValue, b: &'a ScalarValue) -> &'a ScalarValue {
    if b > a { b } else { a }
}

/// A filter compacted into per-column domains: `None` means the filter is false (no row can
/// pass); a column absent from the map is unconstrained.
#[derive(Debug, Clone, PartialEq)]
pub struct Domains {
    /// Domains by column index ([`ColumnResolver`]: for a scan, its output columns, then its
    /// nested struct leaves, `columns.rs`); `None` = no row passes.
    pub columns: Option<BTreeMap<usize, ColumnDomain>>,
}

impl Domains {
    /// No constraint at all.
    pub fn all() -> Self {
        Self {
            columns: Some(BTreeMap::new()),
        }
    }

    /// Nothing passes.
    pub fn none() -> Self {
        Self { columns: None }
    }

    /// One line for EXPLAIN: `name in [lo, hi]`, `∩ {…}` (sets of up to 4 values, else their
    /// size), `or NULL`, joined by `; `; `false` when nothing passes, `true` when unconstrained.
    pub fn describe(&self, columns: &dyn ColumnResolver) -> String {
        let Some(cols) = &self.columns else {
            return "false".into();
        };
        if cols.is_empty() {
            return "true".into();
        }
        cols.iter()
            .map(|(i, d)| {
                let (name, ty) = match columns.describe(*i) {
                    Some((name, ty)) => (name, Some(ty)),
                    None => ("?", None),
                };
                // Bounds are inclusive (`<` is widened to `<=`); the type's extremes are open ends.
                let open = |v: &ScalarValue, extreme: Option<ScalarValue>, sign: &str| {
                    if extreme.as_ref() == Some(v) {
                        format!("{sign}∞")
                    } else {
                        v.to_string()
                    }
                };
                let mut out = match (&d.range, ty) {
                    (Some((lo, hi)), Some(ty)) => format!(
                        "{name} in [{}, {}]",
                        open(lo, type_min(ty), "-"),
                        open(hi, type_max(ty), "+")
                    ),
                    (Some((lo, hi)), None) => format!("{name} in [{lo}, {hi}]"),
                    (None, _) => format!("{name} no value"),
                };
                match &d.values {
                    Some(vs) if vs.len() <= 4 => {
                        let list: Vec<String> = vs.iter().map(ToString::to_string).collect();
                        out.push_str(&format!(" ∩ {{{}}}", list.join(", ")));
                    }
                    Some(vs) => out.push_str(&format!(" ∩ {} values", vs.len())),
                    None => {}
                }
                if d.null_allowed {
                    out.push_str(" or NULL");
                }
                out
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// With `yes`, lets NULL pass in every constrained column.
    fn allow_null(mut self, yes: bool) -> Self {
        if let (true, Some(cols)) = (yes, self.columns.as_mut()) {
            cols.values_mut().for_each(|d| d.null_allowed = true);
        }
        self
    }

    fn column(index: usize, d: ColumnDomain) -> Self {
        if d.is_empty() {
            return Self::none();
        }
        Self {
            columns: Some(BTreeMap::from([(index, d)])),
        }
    }

    /// Intersection: both filters hold.
    pub fn and(self, other: Self) -> Self {
        let (Some(mut a), Some(b)) = (self.columns, other.columns) else {
            return Self::none();
        };
        for (i, d) in b {
            let merged = match a.get(&i) {
                Some(existing) => existing.intersect(&d),
                None => d,
            };
            if merged.is_empty() {
                return Self::none();
            }
            a.insert(i, merged);
        }
        Self { columns: Some(a) }
    }

    fn or(self, other: Self, cap: usize) -> Self {
        match (self.columns, other.columns) {
            (None, x) | (x, None) => Self { columns: x },
            (Some(a), Some(b)) => Self {
                columns: Some(
                    a.iter()
                        .filter_map(|(i, d)| b.get(i).map(|e| (*i, d.union(e, cap))))
                        .collect(),
                ),
            },
        }
    }
}

/// Compacts `expr` (evaluated over rows of `schema`) into per-column domains; `cap` bounds value
/// sets. Dynamic filters are read at their current value.
///
/// `null_may_pass`: let NULL through every comparison and IN list. A join's dynamic filter does
/// not say whether the join is null-equal (`IS NOT DISTINCT FROM`), where a NULL probe key must
/// reach the join although `k >= 1` is NULL for it (case c04); such filters are not proven
/// null-safe, so their domains keep NULL.
pub fn normalize(
    expr: &Arc<dyn PhysicalExpr>,
    schema: &dyn ColumnResolver,
    cap: usize,
    null_may_pass: bool,
) -> Domains {
    let any: &dyn PhysicalExpr = expr.as_ref();
    if let Some(d) = any.downcast_ref::<DynamicFilterPhysicalExpr>() {
        return match d.current() {
            Ok(current) => normalize(&current, schema, cap, null_may_pass),
            Err(_) => Domains::all(),
        };
    }
    if let Some(lit) = any.downcast_ref::<Literal>() {
        return match lit.value() {
            ScalarValue::Boolean(Some(true)) => Domains::all(),
            ScalarValue::Boolean(_) => Domains::none(),
            _ => Domains::all(),
        };
    }
    if let Some(b) = any.downcast_ref::<BinaryExpr>() {
        return match b.op() {
            Operator::And => normalize(b.left(), schema, cap, null_may_pass).and(normalize(
                b.right(),
                schema,
                cap,
                null_may_pass,
            )),
            Operator::Or => normalize(b.left(), schema, cap, null_may_pass)
                .or(normalize(b.right(), schema, cap, null_may_pass), cap),
            op => comparison(b.left(), *op, b.right(), schema).allow_null(null_may_pass),
        };
    }
    if let Some(case) = any.downcast_ref::<CaseExpr>() {
        let mut out = match case.else_expr() {
            Some(e) => normalize(e, schema, cap, null_may_pass),
            None => Domains::none(), // missing ELSE is NULL: it adds nothing
        };
        for (_, then) in case.when_then_expr() {
            out = out.or(normalize(then, schema, cap, null_may_pass), cap);
        }
        return out;
    }
    if let Some(is_null) = any.downcast_ref::<IsNullExpr>() {
        if let Some((index, _)) = schema.resolve(is_null.arg()) {
            return Domains::column(index, ColumnDomain::only_null());
        }
        return Domains::all();
    }
    if let Some(in_list) = any.downcast_ref::<InListExpr>() {
        return in_list_domains(in_list, schema, cap).allow_null(null_may_pass);
    }
    Domains::all()
}

/// A literal usable in a domain of a column of type `ty`: same type, not NULL, not NaN or ±0.0.
fn usable(value: &ScalarValue, ty: &DataType) -> Option<ScalarValue> {
    if value.is_null() || &value.data_type() != ty {
        return None;
    }
    match value {
        ScalarValue::Float32(Some(v)) if v.is_nan() || *v == 0.0 => None,
        ScalarValue::Float64(Some(v)) if v.is_nan() || *v == 0.0 => None,
        ScalarValue::Float16(Some(v)) if v.is_nan() || f32::from(*v) == 0.0 => None,
        _ => Some(value.clone()),
    }
}

fn comparison(
    left: &Arc<dyn PhysicalExpr>,
    op: Operator,
    right: &Arc<dyn PhysicalExpr>,
    schema: &dyn ColumnResolver,
) -> Domains {
    let (col, lit, op) = match (schema.resolve(left), right.downcast_ref::<Literal>()) {
        (Some(c), Some(l)) => (c, l, op),
        _ => match (
            schema.resolve(right),
            left.downcast_ref::<Literal>(),
            op.swap(),
        ) {
            (Some(c), Some(l), Some(op)) => (c, l, op),
            _ => return Domains::all(),
        },
    };
    let (index, ty) = col;
    let Some(v) = usable(lit.value(), &ty) else {
        return Domains::all();
    };
    // Ranges are inclusive: `<` and `>` widen to `<=` and `>=`, which only keeps more rows. The
    // open side takes the type's extreme; a type without one (strings above, floats: NaN
    // sorts above every number, case c02) leaves the column unconstrained.
    let d = match op {
        Operator::Eq => ColumnDomain::from_values(vec![v], usize::MAX),
        Operator::Lt | Operator::LtEq => match type_min(&ty) {
            Some(lo) => ColumnDomain::range(lo, v),
            None => return Domains::all(),
        },
        Operator::Gt | Operator::GtEq => match type_max(&ty) {
            Some(hi) => ColumnDomain::range(v, hi),
            None => return Domains::all(),
        },
        _ => return Domains::all(),
    };
    Domains::column(index, d)
}

/// The smallest value of a type, for ranges open below (`None`: such ranges constrain nothing).
pub(crate) fn type_min(ty: &DataType) -> Option<ScalarValue> {
    Some(match ty {
        DataType::Int8 => ScalarValue::Int8(Some(i8::MIN)),
        DataType::Int16 => ScalarValue::Int16(Some(i16::MIN)),
        DataType::Int32 => ScalarValue::Int32(Some(i32::MIN)),
        DataType::Int64 => ScalarValue::Int64(Some(i64::MIN)),
        DataType::Date32 => ScalarValue::Date32(Some(i32::MIN)),
        // Floats have none: Arrow orders a negative NaN (x86's `0.0 / 0.0`) below -∞, and
        // Parquet and Iceberg bounds leave NaN out, so no float range is safe (case c02).
        DataType::Decimal128(p, s) => {
            ScalarValue::Decimal128(Some(-(10i128.pow(u32::from(*p)) - 1)), *p, *s)
        }
        DataType::Utf8 => ScalarValue::Utf8(Some(String::new())),
        DataType::LargeUtf8 => ScalarValue::LargeUtf8(Some(String::new())),
        DataType::Utf8View => ScalarValue::Utf8View(Some(String::new())),
        _ => return None,
    })
}

/// The largest value of a type, for ranges open above. Floats have none usable (NaN).
pub(crate) fn type_max(ty: &DataType) -> Option<ScalarValue> {
    Some(match ty {
        DataType::Int8 => ScalarValue::Int8(Some(i8::MAX)),
        DataType::Int16 => ScalarValue::Int16(Some(i16::MAX)),
        DataType::Int32 => ScalarValue::Int32(Some(i32::MAX)),
        DataType::Int64 => ScalarValue::Int64(Some(i64::MAX)),
        DataType::Date32 => ScalarValue::Date32(Some(i32::MAX)),
        DataType::Decimal128(p, s) => {
            ScalarValue::Decimal128(Some(10i128.pow(u32::from(*p)) - 1), *p, *s)
        }
        _ => return None,
    })
}

fn in_list_domains(in_list: &InListExpr, schema: &dyn ColumnResolver, cap: usize) -> Domains {
    if in_list.negated() {
        return Domains::all();
    }
    let literals: Option<Vec<&ScalarValue>> = in_list
        .list()
        .iter()
        .map(|e| e.downcast_ref::<Literal>().map(Literal::value))
        .collect();
    let Some(literals) = literals else {
        return Domains::all();
    };
    // Single column.
    if let Some((index, ty)) = schema.resolve(in_list.expr()) {
        let mut values = Vec::with_capacity(literals.len());
        for l in literals {
            if l.is_null() {
                continue; // NULL in an IN list never matches
            }
            match usable(l, &ty) {
                Some(v) => values.push(v),
                None => return Domains::all(), // dropping it would narrow the set
            }
        }
        return Domains::column(index, ColumnDomain::from_values(values, cap));
    }
    // struct(c0, c1, ...) IN ({c0: .., c1: ..}, ...): one constraint per column.
    let Some(func) = in_list.expr().downcast_ref::<ScalarFunctionExpr>() else {
        return Domains::all();
    };
    if func.name() != "struct" && func.name() != "named_struct" {
        return Domains::all();
    }
    let columns: Vec<Option<(usize, DataType)>> =
        func.args().iter().map(|a| schema.resolve(a)).collect();
    let mut per_column: Vec<Vec<ScalarValue>> = vec![vec![]; columns.len()];
    let mut usable_column = vec![true; columns.len()];
    for l in literals {
        let ScalarValue::Struct(arr) = l else {
            return Domains::all();
        };
        if arr.len() != 1 || arr.num_columns() != columns.len() {
            return Domains::all();
        }
        for (j, c) in columns.iter().enumerate() {
            let Some((_, ty)) = c else {
                usable_column[j] = false;
                continue;
            };
            match ScalarValue::try_from_array(arr.column(j), 0)
                .ok()
                .and_then(|v| {
                    if v.is_null() {
                        Some(None)
                    } else {
                        usable(&v, ty).map(Some)
                    }
                }) {
                Some(Some(v)) => per_column[j].push(v),
                Some(None) => {} // a NULL key component never matches
                None => usable_column[j] = false,
            }
        }
    }
    let mut out = Domains::all();
    for (j, c) in columns.into_iter().enumerate() {
        if let (Some((index, _)), true) = (c, usable_column[j]) {
            out = out.and(Domains::column(
                index,
                ColumnDomain::from_values(std::mem::take(&mut per_column[j]), cap),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{Field, Schema};
    use datafusion::physical_expr::expressions::{case, col, in_list, is_null, lit};

    use super::*;

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("k", DataType::Int32, true),
            Field::new("k2", DataType::Int32, true),
            Field::new("v", DataType::Int64, true),
            Field::new("f", DataType::Float64, true),
        ])
    }

    fn bin(
        l: Arc<dyn PhysicalExpr>,
        op: Operator,
        r: Arc<dyn PhysicalExpr>,
    ) -> Arc<dyn PhysicalExpr> {
        Arc::new(BinaryExpr::new(l, op, r))
    }

    fn k() -> Arc<dyn PhysicalExpr> {
        col("k", &schema()).unwrap()
    }

    fn ints(vs: &[i32]) -> Vec<Arc<dyn PhysicalExpr>> {
        vs.iter().map(|v| lit(*v)).collect()
    }

    /// `k >= lo AND k <= hi AND k IN (set)`, as a CollectLeft hash join prints it.
    fn bounds_and_set(lo: i32, hi: i32, set: &[i32]) -> Arc<dyn PhysicalExpr> {
        let s = schema();
        let range = bin(
            bin(k(), Operator::GtEq, lit(lo)),
            Operator::And,
            bin(k(), Operator::LtEq, lit(hi)),
        );
        bin(
            range,
            Operator::And,
            in_list(k(), ints(set), &false, &s).unwrap(),
        )
    }

    fn show(d: &Domains) -> String {
        match &d.columns {
            None => "false".into(),
            Some(cols) if cols.is_empty() => "true".into(),
            Some(cols) => cols
                .iter()
                .map(|(i, c)| {
                    let range = c
                        .range
                        .as_ref()
                        .map(|(a, b)| format!("[{a}, {b}]"))
                        .unwrap_or_else(|| "no value".into());
                    let set = c
                        .values
                        .as_ref()
                        .map(|v| {
                            format!(
                                " in {{{}}}",
                                v.iter()
                                    .map(|x| x.to_string())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )
                        })
                        .unwrap_or_default();
                    let null = if c.null_allowed { " or null" } else { "" };
                    format!("#{i}: {range}{set}{null}")
                })
                .collect::<Vec<_>>()
                .join("; "),
        }
    }

    fn norm(e: &Arc<dyn PhysicalExpr>, cap: usize) -> String {
        show(&normalize(e, &schema(), cap, false))
    }

    #[test]
    fn null_may_pass_keeps_null_keys() {
        // Case c04: a null-equal join's filter must not drop NULL probe keys.
        let d = normalize(&bounds_and_set(1, 1, &[1]), &schema(), 150, true);
        insta::assert_snapshot!(show(&d), @"#0: [1, 1] in {1} or null");
        // An empty non-null intersection still lets NULL through; a false filter does not.
        let e = bin(
            bin(k(), Operator::Eq, lit(1)),
            Operator::And,
            bin(k(), Operator::Eq, lit(2)),
        );
        insta::assert_snapshot!(show(&normalize(&e, &schema(), 150, true)), @"#0: no value in {} or null");
        insta::assert_snapshot!(show(&normalize(&lit(false), &schema(), 150, true)), @"false");
    }

    #[test]
    fn collect_left_bounds_and_in_list() {
        // Duplicates in the build-side list are kept by DataFusion; the domain dedupes.
        insta::assert_snapshot!(norm(&bounds_and_set(3, 1200, &[3, 5, 7, 5, 1200]), 150), @"#0: [3, 1200] in {3, 5, 7, 1200}");
    }

    #[test]
    fn unconvertible_conjunct_is_dropped() {
        // Stands for `hash_lookup`: column against column constrains nothing.
        let s = schema();
        let range = bin(
            bin(k(), Operator::GtEq, lit(0)),
            Operator::And,
            bin(k(), Operator::LtEq, lit(2793)),
        );
        let e = bin(
            range,
            Operator::And,
            bin(k(), Operator::Eq, col("k2", &s).unwrap()),
        );
        insta::assert_snapshot!(norm(&e, 150), @"#0: [0, 2793]");
    }

    #[test]
    fn hash_routed_case_unions_branches() {
        let s = schema();
        let routing = bin(col("k2", &s).unwrap(), Operator::Modulo, lit(4));
        let e = case(
            Some(routing.clone()),
            vec![
                (lit(0), bounds_and_set(3, 7, &[3, 5, 7, 5])),
                (lit(2), bounds_and_set(1200, 1200, &[1200])),
            ],
            Some(lit(false)),
        )
        .unwrap();
        insta::assert_snapshot!(norm(&e, 150), @"#0: [3, 1200] in {3, 5, 7, 1200}");
        // A union over the cap keeps only the range.
        insta::assert_snapshot!(norm(&e, 3), @"#0: [3, 1200]");
        // ELSE true (e.g. a cancelled build partition) removes the constraint.
        let e = case(
            Some(routing.clone()),
            vec![(lit(0), bounds_and_set(3, 7, &[3]))],
            Some(lit(true)),
        )
        .unwrap();
        insta::assert_snapshot!(norm(&e, 150), @"true");
        // A missing ELSE is NULL: it adds nothing.
        let e = case(
            Some(routing),
            vec![(lit(0), bounds_and_set(3, 7, &[3, 7]))],
            None,
        )
        .unwrap();
        insta::assert_snapshot!(norm(&e, 150), @"#0: [3, 7] in {3, 7}");
    }

    #[test]
    fn topk_keeps_null_and_aggregate_or_over_columns_is_unconstrained() {
        let s = schema();
        let v = col("v", &s).unwrap();
        let topk = bin(
            is_null(v.clone()).unwrap(),
            Operator::Or,
            bin(v.clone(), Operator::Gt, lit(39970i64)),
        );
        insta::assert_snapshot!(norm(&topk, 150), @"#2: [39970, 9223372036854775807] or null");
        let agg = bin(
            bin(v, Operator::Lt, lit(0i64)),
            Operator::Or,
            bin(k(), Operator::Gt, lit(3999)),
        );
        insta::assert_snapshot!(norm(&agg, 150), @"true");
    }

    #[test]
    fn and_intersects_and_empty_is_false() {
        let e = bin(
            bounds_and_set(1, 10, &[1, 5, 9]),
            Operator::And,
            bin(k(), Operator::GtEq, lit(4)),
        );
        insta::assert_snapshot!(norm(&e, 150), @"#0: [5, 9] in {5, 9}");
        let e = bin(
            bin(k(), Operator::Eq, lit(1)),
            Operator::And,
            bin(k(), Operator::Eq, lit(2)),
        );
        insta::assert_snapshot!(norm(&e, 150), @"false");
        insta::assert_snapshot!(norm(&lit(false), 150), @"false");
        insta::assert_snapshot!(norm(&lit(ScalarValue::Boolean(None)), 150), @"false");
    }

    #[test]
    fn unusable_literals_constrain_nothing() {
        let s = schema();
        let f = col("f", &s).unwrap();
        // Literal of another type than the column.
        insta::assert_snapshot!(norm(&bin(k(), Operator::Eq, lit(3i64)), 150), @"true");
        // NaN and ±0.0 literals; an IN list holding one is not used at all.
        insta::assert_snapshot!(norm(&bin(f.clone(), Operator::Eq, lit(f64::NAN)), 150), @"true");
        insta::assert_snapshot!(norm(&bin(f.clone(), Operator::LtEq, lit(-0.0f64)), 150), @"true");
        let list = vec![lit(1.5f64), lit(f64::NAN)];
        insta::assert_snapshot!(norm(&in_list(f.clone(), list, &false, &s).unwrap(), 150), @"true");
        // Floats have no usable bound: NaN sorts above every number, a negative NaN below -∞.
        insta::assert_snapshot!(norm(&bin(f.clone(), Operator::Gt, lit(2.5f64)), 150), @"true");
        insta::assert_snapshot!(norm(&bin(f, Operator::Lt, lit(2.5f64)), 150), @"true");
        // NOT IN, and NULLs in an IN list (they never match).
        insta::assert_snapshot!(norm(&in_list(k(), ints(&[1, 2]), &true, &s).unwrap(), 150), @"true");
        let list = vec![lit(3), lit(ScalarValue::Int32(None)), lit(9)];
        insta::assert_snapshot!(norm(&in_list(k(), list, &false, &s).unwrap(), 150), @"#0: [3, 9] in {3, 9}");
    }

    /// `struct(k, k2) IN (...)`, as a CollectLeft join on two keys builds it (shape C).
    fn struct_in(tuples: &[(i32, Option<i32>)]) -> Arc<dyn PhysicalExpr> {
        use arrow::array::{Int32Array, StructArray};
        use arrow::datatypes::Fields;
        use datafusion::functions::core::r#struct;
        let s = schema();
        let func = r#struct();
        let args = vec![k(), col("k2", &s).unwrap()];
        let fields = Fields::from(vec![
            Field::new("c0", DataType::Int32, true),
            Field::new("c1", DataType::Int32, true),
        ]);
        let return_field = Arc::new(Field::new("struct", DataType::Struct(fields.clone()), true));
        let expr: Arc<dyn PhysicalExpr> = Arc::new(ScalarFunctionExpr::new(
            "struct",
            func,
            args,
            return_field,
            Arc::new(datafusion::common::config::ConfigOptions::default()),
        ));
        let list = tuples
            .iter()
            .map(|(a, b)| {
                let arr = StructArray::new(
                    fields.clone(),
                    vec![
                        Arc::new(Int32Array::from(vec![Some(*a)])),
                        Arc::new(Int32Array::from(vec![*b])),
                    ],
                    None,
                );
                lit(ScalarValue::Struct(Arc::new(arr)))
            })
            .collect();
        in_list(expr, list, &false, &s).unwrap()
    }

    #[test]
    fn multi_column_keys_constrain_each_column() {
        let e = struct_in(&[(3, Some(30)), (5, None), (7, Some(10))]);
        insta::assert_snapshot!(norm(&e, 150), @"#0: [3, 7] in {3, 5, 7}; #1: [10, 30] in {10, 30}");
        // With the bounds DataFusion puts in front.
        let bounds = bin(
            bin(k(), Operator::GtEq, lit(3)),
            Operator::And,
            bin(k(), Operator::LtEq, lit(7)),
        );
        insta::assert_snapshot!(norm(&bin(bounds, Operator::And, e), 2), @"#0: [3, 7]; #1: [10, 30] in {10, 30}");
    }

    #[test]
    fn range_routed_case_and_merged_or_of_cases() {
        let s = schema();
        // Range-routed: WHEN k2 < 100 THEN … WHEN k2 >= 100 THEN …, no ELSE.
        let routed = case(
            None,
            vec![
                (
                    bin(col("k2", &s).unwrap(), Operator::Lt, lit(100)),
                    bounds_and_set(1, 4, &[1, 4]),
                ),
                (
                    bin(col("k2", &s).unwrap(), Operator::GtEq, lit(100)),
                    bounds_and_set(10, 12, &[10, 12]),
                ),
            ],
            None,
        )
        .unwrap();
        insta::assert_snapshot!(norm(&routed, 150), @"#0: [1, 12] in {1, 4, 10, 12}");
        // The merged distributed shape: an OR of per-task CASEs.
        let routing = bin(col("k2", &s).unwrap(), Operator::Modulo, lit(2));
        let task = |lo: i32, hi: i32| {
            case(
                Some(routing.clone()),
                vec![(lit(0), bounds_and_set(lo, hi, &[lo, hi]))],
                Some(lit(false)),
            )
            .unwrap()
        };
        let merged = bin(task(1, 2), Operator::Or, task(50, 60));
        insta::assert_snapshot!(norm(&merged, 150), @"#0: [1, 60] in {1, 2, 50, 60}");
        insta::assert_snapshot!(norm(&merged, 3), @"#0: [1, 60]");
        // A branch without an IN list (a dropped hash lookup) keeps only the range.
        let lookup = case(
            Some(routing),
            vec![
                (lit(0), bounds_and_set(1, 2, &[1, 2])),
                (
                    lit(1),
                    bin(
                        bin(k(), Operator::GtEq, lit(20)),
                        Operator::And,
                        bin(k(), Operator::LtEq, lit(30)),
                    ),
                ),
            ],
            Some(lit(false)),
        )
        .unwrap();
        insta::assert_snapshot!(norm(&lookup, 150), @"#0: [1, 30]");
    }

    #[test]
    fn filters_under_not_or_next_to_unconstrained_branches_constrain_nothing() {
        use datafusion::physical_expr::expressions::{DynamicFilterPhysicalExpr, not};
        let s = Arc::new(schema());
        let dynamic = Arc::new(DynamicFilterPhysicalExpr::new(vec![k()], lit(true)));
        dynamic.update(bounds_and_set(3, 9, &[3, 9])).unwrap();
        let d: Arc<dyn PhysicalExpr> = dynamic;
        insta::assert_snapshot!(norm(&d, 150), @"#0: [3, 9] in {3, 9}");
        insta::assert_snapshot!(norm(&not(Arc::clone(&d)).unwrap(), 150), @"true");
        let other = bin(col("v", &s).unwrap(), Operator::Gt, lit(1i64));
        insta::assert_snapshot!(norm(&bin(d, Operator::Or, other), 150), @"true");
    }

    #[test]
    fn c02_float_ranges_never_bound_nan_out_wrongly() {
        // `f > 100` must keep NaN rows (NaN sorts above every number): no upper bound exists.
        let s = schema();
        let f = col("f", &s).unwrap();
        insta::assert_snapshot!(norm(&bin(f.clone(), Operator::Gt, lit(100.0f64)), 150), @"true");
        // A float build side `f >= 1.0 AND f <= 2.0` constrains nothing (a negative NaN sorts
        // below -∞); its value set still would.
        let e = bin(
            bin(f.clone(), Operator::GtEq, lit(1.0f64)),
            Operator::And,
            bin(f, Operator::LtEq, lit(2.0f64)),
        );
        insta::assert_snapshot!(norm(&e, 150), @"true");
    }

    #[test]
    fn describe_shows_open_ends_and_sets() {
        let s = schema();
        let e = bin(
            bin(k(), Operator::Lt, lit(5)),
            Operator::And,
            bin(col("v", &s).unwrap(), Operator::GtEq, lit(7i64)),
        );
        insta::assert_snapshot!(normalize(&e, &s, 150, false).describe(&s), @"k in [-∞, 5]; v in [7, +∞]");
        insta::assert_snapshot!(normalize(&bounds_and_set(1, 9, &[1, 3, 9]), &s, 150, true).describe(&s), @"k in [1, 9] ∩ {1, 3, 9} or NULL");
    }
}
