//! `DELETE FROM t [WHERE p]`: copy-on-write of the data files that hold a deleted row.
//!
//! ```text
//!   candidate data files (planned as a scan under p: manifest and partition pruning)
//!     └─ per file, concurrently: count rows where p is TRUE (a scan of that file, p pushed down)
//!          0 ──► untouched
//!          n ──► affected
//!   affected files' live rows (their delete files applied) where p is not TRUE
//!     ──► new data files (sink.rs's writer: the table's current schema and partition spec)
//!     ──► one snapshot: affected files removed, new files added (commit.rs)
//!   another writer committed first ──► only appends: the same snapshot again on top of them
//!                                      otherwise: new files dropped, all again (Concurrency)
//! ```
//!
//! **Why copy-on-write, not position delete files.** The table stays readable by every engine
//! without delete-file support (DuckDB's iceberg extension, older pyiceberg), and reads keep
//! all their pruning: a delete file must be read and applied by every later scan of its data
//! file, a rewritten file costs nothing after the commit. The price is paid by the statement:
//! a DELETE that hits one row rewrites that row's whole data file.
//!
//! **Rows.** A row is deleted where `p` is TRUE; where it is FALSE or NULL the row stays
//! (SQL's WHERE). `DELETE` without `WHERE` removes every data file and writes none. The count
//! returned is the number of rows deleted.
//!
//! **Concurrency.** The snapshot is committed only if `main` still points at the snapshot it
//! was built on. When another writer committed first:
//! - only appends (same schema and spec): the same files are committed again on top of them.
//!   An append reads nothing, so the DELETE is serialized before it: the appended rows stay.
//! - anything else (a delete, an overwrite): the new files are deleted and the statement runs
//!   again on the new snapshot, so rows deleted meanwhile are not counted twice and rows
//!   rewritten meanwhile are read where they are now.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow::array::{Array, BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::DataType;
use arrow::datatypes::{Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, DataFusionError, Result, ScalarValue, exec_err};
use datafusion::datasource::sink::DataSink;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Expr, ExprSchemable, cast};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan};
use futures::{StreamExt, TryStreamExt};
use iceberg::ErrorKind;
use iceberg::scan::FileScanTask;

use crate::exec::scan_exec::IcebergScanExec;
use crate::model::iceberg_error::external;
use crate::plan::planned::assemble;
use crate::plan::planner::ScanPlanner;
use crate::read::caches::ScanCaches;
use crate::write::data_files::write_data_files;
use crate::write::row_change::{RUNS, only_appended, without_empty};
use iceflight_iceberg::commit::{CommitCatalog, overwrite};

/// Commits of one run's files on top of other writers' appends before the statement gives up.
const REBASES: usize = 32;

/// DataFusion's sink for one `DELETE` (module docs). It reads no input: the rows to delete are
/// found from the table itself when the plan runs.
pub struct DeleteSink {
    catalog: Arc<dyn CommitCatalog>,
    /// The table as planned (its current snapshot then).
    planner: ScanPlanner,
    /// The condition's conjuncts, type-coerced and simplified over the table's columns (none:
    /// every row). Prune the candidate files.
    filters: Vec<Expr>,
    /// The whole condition, evaluated on every row read (`None`: every row).
    predicate: Option<Arc<dyn PhysicalExpr>>,
    /// The condition is the constant FALSE or NULL.
    matches_nothing: bool,
    /// No columns: the sink's input is empty.
    schema: SchemaRef,
}

impl fmt::Debug for DeleteSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeleteSink")
            .field("table", &self.planner.table().identifier().to_string())
            .finish()
    }
}

impl DeleteSink {
    /// A sink deleting the rows of `planner`'s table where `condition` (over its columns,
    /// unqualified; `None`: every row) is TRUE, committing through `catalog`. The condition is
    /// type-coerced and simplified (`now()` fixed) as `state` plans a query's filters.
    ///
    /// Errors: a condition that does not type-check against the table's columns.
    pub fn try_new(
        catalog: Arc<dyn CommitCatalog>,
        planner: ScanPlanner,
        condition: Option<Expr>,
        state: &dyn Session,
    ) -> Result<Self> {
        let df_schema = Arc::new(DFSchema::try_from(Arc::clone(planner.plain_schema()))?);
        let (filters, predicate) = match condition {
            None => (vec![], None),
            Some(condition) => {
                let context = SimplifyContext::builder()
                    .with_schema(Arc::clone(&df_schema))
                    .with_query_execution_start_time(
                        state.execution_props().query_execution_start_time,
                    )
                    .with_config_options(Arc::new(state.config_options().clone()))
                    .build();
                let simplifier = ExprSimplifier::new(context);
                let mut condition = simplifier.coerce(condition, &df_schema)?;
                // `WHERE NULL`: an untyped NULL, coerced to a boolean as a query's filter is.
                if condition.get_type(df_schema.as_ref())? == DataType::Null {
                    condition = cast(condition, DataType::Boolean);
                }
                let condition = simplifier.simplify(condition)?;
                let predicate = state.create_physical_expr(condition.clone(), &df_schema)?;
                let filters = split_conjunction(&condition).into_iter().cloned().collect();
                (filters, Some(predicate))
            }
        };
        // A condition folded to FALSE or NULL matches no row: nothing is read.
        let matches_nothing = filters.iter().any(|f| {
            matches!(f, Expr::Literal(v, _) if v.is_null() || *v == ScalarValue::Boolean(Some(false)))
        });
        Ok(Self {
            catalog,
            planner,
            filters,
            predicate,
            matches_nothing,
            schema: Arc::new(Schema::empty()),
        })
    }
}

impl DisplayAs for DeleteSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IcebergDelete: table={}",
            self.planner.table().identifier()
        )?;
        if let Some(p) = &self.predicate {
            write!(f, ", predicate={p}")?;
        }
        Ok(())
    }
}

#[async_trait]
impl DataSink for DeleteSink {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    async fn write_all(
        &self,
        _data: SendableRecordBatchStream,
        context: &Arc<TaskContext>,
    ) -> Result<u64> {
        if self.matches_nothing {
            return Ok(0);
        }
        let ident = self.planner.table().identifier().clone();
        let mut planner = self.planner.clone();
        let mut runs = 0;
        'run: loop {
            runs += 1;
            let Some(rewrite) = rewrite(&planner, &self.filters, &self.predicate, context).await?
            else {
                return Ok(0);
            };
            // The table the snapshot is committed on: the one read, or a later one that only
            // appended to it.
            let mut base = planner.table().clone();
            for _ in 0..REBASES {
                let committed = overwrite(
                    self.catalog.as_ref(),
                    &base,
                    &rewrite.removed,
                    rewrite.added.clone(),
                )
                .await;
                let e = match committed {
                    Ok(_) => return Ok(rewrite.deleted_rows),
                    Err(e) if e.kind() == ErrorKind::CatalogCommitConflicts => e,
                    Err(e) => return Err(external(e)),
                };
                let table = self.catalog.load_table(&ident).await.map_err(external)?;
                if only_appended(&base, &table) {
                    base = table;
                    continue;
                }
                // Not applied: the new files are referenced by nothing.
                for file in &rewrite.added {
                    let _ = base.file_io().delete(file.file_path()).await;
                }
                if runs == RUNS {
                    return exec_err!(
                        "DELETE on {ident}: the table changed under the statement {RUNS} \
                         times; nothing was deleted: {}",
                        e.message()
                    );
                }
                planner = ScanPlanner::try_new(table)?;
                if planner.plain_schema() != self.planner.plain_schema() {
                    return exec_err!(
                        "DELETE on {ident}: the table's columns changed under the statement; \
                         nothing was deleted"
                    );
                }
                continue 'run;
            }
            return exec_err!(
                "DELETE on {ident}: other writers committed {REBASES} times in a row before \
                 this statement could; nothing was deleted"
            );
        }
    }
}

/// What one run of the statement wrote: the data files it replaces, the files replacing them
/// and the rows it deleted.
struct Rewrite {
    removed: HashSet<String>,
    added: Vec<iceberg::spec::DataFile>,
    deleted_rows: u64,
}

/// Finds the data files of `planner`'s current snapshot with a row where `filters` hold and
/// writes their other rows to new data files (module docs); `None` when no row matches.
async fn rewrite(
    planner: &ScanPlanner,
    filters: &[Expr],
    predicate: &Option<Arc<dyn PhysicalExpr>>,
    context: &Arc<TaskContext>,
) -> Result<Option<Rewrite>> {
    let columns: Vec<usize> = (0..planner.schema().fields().len()).collect();
    let config = context.session_config();
    let caches = ScanCaches::of(config);
    let (inputs, index, tasks) = planner
        .plan_tasks(config, &columns, filters, None, &caches.indexes)
        .await?;
    let scan_of = |tasks: Vec<FileScanTask>, pushed: bool| {
        let mut inputs = inputs.clone();
        if !pushed {
            inputs.predicate = None;
        }
        Arc::new(IcebergScanExec::new(assemble(
            inputs,
            Arc::clone(&index),
            vec![tasks],
        ))) as Arc<dyn ExecutionPlan>
    };

    // Which candidate files hold a matching row.
    let concurrency = config.target_partitions().max(1);
    let counted: Vec<(FileScanTask, u64)> = futures::stream::iter(tasks)
        .map(|task| {
            let scan = scan_of(vec![task.clone()], true);
            let predicate = predicate.clone();
            let context = Arc::clone(context);
            async move {
                // Every row of a file without delete files: its manifest's record count.
                if let (None, true, Some(n)) =
                    (&predicate, task.deletes.is_empty(), task.record_count)
                {
                    return Ok((task, n));
                }
                let mut stream = scan.execute(0, context)?;
                let mut matched = 0u64;
                while let Some(batch) = stream.next().await {
                    let batch = batch?;
                    matched += match &predicate {
                        Some(p) => matches(p, &batch)?.true_count() as u64,
                        None => batch.num_rows() as u64,
                    };
                }
                Ok::<_, DataFusionError>((task, matched))
            }
        })
        .buffer_unordered(concurrency)
        .try_collect()
        .await?;
    let counted: Vec<(FileScanTask, u64)> = counted.into_iter().filter(|(_, n)| *n > 0).collect();
    let affected: Vec<FileScanTask> = counted.iter().map(|(t, _)| t.clone()).collect();
    if affected.is_empty() {
        return Ok(None);
    }
    let removed: HashSet<String> = affected.iter().map(|t| t.data_file_path.clone()).collect();
    let Some(predicate) = predicate.clone() else {
        // No condition: every row goes, nothing is written.
        let deleted_rows = counted.iter().map(|(_, n)| n).sum();
        return Ok(Some(Rewrite {
            removed,
            added: vec![],
            deleted_rows,
        }));
    };

    // Their surviving rows, rewritten.
    let read = Arc::new(AtomicU64::new(0));
    let kept = Arc::new(AtomicU64::new(0));
    let survivors = {
        let (read, kept) = (Arc::clone(&read), Arc::clone(&kept));
        let stream = scan_of(affected, false).execute(0, Arc::clone(context))?;
        let out_schema = stream.schema();
        let filtered = stream.map(move |batch| {
            let batch = batch?;
            read.fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
            let hit = matches(&predicate, &batch)?;
            let keep: BooleanArray = hit.iter().map(|v| Some(v != Some(true))).collect();
            let batch = filter_record_batch(&batch, &keep)?;
            kept.fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
            Ok(batch)
        });
        Box::pin(RecordBatchStreamAdapter::new(out_schema, filtered))
    };
    let (written, _) = write_data_files(planner.table(), survivors).await?;
    let added = without_empty(planner.table(), written).await;
    let deleted_rows = read.load(Ordering::Relaxed) - kept.load(Ordering::Relaxed);
    Ok(Some(Rewrite {
        removed,
        added,
        deleted_rows,
    }))
}

/// `p` evaluated on `batch`: TRUE, FALSE or NULL per row.
fn matches(p: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Result<BooleanArray> {
    let values = p.evaluate(batch)?.into_array(batch.num_rows())?;
    match values.as_any().downcast_ref::<BooleanArray>() {
        Some(b) => Ok(b.clone()),
        None => exec_err!(
            "the DELETE condition is of type {}, not boolean",
            values.data_type()
        ),
    }
}
