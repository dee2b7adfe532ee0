//! DDL iceflight plans and runs itself: `CREATE TABLE … WITH (partitioning, sorted_by)` and
//! `ALTER TABLE`, as logical nodes of `iceflight-catalog` run against the session's Iceberg
//! catalog.

use std::sync::Arc;

use datafusion::common::{DataFusionError, Result, plan_err};
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement;
use iceflight_catalog::CatalogError;
use iceflight_catalog::alter::{AlterTable, alter_table};
use iceflight_catalog::provider::IcebergCatalogProvider;
use iceflight_catalog::tables::{CreateTableWith, TableLayout, create_table_with};

/// `CREATE TABLE … WITH (partitioning = ARRAY[…], sorted_by = ARRAY[…]) [AS SELECT …]` as a
/// [`CreateTableWith`] node: columns from the column list or the query's plan.
///
/// Errors: an option other than `partitioning` and `sorted_by`, or one that is not an array
/// of strings; a column type DataFusion does not know.
pub(crate) async fn plan_create_with(
    ctx: &SessionContext,
    create: &datafusion::sql::sqlparser::ast::CreateTable,
) -> Result<LogicalPlan> {
    use datafusion::sql::sqlparser::ast::{
        ColumnOption, CreateTableOptions, Expr as SqlExpr, SqlOption, Statement as Sql, Value,
    };
    let CreateTableOptions::With(options) = &create.table_options else {
        return plan_err!("CREATE TABLE without WITH options is DataFusion's");
    };
    let strings = |key: &str, value: &SqlExpr| -> Result<Vec<String>> {
        let SqlExpr::Array(array) = value else {
            return plan_err!("table property {key} takes ARRAY['…', …], not {value}");
        };
        array
            .elem
            .iter()
            .map(|e| match e {
                SqlExpr::Value(v) => match &v.value {
                    Value::SingleQuotedString(s) => Ok(s.clone()),
                    other => plan_err!("table property {key}: {other} is not a string"),
                },
                other => plan_err!("table property {key}: {other} is not a string"),
            })
            .collect()
    };
    let mut layout = TableLayout::default();
    for option in options {
        let SqlOption::KeyValue { key, value } = option else {
            return plan_err!("table option {option} is not supported");
        };
        match key.value.to_lowercase().as_str() {
            "partitioning" => layout.partitioning = strings("partitioning", value)?,
            "sorted_by" => layout.sorted_by = strings("sorted_by", value)?,
            // Trino's name, and Iceberg's (DuckDB's `'format-version' = '3'`).
            "format_version" | "format-version" => {
                let text = value.to_string();
                layout.format_version = match text.trim_matches('\'') {
                    "1" => Some(1),
                    "2" => Some(2),
                    "3" => Some(3),
                    _ => {
                        return plan_err!(
                            "table property format_version takes 1, 2 or 3, not {value}"
                        );
                    }
                };
            }
            // Iceberg's own properties by name, as DuckDB and Spark take them; the write
            // modes are those a user sets at creation (`scan/src/write/write_mode.rs`).
            name @ ("write.delete.mode" | "write.update.mode" | "write.merge.mode") => {
                let text = match value {
                    SqlExpr::Value(v) => match &v.value {
                        Value::SingleQuotedString(s) => s.clone(),
                        other => other.to_string(),
                    },
                    other => other.to_string(),
                };
                if !["copy-on-write", "merge-on-read"].contains(&text.as_str()) {
                    return plan_err!(
                        "table property {name} takes 'copy-on-write' or 'merge-on-read', not {value}"
                    );
                }
                layout.properties.push((name.to_string(), text));
            }
            other => {
                return plan_err!(
                    "table property {other} is not supported (partitioning, sorted_by, format_version \
                     and the write modes write.delete.mode, write.update.mode, write.merge.mode are)"
                );
            }
        }
    }
    layout.properties.sort();
    let names = Names::of(ctx);
    let reference = names.table(&create.name)?;
    if create.query.is_some() && !create.columns.is_empty() {
        return plan_err!(
            "CREATE TABLE … WITH (…) AS SELECT takes its columns from the query: leave out the \
             column list (name and cast them in the SELECT)"
        );
    }
    let (columns, query) = match &create.query {
        Some(query) => {
            let plan = ctx
                .state()
                .statement_to_plan(Statement::Statement(Box::new(Sql::Query(query.clone()))))
                .await?;
            let columns = plan
                .schema()
                .fields()
                .iter()
                .map(|f| (f.name().clone(), f.data_type().clone(), f.is_nullable()))
                .collect();
            (columns, Some(plan))
        }
        None => {
            let mut columns = vec![];
            for column in &create.columns {
                let typed = ctx
                    .sql(&format!("SELECT CAST(NULL AS {})", column.data_type))
                    .await?;
                let not_null = column
                    .options
                    .iter()
                    .any(|o| matches!(o.option, ColumnOption::NotNull));
                let name = names.ident(&column.name);
                if matches!(
                    column.data_type,
                    datafusion::sql::sqlparser::ast::DataType::Timestamp(Some(9), _)
                ) {
                    layout.nanosecond_columns.push(name.clone());
                }
                columns.push((name, typed.schema().field(0).data_type().clone(), !not_null));
            }
            (columns, None)
        }
    };
    Ok(CreateTableWith {
        catalog: reference.catalog.to_string(),
        namespace: reference.schema.to_string(),
        table: reference.table.to_string(),
        if_not_exists: create.if_not_exists,
        columns,
        layout,
        query,
    }
    .into_plan())
}

/// `CREATE TABLE … AS SELECT` as DataFusion planned it (its refusals of clauses it does not take
/// kept), to run as a [`CreateTableWith`] node: the query's rows stream into the new table and
/// the statement answers the rows written. Any other plan is returned as it is.
///
/// Errors: `CREATE TEMPORARY TABLE` (an Iceberg table outlives the session).
pub(crate) fn create_as_select(ctx: &SessionContext, plan: LogicalPlan) -> Result<LogicalPlan> {
    let LogicalPlan::Ddl(datafusion::logical_expr::DdlStatement::CreateMemoryTable(create)) = &plan
    else {
        return Ok(plan);
    };
    if create.temporary {
        return datafusion::common::not_impl_err!(
            "CREATE TEMPORARY TABLE is not supported: an Iceberg table outlives the session"
        );
    }
    let defaults = ctx.state().config_options().catalog.clone();
    let name = create
        .name
        .clone()
        .resolve(&defaults.default_catalog, &defaults.default_schema);
    let columns = create
        .input
        .schema()
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone(), f.is_nullable()))
        .collect();
    Ok(CreateTableWith {
        catalog: name.catalog.to_string(),
        namespace: name.schema.to_string(),
        table: name.table.to_string(),
        if_not_exists: create.if_not_exists,
        columns,
        layout: TableLayout::default(),
        query: Some(create.input.as_ref().clone()),
    }
    .into_plan())
}

/// How a session resolves the names in statements iceflight plans itself: as DataFusion does
/// (unquoted identifiers lowercased when normalization is on; the default catalog and schema).
pub(crate) struct Names {
    options: datafusion::config::ConfigOptions,
}

impl Names {
    pub(crate) fn of(ctx: &SessionContext) -> Self {
        Self {
            options: ctx.state().config().options().as_ref().clone(),
        }
    }

    /// A table name, resolved to catalog, schema and table.
    pub(crate) fn table(
        &self,
        name: &datafusion::sql::sqlparser::ast::ObjectName,
    ) -> Result<datafusion::common::ResolvedTableReference> {
        Ok(datafusion::sql::planner::object_name_to_table_reference(
            name.clone(),
            self.options.sql_parser.enable_ident_normalization,
        )?
        .resolve(
            &self.options.catalog.default_catalog,
            &self.options.catalog.default_schema,
        ))
    }

    /// A table name as written (not resolved to the default catalog and schema): what the
    /// columns of a table named without an alias are qualified by.
    pub(crate) fn reference(
        &self,
        name: &datafusion::sql::sqlparser::ast::ObjectName,
    ) -> Result<datafusion::common::TableReference> {
        datafusion::sql::planner::object_name_to_table_reference(
            name.clone(),
            self.options.sql_parser.enable_ident_normalization,
        )
    }

    /// A column name.
    pub(crate) fn ident(&self, ident: &datafusion::sql::sqlparser::ast::Ident) -> String {
        match ident.quote_style {
            None if self.options.sql_parser.enable_ident_normalization => {
                ident.value.to_lowercase()
            }
            _ => ident.value.clone(),
        }
    }
}

/// The first part of `create` an Iceberg table cannot keep, as SQL text: a table constraint
/// (`PRIMARY KEY (id)`) or a column option other than `NULL` / `NOT NULL` (`DEFAULT 0`,
/// `UNIQUE`, `CHECK (…)`). Refused rather than dropped: a user of Trino or DuckDB would expect
/// it enforced.
pub(crate) fn refused_option(
    create: &datafusion::sql::sqlparser::ast::CreateTable,
) -> Option<String> {
    use datafusion::sql::sqlparser::ast::ColumnOption;
    if let Some(constraint) = create.constraints.first() {
        return Some(constraint.to_string());
    }
    create.columns.iter().find_map(|column| {
        column
            .options
            .iter()
            .find(|o| !matches!(o.option, ColumnOption::Null | ColumnOption::NotNull))
            .map(|o| format!("{} {}", column.name, o.option))
    })
}

/// Whether `plan` is one of the statements iceflight runs itself ([`plan_statement`](super::statement::plan_statement)).
pub fn is_own_statement(plan: &LogicalPlan) -> bool {
    AlterTable::of(plan).is_some()
        || CreateTableWith::of(plan).is_some()
        || matches!(
            plan,
            LogicalPlan::Ddl(datafusion::logical_expr::DdlStatement::DropTable(_))
        )
}

/// Runs `plan` when it is one of the statements iceflight runs itself ([`plan_statement`](super::statement::plan_statement));
/// `None` for any other plan. `Some(Ok(Some(n)))`: the statement wrote `n` rows (`CREATE TABLE
/// … AS SELECT`), which it answers as `INSERT` does.
///
/// Errors: the catalog is not an Iceberg catalog of this engine (`system`); the statement's.
pub async fn run_own_statement(
    ctx: &SessionContext,
    plan: &LogicalPlan,
) -> Option<Result<Option<u64>>> {
    if let LogicalPlan::Ddl(datafusion::logical_expr::DdlStatement::DropTable(drop)) = plan {
        return drop_table(ctx, drop).await.map(|ran| ran.map(|()| None));
    }
    if let Some(alter) = AlterTable::of(plan) {
        return Some(match iceberg_catalog(ctx, &alter.catalog) {
            Ok(catalog) => alter_table(catalog.as_ref(), alter).await.map(|()| None),
            Err(e) => Err(e),
        });
    }
    let create = CreateTableWith::of(plan)?;
    Some(match iceberg_catalog(ctx, &create.catalog) {
        Ok(catalog) => create_table_with(ctx, catalog.as_ref(), create).await,
        Err(e) => Err(e),
    })
}

/// Checks the schema a DDL statement changes before DataFusion runs it:
/// - in a catalog that cannot be reached (or refuses us), the statement fails with that
///   catalog's typed error. DataFusion would answer it from the empty stand-in schema the
///   catalog provider hands out then: `CREATE SCHEMA` "already exists" (and `IF NOT EXISTS`
///   creating nothing; `catalog/src/provider.rs`, `outage`);
/// - `DROP SCHEMA` (without `IF EXISTS`) of a schema that does not exist fails with a typed
///   not-found error naming it, as a query of it does (`DROP TABLE`: [`run_own_statement`]).
///
/// Errors: [`CatalogError::Unavailable`] or `Unauthenticated` of the catalog;
/// [`CatalogError::NotFound`].
pub fn check_ddl_target(ctx: &SessionContext, plan: &LogicalPlan) -> Result<()> {
    use datafusion::logical_expr::DdlStatement as Ddl;
    let LogicalPlan::Ddl(ddl) = plan else {
        return Ok(());
    };
    let default_catalog = || ctx.state().config_options().catalog.default_catalog.clone();
    let in_catalog = |name: &datafusion::sql::TableReference| {
        let name = resolved(ctx, name.clone());
        (name.catalog.to_string(), name.schema.to_string())
    };
    // `DROP TABLE` is checked where it runs ([`run_own_statement`]).
    let (catalog, schema) = match ddl {
        Ddl::CreateCatalogSchema(c) => match c.schema_name.split_once('.') {
            Some((catalog, schema)) => (catalog.to_string(), schema.to_string()),
            None => (default_catalog(), c.schema_name.clone()),
        },
        Ddl::DropCatalogSchema(d) => match &d.name {
            datafusion::common::SchemaReference::Full { catalog, schema } => {
                (catalog.to_string(), schema.to_string())
            }
            datafusion::common::SchemaReference::Bare { schema } => {
                (default_catalog(), schema.to_string())
            }
        },
        Ddl::DropView(d) => in_catalog(&d.name),
        Ddl::CreateMemoryTable(c) => in_catalog(&c.name),
        Ddl::CreateExternalTable(c) => in_catalog(&c.name),
        Ddl::CreateView(c) => in_catalog(&c.name),
        _ => return Ok(()),
    };
    let Some(provider) = ctx.catalog(&catalog).and_then(|c| c.schema(&schema)) else {
        return match ddl {
            Ddl::DropCatalogSchema(d) if !d.if_exists => Err(DataFusionError::External(Box::new(
                CatalogError::NotFound(format!("schema {catalog}.{schema} does not exist")),
            ))),
            _ => Ok(()),
        };
    };
    match iceflight_catalog::provider::outage(&provider) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// `DROP TABLE [IF EXISTS]` of a table in an Iceberg catalog, run here because DataFusion's
/// drops hide the catalog's error (any failure reads "doesn't exist", or nothing with `IF
/// EXISTS`); `None` for a table of another catalog (`system`: DataFusion's answer).
///
/// Errors: the catalog's (typed: unavailable, a failed drop); [`CatalogError::NotFound`] for a
/// missing table without `IF EXISTS`.
async fn drop_table(
    ctx: &SessionContext,
    drop: &datafusion::logical_expr::DropTable,
) -> Option<Result<()>> {
    let name = resolved(ctx, drop.name.clone());
    let catalog = ctx.catalog(&name.catalog)?;
    catalog.downcast_ref::<IcebergCatalogProvider>()?;
    let not_found = |what: String| {
        let e = DataFusionError::External(Box::new(CatalogError::NotFound(what)));
        if drop.if_exists { Ok(()) } else { Err(e) }
    };
    let Some(schema) = catalog.schema(&name.schema) else {
        return Some(not_found(format!(
            "schema {}.{} does not exist",
            name.catalog, name.schema
        )));
    };
    if let Some(e) = iceflight_catalog::provider::outage(&schema) {
        return Some(Err(e));
    }
    Some(match schema.deregister_table(&name.table) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => not_found(format!("table {name} does not exist")),
        Err(e) => Err(e),
    })
}

/// `name` with the session's default catalog and schema filled in.
fn resolved(
    ctx: &SessionContext,
    name: datafusion::sql::TableReference,
) -> datafusion::sql::ResolvedTableReference {
    let state = ctx.state();
    let defaults = &state.config_options().catalog;
    name.resolve(&defaults.default_catalog, &defaults.default_schema)
}

/// The iceberg catalog behind catalog `name` of `ctx`.
///
/// Errors: no such catalog, or not an Iceberg one (`system`).
fn iceberg_catalog(ctx: &SessionContext, name: &str) -> Result<Arc<dyn iceberg::Catalog>> {
    let Some(provider) = ctx.catalog(name) else {
        return plan_err!("unknown catalog {name}");
    };
    match provider.downcast_ref::<IcebergCatalogProvider>() {
        Some(iceberg) => Ok(Arc::clone(iceberg.catalog()) as Arc<dyn iceberg::Catalog>),
        None => plan_err!("tables of catalog {name} cannot be changed"),
    }
}

/// `key = value` table options as property names and values: a quoted or bare key, a string
/// or other literal value (`'write.delete.mode' = 'merge-on-read'`, `format_version = 3`).
///
/// Errors: an option that is not `key = value`.
pub(crate) fn property_pairs(
    options: &[datafusion::sql::sqlparser::ast::SqlOption],
) -> Result<Vec<(String, String)>> {
    use datafusion::sql::sqlparser::ast::{Expr as SqlExpr, SqlOption, Value};
    options
        .iter()
        .map(|option| {
            let SqlOption::KeyValue { key, value } = option else {
                return plan_err!("table property {option} is not key = value");
            };
            let value = match value {
                SqlExpr::Value(v) => match &v.value {
                    Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => s.clone(),
                    other => other.to_string(),
                },
                other => other.to_string(),
            };
            Ok((key.value.to_lowercase(), value))
        })
        .collect()
}

/// The first of `references` whose catalog, schema or table does not exist, described
/// (`table local.tpch.nope does not exist`).
pub(crate) async fn missing_table(
    ctx: &SessionContext,
    references: Vec<datafusion::sql::TableReference>,
) -> Option<String> {
    let state = ctx.state();
    for reference in references {
        // A table function (`read_parquet(…)`) is named like a table and is none.
        if reference.schema().is_none() && state.table_functions().contains_key(reference.table()) {
            continue;
        }
        let name = resolved(ctx, reference);
        // DataFusion answers information_schema itself, outside the catalogs' schemas.
        if name.schema.as_ref() == datafusion::catalog::information_schema::INFORMATION_SCHEMA {
            continue;
        }
        let Some(catalog) = ctx.catalog(&name.catalog) else {
            return Some(format!("catalog {} does not exist", name.catalog));
        };
        let Some(schema) = catalog.schema(&name.schema) else {
            return Some(format!(
                "schema {}.{} does not exist",
                name.catalog, name.schema
            ));
        };
        if !schema.table_exist(&name.table) && schema.table(&name.table).await.ok()?.is_none() {
            return Some(format!("table {name} does not exist"));
        }
    }
    None
}
