//! One data file's access plan: which row groups to skip, scan whole, or read through a row
//! selection, decided in one place and consumed by both readers, in the spirit of DataFusion's
//! `ParquetAccessPlan`.
//!
//! ```text
//!   footer statistics (pushdown/row_groups.rs) ──► FileAccessPlan::from_footer: Skip | Scan
//!   per row group, when the native reader reaches it:
//!     page index (pushdown/page_index.rs) ∩ rows not deleted (deletes/positional_deletes.rs)
//!       ──► FileAccessPlan::row_group: Skip | Scan | Select(RowSelection)
//!   native reader: kept row groups one by one; iceberg's reader: byte ranges of their runs
//! ```

use arrow::datatypes::Schema;
use iceberg::scan::FileScanTask;
use parquet::arrow::arrow_reader::RowSelection;
use parquet::arrow::parquet_to_arrow_schema;
use parquet::file::metadata::ParquetMetaData;

use crate::model::layout::ColumnLayout;
use crate::pushdown::domain::Domains;
use crate::pushdown::gate::GateColumn;
use crate::pushdown::row_groups;

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
    /// Row groups inside the task's byte range.
    candidates: usize,
    /// The candidates that may hold a passing row, in file order.
    kept: Vec<usize>,
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
        let candidates = row_groups::candidates(metadata, task);
        let (kept, layouts) =
            row_groups::keep(metadata, file_schema, &candidates, domains, columns);
        Self {
            candidates: candidates.len(),
            kept,
            layouts,
        }
    }

    /// Row groups to read, in file order.
    pub fn kept(&self) -> &[usize] {
        &self.kept
    }

    /// Row groups of the task's range the statistics ruled out.
    pub fn pruned(&self) -> usize {
        self.candidates - self.kept.len()
    }

    /// Row groups of the task's range the statistics left to read.
    pub fn matched(&self) -> usize {
        self.kept.len()
    }

    /// Layout of each gate column across the file's row groups.
    pub fn layouts(&self) -> &[ColumnLayout] {
        &self.layouts
    }

    /// Whether the statistics ruled out a row group of the task's range.
    pub fn prunes(&self) -> bool {
        self.pruned() > 0
    }

    /// How row group `rg` is read once its pages and deletes are known: `pages` the rows the
    /// page index keeps, `not_deleted` the rows no positional delete removes (`None`: all).
    pub fn row_group(
        &self,
        rg: usize,
        pages: Option<RowSelection>,
        not_deleted: Option<RowSelection>,
    ) -> RowGroupAccess {
        if !self.kept.contains(&rg) {
            return RowGroupAccess::Skip;
        }
        let selection = match (pages, not_deleted) {
            (Some(a), Some(b)) => Some(a.intersection(&b)),
            (a, b) => a.or(b),
        };
        match selection {
            None => RowGroupAccess::Scan,
            Some(s) if !s.selects_any() => RowGroupAccess::Skip,
            Some(s) => RowGroupAccess::Select(s),
        }
    }

    /// For iceberg's reader, which reads byte ranges: `task` split into one piece per run of
    /// kept row groups (iceberg keeps the row groups whose midpoint lies in a piece's range).
    pub fn byte_ranges(
        &self,
        task: &FileScanTask,
        metadata: &ParquetMetaData,
    ) -> Vec<FileScanTask> {
        row_groups::split(task, metadata, &self.kept)
    }
}

#[cfg(test)]
mod tests {
    use parquet::arrow::arrow_reader::RowSelector;

    use super::*;

    fn plan(kept: Vec<usize>) -> FileAccessPlan {
        FileAccessPlan {
            candidates: 3,
            kept,
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
}
