//! Appends to an Iceberg table: `INSERT INTO … VALUES | SELECT` and `CREATE TABLE … AS SELECT`.
//!
//! ```text
//!   rows (DataSinkExec, one partition) ──► data files (data_files.rs: iceberg's Parquet
//!     writers, split by partition, rolled at the table's target size)
//!     ──► one fast append (Transaction::commit) ──► rows written
//!   INSERT OVERWRITE ──► the same files replacing the partitions they fall in (overwrite.rs)
//! ```
//!
//! **Concurrency.** iceberg's `Transaction::commit` loads the table again before it commits,
//! re-applies the append on whatever snapshot is current then, and retries a commit the catalog
//! refused as conflicting (the table's `commit.retry.*` properties): a concurrent writer's
//! snapshot is kept and ours added on top, never lost and never duplicated (an append conflicts
//! with nothing). Nothing is committed when no row was written. Data files written before a
//! failure stay as orphans (as with any Iceberg writer), never referenced by a snapshot.

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::common::Result;
use datafusion::datasource::sink::DataSink;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType};
use iceberg::Catalog;
use iceberg::spec::DataFile;
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceflight_iceberg::commit::CommitCatalog;

use crate::model::iceberg_error::external;
use crate::write::data_files::write_data_files;
use crate::write::not_null;
use crate::write::overwrite::overwrite_partitions;

/// What an [`IcebergSink`] does with the files it writes.
enum Commit {
    /// `INSERT INTO`: one fast append.
    Append(Arc<dyn Catalog>),
    /// `INSERT OVERWRITE`: the partitions written replaced (`overwrite.rs`).
    Overwrite(Arc<dyn CommitCatalog>),
}

/// DataFusion's sink for `INSERT INTO` (appends, module docs) and `INSERT OVERWRITE` into one
/// Iceberg table.
pub struct IcebergSink {
    commit: Commit,
    table: Table,
    /// The table's Arrow schema, with field ids and its NOT NULL columns.
    table_schema: SchemaRef,
    /// `table_schema` with every column nullable, as `DataSinkExec` is told: the NOT NULL
    /// columns are checked here, by name (`not_null.rs`).
    schema: SchemaRef,
}

impl fmt::Debug for IcebergSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IcebergSink")
            .field("table", &self.table.identifier().to_string())
            .finish()
    }
}

impl IcebergSink {
    /// A sink appending to `table` (as loaded when the statement was planned), committing
    /// through `catalog`.
    ///
    /// Errors: the table's schema has no Arrow form.
    pub fn try_new(catalog: Arc<dyn Catalog>, table: Table) -> Result<Self> {
        Self::with_commit(Commit::Append(catalog), table)
    }

    /// A sink replacing the partitions of `table` (as planned) its rows fall in
    /// (`overwrite.rs`), committing through `catalog`.
    ///
    /// Errors: the table's schema has no Arrow form.
    pub fn overwriting(catalog: Arc<dyn CommitCatalog>, table: Table) -> Result<Self> {
        Self::with_commit(Commit::Overwrite(catalog), table)
    }

    fn with_commit(commit: Commit, table: Table) -> Result<Self> {
        let schema = iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema())
            .map_err(external)?;
        Ok(Self {
            commit,
            table,
            schema: not_null::accepting(&schema),
            table_schema: Arc::new(schema),
        })
    }
}

impl DisplayAs for IcebergSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.commit {
            Commit::Append(_) => write!(f, "IcebergSink: table={}", self.table.identifier()),
            Commit::Overwrite(_) => {
                write!(f, "IcebergOverwrite: table={}", self.table.identifier())
            }
        }
    }
}

#[async_trait]
impl DataSink for IcebergSink {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    async fn write_all(
        &self,
        data: SendableRecordBatchStream,
        _context: &Arc<TaskContext>,
    ) -> Result<u64> {
        let data = not_null::checked(
            data,
            &self.table_schema,
            &self.table.identifier().to_string(),
        );
        match &self.commit {
            Commit::Append(catalog) => append_rows(catalog.as_ref(), &self.table, data).await,
            Commit::Overwrite(catalog) => {
                overwrite_partitions(catalog.as_ref(), &self.table, data).await
            }
        }
    }
}

/// Writes `data` as data files of `table` and commits them in one fast append; returns the
/// rows written. Nothing is committed when no row was written.
///
/// Errors: see [`write_data_files`] and [`commit_append`].
pub async fn append_rows(
    catalog: &dyn Catalog,
    table: &Table,
    data: SendableRecordBatchStream,
) -> Result<u64> {
    let (files, rows) = write_data_files(table, data).await?;
    if rows > 0 {
        commit_append(catalog, table, files).await?;
    }
    Ok(rows)
}

/// Commits `files` to `table` in one fast append, retried on conflict (module docs).
///
/// Errors: the catalog refused the commit after its retries, or could not be reached.
pub async fn commit_append(
    catalog: &dyn Catalog,
    table: &Table,
    files: Vec<DataFile>,
) -> Result<Table> {
    let tx = Transaction::new(table);
    let tx = tx
        .fast_append()
        .add_data_files(files)
        .apply(tx)
        .map_err(external)?;
    tx.commit(catalog).await.map_err(external)
}
