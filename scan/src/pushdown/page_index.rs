//! Page pruning from the Parquet page index (column index: per-page min / max / null count;
//! offset index: per-page first row) against a task's domains, as a `RowSelection` for one row
//! group.
//!
//! ```text
//!   row group rg, constrained top-level column c (found by field id)
//!     ──► StatisticsConverter::data_page_{mins,maxes,null_counts,row_counts}(rg)
//!     ──► per page: ColumnBounds ──► prune.rs may_match ──► select / skip its rows
//!   columns' selections intersected (their pages need not line up) ──► RowSelection
//! ```
//!
//! Sorted and clustered layouts are where this prunes: a page holds a narrow value range. Only
//! top-level columns (parquet's `StatisticsConverter` resolves root columns only); a file
//! without a page index, or a column whose page statistics do not convert, selects every row.

use arrow::array::Array;
use arrow::compute::cast;
use arrow::datatypes::Schema;
use datafusion::common::ScalarValue;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use parquet::file::metadata::ParquetMetaData;

use crate::pushdown::domain::Domains;
use crate::pushdown::gate::GateColumn;
use crate::pushdown::prune::{ColumnBounds, FileBounds, may_match};
use crate::pushdown::row_groups::column_name;

/// The rows of one row group that pages may hold passing rows in.
#[derive(Debug, Clone, PartialEq)]
pub struct PageSelection {
    /// `None`: every row (nothing pruned).
    pub selection: Option<RowSelection>,
    /// Pages ruled out, summed over the constrained columns.
    pub pages_pruned: usize,
    /// Pages of the constrained columns examined and kept (with `pages_pruned`: every page
    /// the page index was asked about).
    pub pages_matched: usize,
}

/// Prunes the pages of row group `rg` of a file with `metadata` (loaded with its page index)
/// and Arrow schema `file_schema` against `domains`, whose column indices are those of
/// `columns`. Selects every row when the file has no page index.
pub fn select(
    metadata: &ParquetMetaData,
    file_schema: &Schema,
    rg: usize,
    domains: &Domains,
    columns: &[GateColumn],
) -> PageSelection {
    let all = PageSelection {
        selection: None,
        pages_pruned: 0,
        pages_matched: 0,
    };
    let Some(constrained) = &domains.columns else {
        return all;
    };
    if metadata.column_index().is_none() || metadata.offset_index().is_none() {
        return all;
    }
    let rows = metadata.row_group(rg).num_rows() as usize;
    let mut selection: Option<RowSelection> = None;
    let mut pages_pruned = 0;
    let mut pages_matched = 0;
    for &index in constrained.keys() {
        let Some(col) = columns.get(index).map(|c| &c.column) else {
            continue;
        };
        if col.nested {
            continue;
        }
        let Some(keep) = page_keep(
            metadata,
            file_schema,
            rg,
            col,
            index,
            domains,
            columns.len(),
        ) else {
            continue;
        };
        let (counts, kept) = (&keep.0, &keep.1);
        let pruned = kept.iter().filter(|k| !**k).count();
        pages_matched += kept.len() - pruned;
        if pruned == 0 {
            continue;
        }
        pages_pruned += pruned;
        let column = selectors(counts, kept);
        selection = Some(match selection {
            Some(s) => s.intersection(&column),
            None => column,
        });
    }
    match selection {
        Some(s) if s.row_count() < rows => PageSelection {
            selection: Some(s),
            pages_pruned,
            pages_matched,
        },
        _ => PageSelection {
            selection: None,
            pages_pruned,
            pages_matched,
        },
    }
}

/// Per page of column `col` in row group `rg`: its row count and whether it may hold a passing
/// row. `None` when the page statistics are missing or do not convert.
fn page_keep(
    metadata: &ParquetMetaData,
    file_schema: &Schema,
    rg: usize,
    col: &crate::model::columns::ScanColumn,
    index: usize,
    domains: &Domains,
    width: usize,
) -> Option<(Vec<usize>, Vec<bool>)> {
    let column_index = metadata.column_index()?;
    let offset_index = metadata.offset_index()?;
    let name = column_name(file_schema, col.field_id)?;
    let converter =
        StatisticsConverter::try_new(&name, file_schema, metadata.file_metadata().schema_descr())
            .ok()?
            .with_missing_null_counts_as_zero(false);
    let groups = [rg];
    let mins = converter
        .data_page_mins(column_index, offset_index, &groups)
        .ok()?;
    let maxes = converter
        .data_page_maxes(column_index, offset_index, &groups)
        .ok()?;
    let nulls = converter
        .data_page_null_counts(column_index, offset_index, &groups)
        .ok()?;
    let counts = converter
        .data_page_row_counts(offset_index, metadata.row_groups(), &groups)
        .ok()??;
    let mins = cast(&mins, &col.arrow_type).ok()?;
    let maxes = cast(&maxes, &col.arrow_type).ok()?;
    let scalar = |a: &dyn Array, i: usize| {
        ScalarValue::try_from_array(a, i)
            .ok()
            .filter(|v| !v.is_null())
    };
    let pages = counts.len();
    if mins.len() != pages || maxes.len() != pages || nulls.len() != pages {
        return None;
    }
    let mut bounds: FileBounds = vec![ColumnBounds::default(); width];
    let mut rows = Vec::with_capacity(pages);
    let mut kept = Vec::with_capacity(pages);
    for page in 0..pages {
        bounds[index] = ColumnBounds {
            min: scalar(mins.as_ref(), page),
            max: scalar(maxes.as_ref(), page),
            null_count: (!nulls.is_null(page)).then(|| nulls.value(page)),
        };
        rows.push(counts.value(page) as usize);
        kept.push(may_match(&single(domains, index), &bounds));
    }
    Some((rows, kept))
}

/// `domains` restricted to column `index` (the others unconstrained).
fn single(domains: &Domains, index: usize) -> Domains {
    let Some(columns) = &domains.columns else {
        return Domains::none();
    };
    Domains {
        columns: Some(
            columns
                .iter()
                .filter(|(i, _)| **i == index)
                .map(|(i, d)| (*i, d.clone()))
                .collect(),
        ),
    }
}

/// Select / skip runs over pages of `rows` rows each, adjacent runs of one kind merged.
fn selectors(rows: &[usize], kept: &[bool]) -> RowSelection {
    let mut out: Vec<RowSelector> = vec![];
    for (&n, &k) in rows.iter().zip(kept) {
        match out.last_mut() {
            Some(last) if last.skip != k => last.row_count += n,
            _ => out.push(if k {
                RowSelector::select(n)
            } else {
                RowSelector::skip(n)
            }),
        }
    }
    RowSelection::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_by_kind() {
        let s = selectors(&[10, 10, 5, 5, 7], &[true, true, false, false, true]);
        let v: Vec<RowSelector> = s.into();
        assert_eq!(
            v,
            vec![
                RowSelector::select(20),
                RowSelector::skip(10),
                RowSelector::select(7)
            ]
        );
    }
}
