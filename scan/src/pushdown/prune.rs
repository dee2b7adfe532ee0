//! File pruning against dynamic-filter domains, from the manifest's per-file bounds — no footer
//! read. Applied when a task is opened, so filters that complete later still help later files.
//!
//! ```text
//!   domains (domain.rs) ─┐
//!                        ├─► may the file hold a passing row? ── no ──► skip the task
//!   manifest bounds ─────┘     (lower/upper bounds, null counts, by column index)
//! ```
//!
//! A column rules a file out when neither its non-null part (the domain's range / value set
//! against the file's [lower, upper]) nor its null part (NULL allowed and the null count not
//! known to be zero) can match. Float bounds leave NaN out (case c02); domains never accept NaN
//! (no NaN literal, no float upper bound), so ignoring NaN here keeps every passing row.

use std::collections::HashMap;

use datafusion::common::ScalarValue;

use crate::pushdown::domain::{ColumnDomain, Domains};

/// Manifest bounds of one column (or row-group statistics) in one data file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ColumnBounds {
    /// Lower bound of the non-null values (NaN excluded), if recorded.
    pub min: Option<ScalarValue>,
    /// Upper bound of the non-null values (NaN excluded), if recorded.
    pub max: Option<ScalarValue>,
    /// Number of NULLs, if recorded.
    pub null_count: Option<u64>,
}

/// Bounds of every constrainable column (by column index, `columns.rs`) of one data file.
pub type FileBounds = Vec<ColumnBounds>;

/// Bounds by data file path.
pub type BoundsByFile = HashMap<String, FileBounds>;

/// Whether a file (or row group) with `bounds` may hold a row passing `domains`. Bounds that
/// do not compare with the domain's values (another type) never rule anything out.
pub fn may_match(domains: &Domains, bounds: &FileBounds) -> bool {
    let Some(columns) = &domains.columns else {
        return false;
    };
    columns
        .iter()
        .all(|(i, d)| bounds.get(*i).is_none_or(|b| column_may_match(d, b)))
}

/// `a < b`, false when they do not compare.
fn lt(a: &ScalarValue, b: &ScalarValue) -> bool {
    a.partial_cmp(b) == Some(std::cmp::Ordering::Less)
}

fn column_may_match(d: &ColumnDomain, b: &ColumnBounds) -> bool {
    let nulls_may_pass = d.null_allowed && b.null_count != Some(0);
    let values_may_pass = match (&d.range, &b.min, &b.max) {
        (None, _, _) => false,
        (Some((lo, hi)), Some(fmin), Some(fmax)) => {
            let overlap = !lt(fmax, lo) && !lt(hi, fmin);
            overlap
                && d.values
                    .as_ref()
                    .is_none_or(|vs| vs.iter().any(|v| !lt(v, fmin) && !lt(fmax, v)))
        }
        _ => true,
    };
    nulls_may_pass || values_may_pass
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn domain(range: Option<(i32, i32)>, values: Option<Vec<i32>>, null_allowed: bool) -> Domains {
        Domains {
            columns: Some(BTreeMap::from([(
                0,
                ColumnDomain {
                    range: range
                        .map(|(a, b)| (ScalarValue::Int32(Some(a)), ScalarValue::Int32(Some(b)))),
                    values: values
                        .map(|v| v.into_iter().map(|x| ScalarValue::Int32(Some(x))).collect()),
                    null_allowed,
                },
            )])),
        }
    }

    fn file(min: i32, max: i32, nulls: u64) -> FileBounds {
        vec![ColumnBounds {
            min: Some(ScalarValue::Int32(Some(min))),
            max: Some(ScalarValue::Int32(Some(max))),
            null_count: Some(nulls),
        }]
    }

    #[test]
    fn ranges_sets_and_nulls() {
        let d = domain(Some((10, 20)), None, false);
        assert!(may_match(&d, &file(15, 30, 0)));
        assert!(!may_match(&d, &file(21, 30, 0)));
        // A value set between the file's bounds but none inside them.
        let d = domain(Some((10, 50)), Some(vec![10, 50]), false);
        assert!(!may_match(&d, &file(20, 40, 0)));
        assert!(may_match(&d, &file(40, 60, 0)));
        // NULL allowed: only a file known to have no NULL can be ruled out on that side.
        let d = domain(Some((10, 20)), None, true);
        assert!(may_match(&d, &file(30, 40, 1)));
        assert!(!may_match(&d, &file(30, 40, 0)));
        // Unknown bounds or an unconstrained column never prune; a false filter prunes all.
        assert!(may_match(&d, &vec![ColumnBounds::default()]));
        assert!(may_match(&Domains::all(), &file(0, 1, 0)));
        assert!(!may_match(&Domains::none(), &file(0, 1, 0)));
        // Bounds of another type never prune.
        let other = vec![ColumnBounds {
            min: Some(ScalarValue::Int64(Some(100))),
            max: Some(ScalarValue::Int64(Some(200))),
            null_count: Some(0),
        }];
        assert!(may_match(
            &domain(Some((10, 20)), Some(vec![10]), false),
            &other
        ));
    }
}
