//! Planning `UPDATE`, `MERGE INTO` and merge-on-read `DELETE` on an Iceberg table as a change
//! stream into the table's [`RowChangeTarget`] (`scan/src/write/row_change.rs` applies it).
//!
//! ```text
//!   UPDATE t SET c = e WHERE p
//!     t (with _file, _pos) ─► Filter p ─► [c: CAST(e), other columns as read, _file, _pos, 2]
//!   MERGE INTO t USING s ON j  WHEN [NOT] MATCHED [AND q] THEN UPDATE | DELETE | INSERT …
//!     t (with _file, _pos) RIGHT JOIN s ON j   (INNER JOIN without an INSERT clause)
//!       ─► __clause: the first clause whose kind (matched: t._pos IS NOT NULL) and q hold
//!       ─► Filter __clause IS NOT NULL
//!       ─► [each column: its value under that clause, _file, _pos, 0 | 1 | 2]
//!   DELETE FROM t WHERE p   (write.delete.mode = merge-on-read)
//!     t (with _file, _pos) ─► Filter p ─► [NULL…, _file, _pos, 0]
//!   ──► Dml(INSERT INTO RowChangeTarget(t)) ─► one row: the rows changed
//! ```
//!
//! Values are cast to their column's type as written (`CAST` fails on a value that does not
//! fit: the statement fails and commits nothing); a fractional value for an integer column is
//! refused at planning, since the cast would drop its fraction. A target row two source rows match is
//! refused by the sink ("one target row matched more than one source row", as Trino and the
//! SQL standard say). Refused at planning, one clear line each: a column that does not exist
//! or is set twice, `UPDATE … FROM`, `RETURNING`, `WHEN NOT MATCHED BY SOURCE`, `INSERT ROW`,
//! a target that is not an Iceberg table.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::catalog::default_table_source::provider_as_source;
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{
    Column, DFSchema, Result, ScalarValue, TableReference, not_impl_err, plan_err,
};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{
    DmlStatement, Expr, ExprSchemable, LogicalPlan, LogicalPlanBuilder, WriteOp, cast, col, lit,
    when,
};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::{
    Assignment, AssignmentTarget, Ident, Merge, MergeAction, MergeClauseKind, MergeInsertKind,
    ObjectName, TableFactor, TableWithJoins, Update,
};
use iceflight_scan::IcebergTableProvider;
use iceflight_scan::model::metadata_columns::{FILE_PATH, ROW_POSITION};
use iceflight_scan::table::row_change_target::RowChangeTarget;
use iceflight_scan::write::row_change::{CHANGE, DELETE, INSERT, UPDATE};
use iceflight_scan::write::write_mode::RowOperation;

use super::ddl::Names;
use crate::access::Privilege;

/// The target table of a statement: its name as written, the name its columns are qualified
/// by (the alias, else the name) and its provider.
struct Target {
    reference: TableReference,
    qualifier: TableReference,
    provider: IcebergTableProvider,
}

impl Target {
    /// Resolves `name` (aliased `alias`) in `ctx` to an Iceberg table.
    async fn resolve(
        ctx: &SessionContext,
        name: &ObjectName,
        alias: Option<&Ident>,
        operation: RowOperation,
    ) -> Result<Self> {
        let names = Names::of(ctx);
        let resolved = names.table(name)?;
        let reference = TableReference::full(
            resolved.catalog.to_string(),
            resolved.schema.to_string(),
            resolved.table.to_string(),
        );
        let provider = ctx.table_provider(reference.clone()).await?;
        let Some(iceberg) = provider.downcast_ref::<IcebergTableProvider>() else {
            return not_impl_err!(
                "{} on {name} is not supported: it is not an Iceberg table",
                operation.keyword()
            );
        };
        let qualifier = match alias {
            Some(alias) => TableReference::bare(names.ident(alias)),
            None => names.reference(name)?,
        };
        Ok(Self {
            reference,
            qualifier,
            provider: iceberg.clone(),
        })
    }

    /// The target scanned with `_file` and `_pos`, its columns qualified by
    /// [`Self::qualifier`].
    fn scan(&self) -> Result<LogicalPlanBuilder> {
        LogicalPlanBuilder::scan(
            self.qualifier.clone(),
            provider_as_source(Arc::new(self.provider.with_row_positions())),
            None,
        )
    }

    /// The table's columns as DataFusion sees them: `(name, type)`.
    fn columns(&self) -> Vec<(String, DataType)> {
        self.provider
            .planner()
            .plain_schema()
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect()
    }

    /// `input` (the change stream) as the statement: `INSERT INTO` the table's change target.
    fn into_statement(self, input: LogicalPlan, operation: RowOperation) -> Result<LogicalPlan> {
        let target = RowChangeTarget::try_new(self.provider, operation)?.with_input(input.clone());
        Ok(LogicalPlan::Dml(DmlStatement::new(
            self.reference,
            provider_as_source(Arc::new(target)),
            WriteOp::Insert(InsertOp::Append),
            Arc::new(input),
        )))
    }

    /// What a row inserted without a value for column `name` (of type `ty`) holds: its
    /// `write-default`, else NULL.
    fn default_of(&self, name: &str, ty: &DataType) -> Result<Expr> {
        use datafusion::catalog::TableProvider;
        Ok(match self.provider.get_column_default(name) {
            Some(default) => default.clone(),
            None => lit(ScalarValue::try_from(ty)?),
        })
    }

    /// A column of the target in the planned scan.
    fn column(&self, name: &str) -> Expr {
        Expr::Column(Column::new(Some(self.qualifier.clone()), name))
    }
}

/// An expression written in the statement, planned against `schema`.
///
/// Errors: a subquery (not supported in these statements' expressions: the source of a
/// `MERGE` may be a query), or what planning the expression reports.
fn expr(
    ctx: &SessionContext,
    sql: &datafusion::sql::sqlparser::ast::Expr,
    schema: &DFSchema,
) -> Result<Expr> {
    use datafusion::sql::sqlparser::ast::{Expr as Sql, visit_expressions};
    let subquery = visit_expressions(sql, |e| match e {
        Sql::Subquery(_) | Sql::Exists { .. } | Sql::InSubquery { .. } => {
            std::ops::ControlFlow::Break(())
        }
        _ => std::ops::ControlFlow::Continue(()),
    });
    if subquery.is_break() {
        return not_impl_err!(
            "a subquery in UPDATE's SET or WHERE, or in MERGE's ON or clauses, is not \
             supported ({sql}); use MERGE INTO … USING (SELECT …)"
        );
    }
    ctx.state().create_logical_expr(&sql.to_string(), schema)
}

/// The column an assignment sets, by the table's column names (`t.c` and `c` both name `c`).
fn assigned_column(
    names: &Names,
    assignment: &Assignment,
    columns: &[(String, DataType)],
    table: &TableReference,
) -> Result<usize> {
    let AssignmentTarget::ColumnName(name) = &assignment.target else {
        return not_impl_err!(
            "SET ({}) = … is not supported; set each column",
            assignment.target
        );
    };
    let Some(ident) = name.0.last().and_then(|p| p.as_ident()) else {
        return plan_err!("SET {name}: not a column name");
    };
    let column = names.ident(ident);
    match columns.iter().position(|(n, _)| *n == column) {
        Some(i) => Ok(i),
        None => plan_err!("table {table} has no column {column} (SET {name})"),
    }
}

/// The values `assignments` give the table's columns (`None`: not set), each cast to its
/// column's type.
fn assigned_values(
    ctx: &SessionContext,
    assignments: &[Assignment],
    target: &Target,
    schema: &DFSchema,
) -> Result<Vec<Option<Expr>>> {
    let names = Names::of(ctx);
    let columns = target.columns();
    let mut values: Vec<Option<Expr>> = vec![None; columns.len()];
    for assignment in assignments {
        let i = assigned_column(&names, assignment, &columns, &target.reference)?;
        if values[i].is_some() {
            return plan_err!("column {} is set twice", columns[i].0);
        }
        let value = expr(ctx, &assignment.value, schema)?;
        if has_aggregate(&value)? {
            return plan_err!(
                "SET {} = {}: aggregate and window functions are not allowed here",
                columns[i].0,
                assignment.value
            );
        }
        values[i] = Some(cast_to(value, &columns[i].1, schema)?);
    }
    Ok(values)
}

/// `value` as `ty` (a cast only when the types differ).
///
/// Errors: a fractional value (a float, or a decimal with a scale) for an integer column, which
/// a cast would truncate (`SET id = 3.5`); as Trino, the statement must say `CAST(… AS
/// BIGINT)` itself.
fn cast_to(value: Expr, ty: &DataType, schema: &DFSchema) -> Result<Expr> {
    let from = value.get_type(schema)?;
    if ty.is_integer()
        && (from.is_floating()
            || matches!(from, DataType::Decimal128(_, s) | DataType::Decimal256(_, s) if s > 0))
    {
        return plan_err!(
            "{value} is {from}, which {ty} holds only by dropping its fraction; write \
             CAST(… AS {ty}) or round it"
        );
    }
    Ok(match from == *ty {
        true => value,
        false => cast(value, ty.clone()),
    })
}

/// Whether `e` holds an aggregate or window function.
fn has_aggregate(e: &Expr) -> Result<bool> {
    e.exists(|e| {
        Ok(matches!(
            e,
            Expr::AggregateFunction(_) | Expr::WindowFunction(_)
        ))
    })
}

/// The three columns after the values: `_file`, `_pos`, `_change`.
fn position_columns(target: &Target, change: Expr) -> [Expr; 3] {
    [
        target.column(FILE_PATH).alias(FILE_PATH),
        target.column(ROW_POSITION).alias(ROW_POSITION),
        cast(change, DataType::Int8).alias(CHANGE),
    ]
}

/// The target of an `UPDATE` / `DELETE`: one plain table.
fn single_table(table: &TableWithJoins, keyword: &str) -> Result<(ObjectName, Option<Ident>)> {
    if !table.joins.is_empty() {
        return not_impl_err!("{keyword} with a join is not supported");
    }
    match &table.relation {
        TableFactor::Table { name, alias, .. } => {
            Ok((name.clone(), alias.as_ref().map(|a| a.name.clone())))
        }
        other => not_impl_err!("{keyword} of {other} is not supported: name a table"),
    }
}

/// Plans `UPDATE` (module docs).
///
/// Errors: see the module docs; a WHERE or SET expression that does not plan.
pub async fn plan_update(ctx: &SessionContext, update: &Update) -> Result<LogicalPlan> {
    if update.from.is_some() {
        return not_impl_err!("UPDATE … FROM is not supported; use MERGE INTO");
    }
    if update.returning.is_some() || update.output.is_some() {
        return not_impl_err!("UPDATE … RETURNING is not supported");
    }
    if update.limit.is_some() || !update.order_by.is_empty() {
        return not_impl_err!("UPDATE with LIMIT or ORDER BY is not supported");
    }
    let (name, alias) = single_table(&update.table, "UPDATE")?;
    let target = Target::resolve(ctx, &name, alias.as_ref(), RowOperation::Update).await?;
    let mut builder = target.scan()?;
    let schema = builder.schema().as_ref().clone();
    if let Some(selection) = &update.selection {
        let condition = expr(ctx, selection, &schema)?;
        if has_aggregate(&condition)? {
            return plan_err!(
                "aggregate and window functions are not allowed in the WHERE clause of UPDATE"
            );
        }
        builder = builder.filter(condition)?;
    }
    let values = assigned_values(ctx, &update.assignments, &target, &schema)?;
    let mut projection: Vec<Expr> = target
        .columns()
        .iter()
        .zip(values)
        .map(|((name, _), value)| value.unwrap_or_else(|| target.column(name)).alias(name))
        .collect();
    projection.extend(position_columns(&target, lit(UPDATE)));
    let input = builder.project(projection)?.build()?;
    target.into_statement(input, RowOperation::Update)
}

/// Plans a merge-on-read `DELETE FROM table WHERE condition` (`condition` over the table's
/// unqualified columns, `None`: every row) on `provider`, named `reference`.
pub fn plan_merge_on_read_delete(
    reference: TableReference,
    provider: &IcebergTableProvider,
    condition: Option<Expr>,
) -> Result<LogicalPlan> {
    let target = Target {
        qualifier: reference.clone(),
        reference,
        provider: provider.clone(),
    };
    let mut builder = target.scan()?;
    if let Some(condition) = condition {
        builder = builder.filter(condition)?;
    }
    let mut projection = vec![];
    for (name, ty) in target.columns() {
        projection.push(lit(ScalarValue::try_from(&ty)?).alias(name));
    }
    projection.extend(position_columns(&target, lit(DELETE)));
    let input = builder.project(projection)?.build()?;
    target.into_statement(input, RowOperation::Delete)
}

/// Plans `MERGE INTO` (module docs).
///
/// Errors: see the module docs; an ON, AND, SET or VALUES expression that does not plan.
pub async fn plan_merge(ctx: &SessionContext, merge: &Merge) -> Result<LogicalPlan> {
    if merge.output.is_some() {
        return not_impl_err!("MERGE … OUTPUT is not supported");
    }
    let TableFactor::Table { name, alias, .. } = &merge.table else {
        return not_impl_err!("MERGE INTO {}: name a table", merge.table);
    };
    let target = Target::resolve(
        ctx,
        name,
        alias.as_ref().map(|a| &a.name),
        RowOperation::Merge,
    )
    .await?;
    // The privilege of each kind of clause (Trino: INSERT, UPDATE, DELETE as written).
    let needs: Vec<Privilege> = merge
        .clauses
        .iter()
        .map(|c| match c.action {
            MergeAction::Insert(_) => Privilege::Insert,
            MergeAction::Update(_) => Privilege::Update,
            MergeAction::Delete { .. } => Privilege::Delete,
        })
        .collect();
    crate::access::plan::check_provider(ctx, &target.provider, &needs)?;
    let source = ctx
        .state()
        .create_logical_plan(&format!("SELECT * FROM {}", merge.source))
        .await?;
    // The source as written: its alias (or table name) qualifies its columns.
    let source = match &merge.source {
        TableFactor::Table {
            alias: None, name, ..
        } => LogicalPlanBuilder::from(source)
            .alias(Names::of(ctx).reference(name)?)?
            .build()?,
        _ => source,
    };
    let inserts = merge
        .clauses
        .iter()
        .any(|c| matches!(c.action, MergeAction::Insert(_)));
    let join_type = match inserts {
        true => datafusion::common::JoinType::Right,
        false => datafusion::common::JoinType::Inner,
    };
    let joined_schema = {
        let left = target.scan()?.build()?;
        let builder = LogicalPlanBuilder::from(left).cross_join(source.clone())?;
        builder.schema().as_ref().clone()
    };
    let on = expr(ctx, &merge.on, &joined_schema)?;
    let joined = target.scan()?.join_on(source, join_type, [on])?.build()?;
    let schema = joined.schema().as_ref().clone();
    let matched = target.column(ROW_POSITION).is_not_null();

    // Which clause applies to each joined row, and what it writes.
    let columns = target.columns();
    let mut chooser = None::<datafusion::logical_expr::conditional_expressions::CaseBuilder>;
    let mut kinds = vec![];
    let mut per_clause_values: Vec<Vec<Expr>> = vec![];
    for (i, clause) in merge.clauses.iter().enumerate() {
        let kind_matches = match clause.clause_kind {
            MergeClauseKind::Matched => matched.clone(),
            MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget => {
                Expr::Not(Box::new(matched.clone()))
            }
            MergeClauseKind::NotMatchedBySource => {
                return not_impl_err!("MERGE … WHEN NOT MATCHED BY SOURCE is not supported");
            }
        };
        let condition = match &clause.predicate {
            Some(p) => kind_matches.and(expr(ctx, p, &schema)?),
            None => kind_matches,
        };
        let number = lit(i as i64);
        chooser = Some(match chooser {
            None => when(condition, number),
            Some(mut c) => c.when(condition, number),
        });
        let (kind, values) = match &clause.action {
            MergeAction::Update(update) => {
                if !matches!(clause.clause_kind, MergeClauseKind::Matched) {
                    return plan_err!("MERGE: UPDATE is allowed only WHEN MATCHED");
                }
                if update.update_predicate.is_some() || update.delete_predicate.is_some() {
                    return not_impl_err!("MERGE … UPDATE SET … WHERE is not supported");
                }
                let set = assigned_values(ctx, &update.assignments, &target, &schema)?;
                let values = columns
                    .iter()
                    .zip(set)
                    .map(|((name, _), v)| v.unwrap_or_else(|| target.column(name)))
                    .collect();
                (UPDATE, values)
            }
            MergeAction::Delete { .. } => {
                if !matches!(clause.clause_kind, MergeClauseKind::Matched) {
                    return plan_err!("MERGE: DELETE is allowed only WHEN MATCHED");
                }
                let values = columns
                    .iter()
                    .map(|(_, ty)| Ok(lit(ScalarValue::try_from(ty)?)))
                    .collect::<Result<_>>()?;
                (DELETE, values)
            }
            MergeAction::Insert(insert) => {
                if matches!(clause.clause_kind, MergeClauseKind::Matched) {
                    return plan_err!("MERGE: INSERT is allowed only WHEN NOT MATCHED");
                }
                if insert.insert_predicate.is_some() {
                    return not_impl_err!("MERGE … INSERT … WHERE is not supported");
                }
                let MergeInsertKind::Values(values) = &insert.kind else {
                    return not_impl_err!("MERGE … INSERT ROW is not supported; list VALUES");
                };
                let [row] = values.rows.as_slice() else {
                    return plan_err!("MERGE … INSERT takes one row of VALUES");
                };
                let row = &row.content;
                let names = Names::of(ctx);
                let positions: Vec<usize> = match insert.columns.is_empty() {
                    true => (0..columns.len()).collect(),
                    false => insert
                        .columns
                        .iter()
                        .map(|c| {
                            let Some(ident) = c.0.last().and_then(|p| p.as_ident()) else {
                                return plan_err!("INSERT ({c}): not a column name");
                            };
                            let name = names.ident(ident);
                            columns.iter().position(|(n, _)| *n == name).map_or_else(
                                || plan_err!("table {} has no column {name}", target.reference),
                                Ok,
                            )
                        })
                        .collect::<Result<_>>()?,
                };
                if positions.len() != row.len() {
                    return plan_err!(
                        "MERGE … INSERT names {} columns and gives {} values",
                        positions.len(),
                        row.len()
                    );
                }
                let mut values: Vec<Expr> = columns
                    .iter()
                    .map(|(name, ty)| target.default_of(name, ty))
                    .collect::<Result<_>>()?;
                for (at, value) in positions.iter().zip(row) {
                    let value = expr(ctx, value, &schema)?;
                    values[*at] = cast_to(value, &columns[*at].1, &schema)?;
                }
                (INSERT, values)
            }
        };
        kinds.push(kind);
        per_clause_values.push(values);
    }
    let Some(mut chooser) = chooser else {
        return plan_err!("MERGE needs at least one WHEN clause");
    };
    const CLAUSE: &str = "__merge_clause";
    let chosen = chooser.otherwise(lit(ScalarValue::Int64(None)))?;
    let mut keep: Vec<Expr> = schema.columns().into_iter().map(Expr::Column).collect();
    keep.push(chosen.alias(CLAUSE));
    let chosen = LogicalPlanBuilder::from(joined)
        .project(keep)?
        .filter(col(CLAUSE).is_not_null())?;
    let by_clause = |values: Vec<Expr>| -> Result<Expr> {
        let mut case = None::<datafusion::logical_expr::conditional_expressions::CaseBuilder>;
        for (i, value) in values.into_iter().enumerate() {
            let condition = col(CLAUSE).eq(lit(i as i64));
            case = Some(match case {
                None => when(condition, value),
                Some(mut c) => c.when(condition, value),
            });
        }
        case.expect("at least one clause").end()
    };
    let mut projection = vec![];
    for (c, (name, _)) in columns.iter().enumerate() {
        let values: Vec<Expr> = per_clause_values.iter().map(|v| v[c].clone()).collect();
        projection.push(by_clause(values)?.alias(name));
    }
    let change = by_clause(kinds.into_iter().map(lit).collect())?;
    projection.extend(position_columns(&target, change));
    let input = chosen.project(projection)?.build()?;
    target.into_statement(input, RowOperation::Merge)
}

/// `plan` with the change stream its [`RowChangeTarget`] plans again after a conflict replaced
/// by the plan's own input: what a prepared statement's binding produced (`flight/binding.rs`),
/// so that a rerun reads the bound values, not the placeholders. Any other plan unchanged.
///
/// Errors: the target cannot be rebuilt (not expected: it was built once already).
pub fn with_bound_input(plan: LogicalPlan) -> Result<LogicalPlan> {
    let LogicalPlan::Dml(dml) = &plan else {
        return Ok(plan);
    };
    let provider = datafusion::catalog::default_table_source::source_as_provider(&dml.target)?;
    let Some(target) = provider.downcast_ref::<RowChangeTarget>() else {
        return Ok(plan);
    };
    let target = target.clone().with_input(dml.input.as_ref().clone());
    Ok(LogicalPlan::Dml(DmlStatement::new(
        dml.table_name.clone(),
        provider_as_source(Arc::new(target)),
        dml.op.clone(),
        Arc::clone(&dml.input),
    )))
}
