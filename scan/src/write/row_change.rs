//! `UPDATE` and `MERGE INTO` (and merge-on-read `DELETE`): a stream of row changes applied to
//! an Iceberg table in one snapshot, copy-on-write or merge-on-read (`write_mode.rs`).
//!
//! ```text
//!   change stream (planned by the session: the table scanned with _file, _pos, filtered or
//!   joined to a source, one row per change):
//!     [table columns (new values)…, _file, _pos, _change]
//!       _change 0 delete: (_file, _pos) deleted
//!               1 insert: the values added as a new row
//!               2 update: (_file, _pos) deleted and the values added
//!   ──► deleted positions by data file (a position seen twice: one target row changed twice
//!       ──► error, nothing committed) + new rows ──► new data files (sink.rs's writer)
//!   merge-on-read ──► delete files for the positions (delete_files.rs)
//!   copy-on-write ──► each data file with a deleted position read again, its other rows
//!                     written to new data files; the file removed
//!   ──► one snapshot (iceflight_iceberg::commit::commit_changes)
//! ```
//!
//! **Concurrency.** The snapshot is committed only if `main` still points at the snapshot
//! the changes were read from. When other writers committed first and all they did was append
//! (same schema and spec), an `UPDATE` or `DELETE` is committed on top of them as it is:
//! appends read nothing, so the statement is serialized before them (Iceberg's Java
//! `RowDelta` validates the same way: a concurrent append does not conflict with a delete). A
//! `MERGE` is not: the rows an append adds could have matched its source. Anything else — a
//! delete, an overwrite — may have changed the rows this statement read: its written files
//! are dropped and the statement runs again on the new snapshot (its change stream planned
//! again, [`Rerun`]), up to [`RUNS`] runs; then, or when the table's columns changed, it fails
//! with [`WriteConflict`] (`Aborted` at the edge). Nothing is ever half committed: a run's
//! files are committed in one snapshot or not at all (dropped when the commit surely failed,
//! left unreferenced when its outcome is unknown).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};

use arrow::array::{Array, AsArray, BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType, Field, Int8Type, Int64Type, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::common::{Result, exec_err, internal_err};
use datafusion::datasource::sink::DataSink;
use datafusion::execution::session_state::SessionState;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties,
};
use futures::StreamExt;
use iceberg::ErrorKind;
use iceberg::spec::{DataContentType, Operation};
use iceberg::table::Table;
use iceflight_iceberg::commit::{CommitCatalog, FileChanges, commit_changes};

use crate::exec::scan_exec::IcebergScanExec;
use crate::model::iceberg_error::external;
use crate::model::metadata_columns::{FILE_PATH, ROW_POSITION};
use crate::model::write_conflict::WriteConflict;
use crate::plan::planned::assemble;
use crate::plan::planner::ScanPlanner;
use crate::read::caches::ScanCaches;
use crate::write::data_files::write_data_files;
use crate::write::delete_files::{DeletedRows, write_delete_files};
use crate::write::write_mode::{RowOperation, WriteMode};

/// Name of the change stream's kind column (module docs).
pub const CHANGE: &str = "_change";

/// `_change`: the row's position is deleted.
pub const DELETE: i8 = 0;
/// `_change`: the row's values are added.
pub const INSERT: i8 = 1;
/// `_change`: the row's position is deleted and its values added.
pub const UPDATE: i8 = 2;

/// Commits of one statement's changes on top of other writers' appends before it gives up.
const REBASES: usize = 32;

/// Runs of a statement (reading and writing files) before a table that keeps changing under it
/// in ways other than appends is given up on (`WriteConflict`).
pub const RUNS: usize = 4;

/// The change stream's schema for a table whose columns (as DataFusion sees them) are
/// `columns`: those columns, nullable (a deleted row carries no values), then `_file`, `_pos`
/// and `_change`.
pub fn change_schema(columns: &Schema) -> SchemaRef {
    let mut fields: Vec<Field> = columns
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    fields.push(Field::new(FILE_PATH, DataType::Utf8, true));
    fields.push(Field::new(ROW_POSITION, DataType::Int64, true));
    fields.push(Field::new(CHANGE, DataType::Int8, false));
    Arc::new(Schema::new(fields))
}

/// DataFusion's sink for one `UPDATE`, `MERGE` or merge-on-read `DELETE` (module docs): its
/// input is the change stream; it returns the rows changed.
pub struct RowChangeSink {
    catalog: Arc<dyn CommitCatalog>,
    /// The table at the snapshot the change stream reads.
    planner: ScanPlanner,
    operation: RowOperation,
    mode: WriteMode,
    schema: SchemaRef,
    /// How to read the changes again on a newer snapshot; `None`: a conflict ends the
    /// statement.
    rerun: Option<Rerun>,
}

/// How to run a statement again on a newer snapshot of its table: the change stream planned
/// again (`plan`, the statement's logical plan over the table as `planner` has it) in the
/// session it was planned in.
pub struct Rerun {
    state: SessionState,
    plan: ReplanFn,
}

/// The statement's change stream as a logical plan over the table at another snapshot.
pub type ReplanFn = Arc<dyn Fn(&ScanPlanner) -> Result<LogicalPlan> + Send + Sync>;

impl Rerun {
    /// A rerun planning `plan` in `state`.
    pub fn new(state: SessionState, plan: ReplanFn) -> Self {
        Self { state, plan }
    }

    /// The change stream of the statement over `planner`'s snapshot, one partition.
    async fn stream(
        &self,
        planner: &ScanPlanner,
        context: &Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let logical = (self.plan)(planner)?;
        let mut physical = self.state.create_physical_plan(&logical).await?;
        if physical.output_partitioning().partition_count() > 1 {
            physical = Arc::new(CoalescePartitionsExec::new(physical));
        }
        physical.execute(0, Arc::clone(context))
    }
}

impl fmt::Debug for RowChangeSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowChangeSink")
            .field("table", &self.planner.table().identifier().to_string())
            .field("operation", &self.operation)
            .field("mode", &self.mode)
            .finish()
    }
}

impl RowChangeSink {
    /// A sink applying `operation`'s change stream to `planner`'s table (at the snapshot the
    /// stream reads), committing through `catalog`, in the mode the table's properties choose.
    ///
    /// Errors: an invalid write-mode property ([`WriteMode::of`]).
    pub fn try_new(
        catalog: Arc<dyn CommitCatalog>,
        planner: ScanPlanner,
        operation: RowOperation,
    ) -> Result<Self> {
        let mode = WriteMode::of(planner.table().metadata(), operation)?;
        let schema = change_schema(planner.plain_schema());
        Ok(Self {
            catalog,
            planner,
            operation,
            mode,
            schema,
            rerun: None,
        })
    }

    /// Runs the statement again through `rerun` when another writer changed what it read
    /// (module docs), up to [`RUNS`] runs in all.
    pub fn with_rerun(mut self, rerun: Rerun) -> Self {
        self.rerun = Some(rerun);
        self
    }
}

impl DisplayAs for RowChangeSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match self.mode {
            WriteMode::CopyOnWrite => "copy-on-write",
            WriteMode::MergeOnRead => "merge-on-read",
        };
        write!(
            f,
            "IcebergRowChange: op={}, table={}, mode={mode}",
            self.operation.keyword(),
            self.planner.table().identifier()
        )
    }
}

#[async_trait]
impl DataSink for RowChangeSink {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    async fn write_all(
        &self,
        data: SendableRecordBatchStream,
        context: &Arc<TaskContext>,
    ) -> Result<u64> {
        let mut planner = self.planner.clone();
        let mut data = Some(data);
        for run in 1..=RUNS {
            let stream = match data.take() {
                Some(stream) => stream,
                None => match &self.rerun {
                    Some(rerun) => rerun.stream(&planner, context).await?,
                    None => return internal_err!("a change stream to run again and no plan"),
                },
            };
            match self.apply(&planner, stream, context).await? {
                Applied::Committed(changed) => return Ok(changed),
                Applied::Conflict(now, reason) => {
                    let ident = planner.table().identifier().clone();
                    let rerun = self.rerun.is_some() && run < RUNS;
                    let next = planner.at(*now)?;
                    if !rerun || next.plain_schema() != planner.plain_schema() {
                        let reason = match rerun {
                            true => "the table's columns changed under it".to_string(),
                            false if run == RUNS => format!(
                                "the table changed under the statement {RUNS} times ({reason})"
                            ),
                            false => reason,
                        };
                        return Err(WriteConflict {
                            statement: self.operation.keyword().to_string(),
                            table: ident.to_string(),
                            reason,
                        }
                        .into_error());
                    }
                    tracing::info!(
                        table = %ident,
                        statement = self.operation.keyword(),
                        run,
                        %reason,
                        "another writer changed the table first: running the statement again"
                    );
                    planner = next;
                }
            }
        }
        internal_err!(
            "{} ran {RUNS} times without an outcome",
            self.operation.keyword()
        )
    }
}

/// How one run of the statement ended.
enum Applied {
    /// Committed (or nothing to commit): the rows changed.
    Committed(u64),
    /// Another writer changed what the statement read: the table now, and what happened. The
    /// run's files are dropped.
    Conflict(Box<Table>, String),
}

impl RowChangeSink {
    /// One run: reads `data` (a change stream of `planner`'s table), writes its files and
    /// commits them (module docs).
    async fn apply(
        &self,
        planner: &ScanPlanner,
        data: SendableRecordBatchStream,
        context: &Arc<TaskContext>,
    ) -> Result<Applied> {
        let table = planner.table();
        let columns = planner.plain_schema().fields().len();
        let state = Arc::new(Mutex::new(Collected::default()));
        // New rows go to data files while the stream is read; positions are collected.
        let inserts = {
            let state = Arc::clone(&state);
            let operation = self.operation;
            let table_schema = Arc::clone(planner.plain_schema());
            let out_schema = Arc::clone(&table_schema);
            let rows = data.map(move |batch| {
                let batch = batch?;
                let mut state = state.lock().expect("change state lock");
                state.take(&batch, columns, operation, &table_schema)
            });
            Box::pin(RecordBatchStreamAdapter::new(out_schema, rows))
        };
        let (added, _) = write_data_files(table, inserts).await?;
        let added = without_empty(table, added).await;
        let collected = std::mem::take(&mut *state.lock().expect("change state lock"));
        let mut changes = FileChanges {
            added_data_files: added,
            ..FileChanges::default()
        };
        if !collected.deleted.is_empty() {
            let written = match self.mode {
                WriteMode::MergeOnRead => merge_on_read(planner, &collected.deleted, context).await,
                WriteMode::CopyOnWrite => copy_on_write(planner, &collected.deleted, context).await,
            };
            match written {
                Ok(written) => {
                    changes.removed_data_files = written.removed_data_files;
                    changes.added_data_files.extend(written.added_data_files);
                    changes.added_delete_files = written.added_delete_files;
                    changes.removed_deletion_vectors = written.removed_deletion_vectors;
                }
                Err(e) => {
                    drop_files(table, &changes.written_paths()).await;
                    return Err(e);
                }
            }
        }
        if changes.is_empty() {
            return Ok(Applied::Committed(collected.changed));
        }
        Ok(match self.commit(planner, changes).await? {
            None => Applied::Committed(collected.changed),
            Some((now, reason)) => Applied::Conflict(Box::new(now), reason),
        })
    }
}

/// What the change stream said, as it was read.
#[derive(Debug, Default)]
struct Collected {
    deleted: DeletedRows,
    /// Rows changed: each change row counts once (an update is one).
    changed: u64,
}

impl Collected {
    /// Records `batch`'s deleted positions and returns its rows to add (the first `columns`
    /// columns, under `schema`).
    fn take(
        &mut self,
        batch: &RecordBatch,
        columns: usize,
        operation: RowOperation,
        schema: &SchemaRef,
    ) -> Result<RecordBatch> {
        let n = batch.num_columns();
        if n != columns + 3 {
            return internal_err!("a change stream of {n} columns for a table of {columns}");
        }
        let files = batch.column(columns).as_string::<i32>();
        let positions = batch.column(columns + 1).as_primitive::<Int64Type>();
        let kinds = batch.column(columns + 2).as_primitive::<Int8Type>();
        let mut adds = Vec::with_capacity(batch.num_rows());
        for row in 0..batch.num_rows() {
            if kinds.is_null(row) {
                adds.push(false);
                continue;
            }
            let kind = kinds.value(row);
            if ![DELETE, INSERT, UPDATE].contains(&kind) {
                return internal_err!("unknown change kind {kind} in the change stream");
            }
            if kind == DELETE || kind == UPDATE {
                if files.is_null(row) || positions.is_null(row) || positions.value(row) < 0 {
                    return internal_err!("a deleted row of the change stream has no position");
                }
                if !self
                    .deleted
                    .insert(files.value(row), positions.value(row) as u64)
                {
                    return match operation {
                        RowOperation::Merge => exec_err!(
                            "MERGE: one target row matched more than one source row; nothing \
                             was changed"
                        ),
                        _ => internal_err!("{} changed one row twice", operation.keyword()),
                    };
                }
            }
            adds.push(kind == INSERT || kind == UPDATE);
            self.changed += 1;
        }
        let values = RecordBatch::try_new(
            Arc::new(Schema::new(batch.schema().fields()[..columns].to_vec())),
            batch.columns()[..columns].to_vec(),
        )?;
        let values = filter_record_batch(&values, &BooleanArray::from(adds))?;
        Ok(
            RecordBatch::try_new(Arc::clone(schema), values.columns().to_vec()).or_else(|_| {
                // Nullability differs (the change stream's columns are nullable): the writer
                // checks required columns itself.
                RecordBatch::try_new(values.schema(), values.columns().to_vec())
            })?,
        )
    }
}

/// Merge-on-read: delete files for `deleted` (`delete_files.rs`).
async fn merge_on_read(
    planner: &ScanPlanner,
    deleted: &DeletedRows,
    context: &Arc<TaskContext>,
) -> Result<FileChanges> {
    let table = planner.table();
    let config = context.session_config();
    let caches = ScanCaches::of(config);
    let index = caches.indexes.load(table).await.map_err(external)?;
    // The position delete files that apply to each changed data file now.
    let (_, _, tasks) = planner
        .plan_tasks(config, &[], &[], None, &caches.indexes)
        .await?;
    let current: HashMap<String, Vec<String>> = tasks
        .into_iter()
        .filter(|t| deleted.of(&t.data_file_path).is_some())
        .map(|t| {
            let paths = t
                .deletes
                .iter()
                .filter(|d| d.file_type == DataContentType::PositionDeletes)
                .map(|d| d.file_path.clone())
                .collect();
            (t.data_file_path, paths)
        })
        .collect();
    let written = write_delete_files(table, &index, &current, deleted).await?;
    Ok(FileChanges {
        added_delete_files: written.files,
        removed_deletion_vectors: written.replaced_vectors,
        ..FileChanges::default()
    })
}

/// Copy-on-write: every data file with a deleted position read again (its delete files
/// applied) and its other rows written to new data files.
async fn copy_on_write(
    planner: &ScanPlanner,
    deleted: &DeletedRows,
    context: &Arc<TaskContext>,
) -> Result<FileChanges> {
    let table = planner.table();
    let config = context.session_config();
    let caches = ScanCaches::of(config);
    let table_columns = Arc::clone(planner.plain_schema());
    let planner = planner.clone().with_row_positions();
    let all: Vec<usize> = (0..planner.schema().fields().len()).collect();
    let (inputs, index, tasks) = planner
        .plan_tasks(config, &all, &[], None, &caches.indexes)
        .await?;
    let affected: Vec<_> = tasks
        .into_iter()
        .filter(|t| deleted.of(&t.data_file_path).is_some())
        .collect();
    let removed: HashSet<String> = affected.iter().map(|t| t.data_file_path.clone()).collect();
    if removed.len() != deleted.files().count() {
        return internal_err!("a changed row's data file is not in the snapshot read");
    }
    let scan = Arc::new(IcebergScanExec::new(assemble(
        inputs,
        index,
        vec![affected],
    ))) as Arc<dyn ExecutionPlan>;
    let columns = table_columns.fields().len();
    let out_schema = table_columns;
    let kept_schema = Arc::clone(&out_schema);
    let deleted = Arc::new(deleted.clone());
    let stream = scan.execute(0, Arc::clone(context))?;
    let survivors = stream.map(move |batch| {
        let batch = batch?;
        let files = batch.column(columns).as_string::<i32>();
        let positions = batch.column(columns + 1).as_primitive::<Int64Type>();
        // A batch holds the rows of one data file: its positions are looked up once per run
        // of equal paths, not per row.
        let mut at: Option<(&str, Option<&roaring::RoaringTreemap>)> = None;
        let keep: BooleanArray = (0..batch.num_rows())
            .map(|i| {
                let path = files.value(i);
                let gone = match at {
                    Some((p, of)) if p == path => of,
                    _ => {
                        let of = deleted.of(path);
                        at = Some((path, of));
                        of
                    }
                };
                Some(!gone.is_some_and(|p| p.contains(positions.value(i) as u64)))
            })
            .collect();
        let kept = filter_record_batch(&batch, &keep)?;
        Ok(RecordBatch::try_new(
            Arc::clone(&kept_schema),
            kept.columns()[..columns].to_vec(),
        )?)
    });
    let survivors = Box::pin(RecordBatchStreamAdapter::new(out_schema, survivors));
    let (written, _) = write_data_files(table, survivors).await?;
    let added = without_empty(table, written).await;
    Ok(FileChanges {
        removed_data_files: removed,
        added_data_files: added,
        ..FileChanges::default()
    })
}

impl RowChangeSink {
    /// Commits `changes` on `planner`'s snapshot, or on top of appends committed since (module
    /// docs). `Some((table now, what happened))` when another writer changed more: the written
    /// files are dropped.
    async fn commit(
        &self,
        planner: &ScanPlanner,
        changes: FileChanges,
    ) -> Result<Option<(Table, String)>> {
        let ident = planner.table().identifier().clone();
        let mut base = planner.table().clone();
        for _ in 0..REBASES {
            let e = match commit_changes(self.catalog.as_ref(), &base, &changes).await {
                Ok(()) => return Ok(None),
                Err(e) if e.kind() == ErrorKind::CatalogCommitConflicts => e,
                // Any other failure may hide a commit that happened (a timeout, a 5xx after
                // the request left): the files stay, referenced or not.
                Err(e) => return Err(external(e)),
            };
            let now = match self.catalog.load_table(&ident).await {
                Ok(now) => now,
                Err(load) => {
                    drop_files(&base, &changes.written_paths()).await;
                    return Err(external(load));
                }
            };
            // A MERGE's NOT MATCHED decisions read the keys an append may add (serializable,
            // as Iceberg's Java MERGE validates): it runs again instead.
            if self.operation != RowOperation::Merge && only_appended(&base, &now) {
                base = now;
                continue;
            }
            drop_files(&base, &changes.written_paths()).await;
            let reason = format!("another writer changed the table first ({})", e.message());
            return Ok(Some((now, reason)));
        }
        drop_files(&base, &changes.written_paths()).await;
        let now = self.catalog.load_table(&ident).await.map_err(external)?;
        let reason = format!("other writers committed {REBASES} times in a row first");
        Ok(Some((now, reason)))
    }
}

/// `written` without its files of no rows, which are deleted from storage (a writer may close
/// a file it wrote nothing to).
pub async fn without_empty(
    table: &Table,
    written: Vec<iceberg::spec::DataFile>,
) -> Vec<iceberg::spec::DataFile> {
    let (empty, kept): (Vec<_>, Vec<_>) = written.into_iter().partition(|f| f.record_count() == 0);
    for file in empty {
        let _ = table.file_io().delete(file.file_path()).await;
    }
    kept
}

/// Deletes the files at `paths` (written by a change that is not committed; best effort:
/// a file left behind is referenced by nothing).
pub(crate) async fn drop_files(table: &Table, paths: &HashSet<String>) {
    for path in paths {
        let _ = table.file_io().delete(path).await;
    }
}

/// Whether `now` is `base` with only appends committed on top: snapshots whose operation is
/// `append` back to `base`'s current snapshot, under the same schema and partition spec. Blind
/// appends read nothing, so a change can be committed after them as written: the files it
/// removes or deletes from are still there, and the appended rows stay.
pub fn only_appended(base: &Table, now: &Table) -> bool {
    let (base, now) = (base.metadata(), now.metadata());
    if base.current_schema_id() != now.current_schema_id()
        || base.default_partition_spec_id() != now.default_partition_spec_id()
    {
        return false;
    }
    let Some(target) = base.current_snapshot_id() else {
        return false;
    };
    let mut at = now.current_snapshot();
    while let Some(snapshot) = at {
        if snapshot.snapshot_id() == target {
            return true;
        }
        if snapshot.summary().operation != Operation::Append {
            return false;
        }
        at = snapshot
            .parent_snapshot_id()
            .and_then(|id| now.snapshot_by_id(id));
    }
    false
}
