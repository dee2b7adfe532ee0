//! Row-group selection from the Parquet footer against a task's domains, handed to iceberg's
//! reader as byte-range tasks (iceberg 0.10.1 has no row-group list on `FileScanTask`).
//!
//! ```text
//!   footer ──► row groups of the task, at 4 + Σ compressed_size:
//!                native reader: the rows its byte range covers (covered; a cut row group in part)
//!                iceberg's reader: those whose midpoint it holds (candidates)
//!          ──► per constrained column: row-group min / max / null count, found by field id
//!              (top-level: StatisticsConverter; nested struct leaf: the SchemaDescriptor leaf
//!              and its column chunk statistics, null count unused) ──► prune.rs
//!          ──► contiguous runs of kept row groups ──► one FileScanTask [start, end) per run
//! ```
//!
//! A run's byte range starts at its first row group's computed offset and ends after its last, so
//! iceberg's reader (`filter_row_groups_by_byte_range`: a row group belongs to the task holding its
//! midpoint) reads exactly the run's row groups.

use std::ops::Range;
use std::sync::Arc;

use arrow::compute::cast;
use arrow::datatypes::{DataType, Schema, TimeUnit};
use datafusion::common::ScalarValue;
use iceberg::scan::FileScanTask;
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::basic::{LogicalType, TimeUnit as ParquetTimeUnit};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::statistics::{Statistics, ValueStatistics};
use parquet::schema::types::ColumnDescriptor;

use crate::model::layout::{ColumnLayout, judge};
use crate::pushdown::domain::Domains;
use crate::pushdown::gate::GateColumn;
use crate::pushdown::prune::{ColumnBounds, FileBounds, may_match};

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

/// The row groups (indices in the file) whose midpoint lies in `[start, start + length)` of
/// `task`: iceberg's reader's rule, which reads such a row group whole. Used where iceberg's
/// reader reads the task ([`FileAccessPlan::byte_ranges`](crate::read::access_plan)); the native
/// reader reads [`covered`] rows instead, which equal these row groups whole when the task
/// starts and ends on row-group boundaries.
pub fn candidates(metadata: &ParquetMetaData, task: &FileScanTask) -> Vec<usize> {
    let end = task.start + task.length;
    offsets(metadata)
        .iter()
        .enumerate()
        .filter(|(_, (at, size))| {
            let mid = at + size / 2;
            task.start <= mid && mid < end
        })
        .map(|(i, _)| i)
        .collect()
}

/// The rows of one row group that a task reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowGroupRows {
    /// Index of the row group in the file.
    pub index: usize,
    /// The rows read, as positions inside the row group.
    pub rows: Range<usize>,
    /// Rows in the row group.
    pub total: usize,
}

impl RowGroupRows {
    /// Whether the task reads every row of the row group.
    pub fn whole(&self) -> bool {
        self.rows.start == 0 && self.rows.end == self.total
    }
}

/// The rows `task`'s byte range covers, per row group (file order; none empty). Of a row group
/// at `[at, at + size)` (computed as iceberg's reader computes it) holding `n` rows, a range
/// `[start, end)` reads rows `[row(start), row(end))`, where
/// `row(c) = ⌊n · (clamp(c, at, at + size) − at) / size⌋`.
///
/// - A range of whole row groups (starting and ending on row-group starts or the file's ends)
///   reads exactly those row groups whole, as [`candidates`] would.
/// - Ranges that cut a row group (`plan/planned.rs` cuts a file's bytes evenly over the
///   partitions) read each of its rows exactly once: neighbours share their cut, and `row` is
///   monotone in it.
pub fn covered(metadata: &ParquetMetaData, task: &FileScanTask) -> Vec<RowGroupRows> {
    let end = task.start + task.length;
    offsets(metadata)
        .iter()
        .zip(metadata.row_groups())
        .enumerate()
        .filter_map(|(index, ((at, size), rg))| {
            let total = usize::try_from(rg.num_rows()).unwrap_or(0);
            let row = |c: u64| -> usize {
                if *size == 0 {
                    return if c > *at { total } else { 0 };
                }
                let into = c.clamp(*at, at + size) - at;
                (total as u128 * into as u128 / *size as u128) as usize
            };
            let rows = row(task.start)..row(end);
            (!rows.is_empty()).then_some(RowGroupRows { index, rows, total })
        })
        .collect()
}

/// The subset of `candidates` (row-group indices) that may hold a row passing `domains`, and
/// each column's layout across them (`Unknown` where the domains do not constrain it).
/// `file_schema` is the file's Arrow schema (fields carrying `PARQUET:field_id`), needed for
/// top-level columns; `None` prunes on nested leaves only.
pub fn keep(
    metadata: &ParquetMetaData,
    file_schema: Option<&Schema>,
    candidates: &[usize],
    domains: &Domains,
    columns: &[GateColumn],
) -> (Vec<usize>, Vec<ColumnLayout>) {
    let mut layouts = vec![ColumnLayout::Unknown; columns.len()];
    let Some(constrained) = &domains.columns else {
        return (vec![], layouts);
    };
    if constrained.is_empty() {
        return (candidates.to_vec(), layouts);
    }
    // Bounds per candidate row group, per column (default = unknown).
    let mut bounds: Vec<FileBounds> =
        vec![vec![ColumnBounds::default(); columns.len()]; candidates.len()];
    for &index in constrained.keys() {
        let Some(col) = columns.get(index).map(|c| &c.column) else {
            continue;
        };
        let column = if col.nested {
            leaf_bounds(metadata, col.field_id, &col.arrow_type, candidates)
        } else {
            file_schema.and_then(|file_schema| {
                column_bounds(
                    metadata,
                    file_schema,
                    col.field_id,
                    &col.arrow_type,
                    candidates,
                )
            })
        };
        let Some(column) = column else {
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
    (kept, layouts)
}

/// The name of the top-level column with field id `id` in `file_schema` (the file's Arrow
/// schema, whose fields carry `PARQUET:field_id`).
pub fn column_name(file_schema: &Schema, id: i32) -> Option<String> {
    file_schema.fields().iter().find_map(|f| {
        let fid: i32 = f.metadata().get(PARQUET_FIELD_ID_META_KEY)?.parse().ok()?;
        (fid == id).then(|| f.name().clone())
    })
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
    let name = column_name(file_schema, id)?;
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

/// Row-group bounds of the nested struct leaf with field id `id` (parquet's
/// `StatisticsConverter` only finds root columns, `scan/UPSTREAM.md`, "DataFusion's Parquet path does not prune on struct fields"), found in the file's
/// `SchemaDescriptor` by field id and only outside repeated groups. The null count is never
/// reported: a leaf's count need not include rows whose parent struct is NULL (case c01), so
/// `IS NULL` on a leaf never prunes. `None` when the file has no such leaf (added by schema
/// evolution: read as NULL, so nothing may be ruled out).
fn leaf_bounds(
    metadata: &ParquetMetaData,
    id: i32,
    data_type: &DataType,
    row_groups: &[usize],
) -> Option<Vec<ColumnBounds>> {
    let descr = metadata.file_metadata().schema_descr();
    let leaf = descr.columns().iter().position(|c| {
        let info = c.self_type().get_basic_info();
        info.has_id() && info.id() == id && c.max_rep_level() == 0
    })?;
    let column = descr.column(leaf);
    if !comparable(&column, data_type) {
        return None;
    }
    Some(
        row_groups
            .iter()
            .map(|&rg| {
                let stats = metadata
                    .row_group(rg)
                    .column(leaf)
                    .statistics()
                    .filter(|s| !s.is_min_max_deprecated());
                let (min, max) = stats
                    .map(|s| {
                        (
                            stat_scalar(s, true, data_type),
                            stat_scalar(s, false, data_type),
                        )
                    })
                    .unwrap_or_default();
                ColumnBounds {
                    min,
                    max,
                    null_count: None,
                }
            })
            .collect(),
    )
}

/// Whether the leaf's Parquet statistics order values as `data_type` does: not for unsigned
/// integers (stored in signed physical types) and, for 64-bit integers read as timestamps, only
/// when the file's unit is microseconds.
fn comparable(column: &ColumnDescriptor, data_type: &DataType) -> bool {
    let logical = column.logical_type_ref();
    if let Some(LogicalType::Integer {
        is_signed: false, ..
    }) = logical
    {
        return false;
    }
    match data_type {
        DataType::Timestamp(unit, _) => {
            *unit == TimeUnit::Microsecond
                && matches!(
                    logical,
                    Some(LogicalType::Timestamp {
                        unit: ParquetTimeUnit::MICROS,
                        ..
                    })
                )
        }
        _ => true,
    }
}

/// The min (`lower`) or max of a leaf's Parquet statistics as a value of `data_type`, for the
/// types iceberg writes (int, long, date, timestamp µs, float, double, decimal, string, boolean);
/// `None` for anything else, which then prunes nothing.
fn stat_scalar(stats: &Statistics, lower: bool, data_type: &DataType) -> Option<ScalarValue> {
    fn pick<T>(s: &ValueStatistics<T>, lower: bool) -> Option<&T> {
        if lower { s.min_opt() } else { s.max_opt() }
    }
    let decimal = |v: i128, p: u8, sc: i8| ScalarValue::Decimal128(Some(v), p, sc);
    Some(match (stats, data_type) {
        (Statistics::Boolean(s), DataType::Boolean) => ScalarValue::Boolean(Some(*pick(s, lower)?)),
        (Statistics::Int32(s), DataType::Int32) => ScalarValue::Int32(Some(*pick(s, lower)?)),
        (Statistics::Int32(s), DataType::Date32) => ScalarValue::Date32(Some(*pick(s, lower)?)),
        (Statistics::Int64(s), DataType::Int64) => ScalarValue::Int64(Some(*pick(s, lower)?)),
        (Statistics::Int64(s), DataType::Timestamp(TimeUnit::Microsecond, tz)) => {
            ScalarValue::TimestampMicrosecond(Some(*pick(s, lower)?), tz.clone())
        }
        (Statistics::Float(s), DataType::Float32) => ScalarValue::Float32(Some(*pick(s, lower)?)),
        (Statistics::Double(s), DataType::Float64) => ScalarValue::Float64(Some(*pick(s, lower)?)),
        (Statistics::Int32(s), DataType::Decimal128(p, sc)) => {
            decimal(i128::from(*pick(s, lower)?), *p, *sc)
        }
        (Statistics::Int64(s), DataType::Decimal128(p, sc)) => {
            decimal(i128::from(*pick(s, lower)?), *p, *sc)
        }
        (Statistics::FixedLenByteArray(s), DataType::Decimal128(p, sc)) => {
            decimal(be_i128(pick(s, lower)?.data())?, *p, *sc)
        }
        (Statistics::ByteArray(s), DataType::Decimal128(p, sc)) => {
            decimal(be_i128(pick(s, lower)?.data())?, *p, *sc)
        }
        (Statistics::ByteArray(s), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => {
            let v = pick(s, lower)?.as_utf8().ok()?.to_string();
            match data_type {
                DataType::Utf8 => ScalarValue::Utf8(Some(v)),
                DataType::LargeUtf8 => ScalarValue::LargeUtf8(Some(v)),
                _ => ScalarValue::Utf8View(Some(v)),
            }
        }
        _ => return None,
    })
}

/// A big-endian two's-complement integer of at most 16 bytes (Parquet's decimal encoding).
fn be_i128(bytes: &[u8]) -> Option<i128> {
    if bytes.is_empty() || bytes.len() > 16 {
        return None;
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut buf = [fill; 16];
    buf[16 - bytes.len()..].copy_from_slice(bytes);
    Some(i128::from_be_bytes(buf))
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

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use iceberg::spec::{DataFileFormat, Schema as IcebergSchema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    use super::*;

    /// A Parquet file of `rows` rows in row groups of at most `per_group` rows, and its footer.
    pub(crate) fn file(rows: i64, per_group: usize) -> (u64, Arc<ParquetMetaData>) {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(per_group))
            .build();
        let mut out = vec![];
        let mut writer = ArrowWriter::try_new(&mut out, Arc::clone(&schema), Some(props)).unwrap();
        // Values that do not compress to nothing, so bytes grow with rows.
        let values = Int64Array::from_iter_values((0..rows).map(|i| i.wrapping_mul(2654435761)));
        writer
            .write(&RecordBatch::try_new(schema, vec![Arc::new(values)]).unwrap())
            .unwrap();
        writer.close().unwrap();
        let size = out.len() as u64;
        let reader = SerializedFileReader::new(bytes::Bytes::from(out)).unwrap();
        (size, Arc::new(reader.metadata().clone()))
    }

    /// A task over bytes `[start, end)` of a Parquet file of `size` bytes.
    pub(crate) fn task(size: u64, start: u64, end: u64) -> FileScanTask {
        FileScanTask {
            file_size_in_bytes: size,
            start,
            length: end - start,
            record_count: None,
            data_file_path: "f.parquet".into(),
            data_file_format: DataFileFormat::Parquet,
            schema: Arc::new(IcebergSchema::builder().build().unwrap()),
            project_field_ids: vec![],
            predicate: None,
            deletes: vec![],
            partition: None,
            partition_spec: None,
            name_mapping: None,
            case_sensitive: true,
        }
    }

    /// Every row of the file, read by the tasks between `cuts`: how often each is read.
    fn reads(size: u64, metadata: &ParquetMetaData, cuts: &[u64]) -> Vec<usize> {
        let firsts: Vec<usize> = metadata
            .row_groups()
            .iter()
            .scan(0, |at, rg| {
                let first = *at;
                *at += rg.num_rows() as usize;
                Some(first)
            })
            .collect();
        let total = metadata.file_metadata().num_rows() as usize;
        let mut seen = vec![0; total];
        let bounds: Vec<u64> = std::iter::once(0)
            .chain(cuts.iter().copied())
            .chain(std::iter::once(size))
            .collect();
        for w in bounds.windows(2) {
            for part in covered(metadata, &task(size, w[0], w[1])) {
                for row in part.rows {
                    seen[firsts[part.index] + row] += 1;
                }
            }
        }
        seen
    }

    #[test]
    fn tasks_between_any_cuts_read_every_row_once() {
        let (size, metadata) = file(250_000, 100_000);
        assert_eq!(metadata.num_row_groups(), 3);
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..200 {
            let mut cuts: Vec<u64> = (0..round % 5)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state % size
                })
                .collect();
            cuts.sort_unstable();
            cuts.dedup();
            cuts.retain(|&c| c > 0);
            let seen = reads(size, &metadata, &cuts);
            assert!(seen.iter().all(|&n| n == 1), "cuts {cuts:?}");
        }
    }

    #[test]
    fn tasks_of_whole_row_groups_read_what_the_midpoint_rule_reads() {
        let (size, metadata) = file(250_000, 100_000);
        let starts: Vec<u64> = offsets(&metadata).iter().map(|(at, _)| *at).collect();
        for (start, end) in [
            (0, size),
            (0, starts[1]),
            (starts[1], size),
            (starts[1], starts[2]),
        ] {
            let task = task(size, start, end);
            let parts = covered(&metadata, &task);
            assert!(parts.iter().all(RowGroupRows::whole), "[{start}, {end})");
            let indices: Vec<usize> = parts.iter().map(|p| p.index).collect();
            assert_eq!(indices, candidates(&metadata, &task), "[{start}, {end})");
        }
    }

    #[test]
    fn a_cut_row_group_is_shared_in_proportion_to_bytes() {
        let (size, metadata) = file(250_000, 100_000);
        let (at, len) = offsets(&metadata)[1];
        let first = covered(&metadata, &task(size, 0, at + len / 2));
        let second = covered(&metadata, &task(size, at + len / 2, size));
        // Half of the bytes, rounded down: half of the rows, one fewer for an odd size.
        let half = (100_000 * (len / 2) / len) as usize;
        assert!((49_999..=50_000).contains(&half), "{half}");
        assert_eq!(first.len(), 2);
        assert_eq!(second.len(), 2);
        assert!(first[0].whole() && second[1].whole());
        assert_eq!(first[1].rows, 0..half);
        assert_eq!(second[0].rows, half..100_000);
        assert!(!first[1].whole() && !second[0].whole());
    }
}
