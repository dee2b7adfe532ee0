//! All 22 TPC-H queries at SF 0.01, loaded by our loader into the embedded catalog and read through
//! our scan, against DuckDB 1.5.5's answers in `bench/answers/tpch/sf0.01` (made by
//! `bench/scripts/make_answers.py` from dbgen data — so this also proves our generated data equals
//! dbgen's, through `tables.json`).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{Answer, compare, execute, repo_root, scan_metric, scans};
use iceberg::NamespaceIdent;
use iceflight_catalog::load::{LoadOptions, load_tpch};

#[derive(serde::Deserialize)]
struct TableSums {
    rows: u64,
    columns: BTreeMap<String, BTreeMap<String, String>>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_sf001_answers_match_duckdb() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::engine(dir.path(), 2).await;
    let catalog = Arc::clone(engine.catalogs().get("local").unwrap());
    let options = LoadOptions {
        scale: 0.01,
        target_file_size: 512 * 1024,
        row_group_rows: 8192,
        progress: false,
        ..LoadOptions::default()
    };
    let report = load_tpch(&catalog, &NamespaceIdent::new("tpch".into()), &options)
        .await
        .unwrap();
    let lineitem = report.tables.iter().find(|t| t.0 == "lineitem").unwrap();
    assert_eq!(lineitem.1, 60175, "lineitem rows at SF 0.01");
    assert!(
        lineitem.2 >= 2,
        "lineitem should roll over several files, got {}",
        lineitem.2
    );

    let ctx = engine.session(None, Some("tpch"), &[]).unwrap();
    let answers = repo_root().join("bench/answers/tpch/sf0.01");

    // The generated data equals dbgen's: row counts and per-column aggregates.
    let sums: BTreeMap<String, TableSums> =
        serde_json::from_str(&std::fs::read_to_string(answers.join("tables.json")).unwrap())
            .unwrap();
    let mut failures = vec![];
    for (table, expected) in &sums {
        let mut exprs = vec!["CAST(count(*) AS VARCHAR)".to_string()];
        let mut want = vec![expected.rows.to_string()];
        for (col, aggs) in &expected.columns {
            for (agg, value) in aggs {
                let expr = match agg.as_str() {
                    "sum" => format!("CAST(sum({col}) AS VARCHAR)"),
                    "sum_length" => format!("CAST(sum(length({col})) AS VARCHAR)"),
                    "min" => format!("CAST(min({col}) AS VARCHAR)"),
                    "max" => format!("CAST(max({col}) AS VARCHAR)"),
                    _ => continue,
                };
                exprs.push(expr);
                want.push(value.clone());
            }
        }
        let got = common::query(&ctx, &format!("SELECT {} FROM {table}", exprs.join(", "))).await;
        if got[0] != want {
            failures.push(format!("{table}: got {:?}, want {want:?}", got[0]));
        }
    }
    assert!(
        failures.is_empty(),
        "generated data differs from dbgen:\n{}",
        failures.join("\n")
    );

    for q in 1..=22 {
        let name = format!("q{q:02}");
        let sql =
            std::fs::read_to_string(repo_root().join(format!("bench/queries/tpch/{name}.sql")))
                .unwrap();
        let answer: Answer = serde_json::from_str(
            &std::fs::read_to_string(answers.join(format!("{name}.json"))).unwrap(),
        )
        .unwrap();
        match execute(&ctx, &sql).await {
            Ok(run) => {
                assert!(
                    !scans(&run.plan).is_empty(),
                    "{name}: no IcebergScanExec in the plan"
                );
                assert!(
                    scan_metric(&run.plan, "files_opened") > 0,
                    "{name}: no file opened"
                );
                if let Err(e) = compare(&run.batches, &answer) {
                    failures.push(format!("{name}: {e}"));
                }
            }
            Err(e) => failures.push(format!("{name}: error {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "TPC-H answers differ:\n{}",
        failures.join("\n")
    );
}
