//! Live dynamic filters on the scan's rows, kept only while they pay.
//!
//! ```text
//!   batch (output schema) ──► every filter trivially true (not yet complete)? ──► pass, unmeasured
//!                         ──► measuring or paying? ── no (sample 1 in SAMPLE_EVERY) ──► pass
//!                               │ yes
//!                               ▼
//!                         evaluate the filters (hash lookup, IN list, partitioned CASE, TopK
//!                         bound) ──► drop the rows where any is false or NULL ──► pass ratio
//! ```
//!
//! **The rule.** A filter pays when the rows it drops cost more above the scan than evaluating
//! it costs here. Evaluating a join's filter is about one hash probe per row, what the join
//! would spend on the row anyway; a dropped row also saves its repartition, its copy into the
//! join's output and everything between. So a filter is evaluated while its decayed pass ratio
//! (`kept / seen`, halved every [`DECAY_ROWS`] rows seen) stays at or below [`PAY_RATIO`]; above
//! it only one batch in [`SAMPLE_EVERY`] is evaluated, to notice a filter that tightens later
//! (TopK) or completes after the scan started (a join's build side). Measurement behind the
//! numbers: `bench/reports/native-reader-20261201.md`.
//!
//! **NULL.** Used only where the plan proves what NULL does (`DynamicNulls::Rejected` or
//! `MayPass`, `dynamic_filter_rule.rs`); a row whose filter is NULL is dropped, as DataFusion's
//! own Parquet row filter does with the same expressions. Every filter was answered `No`: the
//! operators above still see only rows they would have kept, so nothing is evaluated twice for
//! correctness and nothing passing is lost.

use std::sync::Arc;
use std::sync::Mutex;

use arrow::array::{Array, BooleanArray, RecordBatch};
use arrow::compute::{and, filter_record_batch, prep_null_mask_filter};
use datafusion::common::{Result, ScalarValue};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{DynamicFilterPhysicalExpr, Literal};
use datafusion::physical_plan::metrics::Count;

/// A filter keeping more than this share of rows is not evaluated on every batch.
pub const PAY_RATIO: f64 = 0.75;

/// While fewer rows than this were seen, every batch is evaluated (measuring).
pub const WARMUP_ROWS: f64 = 32_768.0;

/// Rows after which the past weighs half (the pass ratio follows a filter that changes).
pub const DECAY_ROWS: f64 = 262_144.0;

/// While a filter does not pay, one batch in this many is still evaluated.
pub const SAMPLE_EVERY: u64 = 16;

/// The dynamic filters of one scan partition with their measured pass ratio.
#[derive(Debug)]
pub struct DynamicRowFilter {
    filters: Vec<Arc<dyn PhysicalExpr>>,
    state: Mutex<Ratio>,
    dropped: Count,
    evaluated: Count,
}

#[derive(Debug, Default)]
struct Ratio {
    seen: f64,
    kept: f64,
    batches: u64,
}

impl DynamicRowFilter {
    /// Filters `filters` (expressions over the scan's output schema), counting rows dropped
    /// and rows evaluated; `None` when there is none.
    pub fn new(
        filters: Vec<Arc<dyn PhysicalExpr>>,
        dropped: Count,
        evaluated: Count,
    ) -> Option<Self> {
        (!filters.is_empty()).then(|| Self {
            filters,
            state: Mutex::new(Ratio::default()),
            dropped,
            evaluated,
        })
    }

    /// `batch` without the rows the filters rule out, when evaluating them pays (module docs).
    ///
    /// Errors: a filter fails to evaluate on the batch.
    pub fn apply(&self, batch: RecordBatch) -> Result<RecordBatch> {
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(batch);
        }
        let live: Vec<&Arc<dyn PhysicalExpr>> =
            self.filters.iter().filter(|f| !trivially_true(f)).collect();
        if live.is_empty() || !self.should_evaluate() {
            return Ok(batch);
        }
        let mut mask: Option<BooleanArray> = None;
        for f in live {
            let m = f.evaluate(&batch)?.into_array(rows)?;
            let m = m
                .as_any()
                .downcast_ref::<BooleanArray>()
                .cloned()
                .unwrap_or_else(|| BooleanArray::from(vec![true; rows]));
            mask = Some(match mask {
                Some(prev) => and(&prev, &m)?,
                None => m,
            });
        }
        let mask = mask.expect("at least one live filter");
        let mask = if mask.null_count() > 0 {
            prep_null_mask_filter(&mask)
        } else {
            mask
        };
        let kept = mask.true_count();
        self.record(rows, kept);
        self.evaluated.add(rows);
        if kept == rows {
            return Ok(batch);
        }
        self.dropped.add(rows - kept);
        Ok(filter_record_batch(&batch, &mask)?)
    }

    fn should_evaluate(&self) -> bool {
        let mut s = self.state.lock().expect("row filter state");
        s.batches += 1;
        s.seen < WARMUP_ROWS
            || s.kept <= PAY_RATIO * s.seen
            || s.batches.is_multiple_of(SAMPLE_EVERY)
    }

    fn record(&self, rows: usize, kept: usize) {
        let mut s = self.state.lock().expect("row filter state");
        s.seen += rows as f64;
        s.kept += kept as f64;
        if s.seen > 2.0 * DECAY_ROWS {
            s.seen /= 2.0;
            s.kept /= 2.0;
        }
    }
}

/// Whether `f` is a dynamic filter still at its initial `true` (its producer not done).
fn trivially_true(f: &Arc<dyn PhysicalExpr>) -> bool {
    let Some(d) = f.downcast_ref::<DynamicFilterPhysicalExpr>() else {
        return false;
    };
    d.current().is_ok_and(|e| {
        e.downcast_ref::<Literal>()
            .is_some_and(|l| l.value() == &ScalarValue::Boolean(Some(true)))
    })
}

#[cfg(test)]
mod tests {
    use arrow::array::{ArrayRef, Int32Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{binary, col, lit};

    use super::*;

    fn batch(values: Vec<Option<i32>>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int32, true)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int32Array::from(values)) as ArrayRef]).unwrap()
    }

    #[test]
    fn drops_false_and_null_rows_and_stops_when_it_does_not_pay() {
        let b = batch(vec![Some(1), Some(5), None, Some(9)]);
        let schema = b.schema();
        let f = binary(col("k", &schema).unwrap(), Operator::Gt, lit(4), &schema).unwrap();
        let (dropped, evaluated) = (Count::new(), Count::new());
        let filter = DynamicRowFilter::new(vec![f], dropped.clone(), evaluated.clone()).unwrap();
        let out = filter.apply(b).unwrap();
        assert_eq!(out.num_rows(), 2);
        assert_eq!(dropped.value(), 2);

        // A filter that keeps every row: measured through the warm-up, then sampled.
        let keep_all = binary(col("k", &schema).unwrap(), Operator::Gt, lit(0), &schema).unwrap();
        let (dropped, evaluated) = (Count::new(), Count::new());
        let filter = DynamicRowFilter::new(vec![keep_all], dropped, evaluated.clone()).unwrap();
        let big = batch((1..=8192).map(Some).collect());
        for _ in 0..64 {
            filter.apply(big.clone()).unwrap();
        }
        let warmup = (WARMUP_ROWS as usize).div_ceil(8192) * 8192;
        assert!(evaluated.value() >= warmup);
        assert!(evaluated.value() <= warmup + 8192 * (64 / SAMPLE_EVERY as usize + 1));
    }
}
