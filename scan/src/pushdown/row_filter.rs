//! Filters on the scan's rows, each part kept only while it pays: the live dynamic filters of
//! joins, TopK and aggregates, and the static filters of the query (WHERE) whose conjuncts
//! cannot fail on any row.
//!
//! ```text
//!   dynamic filters ──► static snapshot per generation ──► conjuncts (bounds, IN list,
//!                       hash lookup, partitioned CASE, TopK bound), each measured on its own
//!   static filters  ──► conjuncts that cannot fail (`infallible`: comparisons, IN lists, LIKE,
//!                       IS NULL, widening casts of columns and literals)
//!   batch (output schema) ──► conjuncts in ascending pass ratio, each on the rows the previous
//!                             ones kept:
//!                               measuring, or paying ──► evaluate, drop false / NULL rows
//!                               not paying           ──► one batch in SAMPLE_EVERY only
//!   native path, per row group: the paying conjuncts, in ascending pass ratio, until together
//!   they keep ≤ 5 % (`paying`), run inside the Parquet reader as its RowFilter
//!   (`FilePlan::row_filter`): their columns decode first, the others only for the rows they
//!   keep (late materialization); then not here
//! ```
//!
//! **Static conjuncts.** The `FilterExec` above the scan evaluates the whole WHERE anyway (every
//! filter is answered `No`), in the order the query wrote it: TPC-H q12 compares `l_shipmode`
//! strings on all 6 M rows before the `l_receiptdate` range that keeps 15 %. Here each
//! conjunct is measured and the most selective runs first, so the filter above sees only the
//! rows that pass. A static conjunct pays while it keeps at most [`STATIC_PASS_RATIO`] whatever
//! its cost (the filter above would evaluate it on the same rows). Only conjuncts that cannot
//! fail are taken: evaluated out of the query's order, `x <> 0 AND 10 / x > 1` would divide by
//! zero on rows the query's order never divides.
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

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, RecordBatch, RecordBatchOptions, UInt32Array,
    new_null_array,
};
use arrow::compute::{cast, concat, filter_record_batch, prep_null_mask_filter, take};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{InListExpr, Literal};
use datafusion::physical_expr::utils::{collect_columns, conjunction, split_conjunction};
use datafusion::physical_expr_common::physical_expr::{
    snapshot_generation, snapshot_physical_expr,
};
use datafusion::physical_plan::metrics::Count;

use crate::pushdown::integer_set::IntegerSetExpr;

/// A conjunct measured at or below this cost (ns per row evaluated) is cheap.
pub const CHEAP_NS_PER_ROW: f64 = 5.0;

/// A cheap conjunct keeping at most this share of rows runs on every batch.
pub const CHEAP_PASS_RATIO: f64 = 0.75;

/// A costlier conjunct keeping at most this share of rows runs on every batch.
pub const COSTLY_PASS_RATIO: f64 = 0.02;

/// A static conjunct (the query's own) keeping at most this share of rows runs on every batch,
/// whatever its cost: the filter above evaluates it anyway, here it runs first and on
/// dictionaries. Above, copying the kept rows once more costs more than it saves (TPC-H q03,
/// whose date conjuncts keep ~50 %, ran 21 % slower at 0.75; q12's ship modes keep 29 %).
pub const STATIC_PASS_RATIO: f64 = 0.3;

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

/// The row filters of one scan partition, split into measured conjuncts.
#[derive(Debug)]
pub struct ScanRowFilter {
    filters: Vec<(FilterKind, Arc<dyn PhysicalExpr>)>,
    schema: SchemaRef,
    state: Mutex<Vec<Snapshot>>,
    counters: RowFilterCounters,
}

/// Where a filter of the scan comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterKind {
    /// The query's own filter (WHERE, a join's pushed condition): only its infallible
    /// conjuncts are taken.
    Static,
    /// A live dynamic filter (join build side, TopK, min/max aggregate).
    Dynamic,
}

/// The counters a [`ScanRowFilter`] adds to (`metrics.rs`).
#[derive(Debug, Clone, Default)]
pub struct RowFilterCounters {
    /// Rows dropped by dynamic conjuncts.
    pub dynamic_dropped: Count,
    /// Rows dynamic conjuncts were evaluated on (each conjunct counts its rows).
    pub dynamic_evaluated: Count,
    /// Rows dropped by static conjuncts.
    pub static_dropped: Count,
    /// Rows static conjuncts were evaluated on (each conjunct counts its rows).
    pub static_evaluated: Count,
    /// Rows the first conjunct inside the Parquet reader was evaluated on: the rows whose
    /// filter columns were decoded, while the other columns decode only the rows kept.
    pub late_rows: Count,
}

impl RowFilterCounters {
    fn add(&self, kind: FilterKind, rows: usize, dropped: usize) {
        let (e, d) = match kind {
            FilterKind::Static => (&self.static_evaluated, &self.static_dropped),
            FilterKind::Dynamic => (&self.dynamic_evaluated, &self.dynamic_dropped),
        };
        e.add(rows);
        d.add(dropped);
    }
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
    kind: FilterKind,
    seen: f64,
    kept: f64,
    nanos: f64,
    batches: u64,
}

impl Conjunct {
    fn new(expr: Arc<dyn PhysicalExpr>, kind: FilterKind) -> Self {
        Self {
            expr,
            kind,
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
        if self.kind == FilterKind::Static {
            STATIC_PASS_RATIO
        } else if self.seen > 0.0 && self.nanos / self.seen <= CHEAP_NS_PER_ROW {
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

impl ScanRowFilter {
    /// Filters `filters` (expressions over `schema`, the scan's output, each of its kind),
    /// counting into `counters`; `None` when there is none.
    pub fn new(
        filters: Vec<(FilterKind, Arc<dyn PhysicalExpr>)>,
        schema: SchemaRef,
        counters: RowFilterCounters,
    ) -> Option<Self> {
        (!filters.is_empty()).then(|| Self {
            schema,
            state: Mutex::new((0..filters.len()).map(|_| Snapshot::default()).collect()),
            filters,
            counters,
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
            self.counters.add(c.kind, rows, rows - kept);
        }
        Ok(batch)
    }

    /// The conjuncts measured to pay now (past their warm-up, at or below their pass limit),
    /// in ascending pass ratio, up to the first at which together they keep at most
    /// [`LATE_PASS_RATIO`] (their pass ratios multiplied, as if independent); none when all of
    /// them keep more. What the native reader may evaluate inside the Parquet reader, in this
    /// order, before decoding the other columns (late materialization).
    ///
    /// Errors: a filter fails to snapshot.
    pub fn paying(&self) -> Result<Vec<(ConjunctKey, Arc<dyn PhysicalExpr>)>> {
        let mut state = self.state.lock().expect("row filter state");
        self.refresh(&mut state)?;
        let mut candidates = vec![];
        for (f, snapshot) in state.iter().enumerate() {
            let generation = snapshot.generation.unwrap_or_default();
            for (index, c) in snapshot.conjuncts.iter().enumerate() {
                if c.seen >= WARMUP_ROWS && c.pass_ratio() <= c.limit() {
                    let key = ConjunctKey {
                        filter: f,
                        generation,
                        index,
                    };
                    candidates.push((c.pass_ratio(), key, Arc::clone(&c.expr)));
                }
            }
        }
        candidates.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut out = vec![];
        let mut together = 1.0;
        for (ratio, key, expr) in candidates {
            out.push((key, expr));
            together *= ratio;
            if together <= LATE_PASS_RATIO {
                return Ok(out);
            }
        }
        Ok(vec![])
    }

    /// Records an evaluation of conjunct `key` inside the reader: `rows` seen, `kept` kept,
    /// `nanos` spent (ignored when its filter moved to another generation meanwhile).
    pub fn record(&self, key: ConjunctKey, rows: usize, kept: usize, nanos: f64) {
        if let Some((kind, _)) = self.filters.get(key.filter) {
            self.counters.add(*kind, rows, rows - kept);
        }
        let mut state = self.state.lock().expect("row filter state");
        if let Some(snapshot) = state.get_mut(key.filter)
            && snapshot.generation == Some(key.generation)
            && let Some(c) = snapshot.conjuncts.get_mut(key.index)
        {
            c.record(rows, kept, nanos);
        }
    }

    /// The output columns any of its filters reads, ascending.
    pub fn columns(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .filters
            .iter()
            .flat_map(|(_, f)| collect_columns(f))
            .map(|c| c.index())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Counts `rows` reaching the first conjunct inside the Parquet reader
    /// ([`RowFilterCounters::late_rows`]).
    pub fn record_late_rows(&self, rows: usize) {
        self.counters.late_rows.add(rows);
    }

    /// Snapshots each filter whose generation changed and splits it into conjuncts.
    fn refresh(&self, state: &mut [Snapshot]) -> Result<()> {
        for ((kind, f), snapshot) in self.filters.iter().zip(state.iter_mut()) {
            let generation = snapshot_generation(f);
            if snapshot.generation != Some(generation) {
                let expr = snapshot_physical_expr(Arc::clone(f))?;
                snapshot.generation = Some(generation);
                let parts: Vec<Arc<dyn PhysicalExpr>> = split_conjunction(&expr)
                    .into_iter()
                    .filter(|c| !trivially_true(c))
                    .filter(|c| *kind == FilterKind::Dynamic || infallible(c, &self.schema))
                    .map(|c| as_integer_set(c, &self.schema))
                    .collect();
                let parts = match kind {
                    FilterKind::Dynamic => parts,
                    FilterKind::Static => by_single_column(parts),
                };
                snapshot.conjuncts = parts.into_iter().map(|c| Conjunct::new(c, *kind)).collect();
            }
        }
        Ok(())
    }
}

/// `c` as an [`IntegerSetExpr`] where it is an integer column's IN list the bitmap covers (a
/// bit test per row instead of a hash-set probe), else `c`.
fn as_integer_set(c: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Arc<dyn PhysicalExpr> {
    c.downcast_ref::<InListExpr>()
        .and_then(|l| IntegerSetExpr::try_from_in_list(l, schema))
        .map_or_else(
            || Arc::clone(c),
            |set| Arc::new(set) as Arc<dyn PhysicalExpr>,
        )
}

/// `parts` with those over one and the same column joined by AND, in place of the first: a
/// range written as two bounds (`d >= a AND d < b`) is measured as the one conjunct it is
/// (each bound alone may keep half the rows while together they keep 1 %).
fn by_single_column(parts: Vec<Arc<dyn PhysicalExpr>>) -> Vec<Arc<dyn PhysicalExpr>> {
    // (the one column, or `None` for a conjunct of several) and the conjuncts of the group
    type Group = (Option<usize>, Vec<Arc<dyn PhysicalExpr>>);
    let mut out: Vec<Group> = vec![];
    for p in parts {
        let columns = collect_columns(&p);
        let single = (columns.len() == 1)
            .then(|| columns.iter().next().map(|c| c.index()))
            .flatten();
        match out
            .iter_mut()
            .find(|(c, _)| single.is_some() && *c == single)
        {
            Some((_, group)) => group.push(p),
            None => out.push((single, vec![p])),
        }
    }
    out.into_iter()
        .map(|(_, group)| conjunction(group))
        .collect()
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
/// `batch` may hold a string column as a dictionary (`Dictionary(Int32, Utf8)`, read so by the
/// native path where a conjunct uses it) where `expr` was planned on its values: a conjunct of
/// that one column is evaluated once per distinct value (and once on NULL when the column has
/// NULLs), its answers then taken by the rows' keys; other conjuncts see the column's values.
///
/// Errors: the expression fails to evaluate.
pub fn evaluate(expr: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Result<Option<BooleanArray>> {
    let columns = collect_columns(expr);
    let dictionaries: Vec<usize> = columns
        .iter()
        .map(|c| c.index())
        .filter(|&i| {
            i < batch.num_columns()
                && matches!(batch.column(i).data_type(), DataType::Dictionary(_, _))
        })
        .collect();
    let mask = match dictionaries.as_slice() {
        [] => expr.evaluate(batch)?.into_array(batch.num_rows())?,
        [one] if columns.len() == 1 => match on_dictionary_values(expr, batch, *one)? {
            Some(mask) => mask,
            None => expr
                .evaluate(&with_values(batch, &dictionaries)?)?
                .into_array(batch.num_rows())?,
        },
        _ => expr
            .evaluate(&with_values(batch, &dictionaries)?)?
            .into_array(batch.num_rows())?,
    };
    let Some(mask) = mask.as_any().downcast_ref::<BooleanArray>() else {
        return Ok(None);
    };
    Ok(Some(if mask.null_count() > 0 {
        prep_null_mask_filter(mask)
    } else {
        mask.clone()
    }))
}

/// `expr` (over column `index` of `batch` only, a dictionary) evaluated on the dictionary's
/// values and taken by the keys; `None` when the dictionary holds more values than the batch
/// rows (evaluating the rows is then cheaper) or none at all.
fn on_dictionary_values(
    expr: &Arc<dyn PhysicalExpr>,
    batch: &RecordBatch,
    index: usize,
) -> Result<Option<ArrayRef>> {
    let column = batch.column(index);
    let Some(dictionary) = column.as_any_dictionary_opt() else {
        return Ok(None);
    };
    let values = dictionary.values();
    // No values (a chunk of NULLs only): the rows are evaluated as values instead.
    if values.is_empty() || values.len() > batch.num_rows() {
        return Ok(None);
    }
    // One more value, NULL, at position `n` for the rows whose key is NULL.
    let n = values.len();
    let has_nulls = column.null_count() > 0;
    let values = if has_nulls {
        concat(&[
            values.as_ref(),
            new_null_array(values.data_type(), 1).as_ref(),
        ])?
    } else {
        Arc::clone(values)
    };
    let rows = values.len();
    // Every column nullable: the other columns are all NULL here, and this one may be.
    let schema = batch.schema();
    let mut fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    fields[index] = fields[index]
        .clone()
        .with_data_type(values.data_type().clone());
    let columns: Vec<ArrayRef> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if i == index {
                Arc::clone(&values)
            } else {
                new_null_array(f.data_type(), rows)
            }
        })
        .collect();
    let per_value = RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )?;
    let answers = expr.evaluate(&per_value)?.into_array(rows)?;
    let mut keys = dictionary.normalized_keys();
    if has_nulls && let Some(nulls) = column.logical_nulls() {
        for (k, valid) in keys.iter_mut().zip(nulls.iter()) {
            if !valid {
                *k = n;
            }
        }
    }
    let indices = UInt32Array::from_iter_values(keys.into_iter().map(|k| k as u32));
    Ok(Some(take(answers.as_ref(), &indices, None)?))
}

/// `batch` with the dictionary columns `indices` as their values (the types filters were
/// planned on).
fn with_values(batch: &RecordBatch, indices: &[usize]) -> Result<RecordBatch> {
    let schema = batch.schema();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut columns = batch.columns().to_vec();
    for &i in indices {
        if let DataType::Dictionary(_, value) = columns[i].data_type().clone() {
            columns[i] = cast(&columns[i], &value)?;
            fields[i] = fields[i].clone().with_data_type(*value);
        }
    }
    Ok(RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?)
}

/// Whether evaluating `e` cannot fail on any row, so it may run before, or without, the
/// conjuncts the query wrote before it: columns, literals, comparisons, AND / OR / NOT, IN
/// lists, LIKE, `IS [NOT] NULL`, and casts that only widen (integers to wider integers, floats or
/// decimals with room for every value; decimals to more digits; strings between their layouts;
/// a dictionary to its values). Arithmetic (overflow, division by zero), functions and other
/// casts (parsing, narrowing) are not.
/// `schema` is the schema `e` reads (the scan's output).
pub fn infallible(e: &Arc<dyn PhysicalExpr>, schema: &Schema) -> bool {
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{
        BinaryExpr, CastExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, LikeExpr, NotExpr,
        TryCastExpr,
    };
    if e.downcast_ref::<Column>().is_some() || e.downcast_ref::<Literal>().is_some() {
        return true;
    }
    if let Some(b) = e.downcast_ref::<BinaryExpr>() {
        return matches!(
            b.op(),
            Operator::Eq
                | Operator::NotEq
                | Operator::Lt
                | Operator::LtEq
                | Operator::Gt
                | Operator::GtEq
                | Operator::And
                | Operator::Or
                | Operator::IsDistinctFrom
                | Operator::IsNotDistinctFrom
        ) && infallible(b.left(), schema)
            && infallible(b.right(), schema);
    }
    if let Some(l) = e.downcast_ref::<InListExpr>() {
        return infallible(l.expr(), schema) && l.list().iter().all(|e| infallible(e, schema));
    }
    if let Some(l) = e.downcast_ref::<LikeExpr>() {
        return infallible(l.expr(), schema) && l.pattern().downcast_ref::<Literal>().is_some();
    }
    if let Some(n) = e.downcast_ref::<NotExpr>() {
        return infallible(n.arg(), schema);
    }
    if let Some(n) = e.downcast_ref::<IsNullExpr>() {
        return infallible(n.arg(), schema);
    }
    if let Some(n) = e.downcast_ref::<IsNotNullExpr>() {
        return infallible(n.arg(), schema);
    }
    if let Some(c) = e.downcast_ref::<TryCastExpr>() {
        return infallible(c.expr(), schema);
    }
    if let Some(c) = e.downcast_ref::<CastExpr>() {
        let Ok(from) = c.expr().data_type(schema) else {
            return false;
        };
        return widening(&from, c.cast_type()) && infallible(c.expr(), schema);
    }
    false
}

/// Whether every value of `from` has a value of `to` (module docs of [`infallible`]).
fn widening(from: &arrow::datatypes::DataType, to: &arrow::datatypes::DataType) -> bool {
    use arrow::datatypes::DataType::*;
    // Decimal digits left of the point each integer type needs.
    let int_digits = |t: &arrow::datatypes::DataType| -> Option<(bool, u32, i16)> {
        Some(match t {
            Int8 => (true, 8, 3),
            Int16 => (true, 16, 5),
            Int32 => (true, 32, 10),
            Int64 => (true, 64, 19),
            UInt8 => (false, 8, 3),
            UInt16 => (false, 16, 5),
            UInt32 => (false, 32, 10),
            UInt64 => (false, 64, 20),
            _ => return None,
        })
    };
    if from == to {
        return true;
    }
    match (from, to) {
        (Dictionary(_, v), to) => widening(v, to),
        (Utf8 | LargeUtf8 | Utf8View, Utf8 | LargeUtf8 | Utf8View) => true,
        (Binary | LargeBinary | BinaryView, Binary | LargeBinary | BinaryView) => true,
        (Float16 | Float32, Float32 | Float64) => true,
        (f, Float32 | Float64) if int_digits(f).is_some() => true,
        (f, t) if int_digits(f).is_some() && int_digits(t).is_some() => {
            let (fs, fb, _) = int_digits(f).unwrap_or_default();
            let (ts, tb, _) = int_digits(t).unwrap_or_default();
            (fs == ts && tb >= fb) || (!fs && ts && tb > fb)
        }
        (f, Decimal128(p, s) | Decimal256(p, s)) if int_digits(f).is_some() => {
            let (_, _, digits) = int_digits(f).unwrap_or_default();
            *p as i16 - *s as i16 >= digits
        }
        (Decimal128(p1, s1) | Decimal256(p1, s1), Decimal128(p2, s2) | Decimal256(p2, s2)) => {
            s2 >= s1 && (*p2 as i16 - *s2 as i16) >= (*p1 as i16 - *s1 as i16)
        }
        (Date32, Date64) => true,
        _ => false,
    }
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
        let dynamic = |e| vec![(FilterKind::Dynamic, e)];
        let counters = RowFilterCounters::default();
        let filter =
            ScanRowFilter::new(dynamic(gt(4)), Arc::clone(&schema), counters.clone()).unwrap();
        let out = filter.apply(b, &[]).unwrap();
        assert_eq!(out.num_rows(), 2);
        assert_eq!(counters.dynamic_dropped.value(), 2);

        // `k > 0 AND k > 8100`: the selective conjunct runs on every batch, the one that keeps
        // every row only through the warm-up and then in samples. The selective one keeps
        // 92 / 8192 = 1.1 %, under `COSTLY_PASS_RATIO`, so it pays whatever its measured cost
        // (timing on a loaded machine must not decide the outcome: `k > 8000` keeps 2.3 % and
        // was dropped as not paying when a debug build measured it above `CHEAP_NS_PER_ROW`).
        let both = binary(gt(0), Operator::And, gt(8100), &schema).unwrap();
        let counters = RowFilterCounters::default();
        let filter =
            ScanRowFilter::new(dynamic(both), Arc::clone(&schema), counters.clone()).unwrap();
        let (dropped, evaluated) = (&counters.dynamic_dropped, &counters.dynamic_evaluated);
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

    /// An IN list of integer keys (a join's dynamic filter) runs as a bitmap, inside the
    /// reader too, and keeps the rows the list keeps.
    #[test]
    fn integer_in_lists_run_as_bitmaps() {
        let schema = batch(vec![]).schema();
        let keys = (0..100).map(|k| lit(k * 7)).collect();
        let list = datafusion::physical_expr::expressions::in_list(
            col("k", &schema).unwrap(),
            keys,
            &false,
            &schema,
        )
        .unwrap();
        let counters = RowFilterCounters::default();
        let filter = ScanRowFilter::new(
            vec![(FilterKind::Dynamic, list)],
            Arc::clone(&schema),
            counters,
        )
        .unwrap();
        let b = batch((0..8192).map(Some).chain([None]).collect());
        // Past the warm-up (`WARMUP_ROWS`), keeping 1.2 % (under `COSTLY_PASS_RATIO`, so it
        // pays whatever a debug build measures): it runs inside the reader.
        for _ in 0..5 {
            assert_eq!(filter.apply(b.clone(), &[]).unwrap().num_rows(), 100);
        }
        let paying = filter.paying().unwrap();
        assert_eq!(paying.len(), 1);
        assert!(paying[0].1.downcast_ref::<IntegerSetExpr>().is_some());
    }

    #[test]
    fn static_conjuncts_run_most_selective_first_and_only_when_they_cannot_fail() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int32, true),
            Field::new("j", DataType::Int32, true),
        ]));
        let k = || col("k", &schema).unwrap();
        let j = || col("j", &schema).unwrap();
        let cmp = |c, op, v: i32| binary(c, op, lit(v), &schema).unwrap();
        let and = |a, b| binary(a, Operator::And, b, &schema).unwrap();
        // Written order: `j = 0` (keeps half), then `k > 8100 AND k < 9000` (1.1 %, one
        // conjunct: both bounds are on k), then a division that fails on k = 0, which may not
        // be moved before the conjuncts written ahead of it (so the scan leaves it out).
        let divided = binary(
            binary(lit(100), Operator::Divide, k(), &schema).unwrap(),
            Operator::Gt,
            lit(0),
            &schema,
        )
        .unwrap();
        let filter_expr = and(
            and(
                and(cmp(j(), Operator::Eq, 0), cmp(k(), Operator::Gt, 8100)),
                cmp(k(), Operator::Lt, 9000),
            ),
            divided,
        );
        let counters = RowFilterCounters::default();
        let filter = ScanRowFilter::new(
            vec![(FilterKind::Static, filter_expr)],
            Arc::clone(&schema),
            counters.clone(),
        )
        .unwrap();
        let big = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int32Array::from_iter_values(1..=8192)) as ArrayRef,
                Arc::new(Int32Array::from_iter_values((1..=8192).map(|v| v % 2))),
            ],
        )
        .unwrap();
        let rounds = 64;
        for _ in 0..rounds {
            assert_eq!(filter.apply(big.clone(), &[]).unwrap().num_rows(), 46);
        }
        assert_eq!(counters.static_dropped.value(), rounds * (8192 - 46));
        assert_eq!(counters.dynamic_dropped.value(), 0);
        // The k range first (after the first batch), then `j = 0` on its 92 survivors.
        let evaluated = counters.static_evaluated.value();
        assert!(evaluated >= rounds * 8192, "{evaluated}");
        assert!(evaluated <= rounds * (8192 + 92) + 8192, "{evaluated}");
        // The range alone keeps 1.1 % (≤ 5 %): the reader may run it; `j = 0` is still in
        // its warm-up (it saw 92 rows a batch).
        let paying = filter.paying().unwrap();
        assert_eq!(paying.len(), 1);
        assert_eq!(format!("{}", paying[0].1), "k@0 > 8100 AND k@0 < 9000");
    }

    #[test]
    fn casts_are_infallible_only_where_they_widen() {
        let schema = Schema::new(vec![
            Field::new("i", DataType::Int32, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("d", DataType::Decimal128(15, 2), true),
        ]);
        let cast = |c: &str, to: DataType| {
            let e: Arc<dyn PhysicalExpr> =
                Arc::new(datafusion::physical_expr::expressions::CastExpr::new(
                    col(c, &schema).unwrap(),
                    to,
                    None,
                ));
            infallible(&e, &schema)
        };
        assert!(cast("i", DataType::Int64));
        assert!(cast("i", DataType::Float64));
        assert!(cast("i", DataType::Decimal128(12, 2)));
        assert!(
            !cast("i", DataType::Decimal128(11, 2)),
            "10 digits need p - s ≥ 10"
        );
        assert!(!cast("i", DataType::Int16));
        assert!(!cast("s", DataType::Int32), "parsing a string can fail");
        assert!(cast("d", DataType::Decimal128(20, 4)));
        assert!(
            !cast("d", DataType::Decimal128(15, 4)),
            "13 integer digits into 11"
        );
        assert!(cast("s", DataType::Utf8View));
    }
}
