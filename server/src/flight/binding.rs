//! Parameters of prepared statements: the types announced to clients, the values they send cast
//! to those types, and the rows bound into the statement's plan, one row or many as one
//! statement.
//!
//! ```text
//!   CreatePreparedStatement ─► Placeholders::of(plan): $1..$n, DataFusion's inferred types
//!   DoPut(…Query | …Update) ─► ParameterRows (input crate) ─► Placeholders::rows: cast ─► BoundRows
//!   execute ─► bind(plan, rows):  1 row ─► LogicalPlan::with_param_values
//!                                 n rows, INSERT … VALUES (?, …) ─► a scan of the rows as sent
//!                                 n rows, other INSERT … VALUES ─► its rows once per parameter row
//!                                 n rows, DELETE … WHERE p ─► WHERE p₁ OR … OR pₙ (IN list for
//!                                                             `column = ?`)
//!                                 n rows, a query ─► UNION ALL of the n bound queries
//!          ─► one statement: one snapshot, the total rows changed
//! ```
//!
//! Flight SQL carries the parameters of a query in `DoPut(CommandPreparedStatementQuery)`,
//! bound to the next execution, and those of an update in its own
//! `DoPut(CommandPreparedStatementUpdate)` stream; either may hold many rows, and "all of the
//! bound parameter sets will be executed as a single atomic execution" (FlightSql.proto). ADBC's
//! `executemany` and JDBC's `executeBatch` send every row in one `DoPut`. A binding is used by
//! one execution only: an execution without its parameters is an error, never a run with the
//! values of an earlier one.
//!
//! **Types.** A placeholder whose type the statement decides (`WHERE k = ?`, `INSERT INTO t
//! VALUES (?, ?)`) is announced with that type and a value of another type is cast to it; a
//! number that does not fit an integer or decimal placeholder exactly is refused, never
//! truncated. A placeholder the statement leaves open (`SELECT ? AS x`) takes the value as sent
//! (`1` answers `1`, not `'1'`); it is announced as `Utf8`, since the JDBC driver can bind only a
//! typed parameter and takes text for any (a `Null` or union type takes no value there).
//!
//! **Memory.** The rows stay in the Arrow arrays they arrived in (at most the upload's bounds,
//! `iceflight_input::parameters`); a row becomes scalar values only where a plan needs one per
//! row, and there the rows are bounded ([`MAX_PLANNED_ROWS`], [`MAX_EXPANDED_ROWS`]).

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::{CastOptions, cast, cast_with_options};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::default_table_source::provider_as_source;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, ParamValues, Result, ScalarValue, plan_datafusion_err, plan_err};
use datafusion::datasource::MemTable;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{
    BinaryExpr, DmlStatement, Expr, Filter, LogicalPlan, LogicalPlanBuilder, Operator, Union,
    Values, WriteOp, col,
};
use iceflight_input::parameters::ParameterRows;
use tonic::Status;

use super::status::to_status;
use crate::sql::is_state_change;

/// Most parameter rows one execution binds where each row needs a plan or a condition of its
/// own (a query, an `INSERT … SELECT`, a `DELETE` condition other than `column = ?`): the
/// statement grows with every row.
pub const MAX_PLANNED_ROWS: usize = 1000;

/// Most parameter rows one execution binds where each row becomes expressions of one plan node
/// (an `INSERT … VALUES` of expressions over the placeholders, a `DELETE … WHERE column = ?`
/// IN list). `INSERT … VALUES (?, …)` of bare placeholders reads the rows as sent and takes as
/// many as the upload holds.
pub const MAX_EXPANDED_ROWS: usize = 100_000;

/// The placeholders of a prepared statement, `$1..$n` in order.
#[derive(Debug, Clone)]
pub struct Placeholders {
    /// The type DataFusion inferred for each; `None` where the statement leaves it open.
    types: Vec<Option<DataType>>,
    /// The parameter schema announced to clients (module docs, "Types").
    schema: SchemaRef,
}

impl Placeholders {
    /// The placeholders of `plan` (`$n` after `planner::number_placeholders`), ordered by
    /// number.
    ///
    /// Errors: a placeholder used with two types (DataFusion's error, as a status).
    pub fn of(plan: &LogicalPlan) -> Result<Self, Status> {
        let mut params: Vec<(usize, String, Option<DataType>)> = plan
            .get_parameter_types()
            .map_err(to_status)?
            .into_iter()
            .map(|(name, ty)| (placeholder_index(&name).unwrap_or(usize::MAX), name, ty))
            .collect();
        params.sort();
        let fields: Vec<Field> = params
            .iter()
            .map(|(_, name, ty)| Field::new(name, ty.clone().unwrap_or(DataType::Utf8), true))
            .collect();
        Ok(Self {
            types: params.into_iter().map(|(_, _, ty)| ty).collect(),
            schema: Arc::new(Schema::new(fields)),
        })
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// Whether the statement has none.
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// The parameter schema announced to clients.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The uploaded rows, each column cast to its placeholder's type where the statement
    /// decides one (module docs, "Types").
    ///
    /// Errors: `InvalidArgument` naming the placeholder, for a value that does not cast or does
    /// not fit exactly.
    pub fn rows(&self, upload: ParameterRows) -> Result<BoundRows, Status> {
        let columns = upload
            .columns
            .iter()
            .zip(&self.types)
            .zip(self.schema.fields())
            .map(|((column, ty), field)| match ty {
                Some(ty) => cast_exactly(column, ty, field.name()),
                None => Ok(Arc::clone(column)),
            })
            .collect::<Result<Vec<_>, Status>>()?;
        Ok(BoundRows {
            columns,
            rows: upload.rows,
            upload_bytes: upload.bytes,
        })
    }
}

/// `column` cast to `target`. A number cast to an integer or decimal type must come back to
/// itself: `3.5` for a `BIGINT` placeholder would otherwise bind `3` and the statement would
/// answer for another value (found by a newcomer's trial: `n_nationkey = ?` bound to 3.5
/// answered CANADA, the row of 3).
///
/// Errors: `InvalidArgument` naming the placeholder `name`.
fn cast_exactly(column: &ArrayRef, target: &DataType, name: &str) -> Result<ArrayRef, Status> {
    let source = column.data_type();
    if source == target {
        return Ok(Arc::clone(column));
    }
    if *source == DataType::Null {
        return Ok(arrow::array::new_null_array(target, column.len()));
    }
    let invalid = |e: String| Status::invalid_argument(format!("parameter {name}: {e}"));
    let options = CastOptions {
        safe: false,
        ..Default::default()
    };
    let cast = cast_with_options(column, target, &options).map_err(|e| invalid(e.to_string()))?;
    let numeric = source.is_floating() || source.is_integer() || source.is_decimal();
    if numeric && (target.is_integer() || target.is_decimal()) {
        let back =
            cast_with_options(&cast, source, &options).map_err(|e| invalid(e.to_string()))?;
        for row in 0..column.len() {
            let sent = ScalarValue::try_from_array(column, row).map_err(to_status)?;
            let kept = ScalarValue::try_from_array(&back, row).map_err(to_status)?;
            if !same_number(&sent, &kept) {
                return Err(invalid(format!("{sent} does not fit {target} exactly")));
            }
        }
    }
    Ok(cast)
}

/// Whether `a` and `b` (a value and its round trip through a cast) are the same number: floats
/// by value (`-0.0` is `0`), everything else as `ScalarValue` compares.
fn same_number(a: &ScalarValue, b: &ScalarValue) -> bool {
    match (a, b) {
        (ScalarValue::Float64(Some(a)), ScalarValue::Float64(Some(b))) => a == b,
        (ScalarValue::Float32(Some(a)), ScalarValue::Float32(Some(b))) => a == b,
        (ScalarValue::Float16(Some(a)), ScalarValue::Float16(Some(b))) => a == b,
        _ => a == b,
    }
}

/// Values bound to a statement's placeholders, one row per execution of the statement: one
/// array per placeholder, each value of its placeholder's type ([`Placeholders::rows`]), kept
/// as it arrived (module docs, "Memory").
#[derive(Debug, Clone, Default)]
pub struct BoundRows {
    columns: Vec<ArrayRef>,
    rows: usize,
    /// Bytes of the upload they came from.
    upload_bytes: usize,
}

impl BoundRows {
    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// What the rows may hold in memory at most: the upload they came from (its arrays may
    /// be slices of it) and the values of the casts made from them.
    pub fn bytes(&self) -> u64 {
        let cast: usize = self
            .columns
            .iter()
            .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0))
            .sum();
        (self.upload_bytes + cast) as u64
    }

    /// Row `i` as one value per placeholder.
    ///
    /// Errors: `InvalidArgument` for a value of a type DataFusion has no scalar of.
    fn row(&self, i: usize) -> Result<Vec<ScalarValue>, Status> {
        self.columns
            .iter()
            .map(|c| ScalarValue::try_from_array(c, i))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| Status::invalid_argument(format!("a parameter value: {e}")))
    }

    /// Every row, if there are at most `max` (`what` names the statement in the error).
    ///
    /// Errors: `InvalidArgument` past `max`, or for a value [`Self::row`] refuses.
    fn all_rows(&self, max: usize, what: &str) -> Result<Vec<Vec<ScalarValue>>, Status> {
        if self.rows > max {
            return Err(Status::invalid_argument(format!(
                "{what} binds at most {max} parameter rows per execution, {} were sent",
                self.rows
            )));
        }
        (0..self.rows).map(|i| self.row(i)).collect()
    }
}

/// `plan` (with placeholders) run once per row of `rows`, as one statement (module docs). A
/// `DELETE`'s condition is taken again from the bound plan (`sql/delete.rs`).
///
/// Errors (`InvalidArgument`): placeholders and no row bound; more than one row for a statement
/// other than a query, `INSERT` or `DELETE`; more rows than the plan can take
/// ([`MAX_PLANNED_ROWS`], [`MAX_EXPANDED_ROWS`]); a NULL for a `NOT NULL` column of an `INSERT
/// … VALUES (?, …)`; DataFusion's errors binding the values.
pub fn bind(
    plan: &LogicalPlan,
    placeholders: &Placeholders,
    rows: Option<&BoundRows>,
) -> Result<LogicalPlan, Status> {
    if placeholders.is_empty() {
        return Ok(plan.clone());
    }
    let Some(rows) = rows.filter(|r| !r.is_empty()) else {
        return Err(Status::invalid_argument(format!(
            "the prepared statement has {} parameter(s) and none were bound",
            placeholders.len()
        )));
    };
    let bound = match plan {
        LogicalPlan::Dml(dml) if matches!(dml.op, WriteOp::Insert(_)) => bind_insert(dml, rows)?,
        LogicalPlan::Dml(dml) if dml.op == WriteOp::Delete => bind_delete(dml, rows)?,
        plan if rows.rows == 1 => with_row(plan.clone(), &rows.row(0)?).map_err(to_status)?,
        plan if !is_state_change(plan) => {
            let rows = rows.all_rows(MAX_PLANNED_ROWS, "a query")?;
            union(plan, &rows).map_err(to_status)?
        }
        _ => {
            return Err(Status::invalid_argument(format!(
                "this statement binds one parameter row per execution, {} were sent; \
                 only queries, INSERT and DELETE take several",
                rows.rows
            )));
        }
    };
    let bound = crate::sql::row_change::with_bound_input(bound).map_err(to_status)?;
    crate::sql::delete::plan_delete(bound).map_err(to_status)
}

fn with_row(plan: LogicalPlan, row: &[ScalarValue]) -> Result<LogicalPlan> {
    plan.with_param_values(ParamValues::List(
        row.iter().cloned().map(Into::into).collect(),
    ))
}

/// `INSERT`: when the placeholders are all in one `VALUES` node (the plan of `INSERT INTO t
/// VALUES (?, …)`), that node reads every row ([`values_of_rows`]); otherwise the union of the
/// bound inputs.
fn bind_insert(dml: &DmlStatement, rows: &BoundRows) -> Result<LogicalPlan, Status> {
    let mut values = vec![];
    let mut elsewhere = false;
    dml.input
        .apply_with_subqueries(|node| {
            match node {
                LogicalPlan::Values(v) if has_placeholders_in(v) => values.push(v.clone()),
                node => elsewhere |= has_placeholders(node)?,
            }
            Ok(TreeNodeRecursion::Continue)
        })
        .map_err(to_status)?;
    let input = match values.as_slice() {
        [template] if !elsewhere => {
            let rows = values_of_rows(template, rows)?;
            Arc::unwrap_or_clone(Arc::clone(&dml.input))
                .transform_up_with_subqueries(|node| match node {
                    LogicalPlan::Values(v) if has_placeholders_in(&v) => {
                        Ok(Transformed::yes(rows.clone()))
                    }
                    node => Ok(Transformed::no(node)),
                })
                .map_err(to_status)?
                .data
        }
        _ => {
            let rows = rows.all_rows(
                MAX_PLANNED_ROWS,
                "an INSERT with parameters outside its VALUES",
            )?;
            union(&dml.input, &rows).map_err(to_status)?
        }
    };
    Ok(LogicalPlan::Dml(DmlStatement::new(
        dml.table_name.clone(),
        Arc::clone(&dml.target),
        dml.op.clone(),
        Arc::new(input),
    )))
}

/// The `VALUES` node `template` (rows of expressions over the placeholders) for every bound
/// row, under the template's schema (its column types are the table's, which each value was
/// cast to): a scan of the arrays as sent when the template is one row of bare placeholders (no
/// value becomes an expression), else the template's rows once per parameter row, in order.
fn values_of_rows(template: &Values, rows: &BoundRows) -> Result<LogicalPlan, Status> {
    if let [exprs] = template.values.as_slice()
        && let Some(columns) = bare_placeholders(exprs, rows)
    {
        return scan_of_rows(template, columns);
    }
    let rows = rows.all_rows(MAX_EXPANDED_ROWS, "this INSERT … VALUES")?;
    let mut values = Vec::with_capacity(rows.len() * template.values.len());
    for row in &rows {
        for exprs in &template.values {
            let bound = exprs
                .iter()
                .map(|e| substitute(e.clone(), row))
                .collect::<Result<Vec<_>>>()
                .map_err(to_status)?;
            values.push(bound);
        }
    }
    Ok(LogicalPlan::Values(Values {
        schema: Arc::clone(&template.schema),
        values,
    }))
}

/// The bound arrays in the order of `exprs`, with their placeholders, when each is a bare
/// placeholder.
fn bare_placeholders<'a>(exprs: &'a [Expr], rows: &BoundRows) -> Option<Vec<(&'a str, ArrayRef)>> {
    exprs
        .iter()
        .map(|e| match e {
            Expr::Placeholder(p) => placeholder_index(&p.id)
                .and_then(|i| rows.columns.get(i))
                .map(|c| (p.id.as_str(), Arc::clone(c))),
            _ => None,
        })
        .collect()
}

/// A plan reading `columns` under the `VALUES` node's column names (`column1`, …) and types: a
/// scan of an in-memory table, projected to unqualified names as `VALUES` has them.
///
/// Errors: `InvalidArgument` for a NULL where the node's column (the table's) is `NOT NULL`,
/// naming the placeholder.
fn scan_of_rows(template: &Values, columns: Vec<(&str, ArrayRef)>) -> Result<LogicalPlan, Status> {
    let schema = Arc::new(template.schema.as_arrow().clone());
    for ((placeholder, column), field) in columns.iter().zip(schema.fields()) {
        if !field.is_nullable() && column.null_count() > 0 {
            return Err(Status::invalid_argument(format!(
                "parameter {placeholder} is NULL for a NOT NULL column"
            )));
        }
    }
    let columns = columns
        .iter()
        .zip(schema.fields())
        .map(|((_, c), f)| Ok(cast(c, f.data_type())?))
        .collect::<Result<Vec<_>>>()
        .map_err(to_status)?;
    scan_of_batch(schema, columns).map_err(to_status)
}

/// A scan of one batch of `columns` under `schema`, projected to unqualified names.
fn scan_of_batch(schema: SchemaRef, columns: Vec<ArrayRef>) -> Result<LogicalPlan> {
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns)
        .map_err(|e| plan_datafusion_err!("parameter rows: {e}"))?;
    let table = MemTable::try_new(Arc::clone(&schema), vec![vec![batch]])?;
    let scan = LogicalPlanBuilder::scan("parameters", provider_as_source(Arc::new(table)), None)?;
    let names: Vec<Expr> = schema
        .fields()
        .iter()
        .map(|f| col(Column::new(Some("parameters"), f.name())).alias(f.name()))
        .collect();
    scan.project(names)?.build()
}

/// `DELETE … WHERE p`: `p` bound once per row, the rows deleted where any is TRUE (the rows
/// each execution would delete, in one snapshot).
fn bind_delete(dml: &DmlStatement, rows: &BoundRows) -> Result<LogicalPlan, Status> {
    let rows = rows.all_rows(MAX_EXPANDED_ROWS, "a DELETE")?;
    let input = Arc::unwrap_or_clone(Arc::clone(&dml.input))
        .transform_up(|node| match node {
            LogicalPlan::Filter(filter) if has_placeholder(&filter.predicate) => {
                let conditions = rows
                    .iter()
                    .map(|row| substitute(filter.predicate.clone(), row))
                    .collect::<Result<Vec<_>>>()?;
                let predicate = any_of(conditions)?;
                Filter::try_new(predicate, filter.input)
                    .map(|f| Transformed::yes(LogicalPlan::Filter(f)))
            }
            other => Ok(Transformed::no(other)),
        })
        .map_err(to_status)?
        .data;
    let mut left = false;
    input
        .apply_with_subqueries(|node| {
            left |= has_placeholders(node)?;
            Ok(TreeNodeRecursion::Continue)
        })
        .map_err(to_status)?;
    if left {
        return Err(Status::invalid_argument(
            "DELETE takes parameters only in its WHERE condition",
        ));
    }
    Ok(LogicalPlan::Dml(DmlStatement::new(
        dml.table_name.clone(),
        Arc::clone(&dml.target),
        dml.op.clone(),
        Arc::new(input),
    )))
}

/// `c₁ OR … OR cₙ`: an IN list when every condition is `column = value` of one column, else a
/// balanced OR of at most [`MAX_PLANNED_ROWS`] conditions. (`k IN (v₁, …)` is `k = v₁ OR …`
/// under three-valued logic, NULL values included.)
fn any_of(mut conditions: Vec<Expr>) -> Result<Expr> {
    if conditions.len() == 1 {
        return Ok(conditions.remove(0));
    }
    let column_eq = |e: &Expr| match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) => match (left.as_ref(), right.as_ref()) {
            (Expr::Column(c), Expr::Literal(..)) => Some((c.clone(), right.as_ref().clone())),
            (Expr::Literal(..), Expr::Column(c)) => Some((c.clone(), left.as_ref().clone())),
            _ => None,
        },
        _ => None,
    };
    let pairs: Option<Vec<(Column, Expr)>> = conditions.iter().map(column_eq).collect();
    if let Some(pairs) = pairs
        && let Some((column, _)) = pairs.first()
        && pairs.iter().all(|(c, _)| c == column)
    {
        let column = Expr::Column(column.clone());
        let list = pairs.into_iter().map(|(_, v)| v).collect();
        return Ok(Expr::InList(InList::new(Box::new(column), list, false)));
    }
    if conditions.len() > MAX_PLANNED_ROWS {
        return plan_err!(
            "a DELETE condition other than `column = ?` binds at most {MAX_PLANNED_ROWS} \
             parameter rows per execution, {} were sent",
            conditions.len()
        );
    }
    Ok(balanced_or(conditions))
}

fn balanced_or(mut conditions: Vec<Expr>) -> Expr {
    if conditions.len() == 1 {
        return conditions.remove(0);
    }
    let right = conditions.split_off(conditions.len() / 2);
    balanced_or(conditions).or(balanced_or(right))
}

/// `plan` bound to each row, as one `UNION ALL` of them all (the caller bounds the rows). The
/// rows of different parameter rows may interleave.
fn union(plan: &LogicalPlan, rows: &[Vec<ScalarValue>]) -> Result<LogicalPlan> {
    if let [row] = rows {
        return with_row(plan.clone(), row);
    }
    let inputs = rows
        .iter()
        .map(|row| with_row(plan.clone(), row).map(Arc::new))
        .collect::<Result<Vec<_>>>()?;
    Ok(LogicalPlan::Union(Union::try_new_with_loose_types(inputs)?))
}

/// `$n` → `n - 1`.
fn placeholder_index(id: &str) -> Option<usize> {
    id.trim_start_matches('$')
        .parse::<usize>()
        .ok()
        .and_then(|i| i.checked_sub(1))
}

/// `expr` with each placeholder `$i` replaced by `row[i - 1]`.
fn substitute(expr: Expr, row: &[ScalarValue]) -> Result<Expr> {
    expr.transform_up(|e| match e {
        Expr::Placeholder(p) => match placeholder_index(&p.id).and_then(|i| row.get(i)) {
            Some(v) => Ok(Transformed::yes(Expr::Literal(v.clone(), None))),
            None => plan_err!("no value bound for placeholder {}", p.id),
        },
        other => Ok(Transformed::no(other)),
    })
    .map(|t| t.data)
}

fn has_placeholder(expr: &Expr) -> bool {
    expr.exists(|e| Ok(matches!(e, Expr::Placeholder(_))))
        .unwrap_or(false)
}

/// Whether a plan node's own expressions hold a placeholder.
fn has_placeholders(node: &LogicalPlan) -> Result<bool> {
    let mut found = false;
    node.apply_expressions(|e| {
        found |= has_placeholder(e);
        Ok(match found {
            true => TreeNodeRecursion::Stop,
            false => TreeNodeRecursion::Continue,
        })
    })?;
    Ok(found)
}

fn has_placeholders_in(values: &Values) -> bool {
    values.values.iter().flatten().any(has_placeholder)
}
