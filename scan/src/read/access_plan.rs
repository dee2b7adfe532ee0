//! One data file's access plan: which row groups to skip, scan whole, or read through a row
//! selection, decided in one place and consumed by both readers, in the spirit of DataFusion's
//! `ParquetAccessPlan`.
//!
//! ```text
//!   the task's rows per row group (pushdown/row_groups.rs: whole, or part of a cut one)
//!     ──► footer statistics ──► FileAccessPlan::from_footer: Skip | Scan
//!   per row group, when the native reader reaches it:
//!     page index (pushdown/page_index.rs) ∩ rows not deleted (deletes/positional_deletes.rs)
//!       ∩ the task's part of a cut row group
//!       ──► FileAccessPlan::row_group: Skip | Scan | Select(RowSelection)
//!   native reader: kept row groups one by one; iceberg's reader: byte ranges of the runs of
//!   kept row groups whose midpoint the task holds
//! ```

use arrow::datatypes::Schema;
use iceberg::scan::FileScanTask;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use parquet::arrow::parquet_to_arrow_schema;
use parquet::file::metadata::ParquetMetaData;

use crate::model::layout::ColumnLayout;
use crate::pushdown::domain::Domains;
use crate::pushdown::gate::GateColumn;
use crate::pushdown::row_groups::{self, RowGroupRows};

/// How one row group is read.
#[derive(Debug, Clone, PartialEq)]
pub enum RowGroupAccess {
    /// Not read: no row in it can pass, or every row of it is deleted.
    Skip,
    /// Every row read.
    Scan,
    /// Only the selected rows read (pages pruned, positions deleted).
    Select(RowSelection),
}

/// What to read of one task's data file (module docs).
#[derive(Debug, Clone)]
pub struct FileAccessPlan {
    /// Whether the statistics ruled out a row group either reader would read of the task.
    prunes: bool,
    /// Row groups the task's byte range covers whose counters it reports: those it covers
    /// whole, and those it cuts and holds the midpoint of (so a cut row group counts once).
    counted: Vec<usize>,
    /// The row groups the task's byte range covers, whole or in part, that may hold a passing
    /// row, in file order: what the native reader reads.
    kept: Vec<usize>,
    /// The kept row groups the task reads only part of (its range cuts them), with its rows.
    cut: Vec<RowGroupRows>,
    /// The row groups whose midpoint the task's range holds that may hold a passing row, in
    /// file order: what iceberg's reader reads.
    midpoint_kept: Vec<usize>,
    /// Layout of each gate column across the file's row groups (`Unknown` where not computed).
    layouts: Vec<ColumnLayout>,
}

impl FileAccessPlan {
    /// The plan from `metadata`'s row-group statistics: the row groups of `task`'s byte range
    /// that may hold a row passing `domains` over `columns`. `file_schema` is the file's Arrow
    /// schema (derived from the footer when `None`).
    pub fn from_footer(
        metadata: &ParquetMetaData,
        task: &FileScanTask,
        file_schema: Option<&Schema>,
        domains: &Domains,
        columns: &[GateColumn],
    ) -> Self {
        let derived;
        let file_schema = match file_schema {
            Some(schema) => Some(schema),
            None => {
                derived = parquet_to_arrow_schema(
                    metadata.file_metadata().schema_descr(),
                    metadata.file_metadata().key_value_metadata(),
                )
                .ok();
                derived.as_ref()
            }
        };
        let covered = row_groups::covered(metadata, task);
        let midpoint = row_groups::candidates(metadata, task);
        // The statistics judge every row group either reader may read of the task. The two sets
        // differ only where a cut leaves the midpoint's side without a row of the row group
        // (a row group of one row): its neighbour covers the row, this task holds the midpoint.
        let mut candidates: Vec<usize> = covered
            .iter()
            .map(|c| c.index)
            .chain(midpoint.iter().copied())
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        let (passing, layouts) =
            row_groups::keep(metadata, file_schema, &candidates, domains, columns);
        let kept: Vec<usize> = covered
            .iter()
            .map(|c| c.index)
            .filter(|rg| passing.contains(rg))
            .collect();
        let counted = covered
            .iter()
            .filter(|c| c.whole() || midpoint.contains(&c.index))
            .map(|c| c.index)
            .collect();
        let cut = covered
            .into_iter()
            .filter(|c| !c.whole() && kept.contains(&c.index))
            .collect();
        Self {
            prunes: passing.len() < candidates.len(),
            counted,
            kept,
            cut,
            midpoint_kept: midpoint
                .into_iter()
                .filter(|rg| passing.contains(rg))
                .collect(),
            layouts,
        }
    }

    /// Row groups the native reader reads, whole or in part, in file order.
    pub fn kept(&self) -> &[usize] {
        &self.kept
    }

    /// Row groups of the task's range the statistics ruled out (a cut row group counted by
    /// the piece holding its midpoint only).
    pub fn pruned(&self) -> usize {
        self.counted
            .iter()
            .filter(|rg| !self.kept.contains(rg))
            .count()
    }

    /// Row groups of the task's range the statistics left to read (a cut row group counted by
    /// the piece holding its midpoint only).
    pub fn matched(&self) -> usize {
        self.counted
            .iter()
            .filter(|rg| self.kept.contains(rg))
            .count()
    }

    /// Whether this task reports row group `rg`'s counters (pruned, matched, pages, deleted
    /// rows): it reads all of it, or its range cuts it and holds its midpoint.
    pub fn counts(&self, rg: usize) -> bool {
        self.counted.contains(&rg)
    }

    /// Layout of each gate column across the file's row groups.
    pub fn layouts(&self) -> &[ColumnLayout] {
        &self.layouts
    }

    /// Whether the statistics ruled out a row group of the task's range.
    pub fn prunes(&self) -> bool {
        self.prunes
    }

    /// How row group `rg` is read once its pages and deletes are known: `pages` the rows the
    /// page index keeps, `not_deleted` the rows no positional delete removes (`None`: all),
    /// both within the task's part of the row group where its range cuts it.
    pub fn row_group(
        &self,
        rg: usize,
        pages: Option<RowSelection>,
        not_deleted: Option<RowSelection>,
    ) -> RowGroupAccess {
        if !self.kept.contains(&rg) {
            return RowGroupAccess::Skip;
        }
        let part = self.cut.iter().find(|c| c.index == rg).map(|c| {
            let selectors = [
                RowSelector::skip(c.rows.start),
                RowSelector::select(c.rows.len()),
                RowSelector::skip(c.total - c.rows.end),
            ];
            RowSelection::from(
                selectors
                    .into_iter()
                    .filter(|s| s.row_count > 0)
                    .collect::<Vec<_>>(),
            )
        });
        let selection = [pages, not_deleted, part]
            .into_iter()
            .flatten()
            .reduce(|a, b| a.intersection(&b));
        match selection {
            None => RowGroupAccess::Scan,
            Some(s) if !s.selects_any() => RowGroupAccess::Skip,
            Some(s) => RowGroupAccess::Select(s),
        }
    }

    /// For iceberg's reader, which reads byte ranges and whole row groups: `task` split into one
    /// piece per run of kept row groups whose midpoint it holds (iceberg keeps the row groups
    /// whose midpoint lies in a piece's range). Empty when it holds none: a cut row group is
    /// read whole by the task holding its midpoint.
    pub fn byte_ranges(
        &self,
        task: &FileScanTask,
        metadata: &ParquetMetaData,
    ) -> Vec<FileScanTask> {
        row_groups::split(task, metadata, &self.midpoint_kept)
    }
}

#[cfg(test)]
mod tests {
    use parquet::arrow::arrow_reader::RowSelector;

    use super::*;

    fn plan(kept: Vec<usize>) -> FileAccessPlan {
        FileAccessPlan {
            prunes: kept.len() < 3,
            counted: vec![0, 1, 2],
            midpoint_kept: kept.clone(),
            kept,
            cut: vec![],
            layouts: vec![],
        }
    }

    #[test]
    fn row_group_access_combines_pages_and_deletes() {
        let plan = plan(vec![0, 2]);
        assert_eq!(plan.pruned(), 1);
        assert_eq!(plan.matched(), 2);
        assert_eq!(plan.row_group(1, None, None), RowGroupAccess::Skip);
        assert_eq!(plan.row_group(0, None, None), RowGroupAccess::Scan);
        let pages = RowSelection::from(vec![RowSelector::select(2), RowSelector::skip(2)]);
        let alive = RowSelection::from(vec![RowSelector::skip(1), RowSelector::select(3)]);
        let both = RowSelection::from(vec![
            RowSelector::skip(1),
            RowSelector::select(1),
            RowSelector::skip(2),
        ]);
        assert_eq!(
            plan.row_group(2, Some(pages.clone()), Some(alive)),
            RowGroupAccess::Select(both)
        );
        let none = RowSelection::from(vec![RowSelector::skip(2), RowSelector::select(2)]);
        assert_eq!(
            plan.row_group(2, Some(pages), Some(none)),
            RowGroupAccess::Skip
        );
    }

    /// Two tasks cutting the middle of three row groups (100 000, 100 000 and 50 000 rows).
    #[test]
    fn a_cut_row_group_is_read_in_parts_and_counted_once() {
        use crate::pushdown::row_groups::tests::{file, task};
        let (size, metadata) = file(250_000, 100_000);
        let rg1 = metadata.row_group(1).compressed_size() as u64;
        let at = 4 + metadata.row_group(0).compressed_size() as u64;
        let cut = at + rg1 / 2;
        let (first, second) = (task(size, 0, cut), task(size, cut, size));
        let plan = |t: &FileScanTask| {
            FileAccessPlan::from_footer(&metadata, t, None, &Domains::all(), &[])
        };
        let (a, b) = (plan(&first), plan(&second));
        assert_eq!((a.kept(), b.kept()), (&[0, 1][..], &[1, 2][..]));
        // The cut row group counts with the task holding its midpoint.
        assert_eq!((a.matched(), b.matched()), (1, 2));
        assert!(a.counts(0) && !a.counts(1) && b.counts(1) && b.counts(2));
        assert!(!a.prunes() && !b.prunes());

        // Each task's part of row group 1, intersected with the pages and the deletes.
        let half = (100_000 * (rg1 / 2) / rg1) as usize;
        let part = |skip: usize, take: usize| {
            RowSelection::from(vec![
                RowSelector::skip(skip),
                RowSelector::select(take),
                RowSelector::skip(100_000 - skip - take),
            ])
        };
        assert_eq!(a.row_group(0, None, None), RowGroupAccess::Scan);
        assert_eq!(
            a.row_group(1, None, None),
            RowGroupAccess::Select(part(0, half))
        );
        assert_eq!(
            b.row_group(1, None, None),
            RowGroupAccess::Select(part(half, 100_000 - half))
        );
        let pages = part(half - 10, 20);
        assert_eq!(
            a.row_group(1, Some(pages.clone()), None),
            RowGroupAccess::Select(part(half - 10, 10))
        );
        assert_eq!(
            b.row_group(1, Some(pages.clone()), Some(part(half + 5, 100))),
            RowGroupAccess::Select(part(half + 5, 5))
        );
        assert_eq!(
            a.row_group(1, Some(part(half, 10)), None),
            RowGroupAccess::Skip
        );

        // iceberg's reader reads the cut row group whole, with the task holding its midpoint.
        let ranges = |p: &FileAccessPlan, t: &FileScanTask| -> Vec<(u64, u64)> {
            p.byte_ranges(t, &metadata)
                .iter()
                .map(|r| (r.start, r.start + r.length))
                .collect()
        };
        let end = at + rg1 + metadata.row_group(2).compressed_size() as u64;
        assert_eq!(ranges(&a, &first), [(4, at)]);
        assert_eq!(ranges(&b, &second), [(at, end)]);
    }

    /// A cut just past the midpoint of a row group of one row: the task holding the midpoint
    /// covers none of its rows, its neighbour covers the row. Each reader reads it once: the
    /// native reader in the neighbour, iceberg's in the task holding the midpoint.
    #[test]
    fn a_row_group_of_one_row_is_read_once_by_either_reader() {
        use crate::pushdown::row_groups::tests::{file, task};
        let (size, metadata) = file(3, 1);
        assert_eq!(metadata.num_row_groups(), 3);
        let at = 4 + metadata.row_group(0).compressed_size() as u64;
        let len = metadata.row_group(1).compressed_size() as u64;
        let end = at + len + metadata.row_group(2).compressed_size() as u64;
        let cut = at + len / 2 + 1;
        let (first, second) = (task(size, 0, cut), task(size, cut, size));
        let plan = |t: &FileScanTask| {
            FileAccessPlan::from_footer(&metadata, t, None, &Domains::all(), &[])
        };
        let (a, b) = (plan(&first), plan(&second));
        assert_eq!((a.kept(), b.kept()), (&[0][..], &[1, 2][..]));
        let ranges = |p: &FileAccessPlan, t: &FileScanTask| -> Vec<(u64, u64)> {
            p.byte_ranges(t, &metadata)
                .iter()
                .map(|r| (r.start, r.start + r.length))
                .collect()
        };
        assert_eq!(ranges(&a, &first), [(4, at + len)]);
        assert_eq!(ranges(&b, &second), [(at + len, end)]);
    }
}
