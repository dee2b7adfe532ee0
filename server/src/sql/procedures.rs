//! Table procedures in Trino's syntax: `ALTER TABLE t EXECUTE name(arg => value, …) [WHERE …]`
//! and `CALL system.rollback_to_snapshot('schema', 'table', id)`; `CALL
//! system.runtime.kill_query(…)` is planned by `query_control.rs`.
//!
//! ```text
//!   ALTER TABLE t EXECUTE optimize(file_size_threshold => '128MB') WHERE part = 'a'
//!     ──► rewritten in the text (`input/src/sql_text/alter_execute.rs`)
//!   CALL iceflight.execute(t, 'optimize', 'part = ''a''', file_size_threshold => '128MB')
//!     ──► plan_call: a one-partition table whose scan runs the procedure when executed
//!         and answers (metric_name, metric_value) rows
//! ```
//!
//! | procedure | arguments | does |
//! |---|---|---|
//! | `optimize` | `file_size_threshold` (default `100MB`), `sort_by` (`'c1, c2'` or `'zorder(c1, c2)'`: every file rewritten in that order), `WHERE` on identity-partition columns | compaction (`scan/src/write/optimize.rs`) |
//! | `expire_snapshots` | `retention_threshold` (default and floor: `[maintenance] min_retention`, 7 days) | snapshots older than it and the files only they reach (`iceberg/src/snapshots.rs`) |
//! | `remove_orphan_files` | `retention_threshold` (as above) | files under the table's location nothing references, older than it (`iceberg/src/orphan_files.rs`) |
//! | `optimize_manifests` | none | every manifest rewritten into few, per content and partition spec (`iceberg/src/commit.rs`) |
//! | `rollback_to_snapshot` | `snapshot_id` | `main` back to an ancestor |
//!
//! A procedure runs when its plan executes, not when it is planned (a prepared statement runs
//! it at each execution). Its answer is one row per metric, as Trino's `expire_snapshots`.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::streaming::StreamingTable;
use datafusion::common::{DataFusionError, Result, plan_err};
use datafusion::datasource::provider_as_source;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{LogicalPlan, LogicalPlanBuilder};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::{
    Expr as SqlExpr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, ObjectName, Value,
};
use futures::future::BoxFuture;
use iceflight_input::sql_text::alter_execute::EXECUTE;
use iceflight_scan::IcebergTableProvider;

use super::ddl::Names;
use crate::access::Privilege;

/// Trino's default `file_size_threshold` of `optimize`.
const DEFAULT_FILE_SIZE_THRESHOLD: u64 = 100 * 1000 * 1000;

/// Times `optimize_manifests` and `add_files` read the table again after another commit came
/// first (both only describe files, so redoing costs metadata reads).
const COMMIT_ATTEMPTS: usize = 8;

/// Limits of the procedures from the server's configuration (`[maintenance]`), a session
/// config extension.
#[derive(Debug, Clone)]
pub struct MaintenanceLimits {
    /// The shortest retention `expire_snapshots` accepts.
    pub min_retention: Duration,
    /// Where `add_files` may take files from besides the table's location
    /// (`[maintenance] import_roots`).
    pub import_roots: Vec<String>,
}

/// The plan of `CALL function(…)`: [`EXECUTE`] (from `ALTER TABLE … EXECUTE`,
/// `input/src/sql_text/alter_execute.rs`) or Trino's
/// `system.rollback_to_snapshot(schema, table, snapshot_id)`.
///
/// Errors (`InvalidArgument` at the edge): an unknown procedure or argument, an argument of the
/// wrong kind, a `WHERE` on a procedure that takes none, a retention under the floor; a table
/// that is not an Iceberg table of a configured catalog (`NotFound` when missing).
pub async fn plan_call(ctx: &SessionContext, function: &Function) -> Result<LogicalPlan> {
    let name = function.name.to_string().to_lowercase();
    let args = arguments(function)?;
    if name == "system.runtime.kill_query" {
        let args = args
            .into_iter()
            .map(|(n, v)| Ok((n, string(&v, "kill_query's arguments")?)))
            .collect::<Result<Vec<_>>>()?;
        return crate::query_control::plan_kill(ctx, args);
    }
    let names = Names::of(ctx);
    let (table, procedure, condition, args) = match name.as_str() {
        EXECUTE => {
            let [table, procedure, condition, rest @ ..] = args.as_slice() else {
                return plan_err!("{EXECUTE} takes a table, a procedure and a condition");
            };
            let table = table_name(&table.1)?;
            let procedure = string(&procedure.1, "procedure")?;
            let condition = string(&condition.1, "condition")?;
            (table, procedure, condition, rest.to_vec())
        }
        "system.rollback_to_snapshot" => {
            let [schema, table, snapshot] = args.as_slice() else {
                return plan_err!(
                    "system.rollback_to_snapshot takes a schema, a table and a snapshot id"
                );
            };
            let schema = string(&schema.1, "schema")?;
            let table = string(&table.1, "table")?;
            let name = ObjectName::from(vec![
                datafusion::sql::sqlparser::ast::Ident::new(schema),
                datafusion::sql::sqlparser::ast::Ident::new(table),
            ]);
            let id = (Some("snapshot_id".to_string()), snapshot.1.clone());
            (
                name,
                "rollback_to_snapshot".to_string(),
                String::new(),
                vec![id],
            )
        }
        other => {
            return plan_err!(
                "unknown procedure {other}; there are ALTER TABLE … EXECUTE optimize, \
                 expire_snapshots, remove_orphan_files, optimize_manifests, add_files, \
                 rollback_to_snapshot, CALL system.rollback_to_snapshot and \
                 CALL system.runtime.kill_query"
            );
        }
    };
    let reference = names.reference(&table)?;
    let provider = match ctx.table_provider(reference.clone()).await {
        Ok(provider) => provider,
        Err(e) => {
            let missing = super::ddl::missing_table(ctx, vec![reference.clone()]).await;
            return Err(match missing {
                Some(missing) => DataFusionError::External(Box::new(
                    iceflight_catalog::CatalogError::NotFound(missing),
                )),
                None => e,
            });
        }
    };
    let Some(iceberg) = provider.downcast_ref::<IcebergTableProvider>() else {
        return plan_err!("{reference} is not an Iceberg table: it has no procedures");
    };
    let iceberg = iceberg.clone();
    // Maintenance is the owner's (Trino: table procedures need OWNERSHIP).
    crate::access::plan::check_provider(ctx, &iceberg, &[Privilege::Ownership])?;
    let job: Job = match procedure.as_str() {
        "optimize" => {
            let [threshold, sort_by] = take(&procedure, args, &["file_size_threshold", "sort_by"])?;
            let sort_by = match sort_by {
                None => None,
                Some(v) => Some(iceflight_scan::write::optimize::SortBy::parse(&string(
                    &v, "sort_by",
                )?)),
            };
            let threshold = match threshold {
                None => DEFAULT_FILE_SIZE_THRESHOLD,
                Some(v) => size(&string(&v, "file_size_threshold")?)?,
            };
            let filters = match condition.trim() {
                "" => vec![],
                text => {
                    let arrow = datafusion::catalog::TableProvider::schema(&iceberg);
                    let schema = datafusion::common::DFSchema::try_from(arrow)?;
                    vec![ctx.parse_sql_expr(text, &schema)?]
                }
            };
            Arc::new(move |context| {
                let (iceberg, filters) = (iceberg.clone(), filters.clone());
                let sort_by = sort_by.clone();
                Box::pin(async move {
                    let r = iceberg
                        .optimize(&filters, threshold, sort_by.as_ref(), &context)
                        .await?;
                    Ok(vec![
                        ("rewritten_data_files_count", r.rewritten_data_files),
                        ("applied_delete_files_count", r.applied_delete_files),
                        ("removed_delete_files_count", r.removed_delete_files),
                        ("added_data_files_count", r.added_data_files),
                        ("rewritten_rows_count", r.rows),
                        ("rewritten_bytes", r.rewritten_bytes),
                        ("added_bytes", r.added_bytes),
                    ])
                })
            })
        }
        "expire_snapshots" => {
            no_condition(&procedure, &condition)?;
            let [retention] = take(&procedure, args, &["retention_threshold"])?;
            let retention = retention_threshold(ctx, retention)?;
            let catalog = writes(&iceberg)?;
            Arc::new(move |_| {
                let (iceberg, catalog) = (iceberg.clone(), Arc::clone(&catalog));
                Box::pin(async move {
                    let older_than = older_than_ms(retention)?;
                    let table = iceberg.table();
                    let r =
                        iceflight_iceberg::snapshots::expire(catalog.as_ref(), table, older_than)
                            .await
                            .map_err(|e| failed(e, "expire_snapshots", table.identifier()))?;
                    Ok(vec![
                        ("deleted_snapshots_count", r.snapshots),
                        ("deleted_data_files_count", r.data_files),
                        (
                            "deleted_position_delete_files_count",
                            r.position_delete_files,
                        ),
                        (
                            "deleted_equality_delete_files_count",
                            r.equality_delete_files,
                        ),
                        ("deleted_manifest_files_count", r.manifests),
                        ("deleted_manifest_lists_count", r.manifest_lists),
                        ("files_not_deleted_count", r.not_deleted),
                    ])
                })
            })
        }
        "remove_orphan_files" => {
            no_condition(&procedure, &condition)?;
            let [retention] = take(&procedure, args, &["retention_threshold"])?;
            let retention = retention_threshold(ctx, retention)?;
            let catalog = writes(&iceberg)?;
            let ident = iceberg.table().identifier().clone();
            Arc::new(move |_| {
                let (catalog, ident) = (Arc::clone(&catalog), ident.clone());
                Box::pin(async move {
                    let older_than = older_than_ms(retention)?;
                    // The table as it is now: a file only a newer snapshot reaches stays.
                    let table = catalog.load_table(&ident).await.map_err(to_df)?;
                    let lister = iceflight_catalog::listing::StorageLister::new(table.file_io());
                    let r = iceflight_iceberg::orphan_files::remove_orphan_files(
                        &table, &lister, older_than,
                    )
                    .await
                    .map_err(to_df)?;
                    Ok(vec![
                        ("processed_manifests_count", r.processed_manifests),
                        ("active_files_count", r.active_files),
                        ("scanned_files_count", r.scanned_files),
                        ("deleted_files_count", r.deleted_files),
                        ("files_not_deleted_count", r.not_deleted),
                    ])
                })
            })
        }
        "optimize_manifests" => {
            no_condition(&procedure, &condition)?;
            let [] = take(&procedure, args, &[])?;
            let catalog = writes(&iceberg)?;
            let ident = iceberg.table().identifier().clone();
            Arc::new(move |_| {
                let (catalog, ident) = (Arc::clone(&catalog), ident.clone());
                Box::pin(async move {
                    // Another commit first: read the manifests again and redo (metadata only).
                    let r = on_fresh_table(&catalog, &ident, "optimize_manifests", |table| {
                        let catalog = Arc::clone(&catalog);
                        async move {
                            iceflight_iceberg::commit::rewrite_manifests(
                                catalog.as_ref(),
                                &table,
                                iceflight_iceberg::commit::MANIFEST_TARGET_SIZE_BYTES,
                            )
                            .await
                        }
                    })
                    .await?;
                    Ok(vec![
                        ("rewritten_manifests_count", r.rewritten_manifests),
                        ("added_manifests_count", r.added_manifests),
                        ("processed_entries_count", r.entries),
                    ])
                })
            })
        }
        "add_files" => {
            no_condition(&procedure, &condition)?;
            let [location, format] = take(&procedure, args, &["location", "format"])?;
            let Some(location) = location else {
                return plan_err!("add_files needs location, the directory of the files to add");
            };
            let location = string(&location, "location")?;
            if let Some(format) = format {
                let format = string(&format, "format")?;
                if !format.eq_ignore_ascii_case("parquet") {
                    return plan_err!("add_files adds Parquet files; format {format} is not one");
                }
            }
            let catalog = writes(&iceberg)?;
            iceberg.planner().check_writable()?;
            let roots = ctx
                .state_ref()
                .read()
                .config()
                .get_extension::<MaintenanceLimits>()
                .map(|l| l.import_roots.clone())
                .unwrap_or_default();
            check_import(&location, iceberg.table().metadata().location(), &roots)?;
            let ident = iceberg.table().identifier().clone();
            Arc::new(move |_| {
                let (catalog, ident, location) =
                    (Arc::clone(&catalog), ident.clone(), location.clone());
                Box::pin(async move {
                    // Another commit first: read the table again and redo (the files are only
                    // described, never written).
                    let r = on_fresh_table(&catalog, &ident, "add_files", |table| {
                        let (catalog, location) = (Arc::clone(&catalog), location.clone());
                        async move {
                            let lister =
                                iceflight_catalog::listing::StorageLister::new(table.file_io());
                            iceflight_iceberg::add_files::add_files(
                                catalog.as_ref(),
                                &table,
                                &lister,
                                &location,
                            )
                            .await
                        }
                    })
                    .await?;
                    Ok(vec![
                        ("added_data_files_count", r.added_files),
                        ("added_rows_count", r.added_rows),
                        ("added_bytes", r.added_bytes),
                    ])
                })
            })
        }
        "rollback_to_snapshot" => {
            no_condition(&procedure, &condition)?;
            let [id] = take(&procedure, args, &["snapshot_id"])?;
            let Some(id) = id else {
                return plan_err!("rollback_to_snapshot needs snapshot_id");
            };
            let id = integer(&id, "snapshot_id")?;
            let catalog = writes(&iceberg)?;
            Arc::new(move |_| {
                let (iceberg, catalog) = (iceberg.clone(), Arc::clone(&catalog));
                Box::pin(async move {
                    let table = iceberg.table();
                    iceflight_iceberg::snapshots::rollback_to(catalog.as_ref(), table, id)
                        .await
                        .map_err(|e| failed(e, "rollback_to_snapshot", table.identifier()))?;
                    Ok(vec![("snapshot_id", id as u64)])
                })
            })
        }
        other => {
            return plan_err!(
                "unknown procedure {other} of ALTER TABLE … EXECUTE; there are optimize, \
                 expire_snapshots, remove_orphan_files, optimize_manifests, add_files and \
                 rollback_to_snapshot"
            );
        }
    };
    let table = StreamingTable::try_new(
        metrics_schema(),
        vec![Arc::new(Procedure {
            schema: metrics_schema(),
            job,
        })],
    )?;
    LogicalPlanBuilder::scan(procedure, provider_as_source(Arc::new(table)), None)?.build()
}

/// A procedure's work: run when the plan executes, answering `(metric, value)` pairs.
type Job = Arc<
    dyn Fn(Arc<TaskContext>) -> BoxFuture<'static, Result<Vec<(&'static str, u64)>>> + Send + Sync,
>;

/// The one partition of a procedure's table: runs its job when executed.
struct Procedure {
    schema: SchemaRef,
    job: Job,
}

impl std::fmt::Debug for Procedure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Procedure").finish_non_exhaustive()
    }
}

impl PartitionStream for Procedure {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, context: Arc<TaskContext>) -> SendableRecordBatchStream {
        let schema = Arc::clone(&self.schema);
        let run = (self.job)(context);
        let batch = async move {
            let metrics = run.await?;
            let names: StringArray = metrics.iter().map(|(n, _)| Some(*n)).collect();
            let values: Int64Array = metrics.iter().map(|(_, v)| Some(*v as i64)).collect();
            Ok(RecordBatch::try_new(
                schema,
                vec![Arc::new(names), Arc::new(values)],
            )?)
        };
        Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            futures::stream::once(batch),
        ))
    }
}

/// `(metric_name VARCHAR, metric_value BIGINT)`.
fn metrics_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("metric_name", DataType::Utf8, false),
        Field::new("metric_value", DataType::Int64, false),
    ]))
}

/// The `retention_threshold` argument, or the floor when absent. Errors: not a duration, or
/// shorter than `[maintenance] min_retention` (naming both).
/// Refuses an `add_files` location that is neither under the table's location nor under an
/// import root: files taken from elsewhere become the table's, and `expire_snapshots` later
/// deletes them. Local paths are compared with their symbolic links followed; URLs as written
/// (a `..` segment refused).
///
/// Errors: [`AccessDenied`](crate::access::AccessDenied) naming the location and the roots.
fn check_import(location: &str, table_location: &str, roots: &[String]) -> Result<()> {
    let local = |p: &str| -> Option<std::path::PathBuf> {
        let path = match p.split_once("://") {
            Some(("file", rest)) => rest,
            Some(_) => return None,
            None => p.strip_prefix("file:").unwrap_or(p),
        };
        path.starts_with('/')
            .then(|| crate::access::files::resolve_existing(std::path::Path::new(path)))
            .flatten()
    };
    let allowed = std::iter::once(table_location)
        .chain(roots.iter().map(String::as_str))
        .any(|root| match (local(location), local(root)) {
            (Some(path), Some(root)) => path.starts_with(root),
            _ => iceflight_catalog::names::inside(root, location),
        });
    if allowed {
        return Ok(());
    }
    Err(crate::access::AccessDenied(format!(
        "add_files may take files only from under the table's location {table_location} or an \
         import root ([maintenance] import_roots{}); {location} is neither",
        match roots.is_empty() {
            true => ": none is set".to_string(),
            false => format!(" = {}", roots.join(", ")),
        }
    ))
    .into_error())
}

fn retention_threshold(ctx: &SessionContext, value: Option<SqlExpr>) -> Result<Duration> {
    let floor = ctx
        .state()
        .config()
        .get_extension::<MaintenanceLimits>()
        .map(|l| l.min_retention)
        .unwrap_or(Duration::from_secs(7 * 86400));
    let retention = match value {
        None => floor,
        Some(v) => duration(&string(&v, "retention_threshold")?)?,
    };
    if retention < floor {
        return plan_err!(
            "retention_threshold {} is shorter than the minimum retention {} \
             ([maintenance] min_retention): a writer may still read those files",
            iceflight_input::units::format_duration(retention),
            iceflight_input::units::format_duration(floor)
        );
    }
    Ok(retention)
}

/// The instant `retention` ago, in milliseconds since the epoch.
fn older_than_ms(retention: Duration) -> Result<i64> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| DataFusionError::External(Box::new(e)))?;
    Ok(now.saturating_sub(retention).as_millis() as i64)
}

/// Runs `run` on `ident` loaded fresh from `catalog`, loading it again and rerunning when
/// another commit came first, at most [`COMMIT_ATTEMPTS`] times more.
///
/// Errors: `run`'s last error as [`failed`] maps it (a conflict left after the last attempt is
/// a `WriteConflict` of `procedure`), or the table failing to load.
async fn on_fresh_table<T, F>(
    catalog: &Arc<dyn iceflight_iceberg::commit::CommitCatalog>,
    ident: &iceberg::TableIdent,
    procedure: &str,
    run: impl Fn(iceberg::table::Table) -> F,
) -> Result<T>
where
    F: std::future::Future<Output = iceberg::Result<T>>,
{
    let mut attempt = 0;
    loop {
        let table = catalog.load_table(ident).await.map_err(to_df)?;
        match run(table).await {
            Err(e)
                if e.kind() == iceberg::ErrorKind::CatalogCommitConflicts
                    && attempt < COMMIT_ATTEMPTS =>
            {
                attempt += 1;
            }
            other => return other.map_err(|e| failed(e, procedure, ident)),
        }
    }
}

/// The table's catalog for commits. Errors: a table read at a past snapshot.
fn writes(
    table: &IcebergTableProvider,
) -> Result<Arc<dyn iceflight_iceberg::commit::CommitCatalog>> {
    match table.writes() {
        Some(catalog) => Ok(Arc::clone(catalog)),
        None => plan_err!(
            "procedures change the table's current state; {} is read at a past snapshot",
            table.table().identifier()
        ),
    }
}

/// `e` as a DataFusion error: bad input as a plan error, another commit first as a
/// [`WriteConflict`](iceflight_scan::model::write_conflict::WriteConflict) of `procedure` on
/// `table` (`Aborted` at the edge).
fn failed(e: iceberg::Error, procedure: &str, table: &iceberg::TableIdent) -> DataFusionError {
    if e.kind() == iceberg::ErrorKind::CatalogCommitConflicts {
        return iceflight_scan::model::write_conflict::WriteConflict {
            statement: procedure.to_string(),
            table: table.to_string(),
            reason: "another writer committed to it first".to_string(),
        }
        .into_error();
    }
    to_df(e)
}

fn to_df(e: iceberg::Error) -> DataFusionError {
    match e.kind() {
        iceberg::ErrorKind::DataInvalid => DataFusionError::Plan(e.message().to_string()),
        iceberg::ErrorKind::FeatureUnsupported => {
            DataFusionError::NotImplemented(e.message().to_string())
        }
        _ => DataFusionError::External(Box::new(e)),
    }
}

/// The call's arguments as `(name, expression)`, positional ones unnamed.
fn arguments(function: &Function) -> Result<Vec<(Option<String>, SqlExpr)>> {
    let FunctionArguments::List(list) = &function.args else {
        return Ok(vec![]);
    };
    list.args
        .iter()
        .map(|arg| match arg {
            FunctionArg::Named {
                name,
                arg: FunctionArgExpr::Expr(e),
                ..
            } => Ok((Some(name.value.to_lowercase()), e.clone())),
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok((None, e.clone())),
            other => plan_err!("procedure argument {other} is not a value"),
        })
        .collect()
}

/// The values of `args` for the parameters `known` (in order), named or positional.
///
/// Errors: an argument of another name, or more than `known` arguments.
fn take<const N: usize>(
    procedure: &str,
    args: Vec<(Option<String>, SqlExpr)>,
    known: &[&str; N],
) -> Result<[Option<SqlExpr>; N]> {
    let mut out: [Option<SqlExpr>; N] = std::array::from_fn(|_| None);
    for (i, (name, value)) in args.into_iter().enumerate() {
        let at = match &name {
            Some(name) => known.iter().position(|k| k == name),
            None => (i < N).then_some(i),
        };
        let Some(at) = at else {
            return plan_err!(
                "procedure {procedure} has no argument {}; it takes {}",
                name.unwrap_or_else(|| format!("number {}", i + 1)),
                match known.is_empty() {
                    true => "none".to_string(),
                    false => known.join(", "),
                }
            );
        };
        out[at] = Some(value);
    }
    Ok(out)
}

fn no_condition(procedure: &str, condition: &str) -> Result<()> {
    match condition.trim().is_empty() {
        true => Ok(()),
        false => plan_err!("procedure {procedure} takes no WHERE clause"),
    }
}

fn table_name(expr: &SqlExpr) -> Result<ObjectName> {
    match expr {
        SqlExpr::Identifier(ident) => Ok(ObjectName::from(vec![ident.clone()])),
        SqlExpr::CompoundIdentifier(parts) => Ok(ObjectName::from(parts.clone())),
        other => plan_err!("{other} is not a table name"),
    }
}

fn string(expr: &SqlExpr, what: &str) -> Result<String> {
    match expr {
        SqlExpr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => Ok(s.clone()),
            other => plan_err!("{what} takes a string such as '7d', not {other}"),
        },
        other => plan_err!("{what} takes a string such as '7d', not {other}"),
    }
}

fn integer(expr: &SqlExpr, what: &str) -> Result<i64> {
    let text = match expr {
        SqlExpr::Value(v) => v.value.to_string(),
        SqlExpr::UnaryOp { op, expr } => format!("{op}{expr}"),
        other => other.to_string(),
    };
    match text.parse() {
        Ok(n) => Ok(n),
        Err(_) => plan_err!("{what} takes an integer, not {text}"),
    }
}

fn size(text: &str) -> Result<u64> {
    match iceflight_input::units::parse_size(text) {
        Ok(n) => Ok(n as u64),
        Err(e) => plan_err!("file_size_threshold: {e} (a size such as '128MB')"),
    }
}

fn duration(text: &str) -> Result<Duration> {
    match iceflight_input::units::parse_duration(text) {
        Some(d) => Ok(d),
        None => {
            plan_err!("retention_threshold: {text} is not a duration (such as '7d', '12h', '30m')")
        }
    }
}
