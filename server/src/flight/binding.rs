//! Parameters of prepared statements: the types announced to clients, the values they send cast
//! to those types, and the rows bound into the statement's plan, one row or many as one
//! statement.
//!
//! ```text
//!   CreatePreparedStatement ─► Placeholders::of(plan): $1..$n, DataFusion's inferred types
//!   DoPut(…Query | …Update) ─► ParameterRows (input crate) ─► Placeholders::rows: cast ─► BoundRows
//!   execute ─► bind(plan, rows):  1 row ─► LogicalPlan::with_param_values
//!                                 n rows, INSERT … VALUES ─► one VALUES of n × its rows
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

use std::sync::Arc;

use arrow::array::{Array, ArrayRef};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, ParamValues, Result, ScalarValue, plan_err};
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{
    BinaryExpr, DmlStatement, Expr, Filter, LogicalPlan, LogicalPlanBuilder, Operator, Values,
    WriteOp,
};
use iceflight_input::parameters::ParameterRows;
use tonic::Status;

use super::planner::is_state_change;
use super::status::to_status;

/// Most parameter rows one execution binds where each row needs a plan or a condition of its
/// own (a query, an `INSERT … SELECT`, a `DELETE` condition other than `column = ?`): the
/// statement grows with every row. `INSERT … VALUES` and `DELETE … WHERE column = ?` take any
/// number (within the upload's bounds).
pub const MAX_PLANNED_ROWS: usize = 1000;

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
            .map(|(name, ty)| {
                let index = name
                    .trim_start_matches('$')
                    .parse::<usize>()
                    .unwrap_or(usize::MAX);
                (index, name, ty)
            })
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

    /// The uploaded rows, each value cast to its placeholder's type where the statement decides
    /// one (module docs, "Types").
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
        let rows = (0..upload.rows)
            .map(|row| {
                columns
                    .iter()
                    .map(|c| ScalarValue::try_from_array(c, row))
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()
            .map_err(to_status)?;
        Ok(BoundRows(rows))
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
    if source == target || *source == DataType::Null {
        return match source == target {
            true => Ok(Arc::clone(column)),
            false => Ok(arrow::array::new_null_array(target, column.len())),
        };
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
            if sent != kept {
                return Err(invalid(format!("{sent} does not fit {target} exactly")));
            }
        }
    }
    Ok(cast)
}

/// Values bound to a statement's placeholders: one row per execution of the statement, each
/// value of its placeholder's type ([`Placeholders::rows`]).
#[derive(Debug, Clone, Default)]
pub struct BoundRows(Vec<Vec<ScalarValue>>);

impl BoundRows {
    /// How many rows.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `plan` (with placeholders) run once per row of `rows`, as one statement (module docs). A
/// `DELETE`'s condition is taken again from the bound plan (`delete_statement.rs`).
///
/// Errors (`InvalidArgument`): placeholders and no row bound; more than one row for a statement
/// other than a query, `INSERT` or `DELETE`, or more than [`MAX_PLANNED_ROWS`] where each row
/// needs a plan of its own; DataFusion's errors binding the values.
pub fn bind(
    plan: &LogicalPlan,
    placeholders: &Placeholders,
    rows: Option<&BoundRows>,
) -> Result<LogicalPlan, Status> {
    let rows = rows.map(|r| r.0.as_slice()).unwrap_or_default();
    if placeholders.is_empty() {
        return Ok(plan.clone());
    }
    let bound = match rows {
        [] => {
            return Err(Status::invalid_argument(format!(
                "the prepared statement has {} parameter(s) and none were bound",
                placeholders.len()
            )));
        }
        [row] => with_row(plan.clone(), row).map_err(to_status)?,
        rows => bind_many(plan, rows)?,
    };
    crate::delete_statement::plan_delete(bound).map_err(to_status)
}

fn with_row(plan: LogicalPlan, row: &[ScalarValue]) -> Result<LogicalPlan> {
    plan.with_param_values(ParamValues::List(
        row.iter().cloned().map(Into::into).collect(),
    ))
}

/// `plan` for two or more rows.
fn bind_many(plan: &LogicalPlan, rows: &[Vec<ScalarValue>]) -> Result<LogicalPlan, Status> {
    let bound = match plan {
        LogicalPlan::Dml(dml) if matches!(dml.op, WriteOp::Insert(_)) => bind_insert(dml, rows),
        LogicalPlan::Dml(dml) if dml.op == WriteOp::Delete => bind_delete(dml, rows),
        plan if !is_state_change(plan) => union(plan, rows),
        _ => {
            return Err(Status::invalid_argument(format!(
                "this statement binds one parameter row per execution, {} were sent; \
                 only queries, INSERT and DELETE take several",
                rows.len()
            )));
        }
    };
    bound.map_err(to_status)
}

/// `INSERT`: one `VALUES` of every row when the placeholders are all in one `VALUES` node (the
/// plan of `INSERT INTO t VALUES (?, …)`); else the union of the bound inputs.
fn bind_insert(dml: &DmlStatement, rows: &[Vec<ScalarValue>]) -> Result<LogicalPlan> {
    let mut in_values = 0;
    let mut elsewhere = false;
    dml.input.apply_with_subqueries(|node| {
        if has_placeholders(node)? {
            match node {
                LogicalPlan::Values(_) => in_values += 1,
                _ => elsewhere = true,
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    let input = if in_values == 1 && !elsewhere {
        let expanded =
            Arc::unwrap_or_clone(Arc::clone(&dml.input)).transform_up(|node| match node {
                LogicalPlan::Values(values) if has_placeholders_in(&values)? => {
                    expanded_values(values, rows).map(Transformed::yes)
                }
                other => Ok(Transformed::no(other)),
            })?;
        expanded.data
    } else {
        union(&dml.input, rows)?
    };
    Ok(LogicalPlan::Dml(DmlStatement::new(
        dml.table_name.clone(),
        Arc::clone(&dml.target),
        dml.op.clone(),
        Arc::new(input),
    )))
}

/// The `VALUES` template (rows of expressions with placeholders) once per bound row, in order,
/// under the template's schema: each value is of its placeholder's type already, so the
/// template's column types hold.
fn expanded_values(template: Values, rows: &[Vec<ScalarValue>]) -> Result<LogicalPlan> {
    let mut values = Vec::with_capacity(rows.len() * template.values.len());
    for row in rows {
        for exprs in &template.values {
            values.push(
                exprs
                    .iter()
                    .map(|e| substitute(e.clone(), row))
                    .collect::<Result<Vec<_>>>()?,
            );
        }
    }
    for (i, field) in template.schema.fields().iter().enumerate() {
        if *field.data_type() == DataType::Null {
            return plan_err!(
                "VALUES column {} has no type to bind several rows to",
                field.name()
            );
        }
        for row in &mut values {
            if let Expr::Literal(v, _) = &row[i]
                && v.data_type() != *field.data_type()
            {
                row[i] = Expr::Literal(v.cast_to(field.data_type())?, None);
            }
        }
    }
    Ok(LogicalPlan::Values(Values {
        schema: template.schema,
        values,
    }))
}

/// `DELETE … WHERE p`: `p` bound once per row, the rows deleted where any is TRUE (the rows
/// each execution would delete, in one snapshot).
fn bind_delete(dml: &DmlStatement, rows: &[Vec<ScalarValue>]) -> Result<LogicalPlan> {
    let input = Arc::unwrap_or_clone(Arc::clone(&dml.input)).transform_up(|node| match node {
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
    })?;
    let mut left = false;
    input.data.apply_with_subqueries(|node| {
        left |= has_placeholders(node)?;
        Ok(TreeNodeRecursion::Continue)
    })?;
    if left {
        return plan_err!("DELETE takes parameters only in its WHERE condition");
    }
    Ok(LogicalPlan::Dml(DmlStatement::new(
        dml.table_name.clone(),
        Arc::clone(&dml.target),
        dml.op.clone(),
        Arc::new(input.data),
    )))
}

/// `c₁ OR … OR cₙ`: an IN list when every condition is `column = value` of one column (any
/// number of rows), else a balanced OR of at most [`MAX_PLANNED_ROWS`] conditions.
fn any_of(conditions: Vec<Expr>) -> Result<Expr> {
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

/// `plan` bound to each row, as `UNION ALL` (at most [`MAX_PLANNED_ROWS`] rows).
fn union(plan: &LogicalPlan, rows: &[Vec<ScalarValue>]) -> Result<LogicalPlan> {
    if rows.len() > MAX_PLANNED_ROWS {
        return plan_err!(
            "this statement binds at most {MAX_PLANNED_ROWS} parameter rows per execution \
             (each needs a plan of its own), {} were sent",
            rows.len()
        );
    }
    let mut bound = rows.iter().map(|row| with_row(plan.clone(), row));
    let Some(first) = bound.next() else {
        return plan_err!("no parameter row to bind");
    };
    let mut builder = LogicalPlanBuilder::from(first?);
    for next in bound {
        builder = builder.union(next?)?;
    }
    builder.build()
}

/// `expr` with each placeholder `$i` replaced by `row[i - 1]`.
fn substitute(expr: Expr, row: &[ScalarValue]) -> Result<Expr> {
    expr.transform_up(|e| match e {
        Expr::Placeholder(p) => {
            let value =
                p.id.trim_start_matches('$')
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| i.checked_sub(1))
                    .and_then(|i| row.get(i));
            match value {
                Some(v) => Ok(Transformed::yes(Expr::Literal(v.clone(), None))),
                None => plan_err!("no value bound for placeholder {}", p.id),
            }
        }
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

fn has_placeholders_in(values: &Values) -> Result<bool> {
    Ok(values.values.iter().flatten().any(has_placeholder))
}
