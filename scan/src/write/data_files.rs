//! Writing rows as data files of an Iceberg table, without committing them: what appends
//! (`sink.rs`), `INSERT OVERWRITE` (`overwrite.rs`), copy-on-write rewrites (`delete.rs`) and
//! row changes (`row_change.rs`) share.
//!
//! ```text
//!   rows ──► conform to the table's Arrow schema (field ids)
//!     ──► unpartitioned: DataFileWriter            ─┐ iceberg's writers: Parquet (ZSTD, page
//!     ──► partitioned:   RecordBatchPartitionSplitter │ statistics), files rolled at the table's
//!                        ──► FanoutWriter per key    ─┘ `write.target-file-size-bytes`
//!   (the rows are pulled up to 4 batches ahead on a task of their own, so producing them
//!   overlaps encoding them)
//! ```

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::SchemaRef;
use datafusion::common::{DataFusionError, Result, exec_datafusion_err, exec_err};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchReceiverStream;
use futures::StreamExt;
use iceberg::arrow::RecordBatchPartitionSplitter;
use iceberg::spec::{DataFile, DataFileFormat, TableProperties};
use iceberg::table::Table;
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

use crate::model::iceberg_error::external;

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
