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

/// Smallest piece, in bytes, that cutting a row group may leave (`iceflight.scan.cut_row_groups`):
/// below it a piece ends on the nearest row-group start instead. A piece this small decodes in
/// about a millisecond, less than opening it again costs in a second partition.
pub const MIN_CUT_PIECE_BYTES: u64 = 1 << 20;

/// Splits tasks into byte ranges when there are fewer tasks than `partitions`, so that one large
/// file is read by several partitions. A task gets pieces in proportion to its share of the
/// bytes (rounded up), cut where its bytes divide evenly:
///
/// - A cut within a sixteenth of a piece of a row-group start (the manifest's `split_offsets`,
///   for the standard layout of row groups back to back after the 4-byte magic) moves to it;
///   so does one that would leave a piece under [`MIN_CUT_PIECE_BYTES`].
/// - Otherwise, with `cut_row_groups`, the cut stays inside its row group: each piece reads
///   the row group's rows in proportion to its bytes (`pushdown/row_groups.rs`, `covered`).
///   Without it a task is split only at row-group starts, into at most one piece per row group,
///   and only when it is a run of whole row groups.
///
/// iceberg's reader keeps the row groups whose midpoint lies in `[start, start+length)`, so a
/// file it reads (a fallback) has each row group read once, whole, by the piece holding its
/// midpoint.
pub fn split_by_row_groups(
    tasks: Vec<FileScanTask>,
    index: &FileMetricsIndex,
    partitions: usize,
    cut_row_groups: bool,
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
        let offsets = if standard { offsets } else { vec![] };
        let share = (partitions as u64 * task.length.max(1)).div_ceil(total) as usize;
        let cuts = match cut_row_groups {
            true => even_cuts(&task, &offsets, share),
            false => row_group_cuts(&task, &offsets, share),
        };
        let end = task.start + task.length;
        let bounds: Vec<u64> = std::iter::once(task.start)
            .chain(cuts)
            .chain(std::iter::once(end))
            .collect();
        if bounds.len() == 2 {
            out.push(task);
            continue;
        }
        for w in bounds.windows(2) {
            let mut piece = task.clone();
            piece.start = w[0];
            piece.length = w[1] - w[0];
            piece.record_count = None;
            out.push(piece);
        }
    }
    out
}

/// Where to cut `task` into `pieces` of equal bytes (increasing, strictly inside it), each cut
/// moved to the nearest of the row-group starts `offsets` when within a sixteenth of a piece (the
/// pieces then differ by at most an eighth), or
/// when the piece would be under [`MIN_CUT_PIECE_BYTES`] (no cut then without a start nearby).
fn even_cuts(task: &FileScanTask, offsets: &[u64], pieces: usize) -> Vec<u64> {
    let end = task.start + task.length;
    // Row-group starts inside the task; the first row group's start leaves no row before it.
    let inner: Vec<u64> = offsets
        .iter()
        .skip(1)
        .copied()
        .filter(|&o| o > task.start && o < end)
        .collect();
    let piece = task.length / pieces.max(1) as u64;
    let mut cuts: Vec<u64> = Vec::with_capacity(pieces);
    for i in 1..pieces as u64 {
        let ideal = task.start + (task.length as u128 * i as u128 / pieces as u128) as u64;
        let nearest = inner.iter().copied().min_by_key(|&o| o.abs_diff(ideal));
        let cut = match nearest {
            Some(o) if o.abs_diff(ideal) <= piece / 16 || piece < MIN_CUT_PIECE_BYTES => Some(o),
            _ if piece >= MIN_CUT_PIECE_BYTES => Some(ideal),
            _ => None,
        };
        if let Some(cut) = cut
            && cut > cuts.last().copied().unwrap_or(task.start)
            && cut < end
        {
            cuts.push(cut);
        }
    }
    cuts
}

/// Row-group starts (of `offsets`) that divide `task`, a run of whole row groups, into at most
/// `pieces` runs of as equal a row-group count as the count allows; none when the task is not
/// such a run.
fn row_group_cuts(task: &FileScanTask, offsets: &[u64], pieces: usize) -> Vec<u64> {
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
    let pieces = pieces.min(starts.len());
    if !aligned || pieces < 2 {
        return vec![];
    }
    (1..pieces)
        .map(|i| starts[i * starts.len() / pieces])
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pushdown::row_groups::tests::task;

    const MIB: u64 = 1 << 20;

    #[test]
    fn one_file_of_three_row_groups_is_cut_in_half_inside_the_middle_one() {
        // Row groups at 4, 4+30 MiB, 4+60 MiB; the file ends at 90 MiB.
        let offsets = [4, 4 + 30 * MIB, 4 + 60 * MIB];
        let file = task(90 * MIB, 0, 90 * MIB);
        assert_eq!(even_cuts(&file, &offsets, 2), vec![45 * MIB]);
        // Row-group starts only: one piece of one row group, one of two.
        assert_eq!(row_group_cuts(&file, &offsets, 2), vec![4 + 30 * MIB]);
        // iceberg's writer's shape: 1 Mi, 1 Mi and 0.4 Mi rows; the second row group starts
        // at 42 % of the bytes, 8 % from half way: still cut inside it.
        let offsets = [4, 4 + 42 * MIB, 4 + 84 * MIB];
        let file = task(100 * MIB, 0, 100 * MIB);
        assert_eq!(even_cuts(&file, &offsets, 2), vec![50 * MIB]);
    }

    #[test]
    fn cuts_near_a_row_group_start_move_to_it() {
        // Twenty row groups of 5 MiB: half way is a row-group start.
        let offsets: Vec<u64> = (0..20).map(|i| 4 + i * 5 * MIB).collect();
        let file = task(100 * MIB, 0, 100 * MIB);
        assert_eq!(even_cuts(&file, &offsets, 2), vec![4 + 50 * MIB]);
        // Thirds fall 1.7 MiB from a start, within a sixteenth of a 33 MiB piece.
        assert_eq!(
            even_cuts(&file, &offsets, 3),
            vec![4 + 35 * MIB, 4 + 65 * MIB]
        );
        // Ten row groups of 10 MiB: thirds fall 3.3 MiB from a start, and stay.
        let offsets: Vec<u64> = (0..10).map(|i| 4 + i * 10 * MIB).collect();
        assert_eq!(
            even_cuts(&file, &offsets, 3),
            vec![100 * MIB / 3, 200 * MIB / 3]
        );
    }

    #[test]
    fn small_pieces_end_on_row_group_starts_or_stay_whole() {
        // Two row groups in 1.5 MiB: a half would be under the smallest cut piece.
        let offsets = [4, 4 + MIB];
        let file = task(3 * MIB / 2, 0, 3 * MIB / 2);
        assert_eq!(even_cuts(&file, &offsets, 2), vec![4 + MIB]);
        // One row group: no start to move to, no cut.
        assert_eq!(even_cuts(&file, &[4], 2), Vec::<u64>::new());
        // Unknown layout (no split offsets): cut only pieces of at least the smallest size.
        let big = task(8 * MIB, 0, 8 * MIB);
        assert_eq!(even_cuts(&big, &[], 2), vec![4 * MIB]);
        assert_eq!(row_group_cuts(&big, &[], 2), Vec::<u64>::new());
    }

    #[test]
    fn a_piece_already_cut_is_cut_again_evenly() {
        // A distributed re-split of a piece that starts inside a row group.
        let offsets = [4, 4 + 30 * MIB, 4 + 60 * MIB];
        let piece = task(90 * MIB, 45 * MIB, 90 * MIB);
        assert_eq!(even_cuts(&piece, &offsets, 3), vec![60 * MIB + 4, 75 * MIB]);
        // Not a run of whole row groups: no cut at row-group starts only.
        assert_eq!(row_group_cuts(&piece, &offsets, 3), Vec::<u64>::new());
    }
}
