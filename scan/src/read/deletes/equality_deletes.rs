//! Equality deletes, applied with **null-safe** equality (case c07).
//!
//! ```text
//!   FileScanTask.deletes ──► equality delete files ──► DeleteKeys (row-format keys, by path, cached)
//!   data batch ──► key columns ──► row format ──► keep rows whose key is in no delete file
//! ```
//!
//! iceberg 0.10.1's reader turns each delete row into `NOT (status = 'INACTIVE')`, which is NULL
//! for a NULL `status` and so drops rows the delete never matched. Here keys are compared in
//! Arrow's row format, where NULL equals NULL and differs from every value — the Iceberg spec's
//! equality-delete semantics. Positional deletes are a row selection (`positional_deletes.rs`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch};
use arrow::compute::{cast, concat, filter_record_batch};
use arrow::datatypes::DataType;
use arrow::row::{RowConverter, SortField};
use datafusion::common::Result;
use iceberg::io::FileIO;
use tokio::sync::Mutex;

use crate::read::deletes::delete_files;

/// The keys of one equality-delete file, in Arrow row format over the data columns' types.
#[derive(Debug)]
pub struct DeleteKeys {
    /// The key columns' types, in the order of the equality field ids the file was loaded
    /// with.
    types: Vec<DataType>,
    /// Row-format converter over `types`, built once and shared by every batch.
    converter: RowConverter,
    keys: HashSet<Vec<u8>>,
}

impl DeleteKeys {
    /// Reads an equality-delete Parquet file and keeps the columns `field_ids` (found by the
    /// `PARQUET:field_id` metadata), cast to `types` (the data columns' Arrow types, same order).
    ///
    /// Errors: unreadable file, or a key column missing from the delete file.
    pub async fn load(
        file_io: &FileIO,
        path: &str,
        field_ids: &[i32],
        types: &[DataType],
    ) -> Result<Self> {
        let builder = delete_files::open(file_io, path).await?;
        let schema = Arc::clone(builder.schema());
        let positions = field_ids
            .iter()
            .map(|id| delete_files::column(&schema, *id, "equality", path))
            .collect::<Result<Vec<_>>>()?;
        let batches = builder
            .build()?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let converter = converter(types)?;
        let mut keys = HashSet::new();
        if !batches.is_empty() {
            let columns = positions
                .iter()
                .zip(types)
                .map(|(&p, ty)| {
                    let parts: Vec<&dyn arrow::array::Array> =
                        batches.iter().map(|b| b.column(p).as_ref()).collect();
                    Ok(cast(&concat(&parts)?, ty)?)
                })
                .collect::<Result<Vec<ArrayRef>>>()?;
            let rows = converter.convert_columns(&columns)?;
            keys.extend(rows.iter().map(|r| r.as_ref().to_vec()));
        }
        Ok(Self {
            types: types.to_vec(),
            converter,
            keys,
        })
    }

    /// Marks rows to keep: `false` where the key formed by `columns` (in the order of the
    /// equality field ids the file was loaded with) equals a delete key, NULLs matching NULLs.
    pub fn keep_mask(&self, columns: &[ArrayRef], num_rows: usize) -> Result<BooleanArray> {
        if self.keys.is_empty() {
            return Ok(BooleanArray::from(vec![true; num_rows]));
        }
        let columns = columns
            .iter()
            .zip(&self.types)
            .map(|(c, ty)| {
                Ok(if c.data_type() == ty {
                    Arc::clone(c)
                } else {
                    cast(c, ty)?
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let rows = self.converter.convert_columns(&columns)?;
        Ok(rows
            .iter()
            .map(|r| Some(!self.keys.contains(r.as_ref())))
            .collect())
    }
}

fn converter(types: &[DataType]) -> Result<RowConverter> {
    Ok(RowConverter::new(
        types.iter().map(|t| SortField::new(t.clone())).collect(),
    )?)
}

/// Equality-delete keys shared by every task of one scan, loaded once per delete file.
#[derive(Debug, Default)]
pub struct DeleteKeysCache {
    loaded: Mutex<HashMap<String, Arc<DeleteKeys>>>,
}

impl DeleteKeysCache {
    /// Returns the keys of `path`, loading them on first use. The lock is held while loading so
    /// that concurrent tasks never read the same delete file twice.
    pub async fn get(
        &self,
        file_io: &FileIO,
        path: &str,
        field_ids: &[i32],
        types: &[DataType],
    ) -> Result<Arc<DeleteKeys>> {
        let mut loaded = self.loaded.lock().await;
        if let Some(keys) = loaded.get(path) {
            return Ok(Arc::clone(keys));
        }
        let keys = Arc::new(DeleteKeys::load(file_io, path, field_ids, types).await?);
        loaded.insert(path.to_string(), Arc::clone(&keys));
        Ok(keys)
    }
}

/// Applies every delete file to `batch`: `deletes[i].1[j]` is the column of `batch` holding the
/// `j`-th equality field of delete file `i`.
pub fn apply(batch: RecordBatch, deletes: &[(Arc<DeleteKeys>, Vec<usize>)]) -> Result<RecordBatch> {
    let mut batch = batch;
    for (keys, positions) in deletes {
        if batch.num_rows() == 0 {
            break;
        }
        let columns: Vec<ArrayRef> = positions
            .iter()
            .map(|&p| Arc::clone(batch.column(p)))
            .collect();
        let mask = keys.keep_mask(&columns, batch.num_rows())?;
        if mask.true_count() < batch.num_rows() {
            batch = filter_record_batch(&batch, &mask)?;
        }
    }
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int32Array, StringArray};

    use super::*;

    fn keys(values: Vec<Option<&str>>) -> DeleteKeys {
        let types = vec![DataType::Utf8];
        let col: ArrayRef = Arc::new(StringArray::from(values));
        let converter = converter(&types).unwrap();
        let rows = converter.convert_columns(&[col]).unwrap();
        DeleteKeys {
            types,
            keys: rows.iter().map(|r| r.as_ref().to_vec()).collect(),
            converter,
        }
    }

    fn batch() -> RecordBatch {
        RecordBatch::try_from_iter([
            ("id", Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef),
            (
                "status",
                Arc::new(StringArray::from(vec![
                    Some("ACTIVE"),
                    None,
                    Some("INACTIVE"),
                ])) as ArrayRef,
            ),
        ])
        .unwrap()
    }

    fn ids(b: &RecordBatch) -> Vec<i32> {
        b.column(0)
            .as_any()
            .downcast_ref::<Int32Array>()
            .unwrap()
            .values()
            .to_vec()
    }

    #[test]
    fn value_delete_keeps_null_rows() {
        let out = apply(
            batch(),
            &[(Arc::new(keys(vec![Some("INACTIVE")])), vec![1])],
        )
        .unwrap();
        assert_eq!(ids(&out), vec![1, 2]);
    }

    #[test]
    fn null_delete_removes_only_null_rows() {
        let out = apply(batch(), &[(Arc::new(keys(vec![None])), vec![1])]).unwrap();
        assert_eq!(ids(&out), vec![1, 3]);
    }
}
