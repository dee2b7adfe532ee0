//! Seeded rows for the rules' tests: one pseudo-random sequence, so every test's data is fixed.

/// Knuth's MMIX linear congruential sequence from `seed`: each `next(m)` is in `0..m`.
pub(crate) fn sequence(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed;
    move |m| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % m
    }
}

use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use arrow::util::pretty::pretty_format_batches;
use datafusion::datasource::MemTable;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;

/// A table of `batch` in two partitions, its first and second half.
pub(crate) fn in_halves(batch: &RecordBatch) -> Arc<MemTable> {
    let n = batch.num_rows();
    let halves = vec![
        vec![batch.slice(0, n / 2)],
        vec![batch.slice(n / 2, n - n / 2)],
    ];
    Arc::new(MemTable::try_new(batch.schema(), halves).unwrap())
}

/// The answer of `sql` as a pretty-printed table, and the physical plan that computed it.
pub(crate) async fn answer(ctx: &SessionContext, sql: &str) -> (String, Arc<dyn ExecutionPlan>) {
    let frame = ctx.sql(sql).await.unwrap();
    let plan = frame.clone().create_physical_plan().await.unwrap();
    let batches = frame.collect().await.unwrap();
    (pretty_format_batches(&batches).unwrap().to_string(), plan)
}
