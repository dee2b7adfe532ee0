//! Cases of `docs/cases.md` and scan behaviours, on fixtures that pyiceberg builds in a temporary
//! embedded catalog (`tests/fixtures/make_cases.py`, which also writes the delete files).

mod common;

use common::{column, execute, make_case_fixtures, plan_text, query, rows, scan_metric, scans};
use datafusion::prelude::SessionContext;
use iceflight::session::Engine;

async fn setup(partitions: usize) -> (tempfile::TempDir, Engine, SessionContext) {
    let dir = tempfile::tempdir().unwrap();
    make_case_fixtures(dir.path());
    let engine = common::engine(dir.path(), partitions).await;
    let ctx = engine.session(None, Some("cases"), &[]).unwrap();
    (dir, engine, ctx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cases_and_scan_behaviour() {
    let (_dir, _engine, ctx) = setup(2).await;

    // c03: a renamed column binds by field id, for projection and for the pushed predicate.
    assert_eq!(
        column(&ctx, "SELECT c1 FROM c03_renamed WHERE c1 = 1").await,
        ["1"]
    );
    assert_eq!(
        column(&ctx, "SELECT count(*) FROM c03_renamed WHERE c1 >= 1").await,
        ["3"]
    );
    assert_eq!(
        column(&ctx, "SELECT c1 FROM c03_renamed ORDER BY c1").await,
        ["1", "2", "3"]
    );

    // c05: an identity-partition value comes from the manifest, not the file.
    assert_eq!(
        query(&ctx, "SELECT id, p FROM c05_identity").await,
        [["1", "a"]]
    );
    assert_eq!(
        column(&ctx, "SELECT id FROM c05_identity WHERE p = 'a'").await,
        ["1"]
    );
    let run = execute(&ctx, "SELECT id FROM c05_identity WHERE p = 'b'")
        .await
        .unwrap();
    assert!(rows(&run.batches).is_empty());
    assert_eq!(
        scan_metric(&run.plan, "files_opened"),
        0,
        "the p=a file must never be opened"
    );

    // c06: a column added without a write is in the schema and reads as NULL.
    assert_eq!(
        query(&ctx, "SELECT id, email FROM c06_added").await,
        [["1", "NULL"]]
    );
    assert_eq!(
        query(&ctx, "SELECT * FROM c06_added").await,
        [["1", "x", "NULL"]]
    );
    assert_eq!(
        column(&ctx, "SELECT count(*) FROM c06_added WHERE email IS NULL").await,
        ["1"]
    );

    // c07: equality deletes match NULL only to NULL.
    assert_eq!(
        column(&ctx, "SELECT id FROM c07_eq_delete ORDER BY id").await,
        ["1", "2"]
    );
    assert_eq!(
        column(&ctx, "SELECT id FROM c07_eq_delete_null ORDER BY id").await,
        ["1", "3"]
    );
    // Only the delete key column is projected away, and count(*) sees the delete too.
    assert_eq!(
        column(&ctx, "SELECT count(*) FROM c07_eq_delete").await,
        ["2"]
    );
    assert_eq!(
        column(&ctx, "SELECT status FROM c07_eq_delete ORDER BY id").await,
        ["ACTIVE", "NULL"]
    );

    // Positional deletes (positions 1 and 4 → ids 2 and 5).
    assert_eq!(
        column(&ctx, "SELECT id FROM pos_deletes ORDER BY id").await,
        ["1", "3", "4", "6", "7", "8", "9", "10"]
    );
    assert_eq!(
        column(&ctx, "SELECT count(*) FROM pos_deletes").await,
        ["8"]
    );

    // c02: NaN is absent from bounds; DataFusion orders NaN above every number.
    assert_eq!(
        column(&ctx, "SELECT count(*) FROM c02_nan WHERE f > 100").await,
        ["1"]
    );
    assert_eq!(
        column(&ctx, "SELECT count(*) FROM c02_nan_ne WHERE f <> 3").await,
        ["1"]
    );
    assert_eq!(
        column(&ctx, "SELECT count(*) FROM c02_nan WHERE f < 0").await,
        ["0"]
    );

    // c04: null-equal join semantics through our scan.
    assert_eq!(
        query(
            &ctx,
            "SELECT * FROM c04_t1 JOIN c04_t2 ON a IS NOT DISTINCT FROM b"
        )
        .await,
        [["NULL", "NULL"]]
    );
    assert!(
        query(&ctx, "SELECT * FROM c04_t1 JOIN c04_t2 ON a = b")
            .await
            .is_empty()
    );
    assert_eq!(
        column(&ctx, "SELECT a FROM c04_t1 INTERSECT SELECT b FROM c04_t2").await,
        ["NULL"]
    );
    // The null-equal join's dynamic filter is not used at all (its `k IN (1)` would drop the
    // NULL probe row that joins; for an all-NULL build side it is `false`); the `=` join's is
    // proven null-rejecting (dynamic_filter_rule.rs), so t2's file (b: 2 and NULL) is never
    // opened.
    let null_equal = execute(
        &ctx,
        "SELECT * FROM c04_t1 JOIN c04_t2 ON a IS NOT DISTINCT FROM b",
    )
    .await
    .unwrap();
    assert_eq!(rows(&null_equal.batches), [["NULL", "NULL"]]);
    assert!(plan_text(&null_equal.plan).contains("(not used: NULL handling not proven, case c04)"));
    let equal = execute(&ctx, "SELECT * FROM c04_t1 JOIN c04_t2 ON a = b")
        .await
        .unwrap();
    assert!(plan_text(&equal.plan).contains("dynamic_domains=[b in [1, 1] ∩ {1}]"));
    assert_eq!(
        scan_metric(&equal.plan, "files_opened"),
        1,
        "only t1's file"
    );

    // c01: nested struct fields read correctly (pruning on them is a later issue).
    assert_eq!(
        column(&ctx, "SELECT id FROM c01_nested WHERE s['a'] = 7").await,
        ["1"]
    );
    assert_eq!(
        column(
            &ctx,
            "SELECT id FROM c01_nested WHERE s['a'] IS NULL ORDER BY id"
        )
        .await,
        ["2", "3"]
    );
    assert_eq!(
        column(&ctx, "SELECT id FROM c01_nested WHERE s IS NULL").await,
        ["3"]
    );
    assert_eq!(
        column(&ctx, "SELECT id FROM c01_nested WHERE s['a'] > 50").await,
        ["4"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_file_table_is_partitioned_and_pruned_files_are_never_opened() {
    let (_dir, _engine, ctx) = setup(2).await;

    let run = execute(&ctx, "SELECT count(*), sum(id) FROM multi_file")
        .await
        .unwrap();
    assert_eq!(rows(&run.batches), [["6000", "17997000"]]);
    let scan = &scans(&run.plan)[0];
    assert_eq!(
        scan.properties().output_partitioning().partition_count(),
        2,
        "6 files over 2 target partitions"
    );
    assert_eq!(scan_metric(&run.plan, "files_opened"), 6);

    // ids 0..999 are in the first file only: the other five are pruned from manifest bounds.
    let run = execute(&ctx, "SELECT count(*) FROM multi_file WHERE id < 500")
        .await
        .unwrap();
    assert_eq!(rows(&run.batches), [["500"]]);
    assert_eq!(scan_metric(&run.plan, "files_opened"), 1);

    // An unconvertible filter (a function call) prunes nothing but still returns the right rows.
    let run = execute(&ctx, "SELECT count(*) FROM multi_file WHERE abs(id) < 500")
        .await
        .unwrap();
    assert_eq!(rows(&run.batches), [["500"]]);
    assert_eq!(scan_metric(&run.plan, "files_opened"), 6);

    // LIMIT stops early and the engine still returns exactly the limit.
    assert_eq!(
        query(&ctx, "SELECT id FROM multi_file LIMIT 7").await.len(),
        7
    );

    // Statistics from manifests: the scan reports the row count.
    let stats = scans(&run.plan)[0].partition_statistics(None).unwrap();
    assert_eq!(stats.num_rows.get_value(), Some(&6000));

    // Byte sizes are the projection's Arrow sizes (DataFusion's semantics), not the files':
    // one BIGINT column of 6000 rows is 48 000 bytes, two 8-byte columns 96 000. No distinct
    // counts reach DataFusion (metrics_index.rs says why).
    for (sql, bytes) in [
        ("SELECT id FROM multi_file WHERE id > 10", 48_000),
        ("SELECT id, v FROM multi_file WHERE id > 10", 96_000),
    ] {
        let run = execute(&ctx, sql).await.unwrap();
        let stats = scans(&run.plan)[0].partition_statistics(None).unwrap();
        assert_eq!(stats.total_byte_size.get_value(), Some(&bytes), "{sql}");
        let id = &stats.column_statistics[0];
        assert_eq!(id.byte_size.get_value(), Some(&48_000), "{sql}");
        assert_eq!(id.distinct_count.get_value(), None, "{sql}");
    }
    // The table's statistics, for the join order: the distinct count of an integer column is
    // its bounds' range (0..5999), capped at the rows; a double column has none.
    let table = ctx.table_provider("multi_file").await.unwrap();
    let stats = table.statistics().expect("statistics from the manifests");
    assert_eq!(stats.num_rows.get_value(), Some(&6000));
    let distinct: Vec<Option<&usize>> = stats
        .column_statistics
        .iter()
        .map(|c| c.distinct_count.get_value())
        .collect();
    assert_eq!(distinct, [Some(&6000), None]);
}
