//! Row-group selection from the Parquet footer against a task's domains, handed to iceberg's
//! reader as byte-range tasks (iceberg 0.10.1 has no row-group list on `FileScanTask`).
//!
//! ```text
//!   footer ──► row groups of the task (iceberg's midpoint rule on 4 + Σ compressed_size)
//!          ──► per constrained column: row-group min / max / null count (StatisticsConverter,
//!              leaf found by field id) ──► prune.rs against the domains
//!          ──► contiguous runs of kept row groups ──► one FileScanTask [start, end) per run
//! ```
//!
//! A run's byte range starts at its first row group's computed offset and ends after its last, so
//! iceberg's reader (`filter_row_groups_by_byte_range`: a row group belongs to the task holding its
//! midpoint) reads exactly the run's row groups.

use std::sync::Arc;

use arrow::compute::cast;
use arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use iceberg::scan::FileScanTask;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::{PARQUET_FIELD_ID_META_KEY, parquet_to_arrow_schema};
use parquet::file::metadata::ParquetMetaData;

use crate::domain::Domains;
use crate::layout::{ColumnLayout, judge};
use crate::prune::{ColumnBounds, FileBounds, may_match};

/// The row groups of one task and which of them may hold a passing row.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// Row groups (indices in the file) inside the task's byte range.
    pub candidates: Vec<usize>,
    /// The subset of `candidates` that may hold a passing row.
    pub kept: Vec<usize>,
    /// Layout of each output column across the file's row groups (`Unknown` where not computed).
    pub layouts: Vec<ColumnLayout>,
}

impl Selection {
    /// Candidates ruled out.
    pub fn pruned(&self) -> usize {
        self.candidates.len() - self.kept.len()
    }
}

/// `(start, size)` in bytes of every row group, computed as iceberg's reader does.
fn offsets(metadata: &ParquetMetaData) -> Vec<(u64, u64)> {
    let mut at = 4u64;
    metadata
        .row_groups()
        .iter()
        .map(|rg| {
            let size = rg.compressed_size() as u64;
            let out = (at, size);
            at += size;
            out
        })
        .collect()
}

/// Selects the row groups of `task` that may hold a row passing `domains`. `schema` is the scan's
/// output schema and `field_ids` its columns' iceberg field ids; columns the domains do not
/// constrain are not read from the footer.
pub fn select(
    metadata: &ParquetMetaData,
    task: &FileScanTask,
    domains: &Domains,
    schema: &SchemaRef,
    field_ids: &[i32],
) -> Selection {
    let end = task.start + task.length;
    let candidates: Vec<usize> = offsets(metadata)
        .iter()
        .enumerate()
        .filter(|(_, (at, size))| {
            let mid = at + size / 2;
            task.start <= mid && mid < end
        })
        .map(|(i, _)| i)
        .collect();
    let mut layouts = vec![ColumnLayout::Unknown; schema.fields().len()];
    let Some(columns) = &domains.columns else {
        return Selection {
            candidates,
            kept: vec![],
            layouts,
        };
    };
    // Bounds per candidate row group, per output column (default = unknown).
    let mut bounds: Vec<FileBounds> =
        vec![vec![ColumnBounds::default(); schema.fields().len()]; candidates.len()];
    let file_schema = parquet_to_arrow_schema(
        metadata.file_metadata().schema_descr(),
        metadata.file_metadata().key_value_metadata(),
    )
    .ok();
    for &index in columns.keys() {
        let (Some(field), Some(id), Some(file_schema)) = (
            schema.fields().get(index),
            field_ids.get(index),
            &file_schema,
        ) else {
            continue;
        };
        let Some(column) =
            column_bounds(metadata, file_schema, *id, field.data_type(), &candidates)
        else {
            continue;
        };
        layouts[index] = judge(
            &column
                .iter()
                .map(|b| b.min.clone().zip(b.max.clone()))
                .collect::<Vec<_>>(),
        );
        for (rg, b) in column.into_iter().enumerate() {
            bounds[rg][index] = b;
        }
    }
    let kept = candidates
        .iter()
        .zip(&bounds)
        .filter(|(_, b)| may_match(domains, b))
        .map(|(i, _)| *i)
        .collect();
    Selection {
        candidates,
        kept,
        layouts,
    }
}

/// Row-group bounds of the top-level column with field id `id`, cast to `data_type`; `None`
/// when the file has no such column or its statistics do not convert.
fn column_bounds(
    metadata: &ParquetMetaData,
    file_schema: &Schema,
    id: i32,
    data_type: &DataType,
    row_groups: &[usize],
) -> Option<Vec<ColumnBounds>> {
    let name = file_schema.fields().iter().find_map(|f| {
        let fid: i32 = f.metadata().get(PARQUET_FIELD_ID_META_KEY)?.parse().ok()?;
        (fid == id).then(|| f.name().clone())
    })?;
    let converter =
        StatisticsConverter::try_new(&name, file_schema, metadata.file_metadata().schema_descr())
            .ok()?
            .with_missing_null_counts_as_zero(false);
    let groups = row_groups.iter().map(|i| metadata.row_group(*i));
    let mins = converter.row_group_mins(groups.clone()).ok()?;
    let maxes = converter.row_group_maxes(groups.clone()).ok()?;
    let nulls = converter.row_group_null_counts(groups).ok()?;
    let mins = cast(&mins, data_type).ok()?;
    let maxes = cast(&maxes, data_type).ok()?;
    let scalar = |a: &Arc<dyn arrow::array::Array>, i: usize| {
        ScalarValue::try_from_array(a, i)
            .ok()
            .filter(|v| !v.is_null())
    };
    Some(
        (0..row_groups.len())
            .map(|i| ColumnBounds {
                min: scalar(&mins, i),
                max: scalar(&maxes, i),
                null_count: (!arrow::array::Array::is_null(&nulls, i)).then(|| nulls.value(i)),
            })
            .collect(),
    )
}

/// Splits `task` into one byte-range task per contiguous run of `kept` row groups (sorted
/// indices into the file's row groups).
pub fn split(task: &FileScanTask, metadata: &ParquetMetaData, kept: &[usize]) -> Vec<FileScanTask> {
    let offsets = offsets(metadata);
    let mut runs: Vec<(usize, usize)> = vec![];
    for &i in kept {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == i => *last = i,
            _ => runs.push((i, i)),
        }
    }
    runs.into_iter()
        .map(|(a, b)| {
            let start = offsets[a].0;
            let end = offsets[b].0 + offsets[b].1;
            let mut piece = task.clone();
            piece.start = start;
            piece.length = end - start;
            piece.record_count = None;
            piece
        })
        .collect()
}
