//! What the scan tells DataFusion's planner: output partitioning and statistics from manifests,
//! on the six-file table that pyiceberg builds (`tests/fixtures/make_cases.py`). The cases' SQL
//! behaviour is in `slt/cases/`.

mod common;

use common::{execute, make_case_fixtures, rows, scans};
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
async fn multi_file_table_is_partitioned_and_reports_statistics_from_manifests() {
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

/// Scans of `history.m` recorded so far.
async fn recorded(ctx: &SessionContext) -> Vec<Vec<String>> {
    common::statement_ok(
        ctx,
        "SELECT count(*) FROM system.runtime.table_access WHERE \"table\" = 'history.m'",
    )
    .await
}

/// Answers from metadata: `count(*)`, `count(col)` and `min`/`max` of integer and date columns
/// of a table without delete files come from its manifests (DataFusion's AggregateStatistics
/// replaces the aggregate by the values the scan's exact statistics give: the plan has no
/// scan and none is recorded), equal to the same aggregates over a filter that makes the scan
/// run. A string column's bounds may be truncated and a delete file changes the rows: then the
/// scan runs. A plain `LIMIT` opens only the files it needs (one of six, over two partitions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_answers_aggregates_and_a_limit_opens_only_the_files_it_needs() {
    let (_dir, _engine, ctx) = common::history_session().await;
    common::statement_ok(
        &ctx,
        "CREATE TABLE m (id BIGINT, d DATE, s VARCHAR, n INT) WITH \
         ('write.delete.mode' = 'merge-on-read')",
    )
    .await;
    for k in 0..6 {
        common::statement_ok(
            &ctx,
            &format!(
                "INSERT INTO m VALUES ({a}, DATE '2024-01-01' + INTERVAL '{k} day', 's{k}', {n}), \
                 ({b}, DATE '2023-06-01' - INTERVAL '{k} day', 'z{k}', NULL)",
                a = k * 10 + 1,
                b = 100 - k,
                n = k * 3
            ),
        )
        .await;
    }
    let from_metadata = [
        "SELECT count(*) FROM m",
        "SELECT count(n), count(id) FROM m",
        "SELECT min(id), max(id), min(d), max(d), min(n), max(n) FROM m",
    ];
    for sql in from_metadata {
        // Its scan's record awaited, so the count below is settled.
        let (scanned, _) =
            common::rows_and_files_read(&ctx, "history.m", &format!("{sql} WHERE id > -1")).await;
        let before = recorded(&ctx).await;
        let run = execute(&ctx, sql).await.unwrap();
        assert_eq!(rows(&run.batches), scanned, "{sql}");
        assert!(scans(&run.plan).is_empty(), "{sql}: a scan is planned");
        assert_eq!(recorded(&ctx).await, before, "{sql}: a scan ran");
    }
    // Strings: bounds may be truncated, so the scan runs.
    let run = execute(&ctx, "SELECT min(s), max(s) FROM m").await.unwrap();
    assert_eq!(rows(&run.batches), [["s0", "z5"]]);
    assert_eq!(scans(&run.plan).len(), 1);

    // LIMIT: six files of two rows over two partitions; three rows need two files.
    for (limit, files) in [(2, 1), (3, 2)] {
        let sql = format!("SELECT * FROM m LIMIT {limit}");
        let (answer, read) = common::rows_and_files_read(&ctx, "history.m", &sql).await;
        assert_eq!(answer.len(), limit);
        assert_eq!(read, files, "LIMIT {limit}");
    }

    // A delete file: the rows are no longer the manifests' counts.
    common::statement_ok(&ctx, "DELETE FROM m WHERE id = 11").await;
    for sql in from_metadata {
        let scanned = common::statement_ok(&ctx, &format!("{sql} WHERE id > -1")).await;
        let run = execute(&ctx, sql).await.unwrap();
        assert_eq!(rows(&run.batches), scanned, "{sql}");
        assert_eq!(scans(&run.plan).len(), 1, "{sql}");
    }
    assert_eq!(
        common::statement_ok(&ctx, "SELECT count(*) FROM m").await,
        [["11"]]
    );
}

/// Answers from metadata under a partition filter: on a table partitioned by `region`
/// (identity), a filter on `region` that every planned file's partition value satisfies is
/// dropped (`ProvenFilterRule`), and `count(*)`, `count(col)`, `min`/`max` come from the
/// manifests of the files that remain (a NOT NULL column's too): no scan in the plan, equal to
/// the answer of a scan made to run by a filter on another column. A filter on another column
/// or with a volatile function, or one a NULL partition value leaves undecided, keeps its scan; rows read through a dropped filter are the rows it
/// passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_answers_under_a_partition_filter() {
    let (_dir, _engine, ctx) = common::history_session().await;
    common::statement_ok(
        &ctx,
        "CREATE TABLE pm (id BIGINT NOT NULL, region VARCHAR, d DATE) \
         WITH (partitioning = ARRAY['region'])",
    )
    .await;
    for k in 0..4 {
        common::statement_ok(
            &ctx,
            &format!(
                "INSERT INTO pm VALUES ({a}, 'EU', DATE '2024-01-01' + INTERVAL '{k} day'), \
                 ({b}, 'US', NULL), ({c}, 'ASIA', DATE '2020-02-02'), ({d}, NULL, NULL)",
                a = k * 10 + 1,
                b = 100 + k,
                c = -k,
                d = 1000 + k,
            ),
        )
        .await;
    }
    let proven = [
        "SELECT count(*) FROM pm WHERE region = 'EU'",
        "SELECT count(*), count(d), min(id), max(id), min(d), max(d) FROM pm WHERE region IN ('EU', 'US')",
        "SELECT count(id), max(id) FROM pm WHERE region = 'ASIA' OR region = 'US'",
    ];
    for sql in proven {
        let scanned = common::statement_ok(&ctx, &format!("{sql} AND id > -1000")).await;
        let run = execute(&ctx, sql).await.unwrap();
        assert_eq!(rows(&run.batches), scanned, "{sql}");
        assert!(scans(&run.plan).is_empty(), "{sql}: a scan is planned");
    }
    // Not proven by partition values (another column, a volatile function): the scan runs.
    for (sql, count) in [
        (
            "SELECT count(*) FROM pm WHERE region = 'EU' AND random() < 2",
            "4",
        ),
        (
            "SELECT count(*) FROM pm WHERE region = 'EU' AND id > 5",
            "3",
        ),
        (
            "SELECT count(*) FROM pm WHERE region = 'EU' OR id = 1000",
            "5",
        ),
    ] {
        let run = execute(&ctx, sql).await.unwrap();
        assert_eq!(scans(&run.plan).len(), 1, "{sql}");
        assert_eq!(rows(&run.batches), [[count]], "{sql}");
    }
    // NULL partition values: a comparison is NULL there (not proven, or the file is pruned),
    // IS NULL is true; either way the count is SQL's.
    for (sql, count) in [
        ("SELECT count(*) FROM pm WHERE region <> 'EU'", "8"),
        (
            "SELECT count(*) FROM pm WHERE region IS NULL OR region = 'US'",
            "8",
        ),
        ("SELECT count(*) FROM pm WHERE region IS NULL", "4"),
    ] {
        assert_eq!(common::statement_ok(&ctx, sql).await, [[count]], "{sql}");
    }
    // A dropped filter still passes exactly its rows.
    let all = common::statement_sorted(&ctx, "SELECT * FROM pm WHERE region = 'US'").await;
    let checked =
        common::statement_sorted(&ctx, "SELECT * FROM pm WHERE region = 'US' AND id > -1000").await;
    assert_eq!(all, checked);
    assert_eq!(all.len(), 4);
}
