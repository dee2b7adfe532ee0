//! Plans of TPC-H SF 0.1 on the embedded catalog: the physical plans of the join- and
//! subquery-heavy queries as insta snapshots (a plan change shows in review), and the join order
//! (`scan/src/join_order.rs`) keeping every answer of the 22 queries against the query's own
//! order (`iceflight.optimizer.join_reorder = false`).

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::{execute, repo_root, rows};
use datafusion::prelude::SessionContext;
use iceberg::NamespaceIdent;
use iceflight_catalog::load::{LoadOptions, load_tpch};

/// The queries whose plans are snapshotted.
const SNAPSHOTTED: [&str; 7] = ["q05", "q07", "q08", "q09", "q17", "q18", "q21"];

fn sql(name: &str) -> String {
    std::fs::read_to_string(repo_root().join(format!("bench/queries/tpch/{name}.sql"))).unwrap()
}

/// The physical plan `EXPLAIN` prints for `sql`.
async fn physical_plan(ctx: &SessionContext, sql: &str) -> String {
    let run = execute(ctx, &format!("EXPLAIN {sql}")).await.unwrap();
    rows(&run.batches)
        .into_iter()
        .find(|r| r[0] == "physical_plan")
        .map(|r| r[1].clone())
        .expect("a physical plan")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_sf01_plans_and_join_order() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::engine(dir.path(), 2).await;
    let catalog = Arc::clone(engine.catalogs().get("local").unwrap());
    let options = LoadOptions {
        scale: 0.1,
        target_file_size: 8 * 1024 * 1024,
        row_group_rows: 65536,
        progress: false,
        ..LoadOptions::default()
    };
    load_tpch(&catalog, &NamespaceIdent::new("tpch".into()), &options)
        .await
        .unwrap();
    let ordered = engine.session(None, Some("tpch"), &[]).unwrap();
    let as_written = engine
        .session(
            None,
            Some("tpch"),
            &[(
                "iceflight.optimizer.join_reorder".to_string(),
                "false".to_string(),
            )],
        )
        .unwrap();

    for name in SNAPSHOTTED {
        let plan = physical_plan(&ordered, &sql(name)).await;
        insta::assert_snapshot!(format!("tpch_{name}"), plan);
    }

    // Same answers in either order; q07's six-way join is reordered (its nation filters move
    // down), the orders whose estimated gain is small keep DataFusion's.
    let mut reordered = vec![];
    for q in 1..=22 {
        let name = format!("q{q:02}");
        let text = sql(&name);
        let sorted = |ctx: &SessionContext| {
            let ctx = ctx.clone();
            let text = text.clone();
            async move {
                let run = execute(&ctx, &text).await.unwrap();
                rows(&run.batches).into_iter().collect::<BTreeSet<_>>()
            }
        };
        assert_eq!(sorted(&ordered).await, sorted(&as_written).await, "{name}");
        if physical_plan(&ordered, &text).await != physical_plan(&as_written, &text).await {
            reordered.push(name);
        }
    }
    assert!(
        reordered.iter().any(|r| r == "q07"),
        "q07 kept its order: {reordered:?}"
    );
    assert!(
        !reordered.iter().any(|r| r == "q05"),
        "q05 reordered: {reordered:?}"
    );
}
