//! `IcebergScanExec` on tables that iceberg's own writer builds in its in-memory catalog (no
//! Python, no files outside the process): the answers, and the deterministic counters that say
//! what each pruning layer skipped.
//!
//! ```text
//!   events(id long, v double, name string)   one snapshot, 4 data files
//!   file f: ids f*1000 .. f*1000+999, in order; 4 row groups of 250 rows; page statistics on
//!   v = id / 2; name = "n<id % 7>"
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::{SessionConfig, SessionContext};
use iceberg::memory::{MEMORY_CATALOG_WAREHOUSE, MemoryCatalogBuilder};
use iceberg::spec::{DataFileFormat, NestedField, PrimitiveType, Schema, Type};
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent, TableCreation};
use iceflight_scan::IcebergTableProvider;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

const FILES: i64 = 4;
const ROWS_PER_FILE: i64 = 1000;
const ROW_GROUP_ROWS: usize = 250;

/// A session (2 target partitions) with `events` registered through iceflight's provider.
async fn session() -> SessionContext {
    let catalog = MemoryCatalogBuilder::default()
        .load(
            "memory",
            HashMap::from([(
                MEMORY_CATALOG_WAREHOUSE.to_string(),
                "memory://warehouse".to_string(),
            )]),
        )
        .await
        .unwrap();
    let namespace = NamespaceIdent::new("t".into());
    catalog
        .create_namespace(&namespace, HashMap::new())
        .await
        .unwrap();
    let schema = Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(2, "v", Type::Primitive(PrimitiveType::Double)).into(),
            NestedField::optional(3, "name", Type::Primitive(PrimitiveType::String)).into(),
        ])
        .build()
        .unwrap();
    let creation = TableCreation::builder()
        .name("events".into())
        .schema(schema)
        .build();
    let table = catalog.create_table(&namespace, creation).await.unwrap();
    let arrow_schema = Arc::new(
        iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema()).unwrap(),
    );

    let mut data_files = vec![];
    for f in 0..FILES {
        // One writer per file: each file holds one contiguous id range.
        let props = WriterProperties::builder()
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .build();
        let parquet = ParquetWriterBuilder::new(props, table.metadata().current_schema().clone());
        let rolling = RollingFileWriterBuilder::new(
            parquet,
            usize::MAX,
            table.file_io().clone(),
            DefaultLocationGenerator::new(table.metadata()).unwrap(),
            DefaultFileNameGenerator::new(format!("events-{f}"), None, DataFileFormat::Parquet),
        );
        let mut writer = DataFileWriterBuilder::new(rolling)
            .build(None)
            .await
            .unwrap();
        let ids: Vec<i64> = (f * ROWS_PER_FILE..(f + 1) * ROWS_PER_FILE).collect();
        let batch = RecordBatch::try_new(
            Arc::clone(&arrow_schema),
            vec![
                Arc::new(Int64Array::from(ids.clone())),
                Arc::new(Float64Array::from_iter_values(
                    ids.iter().map(|id| *id as f64 / 2.0),
                )),
                Arc::new(StringArray::from_iter_values(
                    ids.iter().map(|id| format!("n{}", id % 7)),
                )),
            ],
        )
        .unwrap();
        writer.write(batch).await.unwrap();
        data_files.extend(writer.close().await.unwrap());
    }
    let tx = Transaction::new(&table);
    let tx = tx
        .fast_append()
        .add_data_files(data_files)
        .apply(tx)
        .unwrap();
    let table = tx.commit(&catalog).await.unwrap();

    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    let provider = IcebergTableProvider::try_new(table).unwrap();
    ctx.register_table("events", Arc::new(provider)).unwrap();
    ctx
}

/// The rows of `sql` as text and the executed plan.
async fn run(ctx: &SessionContext, sql: &str) -> (Vec<Vec<String>>, Arc<dyn ExecutionPlan>) {
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let batches = collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
    let options = FormatOptions::default().with_null("NULL");
    let mut rows = vec![];
    for b in &batches {
        let columns: Vec<_> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
            .collect();
        for r in 0..b.num_rows() {
            rows.push(columns.iter().map(|c| c.value(r).to_string()).collect());
        }
    }
    (rows, plan)
}

/// A counter of the plan's Iceberg scan (`scan/src/read/metrics.rs`), summed over its partitions.
fn counter(plan: &Arc<dyn ExecutionPlan>, name: &str) -> usize {
    let mut stack = vec![Arc::clone(plan)];
    let mut total = 0;
    while let Some(p) = stack.pop() {
        if p.name() == "IcebergScanExec" {
            total += p
                .metrics()
                .and_then(|m| m.sum_by_name(name))
                .map_or(0, |v| v.as_usize());
        }
        stack.extend(p.children().into_iter().cloned());
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_row_is_read_once_without_a_filter() {
    let ctx = session().await;
    let (rows, plan) = run(&ctx, "SELECT count(*), sum(id), max(name) FROM events").await;
    // sum(0..3999) = 3999 * 4000 / 2
    assert_eq!(rows, [["4000", "7998000", "n6"]]);
    assert_eq!(counter(&plan, "files_opened"), 4);
    assert_eq!(counter(&plan, "row_groups_pruned"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_prunes_files_from_the_manifest_and_row_groups_from_the_footer() {
    let ctx = session().await;
    // ids 1100..=1200 are in the second file's first row group (1000..1249) only.
    let (rows, plan) = run(
        &ctx,
        "SELECT count(*), min(v), max(v) FROM events WHERE id BETWEEN 1100 AND 1200",
    )
    .await;
    assert_eq!(rows, [["101", "550.0", "600.0"]]);
    assert_eq!(counter(&plan, "files_pruned_manifest"), 3);
    assert_eq!(counter(&plan, "files_opened"), 1);
    assert_eq!(counter(&plan, "row_groups_pruned"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_the_scan_cannot_convert_prunes_nothing_and_keeps_every_matching_row() {
    let ctx = session().await;
    let (rows, plan) = run(&ctx, "SELECT count(*) FROM events WHERE abs(id) < 500").await;
    assert_eq!(rows, [["500"]]);
    assert_eq!(counter(&plan, "files_opened"), 4);
    assert_eq!(counter(&plan, "row_groups_pruned"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_on_a_column_outside_the_projection_is_applied() {
    let ctx = session().await;
    // id > 3980: 19 rows, all in the last file's last row group.
    let (rows, plan) = run(
        &ctx,
        "SELECT name FROM events WHERE id > 3980 ORDER BY name",
    )
    .await;
    let mut want: Vec<Vec<String>> = (3981..4000)
        .map(|id| vec![format!("n{}", id % 7)])
        .collect();
    want.sort();
    assert_eq!(rows, want);
    assert_eq!(counter(&plan, "files_opened"), 1);
    assert_eq!(counter(&plan, "row_groups_pruned"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_float_range_keeps_every_matching_row() {
    let ctx = session().await;
    // v > 1990 ⇔ id > 3980. Float bounds leave NaN out (docs/cases.md, c02).
    let (rows, _) = run(&ctx, "SELECT count(*), min(id) FROM events WHERE v > 1990").await;
    assert_eq!(rows, [["19", "3981"]]);
}
