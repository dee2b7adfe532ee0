//! What positional and equality delete files share: opening one (read whole, through the table's
//! `FileIO`: delete files are small and read once per scan) and finding a column by field id.

use crate::model::iceberg_error::external;
use arrow::datatypes::Schema;
use bytes::Bytes;
use datafusion::common::{Result, exec_datafusion_err};
use iceberg::io::FileIO;
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// A reader over the whole delete file at `path`.
///
/// Errors: the file cannot be read or is not Parquet.
pub async fn open(file_io: &FileIO, path: &str) -> Result<ParquetRecordBatchReaderBuilder<Bytes>> {
    let bytes = file_io
        .new_input(path)
        .map_err(external)?
        .read()
        .await
        .map_err(external)?;
    Ok(ParquetRecordBatchReaderBuilder::try_new(bytes)?)
}

/// The index of the column of `schema` (a delete file's) with field id `id`.
///
/// Errors: no such column (`kind` and `path` name the file in the message).
pub fn column(schema: &Schema, id: i32, kind: &str, path: &str) -> Result<usize> {
    schema
        .fields()
        .iter()
        .position(|f| f.metadata().get(PARQUET_FIELD_ID_META_KEY) == Some(&id.to_string()))
        .ok_or_else(|| {
            exec_datafusion_err!("{kind} delete file {path} has no column with field id {id}")
        })
}
