//! Dynamic filters from joins prune lineitem data files from manifest bounds: same answers with
//! `iceflight.scan.dynamic_filter_pruning` on and off, fewer files opened with it on.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::{execute, rows, scan_metric};
use iceberg::NamespaceIdent;
use iceflight_datagen::load::{LoadOptions, load_tpch};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_dynamic_filter_prunes_files_and_keeps_answers() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::engine(dir.path(), 2).await;
    let catalog = Arc::clone(engine.catalogs().get("local").unwrap());
    let options = LoadOptions {
        scale: 0.01,
        sort: HashMap::from([("lineitem".to_string(), vec!["l_orderkey".to_string()])]),
        target_file_size: 128 * 1024,
        row_group_rows: 4096,
        progress: false,
        ..LoadOptions::default()
    };
    let report = load_tpch(&catalog, &NamespaceIdent::new("tpch".into()), &options)
        .await
        .unwrap();
    let lineitem_files = report.tables.iter().find(|t| t.0 == "lineitem").unwrap().2;
    assert!(
        lineitem_files >= 8,
        "need several lineitem files, got {lineitem_files}"
    );

    // A few orders of one day: their keys are scattered over the l_orderkey-sorted files.
    let sql = "SELECT count(*), sum(l_quantity) FROM lineitem JOIN orders ON l_orderkey = o_orderkey \
               WHERE o_orderdate = DATE '1995-01-01'";
    let run = |on: bool| {
        let settings = [(
            "iceflight.scan.dynamic_filter_pruning".to_string(),
            on.to_string(),
        )];
        let ctx = engine.session(None, Some("tpch"), &settings).unwrap();
        async move { execute(&ctx, sql).await.unwrap() }
    };
    let off = run(false).await;
    let on = run(true).await;
    assert_eq!(
        rows(&on.batches),
        rows(&off.batches),
        "answers differ with pruning on"
    );
    assert_ne!(
        rows(&on.batches)[0][0],
        "0",
        "the query should match some rows"
    );
    let pruned_on = scan_metric(&on.plan, "files_pruned_dynamic");
    assert_eq!(scan_metric(&off.plan, "files_pruned_dynamic"), 0);
    assert!(pruned_on > 0, "no file pruned by the join's dynamic filter");
    assert!(
        scan_metric(&on.plan, "files_opened") < scan_metric(&off.plan, "files_opened"),
        "pruning on must open fewer files"
    );
    let plan = format!(
        "{}",
        datafusion::physical_plan::displayable(on.plan.as_ref()).indent(true)
    );
    assert!(
        plan.contains("dynamic_filters=1 (pruning on, wait 1s)"),
        "{plan}"
    );
}
