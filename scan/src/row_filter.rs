//! Live dynamic filters on the scan's rows, each part kept only while it pays.
//!
//! ```text
//!   dynamic filters ──► static snapshot per generation ──► conjuncts (bounds, IN list,
//!                       hash lookup, partitioned CASE, TopK bound), each measured on its own
//!   batch (output schema) ──► conjuncts in ascending pass ratio, each on the rows the previous
//!                             ones kept:
//!                               measuring, or paying ──► evaluate, drop false / NULL rows
//!                               not paying           ──► one batch in SAMPLE_EVERY only
//!   native path, per row group: conjuncts measured to pay and to keep ≤ 5 % (`paying`) run
//!   inside the Parquet reader as its RowFilter (`FilePlan::row_filter`): their columns decode
//!   first, the others only for the rows they keep (late materialization); then not here
//! ```
//!
//! **The rule.** A conjunct pays when the rows it drops cost more above the scan than
//! evaluating it costs here. A dropped row saves at least one probe of the join that built the
//! filter, plus its repartition and the joins between; evaluating costs what the conjunct
//! measures per row. Range checks and short IN lists cost a few nanoseconds a row, a hash lookup
//! into a large build side tens (a cache miss per row, as the join's own probe). So a conjunct
//! measured at most [`CHEAP_NS_PER_ROW`] keeps running while its decayed pass ratio (`kept /
//! seen`, halved every [`DECAY_ROWS`] rows) is at most [`CHEAP_PASS_RATIO`]; a costlier one only
//! while it keeps at most [`COSTLY_PASS_RATIO`] of the rows (it must save more probes than it
//! adds). Above, one batch in [`SAMPLE_EVERY`] is still evaluated, to notice a filter that
//! tightens (TopK) or completes after the scan started. The first [`WARMUP_ROWS`] rows of a
//! conjunct are always evaluated. Measurements behind the numbers:
//! `bench/reports/native-reader-20261201.md`.
//!
//! **NULL.** Used only where the plan proves what NULL does (`DynamicNulls::Rejected` or
//! `MayPass`, `dynamic_filter_rule.rs`); a row whose conjunct is NULL is dropped, as DataFusion's
//! own Parquet row filter does with the same expressions. Every filter was answered `No`: the
//! operators above still see only rows they would have kept, so nothing is lost and no result
//! depends on this filter running.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Instant;

use arrow::array::{Array, BooleanArray, RecordBatch};
use arrow::compute::{filter_record_batch, prep_null_mask_filter};
use datafusion::common::{Result, ScalarValue};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Literal;
use datafusion::physical_expr::utils::split_conjunction;
use datafusion::physical_expr_common::physical_expr::{
    snapshot_generation, snapshot_physical_expr,
};
use datafusion::physical_plan::metrics::Count;

/// A conjunct measured at or below this cost (ns per row evaluated) is cheap.
pub const CHEAP_NS_PER_ROW: f64 = 5.0;

/// A cheap conjunct keeping at most this share of rows runs on every batch.
pub const CHEAP_PASS_RATIO: f64 = 0.75;

/// A costlier conjunct keeping at most this share of rows runs on every batch.
pub const COSTLY_PASS_RATIO: f64 = 0.02;

/// A paying conjunct keeping at most this share of rows runs inside the Parquet reader (late
/// materialization); above it, the selective decode of the other columns costs more than it
/// saves (SSB q3.x, whose conjuncts keep ~20 %, ran 10–23 % slower inside the reader).
pub const LATE_PASS_RATIO: f64 = 0.05;

/// A conjunct is evaluated on every batch until it has seen this many rows (measuring).
pub const WARMUP_ROWS: f64 = 32_768.0;

/// Rows after which the past weighs half (the measurement follows a filter that changes).
pub const DECAY_ROWS: f64 = 262_144.0;

/// While a conjunct does not pay, one batch in this many is still evaluated.
pub const SAMPLE_EVERY: u64 = 16;

/// The dynamic filters of one scan partition, split into measured conjuncts.
#[derive(Debug)]
pub struct DynamicRowFilter {
    filters: Vec<Arc<dyn PhysicalExpr>>,
    state: Mutex<Vec<Snapshot>>,
    dropped: Count,
    evaluated: Count,
}

/// One filter at one generation: its conjuncts and their measurements. (Evaluating a
/// `DynamicFilterPhysicalExpr` itself rebuilds its inner expression, IN lists included, on
/// every call: that cost more than the rows it dropped saved.)
#[derive(Debug, Default)]
struct Snapshot {
    generation: Option<u64>,
    conjuncts: Vec<Conjunct>,
}

#[derive(Debug)]
struct Conjunct {
    expr: Arc<dyn PhysicalExpr>,
    seen: f64,
    kept: f64,
    nanos: f64,
    batches: u64,
}

impl Conjunct {
    fn new(expr: Arc<dyn PhysicalExpr>) -> Self {
        Self {
            expr,
            seen: 0.0,
            kept: 0.0,
            nanos: 0.0,
            batches: 0,
        }
    }

    fn pass_ratio(&self) -> f64 {
        if self.seen == 0.0 {
            0.0
        } else {
            self.kept / self.seen
        }
    }

    /// The pass ratio at or below which it pays, by its measured cost (module docs).
    fn limit(&self) -> f64 {
        if self.seen > 0.0 && self.nanos / self.seen <= CHEAP_NS_PER_ROW {
            CHEAP_PASS_RATIO
        } else {
            COSTLY_PASS_RATIO
        }
    }

    /// Whether to evaluate it on the next batch (module docs).
    fn should_evaluate(&mut self) -> bool {
        self.batches += 1;
        self.seen < WARMUP_ROWS
            || self.pass_ratio() <= self.limit()
            || self.batches.is_multiple_of(SAMPLE_EVERY)
    }

    fn record(&mut self, rows: usize, kept: usize, nanos: f64) {
        self.seen += rows as f64;
        self.kept += kept as f64;
        self.nanos += nanos;
        if self.seen > 2.0 * DECAY_ROWS {
            self.seen /= 2.0;
            self.kept /= 2.0;
            self.nanos /= 2.0;
        }
    }
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
            state: Mutex::new((0..filters.len()).map(|_| Snapshot::default()).collect()),
            filters,
            dropped,
            evaluated,
        })
    }

    /// `batch` without the rows the paying conjuncts rule out (module docs), leaving out the
    /// conjuncts `skip` (already evaluated by the Parquet reader on these rows).
    ///
    /// Errors: a filter fails to snapshot or to evaluate on the batch.
    pub fn apply(&self, batch: RecordBatch, skip: &[ConjunctKey]) -> Result<RecordBatch> {
        if batch.num_rows() == 0 {
            return Ok(batch);
        }
        let mut state = self.state.lock().expect("row filter state");
        self.refresh(&mut state)?;
        let mut order: Vec<(ConjunctKey, &mut Conjunct)> = vec![];
        for (f, snapshot) in state.iter_mut().enumerate() {
            let generation = snapshot.generation.unwrap_or_default();
            for (index, c) in snapshot.conjuncts.iter_mut().enumerate() {
                let key = ConjunctKey {
                    filter: f,
                    generation,
                    index,
                };
                if !skip.contains(&key) {
                    order.push((key, c));
                }
            }
        }
        order.sort_by(|a, b| a.1.pass_ratio().total_cmp(&b.1.pass_ratio()));
        let before = batch.num_rows();
        let mut batch = batch;
        for (_, c) in order {
            if batch.num_rows() == 0 {
                break;
            }
            if !c.should_evaluate() {
                continue;
            }
            let rows = batch.num_rows();
            let started = Instant::now();
            let Some(mask) = evaluate(&c.expr, &batch)? else {
                continue;
            };
            let kept = mask.true_count();
            if kept < rows {
                batch = filter_record_batch(&batch, &mask)?;
            }
            c.record(rows, kept, started.elapsed().as_nanos() as f64);
            self.evaluated.add(rows);
        }
        self.dropped.add(before - batch.num_rows());
        Ok(batch)
    }

    /// The conjuncts measured to pay now (past their warm-up, at or below their pass limit) and
    /// to keep at most [`LATE_PASS_RATIO`]: what the native reader may evaluate inside the
    /// Parquet reader, before decoding the other columns (late materialization).
    ///
    /// Errors: a filter fails to snapshot.
    pub fn paying(&self) -> Result<Vec<(ConjunctKey, Arc<dyn PhysicalExpr>)>> {
        let mut state = self.state.lock().expect("row filter state");
        self.refresh(&mut state)?;
        let mut out = vec![];
        for (f, snapshot) in state.iter().enumerate() {
            let generation = snapshot.generation.unwrap_or_default();
            for (index, c) in snapshot.conjuncts.iter().enumerate() {
                if c.seen >= WARMUP_ROWS && c.pass_ratio() <= c.limit().min(LATE_PASS_RATIO) {
                    let key = ConjunctKey {
                        filter: f,
                        generation,
                        index,
                    };
                    out.push((key, Arc::clone(&c.expr)));
                }
            }
        }
        out.sort_by(|a, b| {
            let ratio = |k: &ConjunctKey| state[k.filter].conjuncts[k.index].pass_ratio();
            ratio(&a.0).total_cmp(&ratio(&b.0))
        });
        Ok(out)
    }

    /// Records an evaluation of conjunct `key` inside the reader: `rows` seen, `kept` kept,
    /// `nanos` spent (ignored when its filter moved to another generation meanwhile).
    pub fn record(&self, key: ConjunctKey, rows: usize, kept: usize, nanos: f64) {
        self.evaluated.add(rows);
        self.dropped.add(rows - kept);
        let mut state = self.state.lock().expect("row filter state");
        if let Some(snapshot) = state.get_mut(key.filter)
            && snapshot.generation == Some(key.generation)
            && let Some(c) = snapshot.conjuncts.get_mut(key.index)
        {
            c.record(rows, kept, nanos);
        }
    }

    /// Snapshots each filter whose generation changed and splits it into conjuncts.
    fn refresh(&self, state: &mut [Snapshot]) -> Result<()> {
        for (f, snapshot) in self.filters.iter().zip(state.iter_mut()) {
            let generation = snapshot_generation(f);
            if snapshot.generation != Some(generation) {
                let expr = snapshot_physical_expr(Arc::clone(f))?;
                snapshot.generation = Some(generation);
                snapshot.conjuncts = split_conjunction(&expr)
                    .into_iter()
                    .filter(|c| !trivially_true(c))
                    .map(|c| Conjunct::new(Arc::clone(c)))
                    .collect();
            }
        }
        Ok(())
    }
}

/// Which conjunct of which filter, at which generation of that filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConjunctKey {
    filter: usize,
    generation: u64,
    index: usize,
}

/// `expr` on `batch` as a filter mask (NULL as false); `None` when it is not boolean.
///
/// Errors: the expression fails to evaluate.
pub fn evaluate(expr: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Result<Option<BooleanArray>> {
    let mask = expr.evaluate(batch)?.into_array(batch.num_rows())?;
    let Some(mask) = mask.as_any().downcast_ref::<BooleanArray>() else {
        return Ok(None);
    };
    Ok(Some(if mask.null_count() > 0 {
        prep_null_mask_filter(mask)
    } else {
        mask.clone()
    }))
}

/// Whether an expression is the literal `true` (a dynamic filter whose producer is not done).
fn trivially_true(e: &Arc<dyn PhysicalExpr>) -> bool {
    e.downcast_ref::<Literal>()
        .is_some_and(|l| l.value() == &ScalarValue::Boolean(Some(true)))
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
    fn drops_false_and_null_rows_and_samples_a_conjunct_that_does_not_pay() {
        let b = batch(vec![Some(1), Some(5), None, Some(9)]);
        let schema = b.schema();
        let gt =
            |v: i32| binary(col("k", &schema).unwrap(), Operator::Gt, lit(v), &schema).unwrap();
        let (dropped, evaluated) = (Count::new(), Count::new());
        let filter = DynamicRowFilter::new(vec![gt(4)], dropped.clone(), evaluated).unwrap();
        let out = filter.apply(b, &[]).unwrap();
        assert_eq!(out.num_rows(), 2);
        assert_eq!(dropped.value(), 2);

        // `k > 0 AND k > 8100`: the selective conjunct runs on every batch, the one that keeps
        // every row only through the warm-up and then in samples. The selective one keeps
        // 92 / 8192 = 1.1 %, under `COSTLY_PASS_RATIO`, so it pays whatever its measured cost
        // (timing on a loaded machine must not decide the outcome: `k > 8000` keeps 2.3 % and
        // was dropped as not paying when a debug build measured it above `CHEAP_NS_PER_ROW`).
        let both = binary(gt(0), Operator::And, gt(8100), &schema).unwrap();
        let (dropped, evaluated) = (Count::new(), Count::new());
        let filter = DynamicRowFilter::new(vec![both], dropped.clone(), evaluated.clone()).unwrap();
        let big = batch((1..=8192).map(Some).collect());
        let rounds = 64;
        for _ in 0..rounds {
            assert_eq!(filter.apply(big.clone(), &[]).unwrap().num_rows(), 92);
        }
        assert_eq!(dropped.value(), rounds * (8192 - 92));
        // The selective one sees every row; the other one whole batch (before either was
        // measured), then, sorted after it, at most the 92 survivors.
        assert!(evaluated.value() >= rounds * 8192);
        assert!(evaluated.value() <= rounds * (8192 + 92) + 8192);
    }
}
