//! Builds DataFusion sessions over the configured catalogs and runs SQL text.
//!
//! ```text
//!   Config ──► Engine::connect (catalogs, default schema) ──► Engine::session ──► SessionContext
//!   SQL text ──► parse_statements ──► execute_statement (plan, execute) ──► batch stream
//! ```

use std::sync::Arc;

use datafusion::common::{DataFusionError, Result, plan_err};
use datafusion::execution::memory_pool::{FairSpillPool, TrackConsumersPool};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::execution::{SendableRecordBatchStream, SessionStateBuilder};
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::{DFParser, Statement};
use iceflight_cache::block_cache::{BlockCache, BlockCacheConfig};
use iceflight_cache::disk_tier::{DiskTier, DiskTierError};
use iceflight_catalog::alter::{AlterOp, AlterTable, alter_table};
use iceflight_catalog::cached_storage::StorageCache;
use iceflight_catalog::provider::IcebergCatalogProvider;
use iceflight_catalog::tables::{CreateTableWith, TableLayout, create_table_with};
use iceflight_catalog::{CatalogError, Catalogs, NO_DEFAULT_SCHEMA};
use iceflight_scan::read::caches::ScanCaches;
use iceflight_scan::read::footer::FooterCache;

use crate::config::{Config, ConfigError};
use crate::distributed::{Cluster, Role};
use iceflight_scan::distributed::codec::IcebergScanCodec;

/// Connected catalogs plus the settings every session starts from.
#[derive(Debug, Clone)]
pub struct Engine {
    config: Config,
    default_catalog: String,
    /// The configured default schema, else the default catalog's only namespace, else
    /// [`NO_DEFAULT_SCHEMA`].
    default_schema: String,
    catalogs: Catalogs,
    runtime: Arc<RuntimeEnv>,
    /// The block, footer and manifest-metrics caches of this engine (`[cache]`).
    caches: Arc<ScanCaches>,
    /// On a coordinator or worker: what every session adds for datafusion-distributed.
    cluster: Option<Cluster>,
    /// The queries run through Flight SQL (`system.runtime.queries`, `/metrics`).
    history: Arc<crate::query_history::QueryHistory>,
    /// The Flight SQL server's sessions, once it serves (`system.runtime.sessions`).
    sessions: LiveSessions,
}

/// The sessions of the Flight SQL server an engine serves, set when it starts serving.
pub type LiveSessions = Arc<std::sync::OnceLock<Arc<crate::flight::sessions::Sessions>>>;

/// Why an [`Engine`] could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A catalog failed to connect.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// `[cache] disk` cannot be opened.
    #[error("cache.disk: {0}")]
    DiskCache(#[from] DiskTierError),
}

impl Engine {
    /// Connects every catalog of `config`.
    pub async fn connect(config: Config) -> Result<Self, EngineError> {
        config.validate()?;
        let default_catalog = config.effective_default_catalog()?;
        let mut runtime = RuntimeEnvBuilder::new();
        if let Some(bytes) = config.query.memory_limit_bytes() {
            // A fair spill pool: operators that can spill (sorts, aggregates, sort-merge joins)
            // share what the others leave evenly and spill beyond their share, so concurrent
            // queries each progress; the five largest consumers are named when one fails.
            runtime = runtime.with_memory_pool(Arc::new(TrackConsumersPool::new(
                FairSpillPool::new(bytes),
                std::num::NonZeroUsize::new(5).expect("5 > 0"),
            )));
        }
        if let Some(dir) = &config.query.spill_dir {
            let dir = crate::config::absolute(dir);
            std::fs::create_dir_all(&dir).map_err(|e| {
                ConfigError::Invalid(format!("query.spill_dir {}: {e}", dir.display()))
            })?;
            runtime = runtime.with_temp_file_path(dir);
        }
        let runtime = runtime
            .build_arc()
            .map_err(|e| ConfigError::Invalid(format!("query runtime: {e}")))?;
        let blocks = match config.cache.enabled {
            false => None,
            true => {
                let block_size = config.cache.block_size_bytes();
                let mut blocks = BlockCache::new(BlockCacheConfig {
                    capacity: config.cache.memory_bytes(),
                    block_size,
                });
                if let Some(dir) = &config.cache.disk {
                    let disk = DiskTier::open(
                        &crate::config::absolute(dir),
                        config.cache.disk_capacity_bytes(),
                        block_size,
                    )
                    .await?;
                    blocks = blocks.with_disk(disk);
                }
                Some(Arc::new(blocks))
            }
        };
        let manifest_reads = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let caches = Arc::new(ScanCaches {
            blocks: blocks.clone(),
            local_files: config.cache.local_files,
            footers: FooterCache::new(config.cache.metadata_memory_bytes()),
            indexes: Default::default(),
            manifest_reads: Arc::clone(&manifest_reads),
        });
        // Always given, so manifest reads are counted also without a block cache.
        let storage_cache = StorageCache {
            blocks,
            local_files: config.cache.local_files,
            manifest_reads: Arc::clone(&manifest_reads),
        };
        let catalogs =
            Catalogs::connect(&config.effective_catalogs(), Some(&storage_cache)).await?;
        let default_schema = match &config.default_schema {
            Some(schema) => schema.clone(),
            None => only_namespace(&catalogs, &default_catalog)
                .await
                .unwrap_or_else(|| NO_DEFAULT_SCHEMA.to_string()),
        };
        let cluster = match config.distributed.role {
            Role::Single => None,
            role => {
                let codec = IcebergScanCodec::new(Arc::new(catalogs.clone()), Arc::clone(&caches));
                Some(Cluster::new(role, &config.distributed, codec)?)
            }
        };
        Ok(Self {
            config,
            default_catalog,
            default_schema,
            catalogs,
            runtime,
            caches,
            cluster,
            history: Arc::default(),
            sessions: Arc::default(),
        })
    }

    /// Shows `sessions` (the Flight SQL server's) in `system.runtime.sessions`; the first
    /// server's stay when an engine serves twice.
    pub fn attach_sessions(&self, sessions: Arc<crate::flight::sessions::Sessions>) {
        let _ = self.sessions.set(sessions);
    }

    /// The queries run through Flight SQL on this engine.
    pub fn history(&self) -> &Arc<crate::query_history::QueryHistory> {
        &self.history
    }

    /// The engine's caches (`system.runtime.cache` shows them).
    pub fn caches(&self) -> &Arc<ScanCaches> {
        &self.caches
    }

    /// The datafusion-distributed parts of a coordinator or worker (`None`: role `single`).
    pub fn cluster(&self) -> Option<&Cluster> {
        self.cluster.as_ref()
    }

    /// The runtime every query of this engine runs in (memory pool, disk manager).
    pub fn runtime(&self) -> Arc<RuntimeEnv> {
        Arc::clone(&self.runtime)
    }

    /// The catalog for unqualified names.
    pub fn default_catalog(&self) -> &str {
        &self.default_catalog
    }

    /// The schema for unqualified names: configured, or the default catalog's only namespace
    /// (`None` when neither: unqualified names then fail with the namespaces listed).
    pub fn default_schema(&self) -> Option<&str> {
        (self.default_schema != NO_DEFAULT_SCHEMA).then_some(self.default_schema.as_str())
    }

    /// The connected catalogs.
    pub fn catalogs(&self) -> &Catalogs {
        &self.catalogs
    }

    /// The configuration the engine was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A new session: default catalog and schema (overridable), the `[query]` settings, the
    /// `iceflight.*` options, then `settings` (`datafusion.*` / `iceflight.*` keys) in order.
    ///
    /// Errors: an unknown catalog, or an unknown or invalid setting.
    pub fn session(
        &self,
        catalog: Option<&str>,
        schema: Option<&str>,
        settings: &[(String, String)],
    ) -> Result<SessionContext> {
        let catalog = catalog.unwrap_or(&self.default_catalog);
        self.catalogs
            .get(catalog)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let schema = match (schema, catalog == self.default_catalog) {
            (Some(s), _) => s,
            (None, true) => &self.default_schema,
            (None, false) => NO_DEFAULT_SCHEMA,
        };
        let target_partitions = match self.config.query.target_partitions {
            0 => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            n => n,
        };
        let config = SessionConfig::new()
            .with_information_schema(true)
            .with_create_default_catalog_and_schema(false)
            .with_default_catalog_and_schema(catalog, schema)
            .with_target_partitions(target_partitions)
            .with_batch_size(self.config.query.batch_size.max(1));
        let mut config = config;
        // Hash joins hand build sides of up to 1024 distinct keys (DataFusion: 150; and within
        // `hash_join_inlist_pushdown_max_size`, 128 KiB per partition) to their probe-side
        // scans as IN lists. A single-partition (CollectLeft) join's list over one integer
        // column is tested as a bitmap by the scan's row filter (`scan/src/integer_set.rs`;
        // TPC-H SF 1 q17 154 vs 210 ms, q21 229 vs 304 ms); a partitioned join's lists sit in a
        // CASE per partition and keep DataFusion's hash set. A session's SET still overrides
        // it. Workers of a distributed plan start from DataFusion's defaults (150).
        config
            .options_mut()
            .optimizer
            .hash_join_inlist_pushdown_max_distinct_values = INLIST_PUSHDOWN_MAX_DISTINCT_VALUES;
        let mut rules = engine_physical_optimizer_rules();
        let mut config = iceflight_scan::register(config, Arc::clone(&self.caches), &mut rules)
            .with_extension(Arc::clone(&self.history));
        if let Some(cluster) = &self.cluster {
            config = cluster.coordinator_config(config);
        } else {
            // Not on a coordinator: its stages go to workers, whose codec carries neither a
            // shared subtree nor our decimal and LIKE expressions, and whose stages split at the
            // repartitions of partitioned joins. Shared subplans last: it compares
            // subtrees as every other rule left them.
            // The join mode before DataFusion's `join_selection` (and after the filter
            // estimates `register` put there), which keeps a `CollectLeft` it is handed.
            let at = rules
                .iter()
                .position(|r| r.name() == "join_selection")
                .unwrap_or(0);
            rules.insert(
                at,
                Arc::new(iceflight_optimizer::join_partition_mode::JoinPartitionMode),
            );
            rules.push(Arc::new(
                iceflight_optimizer::decimal_arithmetic::DecimalArithmetic,
            ));
            rules.push(Arc::new(iceflight_optimizer::like_segments::LikeSegments));
            rules.push(Arc::new(
                iceflight_scan::exec::dictionary_group_by::DictionaryGroupBy,
            ));
            rules.push(Arc::new(
                iceflight_scan::exec::shared_subplan::SharedSubplans,
            ));
        }
        for (k, v) in settings {
            config.options_mut().set(k, v).map_err(|source| {
                DataFusionError::External(Box::new(crate::message::InvalidSetting {
                    key: k.clone(),
                    value: v.clone(),
                    source,
                }))
            })?;
        }
        let builder = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(Arc::clone(&self.runtime))
            .with_default_features()
            .with_physical_optimizer_rules(rules)
            .with_optimizer_rule(Arc::new(iceflight_optimizer::join_order::JoinOrder))
            .with_optimizer_rule(Arc::new(
                iceflight_optimizer::aggregate_reduction::AggregateReduction,
            ));
        let builder = with_engine_semantics(builder);
        let state = match &self.cluster {
            Some(cluster) => cluster.coordinator_session(builder),
            None => builder,
        }
        .build();
        let ctx = SessionContext::new_with_state(state);
        self.catalogs.register(&ctx);
        if !self.catalogs.names().contains(&crate::system::CATALOG) {
            crate::system::register(
                &ctx,
                Arc::clone(&self.caches),
                self.catalogs.clone(),
                Arc::clone(&self.history),
                Arc::clone(&self.sessions),
            );
        }
        ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(
            crate::invalidate::InvalidateCache::new(
                self.catalogs.clone(),
                Arc::clone(&self.caches),
            ),
        ));
        Ok(ctx)
    }
}

/// The only namespace of catalog `name`, if it holds exactly one (`None` also when listing
/// fails: a catalog that is down must not stop the start).
async fn only_namespace(catalogs: &Catalogs, name: &str) -> Option<String> {
    let catalog = catalogs.get(name).ok()?;
    let mut namespaces = catalog.list_namespaces(None).await.ok()?;
    match namespaces.len() {
        1 => {
            let ns = namespaces.pop()?;
            // A parent with children (`a` of `a.b`) is not a place for tables of its own.
            let children = catalog.list_namespaces(Some(&ns)).await.ok()?;
            children.is_empty().then(|| ns.join("."))
        }
        _ => None,
    }
}

/// Parses `sql`: one or more `;`-separated statements.
///
/// Trino's time-travel clauses are rewritten first (`table_versions.rs`).
///
/// Errors: a syntax error; a time-travel value iceflight cannot read; no statement at all.
pub fn parse_statements(sql: &str) -> Result<Vec<Statement>> {
    let sql = crate::table_versions::rewrite(sql)?;
    let statements: Vec<Statement> = DFParser::parse_sql(&sql)?.into_iter().collect();
    if statements.is_empty() {
        return plan_err!("no SQL statement given");
    }
    Ok(statements)
}

/// Plans and starts one statement; DDL and `SET` take effect here. Returns its output stream
/// (no columns for DDL).
pub async fn execute_statement(
    ctx: &SessionContext,
    statement: Statement,
) -> Result<SendableRecordBatchStream> {
    let plan = plan_statement(ctx, statement).await?;
    if let Some(ran) = run_own_statement(ctx, &plan).await {
        ran?;
        let empty = Arc::new(datafusion::arrow::datatypes::Schema::empty());
        return Ok(Box::pin(
            datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(
                empty,
                futures::stream::empty(),
            ),
        ));
    }
    ctx.execute_logical_plan(plan).await?.execute_stream().await
}

/// The logical plan of one parsed statement (`plan_known_statement`); when planning fails and
/// the statement reads a table that does not exist, the error is a typed
/// [`CatalogError::NotFound`] naming it (→ `NotFound` at the edge), decided from the catalogs
/// rather than from DataFusion's message.
///
/// Errors: the planner's; a missing catalog, schema or table of the statement.
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
        planned => planned,
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
                | Sql::ShowColumns { .. }
                | Sql::ExplainTable { .. }
        ),
        Statement::Explain(explain) => reads_tables(&explain.statement),
        _ => false,
    }
}

/// The first of `references` whose catalog, schema or table does not exist, described
/// (`table local.tpch.nope does not exist`).
async fn missing_table(
    ctx: &SessionContext,
    references: Vec<datafusion::sql::TableReference>,
) -> Option<String> {
    let state = ctx.state();
    let defaults = &state.config_options().catalog;
    for reference in references {
        let name = reference.resolve(&defaults.default_catalog, &defaults.default_schema);
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

/// The logical plan of one parsed statement: DataFusion's (a `DELETE` readied with its condition
/// as written, `delete_statement.rs`), except for what DataFusion does not plan: `ALTER TABLE` (an [`AlterTable`] node, `catalog/src/alter.rs`) and `CREATE TABLE …
/// WITH (…)` (a [`CreateTableWith`] node, `catalog/src/tables.rs`), both run by
/// [`run_own_statement`].
///
/// Errors: the planner's; an `ALTER TABLE` operation or table option iceflight does not know.
async fn plan_known_statement(ctx: &SessionContext, statement: Statement) -> Result<LogicalPlan> {
    use datafusion::sql::sqlparser::ast::{AlterTableOperation, ColumnOption, RenameTableNameKind};
    use datafusion::sql::sqlparser::ast::{CreateTableOptions, Statement as Sql};
    let Statement::Statement(inner) = &statement else {
        // `EXPLAIN …` among them: a DELETE under it is readied as on its own.
        let plan = ctx.state().statement_to_plan(statement).await?;
        return crate::delete_statement::plan_delete(plan);
    };
    let alter = match inner.as_ref() {
        Sql::AlterTable(alter) => alter,
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
        _ => {
            let plan = ctx.state().statement_to_plan(statement).await?;
            return crate::delete_statement::plan_delete(plan);
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
            other => {
                return datafusion::common::not_impl_err!(
                    "ALTER TABLE … {other} is not supported (ADD COLUMN, DROP COLUMN and RENAME TO are)"
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

/// `CREATE TABLE … WITH (partitioning = ARRAY[…], sorted_by = ARRAY[…]) [AS SELECT …]` as a
/// [`CreateTableWith`] node: columns from the column list or the query's plan.
///
/// Errors: an option other than `partitioning` and `sorted_by`, or one that is not an array
/// of strings; a column type DataFusion does not know.
async fn plan_create_with(
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
            other => {
                return plan_err!(
                    "table property {other} is not supported (partitioning and sorted_by are)"
                );
            }
        }
    }
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

/// How a session resolves the names in statements iceflight plans itself: as DataFusion does
/// (unquoted identifiers lowercased when normalization is on; the default catalog and schema).
struct Names {
    options: datafusion::config::ConfigOptions,
}

impl Names {
    fn of(ctx: &SessionContext) -> Self {
        Self {
            options: ctx.state().config().options().as_ref().clone(),
        }
    }

    /// A table name, resolved to catalog, schema and table.
    fn table(
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

    /// A column name.
    fn ident(&self, ident: &datafusion::sql::sqlparser::ast::Ident) -> String {
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
fn refused_option(create: &datafusion::sql::sqlparser::ast::CreateTable) -> Option<String> {
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

/// Whether `plan` is one of the statements iceflight runs itself ([`plan_statement`]).
pub fn is_own_statement(plan: &LogicalPlan) -> bool {
    AlterTable::of(plan).is_some() || CreateTableWith::of(plan).is_some()
}

/// Runs `plan` when it is one of the statements iceflight runs itself ([`plan_statement`]);
/// `None` for any other plan.
///
/// Errors: the catalog is not an Iceberg catalog of this engine (`system`); the statement's.
pub async fn run_own_statement(ctx: &SessionContext, plan: &LogicalPlan) -> Option<Result<()>> {
    if let Some(alter) = AlterTable::of(plan) {
        return Some(match iceberg_catalog(ctx, &alter.catalog) {
            Ok(catalog) => alter_table(catalog.as_ref(), alter).await,
            Err(e) => Err(e),
        });
    }
    let create = CreateTableWith::of(plan)?;
    Some(match iceberg_catalog(ctx, &create.catalog) {
        Ok(catalog) => create_table_with(ctx, catalog.as_ref(), create).await,
        Err(e) => Err(e),
    })
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

/// `builder` (with DataFusion's default features) with the engine's corrections of DataFusion's
/// semantics: floats compare, join and group as SQL says (`float_semantics.rs`, case c12; its
/// rule after every other optimizer rule, so add those first) and the function its plans call.
/// For any DataFusion session of ours that plans or runs queries: Flight SQL and `iceflight
/// sql` sessions, workers, the bench's raw-Parquet engine, tests.
pub fn with_engine_semantics(builder: SessionStateBuilder) -> SessionStateBuilder {
    let mut builder = builder.with_optimizer_rule(Arc::new(crate::float_semantics::FloatSemantics));
    builder
        .scalar_functions()
        .get_or_insert_with(Vec::new)
        .push(crate::float_semantics::canonical_float());
    builder
}

/// iceflight's default of `datafusion.optimizer.hash_join_inlist_pushdown_max_distinct_values`
/// (DataFusion's is 150): the largest build side, in distinct keys per partition, whose keys
/// reach the probe-side scan as an IN list rather than a hash-table lookup
/// (`bench/reports/issue32-progress-20261204.md`).
pub const INLIST_PUSHDOWN_MAX_DISTINCT_VALUES: usize = 1024;

/// A physical optimizer rule, as DataFusion's session builder takes them.
pub type PhysicalRule =
    Arc<dyn datafusion::physical_optimizer::PhysicalOptimizerRule + Send + Sync>;

/// DataFusion's physical optimizer rules, then the engine's corrections of them
/// ([`NullSafeJoinFilters`](iceflight_optimizer::join_filters::NullSafeJoinFilters)): the rules for any
/// DataFusion session of ours, whatever its tables (the bench's raw-Parquet engine, tests).
pub fn engine_physical_optimizer_rules() -> Vec<PhysicalRule> {
    let mut rules = datafusion::physical_optimizer::optimizer::PhysicalOptimizer::new().rules;
    rules.push(Arc::new(
        iceflight_optimizer::join_filters::NullSafeJoinFilters,
    ));
    rules
}
