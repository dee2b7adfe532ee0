//! Positional deletes for the native reader: each delete file read once per scan and shared by
//! its tasks, the positions of one data file turned into a `RowSelection` per row group.
//!
//! ```text
//!   Parquet delete file (file_path: string id 2147483546, pos: long id 2147483545)
//!     ──► read once (PositionalDeletes) ──► positions by data file path, sorted
//!   deletion vector (Puffin blob at the manifest entry's offset, for one data file)
//!     ──► read once ──► its positions (iceflight_iceberg::deletion_vector)
//!   data file's row group rg = rows [first, first + n)
//!     ──► skip the deleted positions inside it ──► RowSelection (None: nothing deleted)
//! ```
//!
//! The field ids are the Iceberg spec's reserved ids for positional delete files ("Position
//! Delete Files", `scan/README.md`). Row groups and pages still prune: the selection of a row
//! group is intersected with its page selection.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int64Type};
use datafusion::common::Result;
use iceberg::io::FileIO;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use tokio::sync::Mutex;

use crate::model::iceberg_error::external;
use crate::plan::metrics_index::FileMetricsIndex;
use crate::read::deletes::delete_files;

/// Field id of `file_path` in a positional delete file.
pub const FILE_PATH_ID: i32 = 2147483546;
/// Field id of `pos` in a positional delete file.
pub const POS_ID: i32 = 2147483545;

/// Deleted positions by data file path, of one delete file.
type ByDataFile = HashMap<String, Vec<u64>>;

/// Deletion vectors read, by (Puffin path, data file path): sorted positions.
type Vectors = HashMap<(String, String), Arc<Vec<u64>>>;

/// Positional delete files of one scan, each loaded on first use.
#[derive(Debug, Default)]
pub struct PositionalDeletes {
    /// The scanned snapshot's delete manifests: where each deletion vector lies.
    index: Arc<FileMetricsIndex>,
    loaded: Mutex<HashMap<String, Arc<ByDataFile>>>,
    /// Deletion vectors by (Puffin path, data file path), sorted positions.
    vectors: Mutex<Vectors>,
}

impl PositionalDeletes {
    /// Position deletes of a scan of the snapshot whose manifests `index` holds.
    pub fn new(index: Arc<FileMetricsIndex>) -> Self {
        Self {
            index,
            ..Self::default()
        }
    }

    /// The sorted, distinct positions that `delete_files` (Parquet position delete files and
    /// Puffin files of deletion vectors) delete in `data_path`. The lock is held while a file
    /// loads, so concurrent tasks never read one delete file twice.
    ///
    /// Errors: a delete file that cannot be read, a Parquet one without the `file_path` / `pos`
    /// columns, a Puffin file the manifests name no deletion vector of `data_path` in, or a
    /// damaged vector.
    pub async fn positions(
        &self,
        file_io: &FileIO,
        delete_files: &[&str],
        data_path: &str,
    ) -> Result<Vec<u64>> {
        let mut out = vec![];
        for path in delete_files {
            if let Some((offset, length)) = self.index.deletion_vector(path, data_path) {
                let key = (path.to_string(), data_path.to_string());
                let mut vectors = self.vectors.lock().await;
                let positions = match vectors.get(&key) {
                    Some(p) => Arc::clone(p),
                    None => {
                        let vector =
                            iceflight_iceberg::deletion_vector::read(file_io, path, offset, length)
                                .await
                                .map_err(external)?;
                        let p = Arc::new(vector.iter().collect::<Vec<u64>>());
                        vectors.insert(key, Arc::clone(&p));
                        p
                    }
                };
                out.extend_from_slice(&positions);
                continue;
            }
            if is_puffin(path) {
                return datafusion::common::exec_err!(
                    "the manifests name no deletion vector of {data_path} in {path}"
                );
            }
            let by_file = {
                let mut loaded = self.loaded.lock().await;
                match loaded.get(*path) {
                    Some(f) => Arc::clone(f),
                    None => {
                        let f = Arc::new(load(file_io, path).await?);
                        loaded.insert(path.to_string(), Arc::clone(&f));
                        f
                    }
                }
            };
            if let Some(p) = by_file.get(data_path) {
                out.extend_from_slice(p);
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }
}

/// Whether `path` names a Puffin file (a deletion vector's), by its extension.
pub fn is_puffin(path: &str) -> bool {
    path.to_ascii_lowercase().ends_with(".puffin")
}

/// Reads one positional delete file (Parquet) into positions by data file path.
async fn load(file_io: &FileIO, path: &str) -> Result<ByDataFile> {
    let builder = delete_files::open(file_io, path).await?;
    let column = |id| delete_files::column(builder.schema(), id, "positional", path);
    let (file_col, pos_col) = (column(FILE_PATH_ID)?, column(POS_ID)?);
    let mut out = ByDataFile::new();
    for batch in builder.build()? {
        let batch = batch?;
        let files = cast(batch.column(file_col), &DataType::Utf8)?;
        let files = files.as_string::<i32>();
        let pos = cast(batch.column(pos_col), &DataType::Int64)?;
        let pos = pos.as_primitive::<Int64Type>();
        for i in 0..batch.num_rows() {
            if files.is_null(i) || pos.is_null(i) || pos.value(i) < 0 {
                continue;
            }
            out.entry(files.value(i).to_string())
                .or_default()
                .push(pos.value(i) as u64);
        }
    }
    for v in out.values_mut() {
        v.sort_unstable();
    }
    Ok(out)
}

/// The rows of a row group holding file rows `[first, first + rows)` that `positions` (sorted,
/// distinct) leave (`None` when none of them is deleted), and how many are deleted.
pub fn selection(positions: &[u64], first: u64, rows: usize) -> (Option<RowSelection>, usize) {
    let end = first + rows as u64;
    let from = positions.partition_point(|p| *p < first);
    let to = positions.partition_point(|p| *p < end);
    if from == to {
        return (None, 0);
    }
    let mut selectors = vec![];
    let mut at = first;
    for &p in &positions[from..to] {
        if p > at {
            selectors.push(RowSelector::select((p - at) as usize));
        }
        selectors.push(RowSelector::skip(1));
        at = p + 1;
    }
    if at < end {
        selectors.push(RowSelector::select((end - at) as usize));
    }
    (Some(RowSelection::from(selectors)), to - from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_inside_the_row_group_are_skipped() {
        // Row group of file rows [10, 20); rows 3 and 25 lie outside it.
        let (s, deleted) = selection(&[3, 10, 11, 15, 19, 25], 10, 10);
        assert_eq!(deleted, 4);
        let s = s.unwrap();
        let v: Vec<RowSelector> = s.into();
        assert_eq!(
            v,
            vec![
                RowSelector::skip(2),
                RowSelector::select(3),
                RowSelector::skip(1),
                RowSelector::select(3),
                RowSelector::skip(1),
            ]
        );
        assert_eq!(selection(&[3, 25], 10, 10), (None, 0));
    }
}
