//! Per-data-file metrics from the snapshot's manifests, and the scan statistics built from them.
//!
//! ```text
//!   manifest list ──► manifests (data) ──► DataFile { record_count, file_size, lower/upper bounds,
//!                                                     null_value_counts, nan_value_counts }
//!                                           keyed by data file path
//! ```
//!
//! `TableScan::plan_files` returns `FileScanTask`s without column metrics; the index lets the scan
//! report `partition_statistics` (rows, bytes, per-column null count / min / max) for exactly the
//! files it will read, so DataFusion's join selection sees small dimensions and plans `CollectLeft`
//! (`scan/UPSTREAM.md`, "Join selection needs statistics").

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, ScalarValue, Statistics};
use futures::future::try_join_all;
use iceberg::scan::FileScanTask;
use iceberg::spec::{DataContentType, DataFile, Datum};
use iceberg::table::Table;

use iceflight_iceberg::row_lineage;

use crate::model::layout::{ColumnLayout, judge};
use crate::model::literal::datum_to_scalar;
use crate::model::metadata_columns::FileLineage;
use crate::pushdown::prune::ColumnBounds;

/// Snapshots whose file index an [`IndexCache`] keeps.
pub const INDEX_CACHE_ENTRIES: u64 = 64;

/// [`FileMetricsIndex`]es by (table uuid, snapshot id), least recently used evicted beyond
/// [`INDEX_CACHE_ENTRIES`]. One per engine ([`crate::read::caches::ScanCaches`]).
#[derive(Debug, Clone)]
pub struct IndexCache {
    entries: moka::sync::Cache<(uuid::Uuid, i64), Arc<FileMetricsIndex>>,
}

impl Default for IndexCache {
    fn default() -> Self {
        Self {
            entries: moka::sync::Cache::new(INDEX_CACHE_ENTRIES),
        }
    }
}

impl IndexCache {
    /// [`FileMetricsIndex::load`], memoised per (table uuid, snapshot id): a snapshot's
    /// manifests never change, so each query after the first plans without re-reading them
    /// for statistics.
    pub async fn load(&self, table: &Table) -> iceberg::Result<Arc<FileMetricsIndex>> {
        let Some(snapshot) = table.metadata().current_snapshot() else {
            return Ok(Arc::new(FileMetricsIndex::default()));
        };
        let key = (table.metadata().uuid(), snapshot.snapshot_id());
        if let Some(hit) = self.entries.get(&key) {
            return Ok(hit);
        }
        let index = Arc::new(FileMetricsIndex::load(table).await?);
        self.entries.insert(key, Arc::clone(&index));
        Ok(index)
    }

    /// Drops every index; returns how many there were.
    pub fn clear(&self) -> u64 {
        let n = self.entries.entry_count();
        self.entries.invalidate_all();
        n
    }
}

/// The smallest and largest value of a column over a snapshot's files.
pub type ValueRange = (ScalarValue, ScalarValue);

/// Puffin blob type whose `ndv` property is a column's distinct count (Iceberg spec, "Puffin
/// file format": `apache-datasketches-theta-v1`, property `ndv`; Trino and Spark write it).
pub const NDV_BLOB_TYPE: &str = "apache-datasketches-theta-v1";

/// One live position delete file of a snapshot as its manifest entry describes it: which data
/// file it deletes from, and for a deletion vector where its blob lies in the Puffin file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PositionDeleteEntry {
    /// The one data file its rows point into (`None`: any, by each row's `file_path`).
    pub referenced_data_file: Option<String>,
    /// `(content_offset, content_size_in_bytes)` of a deletion vector's blob; `None` for a
    /// Parquet position delete file.
    pub blob: Option<(u64, u64)>,
}

/// Data files of one snapshot, by path, and where its position delete files apply.
#[derive(Debug, Default)]
pub struct FileMetricsIndex {
    files: HashMap<String, DataFile>,
    /// The partition spec id of each data file's manifest.
    spec_ids: HashMap<String, i32>,
    /// The row lineage each data file's rows inherit (`model/metadata_columns.rs`).
    lineage: HashMap<String, FileLineage>,
    /// Live position delete files (Parquet and deletion vectors) by path; a Puffin file holding
    /// the vectors of several data files has one entry per vector.
    position_deletes: HashMap<String, Vec<PositionDeleteEntry>>,
    /// Distinct counts by field id from the snapshot's Puffin statistics file, as its blob
    /// metadata states them (the sketch itself is not read).
    ndv: HashMap<i32, u64>,
    /// [`Self::layout`] per (field id, Arrow type), computed once per snapshot.
    layouts: std::sync::Mutex<HashMap<(i32, DataType), ColumnLayout>>,
    /// [`Self::column_range`] per (field id, Arrow type), computed once per snapshot.
    ranges: std::sync::Mutex<HashMap<(i32, DataType), Option<ValueRange>>>,
}

impl FileMetricsIndex {
    /// Reads the manifest list and every manifest of the table's current snapshot (one
    /// object-store read each, concurrently). Empty for a table without snapshot.
    pub async fn load(table: &Table) -> iceberg::Result<Self> {
        let Some(snapshot) = table.metadata().current_snapshot() else {
            return Ok(Self::default());
        };
        let list = table.manifest_list_reader(snapshot).load().await?;
        let manifests = try_join_all(
            list.entries()
                .iter()
                .map(|m| m.load_manifest(table.file_io())),
        )
        .await?;
        let mut files = HashMap::new();
        let mut spec_ids = HashMap::new();
        let mut lineage = HashMap::new();
        let mut position_deletes: HashMap<String, Vec<PositionDeleteEntry>> = HashMap::new();
        for (list_entry, manifest) in list.entries().iter().zip(manifests) {
            let spec_id = manifest.metadata().partition_spec().spec_id();
            let first_row_ids = row_lineage::first_row_ids(list_entry, &manifest);
            for (entry, first_row_id) in manifest.entries().iter().zip(first_row_ids) {
                if !entry.is_alive() {
                    continue;
                }
                let file = entry.data_file();
                match entry.content_type() {
                    DataContentType::Data => {
                        files.insert(file.file_path().to_string(), file.clone());
                        spec_ids.insert(file.file_path().to_string(), spec_id);
                        let file_lineage = FileLineage {
                            first_row_id,
                            sequence_number: entry.sequence_number(),
                        };
                        lineage.insert(file.file_path().to_string(), file_lineage);
                    }
                    DataContentType::PositionDeletes => {
                        let blob = match (file.content_offset(), file.content_size_in_bytes()) {
                            (Some(o), Some(n)) if o >= 0 && n >= 0 => Some((o as u64, n as u64)),
                            _ => None,
                        };
                        position_deletes
                            .entry(file.file_path().to_string())
                            .or_default()
                            .push(PositionDeleteEntry {
                                referenced_data_file: file.referenced_data_file(),
                                blob,
                            });
                    }
                    DataContentType::EqualityDeletes => {}
                }
            }
        }
        let ndv = table
            .metadata()
            .statistics_for_snapshot(snapshot.snapshot_id())
            .map(|f| {
                f.blob_metadata
                    .iter()
                    .filter(|b| b.r#type == NDV_BLOB_TYPE && b.fields.len() == 1)
                    .filter_map(|b| Some((b.fields[0], b.properties.get("ndv")?.parse().ok()?)))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self {
            files,
            spec_ids,
            lineage,
            position_deletes,
            ndv,
            layouts: Default::default(),
            ranges: Default::default(),
        })
    }

    /// The row lineage the rows of the live data file at `path` inherit: its first row id
    /// (own or inherited, `None` before v3) and data sequence number.
    pub fn lineage(&self, path: &str) -> FileLineage {
        self.lineage.get(path).copied().unwrap_or_default()
    }

    /// The partition spec id of the live data file at `path`.
    pub fn spec_id(&self, path: &str) -> Option<i32> {
        self.spec_ids.get(path).copied()
    }

    /// Whether the position delete file at `delete_path` may delete rows of `data_path`: it
    /// names no single data file, or names this one (table spec: a position delete file with
    /// `referenced_data_file` applies only to that file). An unknown delete file may.
    pub fn deletes_from(&self, delete_path: &str, data_path: &str) -> bool {
        match self.position_deletes.get(delete_path) {
            None => true,
            Some(entries) => entries.iter().any(|e| {
                e.referenced_data_file
                    .as_deref()
                    .is_none_or(|referenced| referenced == data_path)
            }),
        }
    }

    /// The blob `(content_offset, content_size_in_bytes)` of the deletion vector in the Puffin
    /// file `delete_path` that deletes rows of `data_path`, if the snapshot has one.
    pub fn deletion_vector(&self, delete_path: &str, data_path: &str) -> Option<(u64, u64)> {
        self.position_deletes
            .get(delete_path)?
            .iter()
            .find(|e| e.referenced_data_file.as_deref() == Some(data_path))?
            .blob
    }

    /// Rows of the live data files of the snapshot (their manifests' record counts).
    pub fn total_rows(&self) -> u64 {
        self.files.values().map(|f| f.record_count()).sum()
    }

    /// Bytes of the live data files of the snapshot.
    pub fn total_bytes(&self) -> u64 {
        self.files.values().map(|f| f.file_size_in_bytes()).sum()
    }

    /// The smallest lower and largest upper bound of field `id` over the live data files that
    /// have them, as scalars of `data_type`; `None` when no file has both. Memoised per
    /// (field id, type): every recorded scan asks it for each column it constrained.
    pub fn column_range(
        &self,
        id: i32,
        data_type: &DataType,
    ) -> Option<(ScalarValue, ScalarValue)> {
        let key = (id, data_type.clone());
        if let Some(hit) = self.ranges.lock().expect("range memo").get(&key) {
            return hit.clone();
        }
        let range = self.compute_range(id, data_type);
        let mut memo = self.ranges.lock().expect("range memo");
        memo.insert(key, range.clone());
        range
    }

    fn compute_range(&self, id: i32, data_type: &DataType) -> Option<(ScalarValue, ScalarValue)> {
        let mut range: Option<(ScalarValue, ScalarValue)> = None;
        for file in self.files.values() {
            let b = Self::bounds(file, id, data_type);
            let (Some(lo), Some(hi)) = (b.min, b.max) else {
                continue;
            };
            range = Some(match range {
                None => (lo, hi),
                Some((min, max)) => (
                    if lo < min { lo } else { min },
                    if hi > max { hi } else { max },
                ),
            });
        }
        range
    }

    /// Number of live data files in the snapshot.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether the snapshot has no live data file.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Paths of every indexed data file.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// Metrics of one data file, if indexed.
    pub fn get(&self, path: &str) -> Option<&DataFile> {
        self.files.get(path)
    }

    /// Manifest bounds of field `id` in `file`, as scalars of `data_type`.
    pub fn bounds(file: &DataFile, id: i32, data_type: &DataType) -> ColumnBounds {
        ColumnBounds {
            min: file
                .lower_bounds()
                .get(&id)
                .and_then(|d| datum_to_scalar(d, data_type)),
            max: file
                .upper_bounds()
                .get(&id)
                .and_then(|d| datum_to_scalar(d, data_type)),
            null_count: file.null_value_counts().get(&id).copied(),
        }
    }

    /// Layout of field `id` across every live data file of the snapshot (`layout.rs`), judged
    /// once per (field id, Arrow type) and then memoised with the index.
    pub fn layout(&self, id: i32, data_type: &DataType) -> ColumnLayout {
        let key = (id, data_type.clone());
        if let Some(hit) = self.layouts.lock().expect("layout memo").get(&key) {
            return *hit;
        }
        let intervals: Vec<_> = self
            .files
            .values()
            .map(|f| {
                let b = Self::bounds(f, id, data_type);
                b.min.zip(b.max)
            })
            .collect();
        let layout = judge(&intervals);
        self.layouts
            .lock()
            .expect("layout memo")
            .insert(key, layout);
        layout
    }

    /// Statistics for reading `tasks` with output `schema`, whose columns have the iceberg field
    /// ids `field_ids` (same order). All values are `Inexact`: deletes and the filters above the
    /// scan remove rows, and string bounds may be truncated.
    ///
    /// Byte sizes follow DataFusion's Parquet statistics (`ColumnStatistics::byte_size`: the
    /// Arrow size of the output): rows × width for fixed-width types; for the others the
    /// manifests' `column_sizes` (compressed Parquet bytes, where DataFusion takes the
    /// uncompressed ones from footers the planner has not read). `total_byte_size` is their sum
    /// over the projected columns, so a narrow projection of a wide table reports few bytes.
    /// No distinct counts: given to DataFusion 54, its join cardinality estimate put TPC-H q17's
    /// decorrelated aggregate on the build side, where no dynamic filter reaches its lineitem
    /// scan (601 127 instead of < 100 000 rows out at SF 0.1, `server/tests/native_reader.rs`);
    /// [`Self::table_statistics`] has them for our join order.
    pub fn statistics(
        &self,
        tasks: &[&FileScanTask],
        schema: &SchemaRef,
        field_ids: &[i32],
    ) -> Statistics {
        let files: Vec<Option<&DataFile>> =
            tasks.iter().map(|t| self.get(&t.data_file_path)).collect();
        let all_known = files.iter().all(Option::is_some);
        // Each task's share of its file: a byte range reads part of the file's rows and bytes.
        let shares: Vec<f64> = tasks
            .iter()
            .zip(&files)
            .map(|(t, f)| match f {
                Some(f) if t.record_count.is_none() => {
                    t.length as f64 / f.file_size_in_bytes().max(1) as f64
                }
                _ => 1.0,
            })
            .collect();
        let rows: u64 = tasks
            .iter()
            .zip(&files)
            .zip(&shares)
            .map(|((t, f), share)| {
                t.record_count
                    .or(f.map(|f| (f.record_count() as f64 * share) as u64))
                    .unwrap_or(0)
            })
            .sum();
        let bytes: u64 = tasks.iter().map(|t| t.length).sum();
        let mut stats = Statistics::new_unknown(schema);
        stats.num_rows = Precision::Inexact(rows as usize);
        stats.total_byte_size = Precision::Inexact(bytes as usize);
        if !all_known {
            return stats;
        }
        let files: Vec<&DataFile> = files.into_iter().flatten().collect();
        self.fill_columns(&mut stats, &files, &shares, rows, schema, field_ids, false);
        stats
    }

    /// `stats` (the [`Self::statistics`] of `tasks`, every task of one scan) made exact where
    /// the manifests hold the exact answer, so that DataFusion's `AggregateStatistics` rule
    /// answers `count(*)`, `count(col)`, `min` and `max` without opening a data file:
    ///
    /// - rows: exact when no task has a delete file (each data file counted once, its pieces
    ///   together being the whole file); nothing else is made exact otherwise;
    /// - a column's null count: exact when every file has one for it (Iceberg's null counts
    ///   exclude NaN, as `count(col)` counts NaN);
    /// - a column's min and max: exact for integer, date and timestamp columns when every file
    ///   either has both bounds or holds only NULLs in it (bounds of those types are never
    ///   truncated; strings' may be, floats' leave NaN out: case c02); NULL when every file
    ///   holds only NULLs there.
    ///
    /// The caller guarantees the scan returns every row of its files: no static predicate, or
    /// one every file's identity partition values prove (`exec/proven_filter_rule.rs`), and no
    /// limit. Columns of `schema` are top-level (a nested leaf's null count would not count
    /// NULL parents: case c01).
    pub fn exact_statistics(
        &self,
        mut stats: Statistics,
        tasks: &[&FileScanTask],
        schema: &SchemaRef,
        field_ids: &[i32],
    ) -> Statistics {
        if tasks.iter().any(|t| !t.deletes.is_empty()) {
            return stats;
        }
        let mut paths: Vec<&str> = tasks.iter().map(|t| t.data_file_path.as_str()).collect();
        paths.sort_unstable();
        paths.dedup();
        let Some(files) = paths
            .iter()
            .map(|p| self.get(p))
            .collect::<Option<Vec<&DataFile>>>()
        else {
            return stats;
        };
        let rows: u64 = files.iter().map(|f| f.record_count()).sum();
        stats.num_rows = Precision::Exact(rows as usize);
        for ((field, id), cs) in schema
            .fields()
            .iter()
            .zip(field_ids)
            .zip(stats.column_statistics.iter_mut())
        {
            let nulls: Option<u64> = files
                .iter()
                .map(|f| f.null_value_counts().get(id).copied())
                .sum();
            if let Some(nulls) = nulls {
                cs.null_count = Precision::Exact(nulls as usize);
            }
            let exact_type = matches!(
                field.data_type(),
                DataType::Int8
                    | DataType::Int16
                    | DataType::Int32
                    | DataType::Int64
                    | DataType::Date32
                    | DataType::Timestamp(_, _)
            );
            if exact_type && let Some((min, max)) = exact_range(&files, *id, field.data_type()) {
                cs.min_value = Precision::Exact(min);
                cs.max_value = Precision::Exact(max);
            }
        }
        stats
    }

    /// Statistics of the whole snapshot (every live data file) with output `schema` and field
    /// ids `field_ids`, as [`Self::statistics`] computes them, plus distinct counts: a Puffin
    /// `ndv` where the snapshot carries one ([`NDV_BLOB_TYPE`]), else for integer and date
    /// columns the width of the bounds' range, both capped at the rows. What the join order
    /// sees before any filter (`IcebergTableProvider::statistics`, `join_order.rs`).
    pub fn table_statistics(&self, schema: &SchemaRef, field_ids: &[i32]) -> Statistics {
        let files: Vec<&DataFile> = self.files.values().collect();
        let rows: u64 = files.iter().map(|f| f.record_count()).sum();
        let mut stats = Statistics::new_unknown(schema);
        stats.num_rows = Precision::Inexact(rows as usize);
        let bytes: u64 = files.iter().map(|f| f.file_size_in_bytes()).sum();
        stats.total_byte_size = Precision::Inexact(bytes as usize);
        self.fill_columns(
            &mut stats,
            &files,
            &vec![1.0; files.len()],
            rows,
            schema,
            field_ids,
            true,
        );
        stats
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "the two callers differ in every argument; a struct would only name them twice"
    )]
    fn fill_columns(
        &self,
        stats: &mut Statistics,
        files: &[&DataFile],
        shares: &[f64],
        rows: u64,
        schema: &SchemaRef,
        field_ids: &[i32],
        distinct: bool,
    ) {
        for (i, (field, id)) in schema.fields().iter().zip(field_ids).enumerate() {
            let mut cs = column_statistics(files, *id, field.data_type());
            cs.byte_size = byte_size(files, shares, *id, field.data_type(), rows);
            if distinct {
                cs.distinct_count = self.distinct_count(&cs, *id, rows);
            }
            stats.column_statistics[i] = cs;
        }
        let sizes: Option<usize> = stats
            .column_statistics
            .iter()
            .map(|c| c.byte_size.get_value().copied())
            .sum();
        if let Some(total) = sizes {
            stats.total_byte_size = Precision::Inexact(total);
        }
    }

    /// A column's distinct count (see [`Self::statistics`]); `Absent` where neither rule applies.
    fn distinct_count(&self, cs: &ColumnStatistics, id: i32, rows: u64) -> Precision<usize> {
        if let Some(&ndv) = self.ndv.get(&id) {
            return Precision::Inexact(ndv.min(rows) as usize);
        }
        let (Precision::Inexact(min), Precision::Inexact(max)) = (&cs.min_value, &cs.max_value)
        else {
            return Precision::Absent;
        };
        let as_i128 = |v: &ScalarValue| -> Option<i128> {
            Some(match v {
                ScalarValue::Int32(Some(x)) | ScalarValue::Date32(Some(x)) => i128::from(*x),
                ScalarValue::Int64(Some(x)) => i128::from(*x),
                _ => return None,
            })
        };
        match (as_i128(min), as_i128(max)) {
            (Some(lo), Some(hi)) if hi >= lo => {
                Precision::Inexact((hi - lo + 1).min(i128::from(rows)) as usize)
            }
            _ => Precision::Absent,
        }
    }
}

/// Output bytes of field `id` over `files` (each read for its share of rows and bytes).
fn byte_size(
    files: &[&DataFile],
    shares: &[f64],
    id: i32,
    data_type: &DataType,
    rows: u64,
) -> Precision<usize> {
    if let Some(width) = data_type.primitive_width() {
        return Precision::Inexact(width * rows as usize);
    }
    let mut total = 0.0;
    for (f, share) in files.iter().zip(shares) {
        match f.column_sizes().get(&id) {
            Some(&size) => total += size as f64 * share,
            None => return Precision::Absent,
        }
    }
    Precision::Inexact(total as usize)
}

fn column_statistics(files: &[&DataFile], id: i32, data_type: &DataType) -> ColumnStatistics {
    let mut cs = ColumnStatistics::new_unknown();
    if files.is_empty() {
        cs.null_count = Precision::Exact(0);
        return cs;
    }
    if let Some(nulls) = files
        .iter()
        .map(|f| f.null_value_counts().get(&id).copied())
        .sum::<Option<u64>>()
    {
        cs.null_count = Precision::Inexact(nulls as usize);
    }
    let bound = |pick: fn(&DataFile) -> &HashMap<i32, Datum>, min: bool| -> Option<ScalarValue> {
        let mut acc: Option<ScalarValue> = None;
        for f in files {
            let v = datum_to_scalar(pick(f).get(&id)?, data_type)?;
            acc = Some(match acc {
                None => v,
                Some(a) => {
                    let keep_a = match a.partial_cmp(&v)? {
                        std::cmp::Ordering::Less => min,
                        std::cmp::Ordering::Greater => !min,
                        std::cmp::Ordering::Equal => true,
                    };
                    if keep_a { a } else { v }
                }
            });
        }
        acc
    };
    // NaN is absent from float bounds (case c02): a max that ignores NaN is no upper bound under
    // DataFusion's ordering, so float columns report no bounds.
    if !matches!(data_type, DataType::Float32 | DataType::Float64) {
        if let Some(v) = bound(DataFile::lower_bounds, true) {
            cs.min_value = Precision::Inexact(v);
        }
        if let Some(v) = bound(DataFile::upper_bounds, false) {
            cs.max_value = Precision::Inexact(v);
        }
    }
    cs
}
/// The exact range of field `id` (Arrow type `data_type`, one whose bounds are never
/// truncated) over `files`: the least lower and greatest upper bound of the files holding a
/// value there, NULL for both when none does; `None` when a file with values lacks a bound or
/// a count says nothing.
fn exact_range(
    files: &[&DataFile],
    id: i32,
    data_type: &DataType,
) -> Option<(ScalarValue, ScalarValue)> {
    let mut range: Option<(ScalarValue, ScalarValue)> = None;
    for f in files {
        if f.null_value_counts().get(&id) == Some(&f.record_count()) {
            continue;
        }
        let b = FileMetricsIndex::bounds(f, id, data_type);
        let (lo, hi) = (b.min?, b.max?);
        range = Some(match range {
            None => (lo, hi),
            Some((min, max)) => (
                if lo < min { lo } else { min },
                if hi > max { hi } else { max },
            ),
        });
    }
    match range {
        Some(r) => Some(r),
        None if files.is_empty() => None,
        None => {
            let null = ScalarValue::try_from(data_type).ok()?;
            Some((null.clone(), null))
        }
    }
}
