//! Statements from SQL text: parsing (after the text rewrites of `input/src/sql_text/`: Trino's
//! time-travel clauses, `ALTER TABLE … EXECUTE`, the expression-depth bound),
//! planning (DataFusion's planner, a `DELETE` readied with its condition as written:
//! `delete.rs`; `ALTER TABLE` and `CREATE TABLE … WITH` as our own nodes: `ddl.rs`) and running.
//!
//! ```text
//!   SQL text ──► parse_statements ──► plan_statement ──► execute_statement ──► batch stream
//! ```

use std::sync::Arc;

use datafusion::common::{DataFusionError, Result, plan_err};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::{DFParser, Statement};
use iceflight_catalog::CatalogError;
use iceflight_catalog::alter::{AlterOp, AlterTable};

use crate::access::Access;

use super::ddl::{
    Names, is_own_statement, missing_table, plan_create_with, refused_option, run_own_statement,
};

/// Parses `sql`: one or more `;`-separated statements.
///
/// Trino's `ALTER TABLE … EXECUTE` and time-travel clauses are rewritten first ([`rewrite`]).
///
/// Errors: a syntax error; a time-travel value iceflight cannot read; no statement at all.
pub fn parse_statements(sql: &str) -> Result<Vec<Statement>> {
    let sql = rewrite(sql, "generic")?;
    let statements: Vec<Statement> = DFParser::parse_sql(&sql)?.into_iter().collect();
    if statements.is_empty() {
        return plan_err!("no SQL statement given");
    }
    Ok(statements)
}

/// `sql` with what DataFusion's parser does not know rewritten into what it does: `INSERT INTO
/// local.…`, Trino's `ALTER TABLE … EXECUTE` and time-travel clauses (`input/src/sql_text/`,
/// fuzzed), versioned names as `catalog/src/table_ref.rs` reads them; a statement whose
/// expressions would nest too deep for the planner is refused, its tokens read in `dialect`
/// (the session's `datafusion.sql_parser.dialect`). Every path from SQL text to a statement
/// goes through it.
///
/// Errors: a time-travel value iceflight cannot read.
pub fn rewrite(sql: &str, dialect: &str) -> Result<String> {
    use iceflight_iceberg::time_travel::TableVersion;
    use iceflight_input::sql_text::time_travel::Version;
    let name = |base: &str, version: &Version| {
        let version = match version {
            Version::Snapshot(id) => TableVersion::Snapshot(*id),
            Version::Ref(name) => TableVersion::Ref(name.clone()),
            Version::Timestamp(ms) => TableVersion::Timestamp(*ms),
        };
        iceflight_catalog::table_ref::versioned_name(base, &version)
    };
    iceflight_input::sql_text::rewrite(sql, dialect, &name).map_err(DataFusionError::Plan)
}

/// Plans and starts one statement; DDL and `SET` take effect here. Returns its output stream
/// (no columns for DDL).
pub async fn execute_statement(
    ctx: &SessionContext,
    statement: Statement,
) -> Result<SendableRecordBatchStream> {
    let plan = plan_statement(ctx, statement).await?;
    if let Some(ran) = run_own_statement(ctx, &plan).await {
        // Rows written are answered as INSERT answers them: one `count` row.
        let (schema, batches) = match ran? {
            None => (
                Arc::new(datafusion::arrow::datatypes::Schema::empty()),
                vec![],
            ),
            Some(rows) => {
                let batch = count_batch(rows)?;
                (batch.schema(), vec![Ok(batch)])
            }
        };
        return Ok(Box::pin(
            datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(
                schema,
                futures::stream::iter(batches),
            ),
        ));
    }
    ctx.execute_logical_plan(plan).await?.execute_stream().await
}

/// The answer of a statement that wrote `rows` rows, as DataFusion's `INSERT` answers: one row,
/// one non-null `UInt64` column named `count`.
///
/// Errors: none in practice (the batch is built from a matching schema).
pub fn count_batch(rows: u64) -> Result<datafusion::arrow::array::RecordBatch> {
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    let schema = Arc::new(Schema::new(vec![Field::new(
        "count",
        DataType::UInt64,
        false,
    )]));
    let count = datafusion::arrow::array::UInt64Array::from(vec![rows]);
    Ok(datafusion::arrow::array::RecordBatch::try_new(
        schema,
        vec![Arc::new(count)],
    )?)
}

/// The logical plan of one parsed statement (`plan_known_statement`); when planning fails and
/// the statement reads a table that does not exist, the error is a typed
/// [`CatalogError::NotFound`] naming it (→ `NotFound` at the edge), decided from the catalogs
/// rather than from DataFusion's message.
///
/// In a logged-in user's session, the plan is checked against what the user may do
/// (`access/plan.rs`).
///
/// Errors: the planner's; a missing catalog, schema or table of the statement; a DDL statement
/// on a catalog that cannot be reached, or dropping what does not exist
/// (`ddl::check_ddl_target`); [`AccessDenied`](crate::access::AccessDenied).
pub async fn plan_statement(ctx: &SessionContext, statement: Statement) -> Result<LogicalPlan> {
    let references = ctx.state().resolve_table_references(&statement).ok();
    let reads = reads_tables(&statement);
    match plan_known_statement(ctx, statement).await {
        Err(e) if reads && matches!(e.find_root(), DataFusionError::Plan(_)) => {
            match missing_table(ctx, references.unwrap_or_default()).await {
                Some(missing) => Err(DataFusionError::External(Box::new(CatalogError::NotFound(
                    missing,
                )))),
                None => Err(e),
            }
        }
        planned => {
            let plan = planned?;
            super::ddl::check_ddl_target(ctx, &plan)?;
            let state = ctx.state();
            if let Some(access) = Access::of(state.config()) {
                crate::access::plan::check(&access, &state, &plan)?;
            }
            super::insert_values::check(&plan)?;
            Ok(plan)
        }
    }
}

/// Whether every table the statement names must exist already (a query, `INSERT`, `DELETE`,
/// `UPDATE`, `SHOW COLUMNS`, `DESCRIBE`, `EXPLAIN` of one): not for `CREATE TABLE`, whose own name is among its references.
fn reads_tables(statement: &Statement) -> bool {
    use datafusion::sql::sqlparser::ast::Statement as Sql;
    match statement {
        Statement::Statement(inner) => matches!(
            inner.as_ref(),
            Sql::Query(_)
                | Sql::Insert(_)
                | Sql::Delete(_)
                | Sql::Update(_)
                | Sql::Merge(_)
                | Sql::ShowColumns { .. }
                | Sql::ExplainTable { .. }
        ),
        Statement::Explain(explain) => reads_tables(&explain.statement),
        _ => false,
    }
}

/// The logical plan of one parsed statement: DataFusion's (a `DELETE` readied with its condition
/// as written, `sql/delete.rs`), except for what DataFusion does not plan: `ALTER TABLE` (an [`AlterTable`] node, `catalog/src/alter.rs`) and `CREATE TABLE …
/// WITH (…)` (a [`CreateTableWith`](iceflight_catalog::tables::CreateTableWith) node, `catalog/src/tables.rs`), both run by
/// [`run_own_statement`].
///
/// Errors: the planner's; an `ALTER TABLE` operation or table option iceflight does not know.
async fn plan_known_statement(ctx: &SessionContext, statement: Statement) -> Result<LogicalPlan> {
    use datafusion::sql::sqlparser::ast::{AlterTableOperation, ColumnOption, RenameTableNameKind};
    use datafusion::sql::sqlparser::ast::{CreateTableOptions, Statement as Sql};
    if super::metadata_columns::names_metadata_column(&statement) {
        let state = super::metadata_columns::with_metadata_columns(ctx.state());
        return super::delete::plan_delete(state.statement_to_plan(statement).await?);
    }
    let Statement::Statement(inner) = &statement else {
        // `EXPLAIN …` among them: a DELETE under it is readied as on its own.
        let plan = ctx.state().statement_to_plan(statement).await?;
        return super::delete::plan_delete(plan);
    };
    let alter = match inner.as_ref() {
        Sql::AlterTable(alter) => alter,
        Sql::Update(update) => return super::row_change::plan_update(ctx, update).await,
        Sql::Merge(merge) => return super::row_change::plan_merge(ctx, merge).await,
        Sql::Call(function) => return super::procedures::plan_call(ctx, function).await,
        // DataFusion replaces a table by dropping it first: a replacement that then fails
        // would lose the table.
        Sql::CreateTable(create) if refused_option(create).is_some() => {
            let what = refused_option(create).unwrap_or_default();
            return datafusion::common::not_impl_err!(
                "CREATE TABLE with {what} is not supported: Iceberg tables keep only column \
                 names, types and NOT NULL"
            );
        }
        Sql::CreateTable(create) if create.or_replace => {
            return datafusion::common::not_impl_err!(
                "CREATE OR REPLACE TABLE is not supported: DROP TABLE, then CREATE TABLE"
            );
        }
        Sql::CreateTable(create) if matches!(create.table_options, CreateTableOptions::With(_)) => {
            return plan_create_with(ctx, create).await;
        }
        // CREATE TABLE … AS SELECT: planned by DataFusion (its refusals kept), then streamed
        // into the new table (DataFusion would collect the rows in memory first) and answered
        // with the rows written.
        Sql::CreateTable(create) if create.query.is_some() => {
            let plan = ctx.state().statement_to_plan(statement).await?;
            return super::ddl::create_as_select(ctx, plan);
        }
        _ => {
            let plan = ctx.state().statement_to_plan(statement).await?;
            return super::delete::plan_delete(plan);
        }
    };
    let names = Names::of(ctx);
    let reference = names.table(&alter.name)?;
    let normalize = |ident: &datafusion::sql::sqlparser::ast::Ident| names.ident(ident);
    let mut ops = vec![];
    for op in &alter.operations {
        ops.push(match op {
            AlterTableOperation::AddColumn {
                if_not_exists,
                column_def,
                ..
            } => {
                if column_def
                    .options
                    .iter()
                    .any(|o| matches!(o.option, ColumnOption::NotNull))
                {
                    return plan_err!(
                        "column {} cannot be added NOT NULL: the rows already written have no value for it",
                        column_def.name
                    );
                }
                let typed = ctx
                    .sql(&format!("SELECT CAST(NULL AS {})", column_def.data_type))
                    .await?;
                AlterOp::AddColumn {
                    name: normalize(&column_def.name),
                    data_type: typed.schema().field(0).data_type().clone(),
                    if_not_exists: *if_not_exists,
                }
            }
            AlterTableOperation::DropColumn {
                column_names,
                if_exists,
                ..
            } => AlterOp::DropColumns {
                names: column_names.iter().map(normalize).collect(),
                if_exists: *if_exists,
            },
            AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            } => AlterOp::RenameColumn(normalize(old_column_name), normalize(new_column_name)),
            AlterTableOperation::RenameTable {
                table_name: RenameTableNameKind::To(name) | RenameTableNameKind::As(name),
            } => match name.0.last().and_then(|p| p.as_ident()) {
                Some(ident) if name.0.len() == 1 => AlterOp::RenameTo(normalize(ident)),
                _ => {
                    return plan_err!(
                        "ALTER TABLE … RENAME TO takes a table name in the same schema, not {name}"
                    );
                }
            },
            AlterTableOperation::SetTblProperties { table_properties } => {
                AlterOp::SetProperties(super::ddl::property_pairs(table_properties)?)
            }
            other => {
                return datafusion::common::not_impl_err!(
                    "ALTER TABLE … {other} is not supported (ADD COLUMN, DROP COLUMN, RENAME TO \
                     and SET TBLPROPERTIES are)"
                );
            }
        });
    }
    Ok(AlterTable {
        catalog: reference.catalog.to_string(),
        namespace: reference.schema.to_string(),
        table: reference.table.to_string(),
        if_exists: alter.if_exists,
        ops,
    }
    .into_plan())
}

/// Whether `plan` changes state rather than returning rows: DDL, `SET`, DML, `COPY`, and the
/// statements iceflight runs itself ([`is_own_statement`]).
pub fn is_state_change(plan: &LogicalPlan) -> bool {
    matches!(
        plan,
        LogicalPlan::Ddl(_)
            | LogicalPlan::Statement(_)
            | LogicalPlan::Dml(_)
            | LogicalPlan::Copy(_)
    ) || is_own_statement(plan)
}
