//! Appends to an Iceberg table: `INSERT INTO … VALUES | SELECT` and `CREATE TABLE … AS SELECT`.
//!
//! ```text
//!   rows (DataSinkExec, one partition) ──► conform to the table's Arrow schema (field ids)
//!     ──► unpartitioned: DataFileWriter            ─┐ iceberg's writers: Parquet (ZSTD, page
//!     ──► partitioned:   RecordBatchPartitionSplitter │ statistics), files rolled at the table's
//!                        ──► FanoutWriter per key    ─┘ `write.target-file-size-bytes`
//!     ──► data files ──► one fast append (Transaction::commit) ──► rows written
//!   (the rows are pulled up to 4 batches ahead on a task of their own, so producing them
//!   overlaps encoding them)
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

use crate::model::iceberg_error::external;
use arrow::array::RecordBatch;
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::common::{DataFusionError, Result, exec_datafusion_err, exec_err};
use datafusion::datasource::sink::DataSink;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchReceiverStream;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType};
use futures::StreamExt;
use iceberg::Catalog;
use iceberg::arrow::RecordBatchPartitionSplitter;
use iceberg::spec::{DataFile, DataFileFormat, TableProperties};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::partitioning::PartitioningWriter;
use iceberg::writer::partitioning::fanout_writer::FanoutWriter;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

/// DataFusion's sink for appends to one Iceberg table (module docs).
pub struct IcebergSink {
    catalog: Arc<dyn Catalog>,
    table: Table,
    /// The table's Arrow schema, with field ids (what the writers take).
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
        let schema = iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema())
            .map_err(external)?;
        Ok(Self {
            catalog,
            table,
            schema: Arc::new(schema),
        })
    }
}

impl DisplayAs for IcebergSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IcebergSink: table={}", self.table.identifier())
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
        append_rows(self.catalog.as_ref(), &self.table, data).await
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

/// Writes `data` as Parquet data files of `table` (unpartitioned, or split by its default
/// partition spec), its columns in the table's order; returns the files and the rows written.
///
/// Errors: a batch that does not fit the table's schema (a NULL in a required column, a type
/// that does not cast), or a failed write.
pub async fn write_data_files(
    table: &Table,
    data: SendableRecordBatchStream,
) -> Result<(Vec<DataFile>, u64)> {
    let metadata = table.metadata();
    let schema = &Arc::new(
        iceberg::arrow::schema_to_arrow_schema(metadata.current_schema()).map_err(external)?,
    );
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(1).map_err(ext_parquet)?,
        ))
        .set_statistics_enabled(EnabledStatistics::Page)
        .build();
    let target_file_size = metadata
        .properties()
        .get(TableProperties::PROPERTY_WRITE_TARGET_FILE_SIZE_BYTES)
        .and_then(|v| v.parse().ok())
        .unwrap_or(TableProperties::PROPERTY_WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT);
    let builder = DataFileWriterBuilder::new(RollingFileWriterBuilder::new(
        ParquetWriterBuilder::new(props, Arc::clone(metadata.current_schema())),
        target_file_size,
        table.file_io().clone(),
        DefaultLocationGenerator::new(metadata).map_err(external)?,
        DefaultFileNameGenerator::new(
            uuid::Uuid::new_v4().to_string(),
            None,
            DataFileFormat::Parquet,
        ),
    ));
    let spec = metadata.default_partition_spec();
    let mut rows = 0u64;
    let mut data = prefetched(data);
    let files = if spec.is_unpartitioned() {
        let mut writer = builder.build(None).await.map_err(external)?;
        while let Some(batch) = data.next().await {
            let batch = conform(schema, batch?)?;
            rows += batch.num_rows() as u64;
            writer.write(batch).await.map_err(external)?;
        }
        writer.close().await.map_err(external)?
    } else {
        let splitter = RecordBatchPartitionSplitter::try_new_with_computed_values(
            Arc::clone(metadata.current_schema()),
            Arc::clone(spec),
        )
        .map_err(external)?;
        let mut writer = FanoutWriter::new(builder);
        while let Some(batch) = data.next().await {
            let batch = conform(schema, batch?)?;
            rows += batch.num_rows() as u64;
            for (key, part) in splitter.split(&batch).map_err(external)? {
                writer.write(key, part).await.map_err(external)?;
            }
        }
        writer.close().await.map_err(external)?
    };
    Ok((files, rows))
}

/// `data` pulled on a task of its own, up to 4 batches ahead: the next batches are produced
/// (a query run, Arrow IPC decoded from a client's upload) while this one is encoded and
/// compressed. The task ends when the returned stream is dropped.
fn prefetched(data: SendableRecordBatchStream) -> SendableRecordBatchStream {
    let mut builder = RecordBatchReceiverStream::builder(data.schema(), 4);
    let tx = builder.tx();
    builder.spawn(async move {
        let mut data = data;
        while let Some(batch) = data.next().await {
            if tx.send(batch).await.is_err() {
                break;
            }
        }
        Ok(())
    });
    builder.build()
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

/// `batch` under the table's schema: same columns in order, each cast where its type differs
/// (DataFusion's string views to strings), field ids attached.
///
/// Errors: a column count that differs, a cast that fails, or a NULL in a required column.
fn conform(schema: &SchemaRef, batch: RecordBatch) -> Result<RecordBatch> {
    if batch.num_columns() != schema.fields().len() {
        return exec_err!(
            "{} column(s) written to a table of {}",
            batch.num_columns(),
            schema.fields().len()
        );
    }
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| {
            if column.data_type() == field.data_type() {
                Ok(Arc::clone(column))
            } else {
                // A value that does not fit fails the statement (Arrow's default cast would
                // write NULL instead).
                let options = CastOptions {
                    safe: false,
                    ..Default::default()
                };
                cast_with_options(column, field.data_type(), &options)
                    .map_err(|e| exec_datafusion_err!("column {}: {e}", field.name()))
            }
        })
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new(Arc::clone(schema), columns)
        .map_err(|e| exec_datafusion_err!("rows do not fit the table's columns: {e}"))
}

fn ext_parquet(e: parquet::errors::ParquetError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
