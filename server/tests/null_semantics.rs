//! Wrong answers of the engine that reach users unchanged (`docs/cases.md`, c08, c09 and c12) and
//! the engine's float semantics: each query runs through our scan and through DataFusion on the same
//! tables' raw data files, and both must give the SQL answer (c08, c09) or the same answer
//! (floats, where the engine decides and our pruning must follow it).
//!
//! ```text
//!   iceberg tables (our writer) ──► iceflight session (IcebergScanExec, pushdown, domains)
//!                    data files ──► DataFusion ListingTable (its own Parquet path)
//! ```

mod common;

use std::sync::Arc;

use arrow::array::{Float64Array, Int32Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use iceberg::NamespaceIdent;
use iceberg::spec::{NestedField, PrimitiveType, Type};
use iceflight::session::{Engine, engine_physical_optimizer_rules, with_engine_semantics};
use iceflight_datagen::load::{LoadOptions, create_table_with_files};
use iceflight_scan::plan::metrics_index::FileMetricsIndex;

/// One data file of a fixture table: rows of nullable INT columns.
type DataFileRows = Vec<Vec<Option<i32>>>;

/// The same tables twice: through our scan (`ours`) and as DataFusion listing tables over their
/// data files (`raw`).
struct Fixture {
    _dir: tempfile::TempDir,
    _engine: Engine,
    ours: SessionContext,
    raw: SessionContext,
}

/// A table of nullable `int` columns: its schema, and per data file one batch of the given
/// columns' values.
fn ints(
    columns: &[&str],
    files: Vec<Vec<Vec<Option<i32>>>>,
) -> (iceberg::spec::Schema, Vec<Vec<RecordBatch>>) {
    let fields: Vec<_> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            Arc::new(NestedField::optional(
                i as i32 + 1,
                *c,
                Type::Primitive(PrimitiveType::Int),
            ))
        })
        .collect();
    let schema = iceberg::spec::Schema::builder()
        .with_fields(fields)
        .build()
        .unwrap();
    let arrow = Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(*c, DataType::Int32, true))
            .collect::<Vec<_>>(),
    ));
    let batches = files
        .into_iter()
        .map(|cols| {
            vec![
                RecordBatch::try_new(
                    Arc::clone(&arrow),
                    cols.into_iter()
                        .map(|v| Arc::new(Int32Array::from(v)) as _)
                        .collect(),
                )
                .unwrap(),
            ]
        })
        .collect();
    (schema, batches)
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::engine(dir.path(), 2).await;
    let catalog = Arc::clone(engine.catalogs().get("local").unwrap());
    let ns = NamespaceIdent::new("t".into());
    catalog
        .create_namespace(&ns, Default::default())
        .await
        .unwrap();
    let options = LoadOptions {
        progress: false,
        ..LoadOptions::default()
    };
    let n = None;
    let tables: Vec<(&str, &[&str], Vec<DataFileRows>)> = vec![
        // c08
        (
            "fact",
            &["k"],
            vec![vec![vec![Some(1), Some(2), Some(3), n]]],
        ),
        ("dim", &["k"], vec![vec![vec![Some(2), n]]]),
        // c09
        (
            "a",
            &["k", "k2"],
            vec![vec![
                vec![Some(1), n, n],
                vec![Some(10), Some(10), Some(20)],
            ]],
        ),
        ("b", &["k"], vec![vec![vec![Some(1), n]]]),
        ("c", &["k2"], vec![vec![vec![Some(10), Some(20)]]]),
        // `=` keys next to a null-equal key: NULL k2 must match nothing.
        (
            "p",
            &["k", "k2"],
            vec![vec![vec![n, Some(1)], vec![n, Some(5)]]],
        ),
        ("q", &["k", "k2"], vec![vec![vec![n, Some(1)], vec![n, n]]]),
    ];
    let mut raw_tables = vec![];
    for (name, columns, files) in tables {
        let (schema, batches) = ints(columns, files);
        let table = create_table_with_files(&catalog, &ns, name, schema, batches, &options)
            .await
            .unwrap();
        raw_tables.push((name.to_string(), table));
    }
    // Floats: one data file per value group, so file and row-group bounds are the values.
    let zeros = create_table_with_files(
        &catalog,
        &ns,
        "zeros",
        iceberg::spec::Schema::builder()
            .with_fields(vec![Arc::new(NestedField::optional(
                1,
                "f",
                Type::Primitive(PrimitiveType::Double),
            ))])
            .build()
            .unwrap(),
        [
            vec![-0.0],
            vec![0.0],
            vec![f64::NAN],
            vec![1.0, 2.0],
            vec![-1.0],
        ]
        .into_iter()
        .map(|values| {
            let schema = Arc::new(Schema::new(vec![Field::new("f", DataType::Float64, true)]));
            vec![RecordBatch::try_new(schema, vec![Arc::new(Float64Array::from(values))]).unwrap()]
        })
        .collect(),
        &options,
    )
    .await
    .unwrap();
    raw_tables.push(("zeros".into(), zeros));

    let ours = engine.session(None, Some("t"), &[]).unwrap();
    // DataFusion with the engine's optimizer rules (its own, then our corrections), no scan of ours.
    let raw = SessionContext::new_with_state(
        with_engine_semantics(
            SessionStateBuilder::new()
                .with_config(SessionConfig::new().with_target_partitions(2))
                .with_default_features()
                .with_physical_optimizer_rules(engine_physical_optimizer_rules()),
        )
        .build(),
    );
    for (name, table) in &raw_tables {
        let index = FileMetricsIndex::load(table).await.unwrap();
        let urls = index
            .paths()
            .map(|p| ListingTableUrl::parse(p).unwrap())
            .collect();
        let options =
            ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
        let config = ListingTableConfig::new_with_multi_paths(urls)
            .with_listing_options(options)
            .infer_schema(&raw.state())
            .await
            .unwrap();
        raw.register_table(
            name.as_str(),
            Arc::new(ListingTable::try_new(config).unwrap()),
        )
        .unwrap();
    }
    Fixture {
        _dir: dir,
        _engine: engine,
        ours,
        raw,
    }
}

/// `sql`'s rows through both engines (ours as they came); panics when they hold other rows.
/// Their order is compared only up to ties: `-0.0` and `0.0` are equal sort keys, which an
/// Iceberg scan's column sorts as stored and any other input in either order
/// (`server/src/float_semantics.rs`).
async fn both(f: &Fixture, sql: &str) -> Vec<Vec<String>> {
    let ours = common::query(&f.ours, sql).await;
    let raw = common::query(&f.raw, sql).await;
    let sorted = |rows: &Vec<Vec<String>>| {
        let mut rows = rows.clone();
        rows.sort();
        rows
    };
    assert_eq!(
        sorted(&ours),
        sorted(&raw),
        "our scan and DataFusion on the raw files differ: {sql}"
    );
    ours
}

/// Runs each `(sql, expected single value)` through both engines; panics listing every query
/// either engine answers wrongly (so one failure does not hide the others).
async fn expect_values(f: &Fixture, cases: &[(String, &str)]) {
    let mut wrong = vec![];
    for (sql, expected) in cases {
        for (engine, ctx) in [
            ("our scan", &f.ours),
            ("DataFusion on the raw files", &f.raw),
        ] {
            let got = common::query(ctx, sql).await;
            if got != [[expected.to_string()]] {
                wrong.push(format!("{engine}: {sql} gave {got:?}, SQL says {expected}"));
            }
        }
    }
    assert!(wrong.is_empty(), "wrong answers:\n{}", wrong.join("\n"));
}

/// Sets `key = value` in both sessions.
async fn set(f: &Fixture, key: &str, value: &str) {
    for ctx in [&f.ours, &f.raw] {
        ctx.sql(&format!("SET {key} = {value}")).await.unwrap();
    }
}

/// c08: `NOT IN` over a subquery that yields NULL is empty, whatever filter sits on the probe key
/// (the optimizer inferred `dim.k = 1` onto the subquery and dropped its NULL); the same with
/// `filter_null_join_keys` (which put `dim.k IS NOT NULL` there) and with DataFusion's row-level
/// Parquet filter (which applied the join's dynamic filter to the subquery's NULL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c08_not_in_with_a_null_in_the_subquery_is_empty() {
    let f = fixture().await;
    let not_in = "SELECT count(*) FROM fact WHERE k NOT IN (SELECT k FROM dim)";
    for (filter_null_join_keys, pushdown_filters) in [("false", "false"), ("true", "true")] {
        set(
            &f,
            "datafusion.optimizer.filter_null_join_keys",
            filter_null_join_keys,
        )
        .await;
        set(
            &f,
            "datafusion.execution.parquet.pushdown_filters",
            pushdown_filters,
        )
        .await;
        let mut cases: Vec<(String, &str)> = [
            "",
            " AND k = 1",
            " AND k IN (1, 3)",
            " AND k > 1",
            " AND k IS NOT NULL",
        ]
        .iter()
        .map(|extra| (format!("{not_in}{extra}"), "0"))
        .collect();
        cases.push((
            "SELECT count(*) FROM fact WHERE k NOT IN (SELECT k FROM dim WHERE k IS NOT NULL) AND k = 1"
                .into(),
            "1",
        ));
        // The same kind without a column on the outer side (no equijoin key: a nested loop
        // join, which DataFusion 54.1 runs without NULL semantics).
        for (sql, answer) in [
            (
                "SELECT count(*) FROM fact WHERE 3 NOT IN (SELECT k FROM dim)",
                "0",
            ),
            (
                "SELECT count(*) FROM fact WHERE 3 NOT IN (SELECT k FROM dim WHERE k IS NOT NULL)",
                "4",
            ),
            (
                "SELECT count(*) FROM fact WHERE 2 NOT IN (SELECT k FROM dim WHERE k IS NOT NULL)",
                "0",
            ),
            (
                "SELECT count(*) FROM fact WHERE 3 NOT IN (SELECT k FROM dim WHERE k > 5)",
                "4",
            ),
            (
                "SELECT count(*) FROM fact WHERE CAST(NULL AS INT) NOT IN (SELECT k FROM dim WHERE k > 5)",
                "4",
            ),
            (
                "SELECT count(*) FROM fact WHERE CAST(NULL AS INT) NOT IN (SELECT k FROM dim WHERE k = 2)",
                "0",
            ),
            // Correlated, the literal typed as the column (with a cast on `d.k`, DataFusion 54.1
            // fails to plan a correlated NOT IN: duplicate projection names).
            (
                "SELECT count(*) FROM fact f WHERE CAST(3 AS INT) NOT IN (SELECT d.k FROM dim d WHERE d.k = f.k)",
                "4",
            ),
            (
                "SELECT count(*) FROM fact f WHERE CAST(2 AS INT) NOT IN (SELECT d.k FROM dim d WHERE d.k = f.k)",
                "3",
            ),
        ] {
            cases.push((sql.into(), answer));
        }
        expect_values(&f, &cases).await;
    }
}

/// c09: a null-equal join keeps matching NULL with NULL when another join follows, in every
/// spelling; an `=` key beside a null-equal key keeps `=`; INTERSECT is null-equal; with and
/// without DataFusion's row-level Parquet filter (the join's dynamic filter on the NULL keys).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c09_null_equal_joins_keep_matching_nulls() {
    let f = fixture().await;
    let mut cases: Vec<(String, &str)> = [
        "SELECT count(*) FROM a JOIN b ON a.k IS NOT DISTINCT FROM b.k",
        "SELECT count(*) FROM a JOIN b ON a.k IS NOT DISTINCT FROM b.k JOIN c ON a.k2 = c.k2",
        "SELECT count(*) FROM a JOIN b ON (a.k IS NOT DISTINCT FROM b.k) JOIN c ON a.k2 = c.k2 WHERE c.k2 >= 10",
        "SELECT count(*) FROM a JOIN c ON a.k2 = c.k2 JOIN b ON a.k IS NOT DISTINCT FROM b.k",
        "SELECT count(*) FROM a, b, c WHERE (a.k IS NOT DISTINCT FROM b.k) AND a.k2 = c.k2",
    ]
    .iter()
    .map(|sql| (sql.to_string(), "3"))
    .collect();
    for sql in [
        "SELECT count(*) FROM p JOIN q ON p.k IS NOT DISTINCT FROM q.k WHERE p.k2 = q.k2",
        "SELECT count(*) FROM p JOIN q ON (p.k IS NOT DISTINCT FROM q.k) AND p.k2 = q.k2",
        "SELECT count(*) FROM p, q WHERE (p.k IS NOT DISTINCT FROM q.k) AND p.k2 = q.k2",
    ] {
        cases.push((sql.into(), "0"));
    }
    cases.push((
        "SELECT count(*) FROM (SELECT k FROM a INTERSECT SELECT k FROM b)".into(),
        "2",
    ));
    for pushdown_filters in ["false", "true"] {
        set(
            &f,
            "datafusion.execution.parquet.pushdown_filters",
            pushdown_filters,
        )
        .await;
        expect_values(&f, &cases).await;
    }
}

/// `-0.0`, `0.0` and NaN (each in a data file of its own, so bounds are the values): every
/// comparison, set, join, TopK and min/max gives what DataFusion (with the engine's float rule,
/// `server/src/float_semantics.rs`) says on the raw files, i.e. our pruning follows the engine's
/// float semantics. The snapshot records SQL's answers (case c12: `-0.0 = 0.0`, NaN one value
/// above every number; DuckDB 1.5.5 gives the same rows, showing `-0.0` as `0.0`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn float_zeros_and_nan_prune_as_the_engine_compares() {
    let f = fixture().await;
    let mut said = String::new();
    for predicate in [
        "f = 0.0",
        "f = -0.0",
        "f <> 0.0",
        "f > 0.0",
        "f >= 0.0",
        "f < 0.0",
        "f <= -0.0",
        "f > -0.0",
        "f BETWEEN -0.0 AND 0.0",
        "f IN (0.0, 2.0)",
        "f IN (-0.0)",
        "f NOT IN (0.0)",
        "f > 1.5",
        "f > 100",
        "f < -0.5",
        "f = 'NaN'::double",
        "isnan(f)",
    ] {
        let sql = format!("SELECT f FROM zeros WHERE {predicate} ORDER BY f");
        let rows = both(&f, &sql).await;
        let values: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
        said.push_str(&format!("{predicate}: {}\n", values.join(", ")));
    }
    for sql in [
        "SELECT a.f FROM zeros a JOIN (VALUES (0.0), (2.0)) v(x) ON a.f = v.x ORDER BY a.f",
        "SELECT a.f FROM zeros a JOIN (VALUES (-0.0)) v(x) ON a.f = v.x ORDER BY a.f",
        "SELECT a.f, b.f FROM zeros a JOIN zeros b ON a.f = b.f ORDER BY a.f, b.f",
        "SELECT f FROM zeros ORDER BY f LIMIT 3",
        "SELECT f FROM zeros ORDER BY f DESC LIMIT 2",
        "SELECT min(f), max(f) FROM zeros WHERE f IS NOT NULL",
    ] {
        let rows = both(&f, sql).await;
        let text: Vec<String> = rows.iter().map(|r| r.join(" ")).collect();
        said.push_str(&format!("{sql}: {}\n", text.join(", ")));
    }
    insta::assert_snapshot!(said);
}
