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

use arrow::array::{Int32Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use arrow::util::pretty::pretty_format_batches;
use datafusion::datasource::MemTable;
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};

/// A session on `config` with DataFusion's default features and the physical optimizer `rules`
/// (DataFusion's own, with the rule under test inserted).
pub(crate) fn session(
    config: SessionConfig,
    rules: Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>>,
) -> SessionContext {
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_physical_optimizer_rules(rules)
        .build();
    SessionContext::new_with_state(state)
}

/// A one-partition table of a non-null Int32 column `key` and a non-null Utf8 column `label`,
/// row by row from `keys` and `labels`.
pub(crate) fn labelled(key: &str, label: &str, keys: Vec<i32>, labels: Vec<&str>) -> Arc<MemTable> {
    let schema = Arc::new(Schema::new(vec![
        Field::new(key, DataType::Int32, false),
        Field::new(label, DataType::Utf8, false),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int32Array::from(keys)),
            Arc::new(StringArray::from(labels)),
        ],
    )
    .unwrap();
    Arc::new(MemTable::try_new(schema, vec![vec![batch]]).unwrap())
}

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
