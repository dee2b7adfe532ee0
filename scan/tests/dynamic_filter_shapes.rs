//! The dynamic filters DataFusion 54.1 really builds, and the domains `domain.rs` compacts them
//! into.
//!
//! Each query runs on DataFusion's own Parquet scan over files written here (no Iceberg, no
//! Python): the filters its operators push to a scan are the same ones our scan receives. After
//! the query has run, every dynamic filter held by a scan is printed as DataFusion shows it
//! (value lists sorted: their order follows the build side's batch order) next to
//! `normalize`'s domain for it, so a DataFusion upgrade that changes a shape changes a snapshot.
//!
//! ```text
//!   fact(k int, k2 utf8, v int)  4 files × 1000 rows, k = 0..3999 in file order
//!   dim(k int, k2 utf8, name utf8)  8 rows: k ∈ {3, 5, 7, 1200, 1201, 2500, 3990, 3999}
//! ```

use std::sync::Arc;

use datafusion::arrow::array::{Int32Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::physical_plan::ParquetSource;
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_expr::expressions::DynamicFilterPhysicalExpr;
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr, collect};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use iceflight_scan::pushdown::domain::normalize;
use parquet::arrow::ArrowWriter;

fn fact_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int32, true),
        Field::new("k2", DataType::Utf8, true),
        Field::new("v", DataType::Int32, true),
    ]))
}

fn write(path: &std::path::Path, batch: &RecordBatch) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

/// The two tables, registered in a session with `target_partitions = 4` and `settings`.
async fn session(dir: &std::path::Path, settings: &[(&str, &str)]) -> SessionContext {
    let fact = dir.join("fact");
    if !fact.exists() {
        std::fs::create_dir_all(&fact).unwrap();
        for f in 0..4 {
            let ks: Vec<i32> = (f * 1000..(f + 1) * 1000).collect();
            let batch = RecordBatch::try_new(
                fact_schema(),
                vec![
                    Arc::new(Int32Array::from(ks.clone())),
                    Arc::new(StringArray::from_iter_values(
                        ks.iter().map(|k| format!("s{}", k % 10)),
                    )),
                    Arc::new(Int32Array::from_iter_values(ks.iter().map(|k| k * 10))),
                ],
            )
            .unwrap();
            write(&fact.join(format!("part-{f}.parquet")), &batch);
        }
        let dim = dir.join("dim");
        std::fs::create_dir_all(&dim).unwrap();
        let ks = [3, 5, 7, 1200, 1201, 2500, 3990, 3999];
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("k", DataType::Int32, true),
                Field::new("k2", DataType::Utf8, true),
                Field::new("name", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(Int32Array::from(ks.to_vec())),
                Arc::new(StringArray::from_iter_values(
                    ks.iter().map(|k| format!("s{}", k % 10)),
                )),
                Arc::new(StringArray::from_iter_values(
                    ks.iter().map(|k| if *k < 1000 { "low" } else { "high" }),
                )),
            ],
        )
        .unwrap();
        write(&dim.join("dim.parquet"), &batch);
    }
    let mut config = SessionConfig::new().with_target_partitions(4);
    for (k, v) in settings {
        config.options_mut().set(k, v).unwrap();
    }
    let ctx = SessionContext::new_with_config(config);
    for t in ["fact", "dim"] {
        ctx.register_parquet(
            t,
            dir.join(t).to_str().unwrap(),
            ParquetReadOptions::default(),
        )
        .await
        .unwrap();
    }
    ctx
}

/// `IN (SET) ([b, a])` lists printed with their items sorted.
fn sorted_lists(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("IN (SET) ([") {
        let open = start + "IN (SET) ([".len();
        let close = open + rest[open..].find("])").unwrap();
        out.push_str(&rest[..open]);
        let mut items: Vec<&str> = rest[open..close].split(", ").collect();
        items.sort_by(|a, b| match (a.parse::<f64>(), b.parse::<f64>()) {
            (Ok(x), Ok(y)) => x.total_cmp(&y),
            _ => a.cmp(b),
        });
        out.push_str(&items.join(", "));
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

/// Runs `sql`, then prints every dynamic filter the plan's scans hold and its domain.
async fn shapes(ctx: &SessionContext, sql: &str) -> String {
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
    let mut out = vec![];
    let mut stack: Vec<Arc<dyn ExecutionPlan>> = vec![plan];
    while let Some(p) = stack.pop() {
        stack.extend(p.children().into_iter().cloned());
        let Some(scan) = p.downcast_ref::<DataSourceExec>() else {
            continue;
        };
        let Some((config, parquet)) = scan.downcast_to_file_source::<ParquetSource>() else {
            continue;
        };
        let Some(predicate) = datafusion::datasource::physical_plan::FileSource::filter(parquet)
        else {
            continue;
        };
        let schema = config.file_schema();
        let mut dynamic: Vec<Arc<dyn PhysicalExpr>> = vec![];
        predicate
            .apply(|e| {
                if e.is::<DynamicFilterPhysicalExpr>() {
                    dynamic.push(Arc::clone(e));
                    return Ok(TreeNodeRecursion::Jump);
                }
                Ok(TreeNodeRecursion::Continue)
            })
            .unwrap();
        for d in dynamic {
            let domains = normalize(&d, schema.as_ref(), 150, false);
            out.push(format!(
                "{}\n  → {}",
                sorted_lists(&d.to_string()),
                domains.describe(schema.as_ref())
            ));
        }
    }
    out.sort();
    out.join("\n")
}

/// CollectLeft (small build side): bounds and the build keys as a value set; over the cap a hash
/// table lookup, which constrains nothing but the bounds; two keys: a struct value set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collect_left_joins() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = session(dir.path(), &[]).await;
    insta::assert_snapshot!(
        shapes(&ctx, "SELECT count(*) FROM fact JOIN dim ON fact.k = dim.k WHERE dim.name = 'high'").await,
        @"
    DynamicFilter [ k@0 >= 1200 AND k@0 <= 3999 AND k@0 IN (SET) ([1200, 1201, 2500, 3990, 3999]) ]
      → k in [1200, 3999] ∩ 5 values
    "
    );
    insta::assert_snapshot!(
        shapes(&ctx, "SELECT count(*) FROM fact JOIN dim ON fact.k = dim.k AND fact.k2 = dim.k2").await,
        @"
    DynamicFilter [ k@0 >= 3 AND k@0 <= 3999 AND k2@1 >= s0 AND k2@1 <= s9 AND struct(k@0, k2@1) IN (SET) ([{c0:1200,c1:s0}, {c0:1201,c1:s1}, {c0:2500,c1:s0}, {c0:3,c1:s3}, {c0:3990,c1:s0}, {c0:3999,c1:s9}, {c0:5,c1:s5}, {c0:7,c1:s7}]) ]
      → k in [3, 3999] ∩ 8 values; k2 in [s0, s9] ∩ 6 values
    "
    );
    // More distinct keys than hash_join_inlist_pushdown_max_distinct_values (150).
    insta::assert_snapshot!(
        shapes(&ctx, "SELECT count(*) FROM fact a JOIN (SELECT k FROM fact WHERE k < 300) b ON a.k = b.k").await,
        @"
    DynamicFilter [ k@0 >= 0 AND k@0 <= 299 AND hash_lookup ]
      → k in [0, 299]
    "
    );
}

/// Partitioned joins: a CASE routing each probe row by hash to its build partition's filter;
/// domains are the union of the branches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_joins() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = session(
        dir.path(),
        &[
            (
                "datafusion.optimizer.hash_join_single_partition_threshold",
                "0",
            ),
            (
                "datafusion.optimizer.hash_join_single_partition_threshold_rows",
                "0",
            ),
        ],
    )
    .await;
    insta::assert_snapshot!(
        shapes(&ctx, "SELECT count(*) FROM fact JOIN dim ON fact.k = dim.k").await,
        @"
    DynamicFilter [ CASE hash_repartition % 4 WHEN 0 THEN k@0 >= 5 AND k@0 <= 7 AND k@0 IN (SET) ([5, 7]) WHEN 1 THEN k@0 >= 3 AND k@0 <= 2500 AND k@0 IN (SET) ([3, 2500]) WHEN 2 THEN k@0 >= 1200 AND k@0 <= 1201 AND k@0 IN (SET) ([1200, 1201]) WHEN 3 THEN k@0 >= 3990 AND k@0 <= 3999 AND k@0 IN (SET) ([3990, 3999]) ELSE false END ]
      → k in [3, 3999] ∩ 8 values
    "
    );
    insta::assert_snapshot!(
        shapes(&ctx, "SELECT count(*) FROM fact JOIN dim ON fact.k = dim.k WHERE dim.k = 5").await,
        @"
    DynamicFilter [ k@0 >= 5 AND k@0 <= 5 AND k@0 IN (SET) ([5]) ]
      → k in [5, 5] ∩ {5}
    "
    );
}

/// An empty build side; join types other than inner with a filter on their probe side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_builds_and_other_join_types() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = session(dir.path(), &[]).await;
    insta::assert_snapshot!(
        shapes(&ctx, "SELECT count(*) FROM fact JOIN dim ON fact.k = dim.k WHERE dim.name = 'none'").await,
        @"
    DynamicFilter [ empty ]
      → true
    "
    );
    insta::assert_snapshot!(
        shapes(&ctx, "SELECT count(*) FROM fact WHERE k IN (SELECT k FROM dim WHERE name = 'low')").await,
        @"
    DynamicFilter [ k@0 >= 3 AND k@0 <= 7 AND k@0 IN (SET) ([3, 5, 7]) ]
      → k in [3, 7] ∩ {3, 5, 7}
    "
    );
    insta::assert_snapshot!(
        shapes(&ctx, "SELECT count(*) FROM dim LEFT JOIN fact ON fact.k = dim.k").await,
        @"
    DynamicFilter [ k@0 >= 3 AND k@0 <= 3999 AND k@0 IN (SET) ([3, 5, 7, 1200, 1201, 2500, 3990, 3999]) ]
      → k in [3, 3999] ∩ 8 values
    "
    );
    insta::assert_snapshot!(
        shapes(&ctx, "SELECT count(*) FROM fact WHERE NOT EXISTS (SELECT 1 FROM dim WHERE dim.k = fact.k)").await,
        @""
    );
}

/// TopK (one and two sort keys, NULLS FIRST and LAST) and min/max aggregates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topk_and_aggregates() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = session(dir.path(), &[]).await;
    insta::assert_snapshot!(
        shapes(&ctx, "SELECT k FROM fact ORDER BY v DESC LIMIT 3").await,
        @"
    DynamicFilter [ v@2 IS NULL OR v@2 > 39970 ]
      → v in [39970, +∞] or NULL
    "
    );
    insta::assert_snapshot!(
        shapes(&ctx, "SELECT k FROM fact ORDER BY k2, v DESC NULLS LAST LIMIT 3").await,
        @"
    DynamicFilter [ k2@1 < s0 OR k2@1 = s0 AND v@2 > 39700 ]
      → k2 in [-∞, s0]
    "
    );
    insta::assert_snapshot!(
        shapes(&ctx, "SELECT min(v), max(k) FROM fact WHERE k2 <> 'zz'").await,
        @"
    DynamicFilter [ v@2 < 0 OR k@0 > 3999 ]
      → true
    "
    );
}
