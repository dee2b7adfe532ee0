//! The planned scan: what a scan is planned from ([`ScanInputs`]), its tasks spread over the
//! output partitions ([`split_by_row_groups`], [`spread_by_size`]) and [`assemble`]d with
//! statistics, bounds and layouts into a [`PlannedScan`].

use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::Statistics;
use iceberg::expr::Predicate;
use iceberg::scan::FileScanTask;
use iceberg::table::Table;
use iceflight_options::ScanSettings;

use crate::model::columns::ScanColumns;
use crate::model::layout::ColumnLayout;
use crate::plan::metrics_index::FileMetricsIndex;
use crate::pushdown::gate::GateColumn;
use crate::pushdown::prune::BoundsByFile;

/// Everything decided while planning a scan: the input of `IcebergScanExec::new`
/// (`exec/scan_exec.rs`), built by [`assemble`].
#[derive(Debug)]
pub struct PlannedScan {
    /// The table, at the snapshot that was planned.
    pub table: Table,
    /// The configured catalog the table was loaded from.
    pub catalog: Option<String>,
    /// Manifest metrics of the planned snapshot.
    pub index: Arc<FileMetricsIndex>,
    /// Output schema.
    pub schema: SchemaRef,
    /// Iceberg field id per output column.
    pub field_ids: Vec<i32>,
    /// `(field id, Arrow type)` of every top-level column of the current schema.
    pub field_types: Vec<(i32, DataType)>,
    /// Tasks per output partition (at least one group, possibly empty).
    pub file_groups: Vec<Vec<FileScanTask>>,
    /// Static predicate handed to `plan_files`.
    pub predicate: Option<Predicate>,
    /// Live data files in the snapshot.
    pub snapshot_files: usize,
    /// Row limit per partition.
    pub limit: Option<usize>,
    /// Rows per output batch.
    pub batch_size: usize,
    /// Statistics per partition (same length as `file_groups`).
    pub statistics: Vec<Statistics>,
    /// Statistics of the whole scan.
    pub total_statistics: Statistics,
    /// Manifest bounds of the output columns, by data file path.
    pub file_bounds: BoundsByFile,
    /// The `iceflight.scan.*` settings.
    pub settings: ScanSettings,
    /// The columns filters can constrain (`columns.rs`).
    pub columns: ScanColumns,
    /// Per column of `columns`: names, types and layout for the gate.
    pub gate_columns: Vec<GateColumn>,
}

/// What a scan is planned from beside its tasks: the table at the planned snapshot, the output
/// columns and the settings. [`assemble`] adds the tasks' statistics, bounds and layouts.
#[derive(Debug, Clone)]
pub struct ScanInputs {
    /// The table, at the snapshot that was planned.
    pub table: Table,
    /// The configured catalog the table was loaded from (`None`: it cannot be distributed).
    pub catalog: Option<String>,
    /// Output schema (a projection of the table's current schema).
    pub schema: SchemaRef,
    /// Iceberg field id per output column.
    pub field_ids: Vec<i32>,
    /// `(field id, Arrow type)` of every top-level column of the current schema.
    pub field_types: Vec<(i32, DataType)>,
    /// Static predicate handed to `plan_files`.
    pub predicate: Option<Predicate>,
    /// Row limit per partition.
    pub limit: Option<usize>,
    /// Rows per output batch.
    pub batch_size: usize,
    /// The `iceflight.scan.*` settings the scan runs with.
    pub settings: ScanSettings,
}

/// Builds a [`PlannedScan`] from `inputs` and its tasks grouped by output partition: per-group
/// statistics, manifest bounds of the constrainable columns per data file, and the columns'
/// layouts over the whole table (all from `index`, the manifest metrics of the planned
/// snapshot). Used by `IcebergTableProvider::scan`, by a scan re-split for distributed tasks
/// and by a scan decoded on a worker, so all three prune alike.
pub fn assemble(
    inputs: ScanInputs,
    index: Arc<FileMetricsIndex>,
    file_groups: Vec<Vec<FileScanTask>>,
) -> PlannedScan {
    let ScanInputs {
        table,
        catalog,
        schema,
        field_ids,
        field_types,
        predicate,
        limit,
        batch_size,
        settings,
    } = inputs;
    let statistics: Vec<Statistics> = file_groups
        .iter()
        .map(|g| index.statistics(&g.iter().collect::<Vec<_>>(), &schema, &field_ids))
        .collect();
    let all: Vec<&FileScanTask> = file_groups.iter().flatten().collect();
    let total_statistics = index.statistics(&all, &schema, &field_ids);
    // A scan that returns every row of its files: what the manifests know exactly is exact.
    let total_statistics = match predicate.is_none() && limit.is_none() {
        true => index.exact_statistics(total_statistics, &all, &schema, &field_ids),
        false => total_statistics,
    };
    let file_groups = if file_groups.is_empty() {
        vec![vec![]]
    } else {
        file_groups
    };
    let statistics = if statistics.is_empty() {
        vec![total_statistics.clone()]
    } else {
        statistics
    };
    let current_schema = Arc::clone(table.metadata().current_schema());
    let columns = ScanColumns::new(&schema, &current_schema);
    let file_bounds: BoundsByFile = file_groups
        .iter()
        .flatten()
        .filter_map(|t| {
            let file = index.get(&t.data_file_path)?;
            let bounds = columns
                .columns()
                .iter()
                .map(|c| {
                    let mut b = FileMetricsIndex::bounds(file, c.field_id, &c.arrow_type);
                    if c.nested {
                        // A leaf's null count need not count NULL parents (case c01).
                        b.null_count = None;
                    }
                    b
                })
                .collect();
            Some((t.data_file_path.clone(), bounds))
        })
        .collect();
    // Layout of the whole table (every live data file), not just the planned ones: a
    // filter that planned one file says nothing about how the column is laid out.
    let layouts: Vec<ColumnLayout> = columns
        .columns()
        .iter()
        .map(|c| index.layout(c.field_id, &c.arrow_type))
        .collect();
    let gate_columns = GateColumn::for_scan(&columns, &layouts);
    PlannedScan {
        file_bounds,
        settings,
        gate_columns,
        columns,
        snapshot_files: index.len(),
        index,
        table,
        catalog,
        schema,
        field_ids,
        field_types,
        file_groups,
        predicate,
        limit,
        batch_size,
        statistics,
        total_statistics,
    }
}

/// Splits tasks into byte ranges at row-group boundaries (the manifest's `split_offsets`) when
/// there are fewer tasks than `partitions`, so that one large file is read by several
/// partitions. A task gets pieces in proportion to its share of the bytes, at most one per row
/// group it covers. A task may already be a range of whole row groups (a scan re-split for
/// distributed tasks splits its pieces further). iceberg's reader keeps the row groups whose
/// midpoint lies in `[start, start+length)`, so ranges that start and end on row-group starts
/// cover each row group exactly once.
pub fn split_by_row_groups(
    tasks: Vec<FileScanTask>,
    index: &FileMetricsIndex,
    partitions: usize,
) -> Vec<FileScanTask> {
    if tasks.is_empty() || tasks.len() >= partitions {
        return tasks;
    }
    let total: u64 = tasks.iter().map(|t| t.length.max(1)).sum();
    let mut out = Vec::with_capacity(partitions);
    for task in tasks {
        let offsets: Vec<u64> = index
            .get(&task.data_file_path)
            .and_then(|f| f.split_offsets())
            .map(|o| o.iter().map(|&x| x as u64).collect())
            .unwrap_or_default();
        // Only for the standard layout (row groups back to back after the 4-byte magic), where
        // the reader's computed row-group positions equal the manifest's split offsets.
        let standard = offsets.first() == Some(&4) && offsets.windows(2).all(|w| w[0] < w[1]);
        let end = task.start + task.length;
        // The task must be a run of whole row groups: it starts at the file's start or a
        // row-group start and ends at the file's end or a row-group start.
        let aligned = (task.start == 0 || offsets.contains(&task.start))
            && (end == task.file_size_in_bytes || offsets.contains(&end));
        // The row groups the task covers, by their starts.
        let starts: Vec<u64> = offsets
            .iter()
            .copied()
            .filter(|&o| o >= task.start && o < end)
            .collect();
        let share = (partitions as u64 * task.length.max(1)).div_ceil(total) as usize;
        let pieces = share.min(starts.len());
        if !standard || !aligned || pieces < 2 {
            out.push(task);
            continue;
        }
        // Row groups [a, b) per piece, as evenly as the row-group count allows.
        for i in 0..pieces {
            let a = i * starts.len() / pieces;
            let b = (i + 1) * starts.len() / pieces;
            let start = if a == 0 { task.start } else { starts[a] };
            let stop = if b == starts.len() { end } else { starts[b] };
            let mut piece = task.clone();
            piece.start = start;
            piece.length = stop - start;
            piece.record_count = None;
            out.push(piece);
        }
    }
    out
}

/// Spreads tasks over at most `partitions` groups, largest first onto the lightest group, so that
/// a table of several files is never read by a single partition. Empty input → no group.
pub fn spread_by_size(mut tasks: Vec<FileScanTask>, partitions: usize) -> Vec<Vec<FileScanTask>> {
    let n = partitions.min(tasks.len());
    if n == 0 {
        return vec![];
    }
    tasks.sort_by(|a, b| {
        b.length
            .cmp(&a.length)
            .then_with(|| a.data_file_path.cmp(&b.data_file_path))
    });
    let mut groups: Vec<(u64, Vec<FileScanTask>)> = (0..n).map(|_| (0, Vec::new())).collect();
    for task in tasks {
        let (size, group) = groups
            .iter_mut()
            .min_by_key(|(size, _)| *size)
            .expect("n > 0 groups");
        *size += task.length.max(1);
        group.push(task);
    }
    groups.into_iter().map(|(_, g)| g).collect()
}
