//! The gate: which parts of a scan's domains reach which pruning layer, per FileScanTask.
//!
//! ```text
//!   domains (static ∧ dynamic) of a task
//!     ├─ false / empty ───────────────────────────────► skip the task, file never opened
//!     ├─ manifest bounds + null counts (prune.rs) ────► skip the file, no footer read
//!     ├─ any constrained column ──────────────────────► footer (cached) → row groups (row_groups.rs)
//!     └─ per column, to the reader's predicate only if
//!          top-level (nested struct leaves stop at the footer: iceberg's row filter rejects them)
//!          and  clustered (layout.rs)  and  present in the file (manifest bounds)
//!            range        → col >= lo AND col <= hi       (type extremes left out), only
//!                           when our row-group selection did not run (files with deletes)
//!            value set    → col IN (…) while ≤ min(cap, IN_PREDICATE_LIMIT)
//!            NULL allowed → … OR col IS NULL
//! ```
//!
//! Why: iceberg 0.10.1's reader turns any predicate into a row filter evaluated on every row of the
//! surviving row groups (`IN` as a loop of `eq` kernels). On a scattered column nothing prunes and
//! the row filter only costs (q6 on unsorted SF 1 lineitem: 1.4–1.6× slower than no predicate);
//! on a clustered column our own footer selection already drops the row groups outside a range,
//! after which the range's row filter measured 0.97–1.24× (SF 1 sorted by `l_shipdate`,
//! `bench/reports/pushdown-onoff-20261130.md`). A small value set on a clustered column still
//! removes most rows of the surviving row groups, so it goes to the reader as `IN` (iceberg's own
//! row-group `IN`/`OR` difference does not matter here: row groups are selected by us, per value).

use std::fmt;

use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use iceberg::expr::{Predicate, Reference};

use crate::model::columns::{ScanColumn, ScanColumns};
use crate::model::layout::ColumnLayout;
use crate::model::literal::scalar_to_datum;
use crate::pushdown::domain::{ColumnDomain, Domains};
use crate::pushdown::prune::FileBounds;

/// `IN_PREDICATE_LIMIT = 200` in iceberg 0.10.1 (`row_group_metrics_evaluator.rs`,
/// `page_index_evaluator.rs`, `inclusive_metrics_evaluator.rs`): a larger `IN` disables
/// row-group and page pruning but still runs as a row filter.
pub const IN_PREDICATE_LIMIT: usize = 200;

/// What the gate does with one constrainable column of the scan (`columns.rs`).
#[derive(Debug, Clone)]
pub struct GateColumn {
    /// Name, field id and types (an output column or a nested struct leaf).
    pub column: ScanColumn,
    /// Layout judged from the manifest's per-file bounds of every live data file.
    pub layout: ColumnLayout,
}

impl GateColumn {
    /// Pairs every column of `columns` with its layout (`layouts`, same order).
    pub fn for_scan(columns: &ScanColumns, layouts: &[ColumnLayout]) -> Vec<Self> {
        columns
            .columns()
            .iter()
            .zip(layouts)
            .map(|(c, layout)| Self {
                column: c.clone(),
                layout: *layout,
            })
            .collect()
    }
}

/// Per-scan gate decisions (built once at planning) applied to each task's domains.
#[derive(Debug, Clone)]
pub struct Gate {
    columns: Vec<GateColumn>,
    /// Value sets larger than this stay out of the reader: min(cap, [`IN_PREDICATE_LIMIT`]).
    set_limit: usize,
    /// `iceflight.scan.reader_predicate`: hand clustered columns to the reader at all.
    reader_predicate: bool,
}

/// How one column of a task's domains reaches the reader.
#[derive(Debug, Clone, PartialEq)]
pub enum ReaderUse {
    /// `col >= lo AND col <= hi` (one side when the other is the type's extreme).
    Range,
    /// `col IN (…)` with this many values.
    Set(usize),
    /// `col IS NULL` only.
    OnlyNull,
    /// Not handed to the reader, with the reason.
    Withheld(&'static str),
}

impl fmt::Display for ReaderUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Range => write!(f, "reader range"),
            Self::Set(n) => write!(f, "reader IN ({n} values)"),
            Self::OnlyNull => write!(f, "reader IS NULL"),
            Self::Withheld(why) => write!(f, "not to reader: {why}"),
        }
    }
}

impl Gate {
    /// A gate over the scan's columns `columns` (`columns.rs`); `cap` =
    /// `hash_join_inlist_pushdown_max_distinct_values`.
    pub fn new(columns: Vec<GateColumn>, cap: usize, reader_predicate: bool) -> Self {
        Self {
            columns,
            set_limit: cap.min(IN_PREDICATE_LIMIT),
            reader_predicate,
        }
    }

    /// The same gate with value sets capped at `cap` (the session's
    /// `hash_join_inlist_pushdown_max_distinct_values`).
    pub fn with_cap(&self, cap: usize) -> Self {
        Self {
            columns: self.columns.clone(),
            set_limit: cap.min(IN_PREDICATE_LIMIT),
            reader_predicate: self.reader_predicate,
        }
    }

    /// The column descriptions, by column index (`columns.rs`).
    pub fn gate_columns(&self) -> &[GateColumn] {
        &self.columns
    }

    /// Whether to read the footer and select row groups: whenever a column is constrained.
    /// File-level overlap says little about the row groups inside the files (Z-ordered 400 K
    /// rows in 3 files: every file spans all keys, each row group an eighth of them; a point
    /// lookup reads 15.8 % of the bytes with row-group selection, 65 % without,
    /// `bench/reports/nested-pruning-20261130.md`),
    /// and a footer is read once per file and then cached, so the selection costs a statistics
    /// pass over the row groups per task.
    pub fn wants_footer(&self, domains: &Domains) -> bool {
        domains
            .columns
            .as_ref()
            .is_some_and(|cols| cols.keys().any(|i| *i < self.columns.len()))
    }

    /// The decision for each constrained column of `domains`, for a file with `bounds` (`None`:
    /// at plan level, for no file in particular; an empty list: the file has no manifest bounds)
    /// and, for columns whose manifest layout is unknown, the layout of
    /// the file's row groups (`row_group_layouts`, by column index). `row_groups_selected`: our
    /// footer-based row-group selection ran for the task, so ranges are not handed over.
    pub fn decide(
        &self,
        domains: &Domains,
        bounds: Option<&FileBounds>,
        row_group_layouts: &[ColumnLayout],
        row_groups_selected: bool,
    ) -> Vec<(usize, ReaderUse)> {
        let Some(cols) = &domains.columns else {
            return vec![];
        };
        cols.iter()
            .map(|(i, d)| {
                let decision =
                    self.decide_column(*i, d, bounds, row_group_layouts, row_groups_selected);
                (*i, decision)
            })
            .collect()
    }

    fn decide_column(
        &self,
        index: usize,
        d: &ColumnDomain,
        bounds: Option<&FileBounds>,
        row_group_layouts: &[ColumnLayout],
        row_groups_selected: bool,
    ) -> ReaderUse {
        let Some(col) = self.columns.get(index) else {
            return ReaderUse::Withheld("unknown column");
        };
        if !self.reader_predicate {
            return ReaderUse::Withheld("iceflight.scan.reader_predicate = false");
        }
        if col.column.nested {
            // iceberg 0.10.1's row filter rejects a leaf that is not a root column
            // (`scan/UPSTREAM.md`, "iceberg's reader rejects nested predicates"); footer and manifest pruning still use it.
            return ReaderUse::Withheld("nested field");
        }
        if col.column.iceberg_type.is_none() {
            return ReaderUse::Withheld("not a primitive column");
        }
        let layout = match col.layout {
            ColumnLayout::Unknown => row_group_layouts
                .get(index)
                .copied()
                .unwrap_or(ColumnLayout::Unknown),
            l => l,
        };
        if !layout.is_clustered() {
            return ReaderUse::Withheld(match layout {
                ColumnLayout::Scattered(_) => "scattered",
                _ => "layout unknown",
            });
        }
        // The reader's row filter answers constant true/false for a column missing from an
        // older file; keep it to files whose manifest shows the column with values.
        let present = match bounds {
            None => true, // plan level: no particular file
            Some(b) => b
                .get(index)
                .is_some_and(|b| b.min.is_some() && b.max.is_some()),
        };
        if !present {
            return ReaderUse::Withheld("no bounds for the column in this file");
        }
        match (&d.range, &d.values) {
            (None, _) => ReaderUse::OnlyNull,
            (Some(_), Some(vs)) if vs.len() <= self.set_limit => ReaderUse::Set(vs.len()),
            // Once our footer selection dropped the row groups outside the range, the range
            // prunes nothing more and its row filter only costs (measured, scan/README.md).
            (Some(_), _) if row_groups_selected => {
                ReaderUse::Withheld("range: row groups already selected")
            }
            (Some(_), _) => ReaderUse::Range,
        }
    }

    /// The reader's predicate for `decisions` over `domains` (conjunction of the columns handed
    /// over), or `None` when no column is. Literals are converted to the column's exact iceberg
    /// type; a column whose literals do not convert is left out.
    pub fn reader_predicate(
        &self,
        domains: &Domains,
        decisions: &[(usize, ReaderUse)],
    ) -> Option<Predicate> {
        let cols = domains.columns.as_ref()?;
        decisions
            .iter()
            .filter_map(|(i, decision)| {
                let col = self.columns.get(*i)?;
                let d = cols.get(i)?;
                column_predicate(col, d, decision)
            })
            .reduce(Predicate::and)
    }
}

fn column_predicate(col: &GateColumn, d: &ColumnDomain, decision: &ReaderUse) -> Option<Predicate> {
    let col = &col.column;
    if col.nested {
        return None;
    }
    let ty = col.iceberg_type.as_ref()?;
    let reference = || Reference::new(col.name.clone());
    let datum = |v: &ScalarValue| scalar_to_datum(v, &col.arrow_type, ty);
    let values = match decision {
        ReaderUse::Withheld(_) => return None,
        ReaderUse::OnlyNull => return Some(reference().is_null()),
        ReaderUse::Set(_) => {
            let set = d
                .values
                .as_ref()?
                .iter()
                .map(datum)
                .collect::<Option<Vec<_>>>()?;
            reference().is_in(set)
        }
        ReaderUse::Range => {
            let (lo, hi) = d.range.as_ref()?;
            let lower = (!is_extreme(lo, &col.arrow_type, false))
                .then(|| datum(lo).map(|v| reference().greater_than_or_equal_to(v)));
            let upper = (!is_extreme(hi, &col.arrow_type, true))
                .then(|| datum(hi).map(|v| reference().less_than_or_equal_to(v)));
            match (lower, upper) {
                // A bound that does not convert leaves the column out (never narrows).
                (Some(None), _) | (_, Some(None)) => return None,
                (Some(Some(l)), Some(Some(u))) => l.and(u),
                (Some(Some(p)), None) | (None, Some(Some(p))) => p,
                (None, None) => return None,
            }
        }
    };
    Some(if d.null_allowed {
        values.or(reference().is_null())
    } else {
        values
    })
}

/// Whether `v` is the open end of a range (`crate::pushdown::domain`'s type extremes).
fn is_extreme(v: &ScalarValue, ty: &DataType, upper: bool) -> bool {
    let extreme = if upper {
        crate::pushdown::domain::type_max(ty)
    } else {
        crate::pushdown::domain::type_min(ty)
    };
    extreme.as_ref() == Some(v)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use iceberg::spec::PrimitiveType;

    use super::*;
    use crate::pushdown::prune::ColumnBounds;

    fn gate(layout: ColumnLayout, cap: usize) -> Gate {
        Gate::new(
            vec![GateColumn {
                column: ScanColumn {
                    name: "k".into(),
                    field_id: 1,
                    arrow_type: DataType::Int32,
                    iceberg_type: Some(PrimitiveType::Int),
                    nested: false,
                },
                layout,
            }],
            cap,
            true,
        )
    }

    fn domains(range: (i32, i32), values: Option<Vec<i32>>, null: bool) -> Domains {
        Domains {
            columns: Some(BTreeMap::from([(
                0,
                ColumnDomain {
                    range: Some((
                        ScalarValue::Int32(Some(range.0)),
                        ScalarValue::Int32(Some(range.1)),
                    )),
                    values: values
                        .map(|v| v.into_iter().map(|x| ScalarValue::Int32(Some(x))).collect()),
                    null_allowed: null,
                },
            )])),
        }
    }

    fn bounds() -> FileBounds {
        vec![ColumnBounds {
            min: Some(ScalarValue::Int32(Some(0))),
            max: Some(ScalarValue::Int32(Some(100))),
            null_count: Some(0),
        }]
    }

    fn show(g: &Gate, d: &Domains) -> String {
        let decisions = g.decide(d, Some(&bounds()), &[], false);
        let p = g.reader_predicate(d, &decisions);
        format!(
            "{} => {}",
            decisions
                .iter()
                .map(|(i, u)| format!("#{i}: {u}"))
                .collect::<Vec<_>>()
                .join(", "),
            p.map(|p| p.to_string()).unwrap_or_else(|| "none".into())
        )
    }

    #[test]
    fn clustered_columns_reach_the_reader() {
        let g = gate(ColumnLayout::Clustered(0.1), 150);
        insta::assert_snapshot!(show(&g, &domains((3, 9), None, false)), @"#0: reader range => (k >= 3) AND (k <= 9)");
        insta::assert_snapshot!(show(&g, &domains((3, 9), Some(vec![3, 5, 9]), true)), @"#0: reader IN (3 values) => (k IN (5, 9, 3)) OR (k IS NULL)");
        let open_above = domains((3, i32::MAX), None, false);
        insta::assert_snapshot!(show(&g, &open_above), @"#0: reader range => k >= 3");
    }

    #[test]
    fn sets_over_the_limit_and_scattered_columns_are_withheld() {
        // cap 150 → limit 150; cap 500 → IN_PREDICATE_LIMIT 200.
        let many: Vec<i32> = (0..201).collect();
        let g = gate(ColumnLayout::Clustered(0.0), 500);
        insta::assert_snapshot!(show(&g, &domains((0, 200), Some(many), false)), @"#0: reader range => (k >= 0) AND (k <= 200)");
        let g = gate(ColumnLayout::Scattered(1.0), 150);
        insta::assert_snapshot!(show(&g, &domains((3, 9), Some(vec![3]), false)), @"#0: not to reader: scattered => none");
        let g = gate(ColumnLayout::Unknown, 150);
        insta::assert_snapshot!(show(&g, &domains((3, 9), None, false)), @"#0: not to reader: layout unknown => none");
        // Unknown from the manifest, clustered across the file's row groups.
        let d = domains((3, 9), None, false);
        let decisions = g.decide(&d, Some(&bounds()), &[ColumnLayout::Clustered(0.2)], false);
        assert_eq!(decisions, vec![(0, ReaderUse::Range)]);
        // No bounds in the file (column added later): withheld.
        let g = gate(ColumnLayout::Clustered(0.0), 150);
        let decisions = g.decide(&d, Some(&vec![ColumnBounds::default()]), &[], false);
        assert!(matches!(decisions[0].1, ReaderUse::Withheld(_)));
        // After our row-group selection a range is withheld; a small set still goes.
        let decisions = g.decide(&d, Some(&bounds()), &[], true);
        assert!(matches!(decisions[0].1, ReaderUse::Withheld(_)));
        let set = domains((3, 9), Some(vec![3, 9]), false);
        assert_eq!(
            g.decide(&set, Some(&bounds()), &[], true),
            vec![(0, ReaderUse::Set(2))]
        );
    }
}
