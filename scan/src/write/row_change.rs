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
//!       ──► error, nothing written) + new rows ──► new data files (sink.rs's writer)
//!   merge-on-read ──► delete files for the positions (delete_files.rs)
//!   copy-on-write ──► each data file with a deleted position read again, its other rows
//!                     written to new data files; the file removed
//!   ──► one snapshot (iceflight_iceberg::commit::commit_changes)
//! ```
//!
//! **Concurrency.** The snapshot is committed only if `main` still points at the snapshot
//! the changes were read from. When other writers committed first and all they did was append
//! (same schema and spec), the same changes are committed on top of them: appends read
//! nothing, so the statement is serialized before them (Iceberg's Java `RowDelta` validates
//! the same way: a concurrent append does not conflict with a delete). Anything else — a
//! delete, an overwrite, a schema change — may have changed the rows this statement read: its
//! written files are dropped and it fails with [`WriteConflict`] (`Aborted` at the edge), for
//! the session to run it again on the new snapshot.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};

use arrow::array::{Array, AsArray, BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType, Field, Int8Type, Int64Type, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::common::{Result, exec_err, internal_err};
use datafusion::datasource::sink::DataSink;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan};
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
use crate::write::delete_files::{DeletedRows, write_delete_files};
use crate::write::sink::write_data_files;
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
        })
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
        let table = self.planner.table();
        let columns = self.planner.plain_schema().fields().len();
        let state = Arc::new(Mutex::new(Collected::default()));
        // New rows go to data files while the stream is read; positions are collected.
        let inserts = {
            let state = Arc::clone(&state);
            let operation = self.operation;
            let table_schema = Arc::clone(self.planner.plain_schema());
            let out_schema = Arc::clone(&table_schema);
            let rows = data.map(move |batch| {
                let batch = batch?;
                let mut state = state.lock().expect("change state lock");
                state.take(&batch, columns, operation, &table_schema)
            });
            Box::pin(RecordBatchStreamAdapter::new(out_schema, rows))
        };
        let (added, _) = write_data_files(table, inserts).await?;
        let collected = std::mem::take(&mut *state.lock().expect("change state lock"));
        let (empty, added): (Vec<_>, Vec<_>) =
            added.into_iter().partition(|f| f.record_count() == 0);
        for file in empty {
            let _ = table.file_io().delete(file.file_path()).await;
        }
        let mut changes = FileChanges {
            added_data_files: added,
            ..FileChanges::default()
        };
        if !collected.deleted.is_empty() {
            let written = match self.mode {
                WriteMode::MergeOnRead => self.merge_on_read(&collected.deleted, context).await,
                WriteMode::CopyOnWrite => self.copy_on_write(&collected.deleted, context).await,
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
            return Ok(collected.changed);
        }
        self.commit(changes).await?;
        Ok(collected.changed)
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

impl RowChangeSink {
    /// Merge-on-read: delete files for `deleted` (`delete_files.rs`).
    async fn merge_on_read(
        &self,
        deleted: &DeletedRows,
        context: &Arc<TaskContext>,
    ) -> Result<FileChanges> {
        let table = self.planner.table();
        let config = context.session_config();
        let caches = ScanCaches::of(config);
        let index = caches.indexes.load(table).await.map_err(external)?;
        // The position delete files that apply to each changed data file now.
        let (_, _, tasks) = self
            .planner
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
        &self,
        deleted: &DeletedRows,
        context: &Arc<TaskContext>,
    ) -> Result<FileChanges> {
        let table = self.planner.table();
        let config = context.session_config();
        let caches = ScanCaches::of(config);
        let planner = self.planner.clone().with_row_positions();
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
        let columns = self.planner.plain_schema().fields().len();
        let out_schema = Arc::clone(self.planner.plain_schema());
        let kept_schema = Arc::clone(&out_schema);
        let deleted = Arc::new(deleted.clone());
        let stream = scan.execute(0, Arc::clone(context))?;
        let survivors = stream.map(move |batch| {
            let batch = batch?;
            let files = batch.column(columns).as_string::<i32>();
            let positions = batch.column(columns + 1).as_primitive::<Int64Type>();
            let keep: BooleanArray = (0..batch.num_rows())
                .map(|i| {
                    let gone = deleted
                        .of(files.value(i))
                        .is_some_and(|p| p.contains(positions.value(i) as u64));
                    Some(!gone)
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

    /// Commits `changes` on the snapshot read, or on top of appends committed since (module
    /// docs); drops the written files when it cannot.
    async fn commit(&self, changes: FileChanges) -> Result<()> {
        let ident = self.planner.table().identifier().clone();
        let mut base = self.planner.table().clone();
        let conflict = |reason: String| {
            WriteConflict {
                statement: self.operation.keyword().to_string(),
                table: ident.to_string(),
                reason,
            }
            .into_error()
        };
        for _ in 0..REBASES {
            let e = match commit_changes(self.catalog.as_ref(), &base, &changes).await {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == ErrorKind::CatalogCommitConflicts => e,
                Err(e) => {
                    drop_files(&base, &changes.written_paths()).await;
                    return Err(external(e));
                }
            };
            let now = match self.catalog.load_table(&ident).await {
                Ok(now) => now,
                Err(load) => {
                    drop_files(&base, &changes.written_paths()).await;
                    return Err(external(load));
                }
            };
            if only_appended(&base, &now) {
                base = now;
                continue;
            }
            drop_files(&base, &changes.written_paths()).await;
            return Err(conflict(format!(
                "another writer changed the table's rows first ({})",
                e.message()
            )));
        }
        drop_files(&base, &changes.written_paths()).await;
        Err(conflict(format!(
            "other writers committed {REBASES} times in a row before this statement could"
        )))
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
async fn drop_files(table: &Table, paths: &HashSet<String>) {
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
