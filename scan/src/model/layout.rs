//! Layout gating: is a column clustered, i.e. are its per-file (or per-row-group) min/max
//! differentiated, so that a constraint on it can prune?
//!
//! ```text
//!   sorted on c:     [1,10] [11,20] [21,30] [31,40]     each overlaps ≤ 2 others → clustered
//!   random c:        [1,40] [2,39]  [1,40]  [3,40]      each overlaps all others → scattered
//! ```
//!
//! Rule: over the `n ≥ 2` intervals with both bounds, the mean over intervals of the share of
//! the *other* intervals it strictly overlaps (`a.max > b.min && b.max > a.min`, so a boundary
//! value shared by neighbours does not count) must be at most [`CLUSTERED_MAX_OVERLAP`]. Fewer
//! than two intervals say nothing (`Unknown`).
//!
//! The threshold and the overlaps measured on TPC-H are in `scan/README.md` ("Layout gating").

use std::cmp::Ordering;
use std::fmt;

use datafusion::common::ScalarValue;

/// Mean overlap share at or below which a column counts as clustered.
pub const CLUSTERED_MAX_OVERLAP: f64 = 0.5;

/// At most this many intervals are compared (evenly sampled beyond it), bounding the O(n²)
/// comparison to 2²⁴ pairs.
pub const MAX_INTERVALS: usize = 4096;

/// The layout of one column across the intervals it was judged on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ColumnLayout {
    /// Mean overlap share ≤ [`CLUSTERED_MAX_OVERLAP`].
    Clustered(f64),
    /// Mean overlap share > [`CLUSTERED_MAX_OVERLAP`].
    Scattered(f64),
    /// Fewer than two intervals with bounds.
    Unknown,
}

impl ColumnLayout {
    /// Whether a constraint on the column is worth handing to the reader.
    pub fn is_clustered(&self) -> bool {
        matches!(self, Self::Clustered(_))
    }
}

impl fmt::Display for ColumnLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Clustered(o) => write!(f, "clustered (overlap {o:.2})"),
            Self::Scattered(o) => write!(f, "scattered (overlap {o:.2})"),
            Self::Unknown => write!(f, "unknown"),
        }
    }
}

/// Judges a column from its `(min, max)` per file or per row group (`None` where unknown).
pub fn judge(intervals: &[Option<(ScalarValue, ScalarValue)>]) -> ColumnLayout {
    let known: Vec<&(ScalarValue, ScalarValue)> = intervals.iter().flatten().collect();
    let sampled: Vec<&(ScalarValue, ScalarValue)> = if known.len() > MAX_INTERVALS {
        (0..MAX_INTERVALS)
            .map(|i| known[i * known.len() / MAX_INTERVALS])
            .collect()
    } else {
        known
    };
    let n = sampled.len();
    if n < 2 {
        return ColumnLayout::Unknown;
    }
    let overlaps = |a: &(ScalarValue, ScalarValue), b: &(ScalarValue, ScalarValue)| {
        // Incomparable bounds (mixed types) count as overlapping: that never gates wrongly.
        let gt = |x: &ScalarValue, y: &ScalarValue| {
            !matches!(x.partial_cmp(y), Some(Ordering::Less | Ordering::Equal))
        };
        gt(&a.1, &b.0) && gt(&b.1, &a.0)
    };
    let mut total = 0usize;
    for (i, a) in sampled.iter().enumerate() {
        for b in &sampled[i + 1..] {
            if overlaps(a, b) {
                total += 2;
            }
        }
    }
    let share = total as f64 / (n * (n - 1)) as f64;
    if share <= CLUSTERED_MAX_OVERLAP {
        ColumnLayout::Clustered(share)
    } else {
        ColumnLayout::Scattered(share)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(a: i32, b: i32) -> Option<(ScalarValue, ScalarValue)> {
        Some((ScalarValue::Int32(Some(a)), ScalarValue::Int32(Some(b))))
    }

    #[test]
    fn sorted_random_and_unknown() {
        // Sorted, neighbours sharing a boundary value: no strict overlap.
        let sorted = [iv(1, 10), iv(10, 20), iv(20, 30), iv(30, 40)];
        assert_eq!(judge(&sorted), ColumnLayout::Clustered(0.0));
        let random = [iv(1, 40), iv(2, 39), iv(1, 40), iv(3, 40)];
        assert_eq!(judge(&random), ColumnLayout::Scattered(1.0));
        // Half-sorted: each overlaps one of three others.
        let partly = [iv(1, 12), iv(8, 20), iv(21, 32), iv(28, 40)];
        assert!(
            matches!(judge(&partly), ColumnLayout::Clustered(s) if (s - 1.0 / 3.0).abs() < 1e-9)
        );
        assert_eq!(judge(&[iv(1, 2), None]), ColumnLayout::Unknown);
        assert_eq!(judge(&[]), ColumnLayout::Unknown);
    }
}
