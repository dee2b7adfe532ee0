//! Writes through the SQL front end: `CREATE TABLE [AS SELECT]`, `INSERT INTO … VALUES |
//! SELECT` (unpartitioned and partitioned), `DROP TABLE`; each read back by iceflight and by
//! pyiceberg (`tests/fixtures/pyiceberg_rw.py`) on the same embedded catalog; iceflight and
//! pyiceberg committing to one table at once lose nothing; `DELETE` rewrites only the data
//! files it hits, and pyiceberg and DuckDB read what we read after it (and we read theirs).

mod common;

use common::{oracle_rows, statement_ok as ok, statement_rows as sql, statement_sorted as sorted};

use std::path::Path;

use datafusion::prelude::SessionContext;

use serde_json::Value;

/// pyiceberg's command `args` on the catalog in `dir`; its stdout lines.
fn pyiceberg(dir: &Path, args: &[&str]) -> Vec<String> {
    common::pyiceberg_rw(dir, args)
}

/// pyiceberg's rows of `table`, each as text (NULL for None), sorted as text.
fn pyiceberg_rows(dir: &Path, table: &str) -> Vec<Vec<String>> {
    oracle_rows(&pyiceberg(dir, &["read", table])[0])
}

/// DuckDB's rows of `table` (`iceberg_scan` of its current metadata file), as
/// [`pyiceberg_rows`].
fn duckdb_rows(dir: &Path, table: &str) -> Vec<Vec<String>> {
    oracle_rows(&pyiceberg(dir, &["duckdb", table])[0])
}

/// The data files of `table`'s current snapshot, as pyiceberg plans them.
fn pyiceberg_files(dir: &Path, table: &str) -> Vec<String> {
    let files: Value = serde_json::from_str(&pyiceberg(dir, &["read", table])[1]).unwrap();
    serde_json::from_value(files["files"].clone()).unwrap()
}

/// The status a client gets for `text`, which must fail as `Unimplemented`.
async fn unimplemented(ctx: &SessionContext, text: &str) -> tonic::Status {
    let err = sql(ctx, text).await.unwrap_err();
    let status = iceflight::flight::status::to_status(err);
    assert_eq!(
        status.code(),
        tonic::Code::Unimplemented,
        "{text}: {status}"
    );
    status
}

/// `CREATE TABLE`, `INSERT … VALUES` and `INSERT … SELECT` write what pyiceberg then reads; a
/// row that breaks `NOT NULL` fails its statement and commits nothing; `DROP TABLE` removes the
/// table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_insert_and_drop() {
    let (dir, _engine, ctx) = common::history_session().await;

    ok(&ctx, "CREATE TABLE t (id BIGINT NOT NULL, name VARCHAR)").await;
    assert_eq!(ok(&ctx, "SELECT count(*) FROM t").await, [["0"]]);
    assert_eq!(
        ok(&ctx, "INSERT INTO t VALUES (1, 'a'), (2, NULL)").await,
        [["2"]]
    );
    assert_eq!(
        ok(&ctx, "INSERT INTO t SELECT id + 10, name FROM t").await,
        [["2"]]
    );
    let want = [["1", "a"], ["11", "a"], ["12", "NULL"], ["2", "NULL"]];
    assert_eq!(sorted(&ctx, "SELECT * FROM t").await, want);
    assert_eq!(pyiceberg_rows(dir.path(), "history.t"), want);

    let err = sql(&ctx, "INSERT INTO t VALUES (NULL, 'x')")
        .await
        .unwrap_err();
    assert!(!err.to_string().contains('\n'), "{err}");
    assert_eq!(
        sorted(&ctx, "SELECT * FROM t").await,
        want,
        "nothing committed"
    );

    let events = ok(&ctx, "SELECT count(*) FROM events").await;
    for (text, says) in [
        (
            "INSERT INTO events FOR VERSION AS OF 'v1' VALUES (9, 'a')",
            "other than its current one",
        ),
        (
            "INSERT INTO \"events$files\" SELECT * FROM \"events$files\"",
            "not implemented",
        ),
        ("DROP TABLE \"events@v1\"", "not a table to drop"),
        ("DROP TABLE \"events$files\"", "not a table to drop"),
        (
            "CREATE OR REPLACE TABLE events AS SELECT 1 AS a",
            "DROP TABLE, then CREATE TABLE",
        ),
    ] {
        let err = sql(&ctx, text).await.unwrap_err();
        assert!(err.to_string().contains(says), "{text}: {err}");
    }
    assert_eq!(
        ok(&ctx, "SELECT count(*) FROM events").await,
        events,
        "nothing written or dropped"
    );

    ok(&ctx, "DROP TABLE t").await;
    let tables = ok(&ctx, "SHOW TABLES").await;
    assert!(!tables.iter().any(|r| r[2] == "t"), "{tables:?}");
    assert!(sql(&ctx, "SELECT * FROM t").await.is_err());
}

/// `INSERT` into a partitioned table writes one data file per partition, in the partition's
/// directory, which pyiceberg reads back with the rest of the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_into_a_partitioned_table() {
    let (dir, _engine, ctx) = common::history_session().await;
    let before = ok(&ctx, "SELECT count(*) FROM \"events$files\"").await;
    assert_eq!(
        ok(
            &ctx,
            "INSERT INTO events VALUES (7, 'c', 70), (8, 'c', 70), (9, 'a', 60)"
        )
        .await,
        [["3"]]
    );
    let after = ok(&ctx, "SELECT count(*) FROM \"events$files\"").await;
    assert_eq!(
        after[0][0].parse::<i64>().unwrap() - before[0][0].parse::<i64>().unwrap(),
        2,
        "one file per partition"
    );
    let ours = sorted(&ctx, "SELECT * FROM events").await;
    assert_eq!(ours.len(), 9);
    assert_eq!(pyiceberg_rows(dir.path(), "history.events"), ours);
    let lines = pyiceberg(dir.path(), &["read", "history.events"]);
    let files: Value = serde_json::from_str(&lines[1]).unwrap();
    let in_c = files["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f.as_str().unwrap().contains("/p=c/x=70/"))
        .count();
    assert_eq!(in_c, 1, "{files}");
    let pruned = ok(&ctx, "SELECT id FROM events WHERE p = 'c' ORDER BY id").await;
    assert_eq!(pruned, [["7"], ["8"]]);
}

/// `CREATE TABLE … AS SELECT` of TPC-H q01 holds the query's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_table_as_a_tpch_query() {
    let (_dir, engine, _) = common::history_session().await;
    common::load_tpch_local(&engine, 0.01).await;
    let ctx = engine.session(None, Some("tpch"), &[]).unwrap();
    let q01 =
        std::fs::read_to_string(common::repo_root().join("bench/queries/tpch/q01.sql")).unwrap();
    let expected = sorted(&ctx, &q01).await;
    assert_eq!(expected.len(), 4);
    ok(&ctx, &format!("CREATE TABLE q01_result AS {q01}")).await;
    assert_eq!(sorted(&ctx, "SELECT * FROM q01_result").await, expected);
    let err = sql(&ctx, &format!("CREATE TABLE q01_result AS {q01}"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    ok(
        &ctx,
        &format!("CREATE TABLE IF NOT EXISTS q01_result AS {q01}"),
    )
    .await;
    assert_eq!(ok(&ctx, "SELECT count(*) FROM q01_result").await, [["4"]]);
}

/// iceflight and pyiceberg appending to one table at the same time: every commit of each is
/// kept once (a conflicting commit is retried on the new metadata).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_commits_with_pyiceberg_lose_nothing() {
    let (dir, _engine, ctx) = common::history_session().await;
    ok(&ctx, "CREATE TABLE c (id BIGINT, who VARCHAR)").await;
    let path = dir.path().to_path_buf();
    let python =
        std::thread::spawn(move || pyiceberg(&path, &["append", "history.c", "1000", "15"]));
    // Insert until pyiceberg is done (at least 15), so that the two overlap.
    let mut ours = 0;
    while ours < 15 || !python.is_finished() {
        ok(&ctx, &format!("INSERT INTO c VALUES ({ours}, 'iceflight')")).await;
        ours += 1;
    }
    let retries = python.join().unwrap();
    let counts = ok(
        &ctx,
        "SELECT who, count(*), count(DISTINCT id) FROM c GROUP BY who ORDER BY who",
    )
    .await;
    let ours = ours.to_string();
    assert_eq!(
        counts,
        [["iceflight", &ours, &ours], ["pyiceberg", "15", "15"]],
        "pyiceberg retried {retries:?}"
    );
    let snapshots = ok(&ctx, "SELECT count(*) FROM \"c$snapshots\"").await;
    let total = ours.parse::<usize>().unwrap() + 15;
    assert_eq!(snapshots, [[total.to_string()]]);
    assert_eq!(pyiceberg_rows(dir.path(), "history.c").len(), total);
    // The commits interleaved: walking the snapshots in commit order (each adds one row), the
    // writer changes at least twice (iceflight, pyiceberg, iceflight, … or the reverse).
    let order = ok(
        &ctx,
        "SELECT snapshot_id FROM \"c$history\" ORDER BY made_current_at, snapshot_id",
    )
    .await;
    let mut writers = vec![];
    let mut pyiceberg_before = 0;
    for row in &order {
        let at = ok(
            &ctx,
            &format!(
                "SELECT count(*) FILTER (WHERE who = 'pyiceberg') FROM c FOR VERSION AS OF {}",
                row[0]
            ),
        )
        .await;
        let pyiceberg_now: usize = at[0][0].parse().unwrap();
        writers.push(if pyiceberg_now > pyiceberg_before {
            "pyiceberg"
        } else {
            "iceflight"
        });
        pyiceberg_before = pyiceberg_now;
    }
    let switches = writers.windows(2).filter(|w| w[0] != w[1]).count();
    eprintln!("iceflight inserts {ours}, pyiceberg retries {retries:?}, switches {switches}");
    assert!(
        switches >= 2,
        "the two writers did not overlap: {writers:?}"
    );
}

/// Table options iceflight understands and cannot keep say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_writes_are_not_implemented() {
    let (_dir, _engine, ctx) = common::history_session().await;
    assert_eq!(ok(&ctx, "SELECT count(*) FROM events").await, [["6"]]);
    // What an Iceberg table cannot keep is refused, not dropped.
    for (text, says) in [
        ("CREATE TABLE k (id BIGINT PRIMARY KEY)", "id PRIMARY KEY"),
        (
            "CREATE TABLE k (id BIGINT, PRIMARY KEY (id))",
            "PRIMARY KEY (id)",
        ),
        ("CREATE TABLE k (id BIGINT DEFAULT 7)", "id DEFAULT 7"),
        (
            "CREATE TABLE k (id BIGINT CHECK (id > 0))",
            "CHECK (id > 0)",
        ),
    ] {
        let status = unimplemented(&ctx, text).await;
        assert!(status.message().contains(says), "{text}: {status}");
    }
    let tables = ok(&ctx, "SHOW TABLES").await;
    assert!(!tables.iter().any(|r| r[2] == "k"), "{tables:?}");
}

/// `ALTER TABLE` adds and drops columns (older rows read NULL for an added one) and renames the
/// table; pyiceberg reads the evolved table alike; what iceberg 0.10.1 cannot do is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_table_evolves_the_schema() {
    let (dir, _engine, ctx) = common::history_session().await;
    // Column types as Trino and DuckDB users write them.
    ok(
        &ctx,
        "CREATE TABLE typed (t TIME, d DATE, ts TIMESTAMP, n DECIMAL(10, 2), b BOOLEAN, f REAL)",
    )
    .await;
    ok(
        &ctx,
        "INSERT INTO typed VALUES (TIME '10:11:12.5', DATE '2026-12-02', \
         TIMESTAMP '2026-12-02 10:11:12', 12.34, true, 1.5)",
    )
    .await;
    assert_eq!(
        ok(&ctx, "SELECT * FROM typed").await,
        [[
            "10:11:12.500",
            "2026-12-02",
            "2026-12-02T10:11:12",
            "12.34",
            "true",
            "1.5"
        ]]
    );
    ok(&ctx, "CREATE TABLE a (id BIGINT, name VARCHAR)").await;
    ok(&ctx, "INSERT INTO a VALUES (1, 'x')").await;
    ok(&ctx, "ALTER TABLE a ADD COLUMN score DOUBLE").await;
    ok(&ctx, "INSERT INTO a VALUES (2, 'y', 2.5)").await;
    let want = [["1", "x", "NULL"], ["2", "y", "2.5"]];
    assert_eq!(sorted(&ctx, "SELECT * FROM a").await, want);
    assert_eq!(pyiceberg_rows(dir.path(), "history.a"), want);

    ok(&ctx, "ALTER TABLE a DROP COLUMN name").await;
    assert_eq!(
        sorted(&ctx, "SELECT * FROM a").await,
        [["1", "NULL"], ["2", "2.5"]]
    );
    ok(&ctx, "ALTER TABLE a ADD COLUMN IF NOT EXISTS score DOUBLE").await;
    for text in [
        "ALTER TABLE a ADD COLUMN score DOUBLE",
        "ALTER TABLE a ADD COLUMN must INT NOT NULL",
        "ALTER TABLE a DROP COLUMN nope",
    ] {
        let status = iceflight::flight::status::to_status(sql(&ctx, text).await.unwrap_err());
        assert_eq!(
            status.code(),
            tonic::Code::InvalidArgument,
            "{text}: {status}"
        );
    }
    ok(&ctx, "CREATE TABLE taken (id BIGINT)").await;
    let status = iceflight::flight::status::to_status(
        sql(&ctx, "ALTER TABLE a RENAME TO taken")
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code(), tonic::Code::AlreadyExists, "{status}");

    let err = sql(&ctx, "ALTER TABLE a RENAME COLUMN score TO points")
        .await
        .unwrap_err();
    let status = iceflight::flight::status::to_status(err);
    assert_eq!(status.code(), tonic::Code::Unimplemented, "{status}");

    ok(&ctx, "ALTER TABLE a RENAME TO b").await;
    assert_eq!(ok(&ctx, "SELECT count(*) FROM b").await, [["2"]]);
    let err = sql(&ctx, "SELECT * FROM a").await.unwrap_err();
    assert_eq!(
        iceflight::flight::status::to_status(err).code(),
        tonic::Code::NotFound
    );
    ok(&ctx, "ALTER TABLE IF EXISTS a ADD COLUMN z INT").await;
}

/// `CREATE TABLE … WITH (partitioning = …, sorted_by = …)` (Trino's table properties): the
/// spec and sort order are the table's, rows are written one file per partition and sorted,
/// and pyiceberg reads them back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_table_with_partitioning_and_sort_order() {
    let (dir, engine, ctx) = common::history_session().await;
    ok(
        &ctx,
        "CREATE TABLE parted WITH (partitioning = ARRAY['p', 'bucket(id, 4)'], \
         sorted_by = ARRAY['id DESC']) AS SELECT * FROM events",
    )
    .await;
    let want = sorted(&ctx, "SELECT * FROM events").await;
    assert_eq!(sorted(&ctx, "SELECT * FROM parted").await, want);
    assert_eq!(pyiceberg_rows(dir.path(), "history.parted"), want);
    let partitions = ok(
        &ctx,
        "SELECT DISTINCT partition['p'] IS NOT NULL, partition['id_bucket'] IS NOT NULL \
         FROM \"parted$files\"",
    )
    .await;
    assert_eq!(partitions, [["true", "true"]]);
    // Each file's identity partition value is the one its rows hold (column p is field 2).
    let mismatched = ok(
        &ctx,
        "SELECT count(*) FROM \"parted$files\" WHERE lower_bounds[2] <> partition['p'] \
         OR upper_bounds[2] <> partition['p']",
    )
    .await;
    assert_eq!(mismatched, [["0"]]);
    let files = ok(
        &ctx,
        "SELECT count(*), sum(record_count) FROM \"parted$files\"",
    )
    .await;
    let buckets = ok(
        &ctx,
        "SELECT count(*) FROM (SELECT DISTINCT partition FROM \"parted$files\")",
    )
    .await;
    assert_eq!(files[0][0], buckets[0][0], "one file per partition");
    assert_eq!(files[0][1], "6");

    ok(
        &ctx,
        "CREATE TABLE days (ts TIMESTAMP, v INT NOT NULL) WITH (partitioning = ARRAY['day(ts)'])",
    )
    .await;
    ok(
        &ctx,
        "INSERT INTO days VALUES (TIMESTAMP '2026-12-01 10:00:00', 1), \
         (TIMESTAMP '2026-12-01 11:00:00', 2), (TIMESTAMP '2026-12-02 09:00:00', 3)",
    )
    .await;
    assert_eq!(
        ok(&ctx, "SELECT count(*) FROM \"days$files\"").await,
        [["2"]]
    );
    assert_eq!(
        ok(
            &ctx,
            "SELECT sum(v) FROM days WHERE ts >= TIMESTAMP '2026-12-02 00:00:00'"
        )
        .await,
        [["3"]]
    );
    // AS SELECT writes its rows in the sort order: one file, read back in file order.
    ok(
        &ctx,
        "CREATE TABLE desc_ids WITH (sorted_by = ARRAY['id DESC']) AS SELECT * FROM events",
    )
    .await;
    let one_partition = engine
        .session(
            None,
            Some("history"),
            &[("datafusion.execution.target_partitions".into(), "1".into())],
        )
        .unwrap();
    let ids: Vec<String> = ok(&one_partition, "SELECT id FROM desc_ids")
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(ids, ["6", "5", "4", "3", "2", "1"]);
    // INSERT writes in the table's sort order too: its new file reads back descending.
    ok(
        &ctx,
        "INSERT INTO desc_ids SELECT id + 100, p, x FROM events",
    )
    .await;
    let newest: Vec<String> = ok(&one_partition, "SELECT id FROM desc_ids WHERE id > 100")
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(newest, ["106", "105", "104", "103", "102", "101"]);
    for bad in [
        "CREATE TABLE b1 (a INT) WITH (partitioning = ARRAY['nope'])",
        "CREATE TABLE b2 (a INT) WITH (partitioning = ARRAY['bucket(a)'])",
        "CREATE TABLE b3 (a INT) WITH (format = 'ORC')",
        "CREATE TABLE b4 (a INT) WITH (partitioning = ARRAY['bucket(a, 0)'])",
        "CREATE TABLE b5 (a INT) WITH (partitioning = ARRAY['truncate(a, 99999999999)'])",
        "CREATE TABLE b6 (a INT) WITH (sorted_by = ARRAY['a SIDEWAYS'])",
        "CREATE TABLE b7 (a BIGINT) WITH (sorted_by = ARRAY['a']) AS SELECT 1 AS a",
    ] {
        let err = sql(&ctx, bad).await.unwrap_err();
        let status = iceflight::flight::status::to_status(err);
        assert_eq!(
            status.code(),
            tonic::Code::InvalidArgument,
            "{bad}: {status}"
        );
    }
}

/// `DELETE … WHERE` removes exactly the rows where the condition is TRUE (not where it is NULL),
/// rewrites only the data files holding one (a file left empty is dropped, not rewritten), and
/// pyiceberg and DuckDB then read the rows we read; we read pyiceberg's own delete alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_rewrites_only_the_files_it_hits() {
    let (dir, _engine, ctx) = common::history_session().await;
    let dir = dir.path();
    ok(
        &ctx,
        "CREATE TABLE d (id BIGINT, part VARCHAR, v DOUBLE) \
         WITH (partitioning = ARRAY['part'])",
    )
    .await;
    ok(
        &ctx,
        "INSERT INTO d VALUES (1, 'a', 1.0), (2, 'a', NULL), (3, 'b', 3.0), (4, 'c', 4.0)",
    )
    .await;
    ok(&ctx, "INSERT INTO d VALUES (5, 'a', 5.0), (6, 'b', NULL)").await;
    let latest = "SELECT operation, summary['deleted-data-files'], summary['added-data-files'], \
                  summary['deleted-records'] FROM \"d$snapshots\" \
                  ORDER BY committed_at DESC, snapshot_id LIMIT 1";

    // The second 'a' file holds the only match: it goes, no file is written, and the first
    // 'a' file (v = 1 and NULL: pruned by its bounds) stays, as do 'b' and 'c'.
    let mut rows = sorted(&ctx, "SELECT * FROM d").await;
    let files = pyiceberg_files(dir, "history.d");
    assert_eq!(files.len(), 5);
    let deleted = ok(&ctx, "DELETE FROM d WHERE v > 2 AND part = 'a'").await;
    let before = rows.len();
    rows.retain(|r| !(r[1] == "a" && r[2] != "NULL" && r[2].parse::<f64>().unwrap() > 2.0));
    assert_eq!(deleted, [[(before - rows.len()).to_string()]]);
    assert_eq!(before - rows.len(), 1);
    assert_eq!(ok(&ctx, latest).await, [["delete", "1", "NULL", "1"]]);
    let after = pyiceberg_files(dir, "history.d");
    assert_eq!(after.len(), 4);
    assert!(after.iter().all(|f| files.contains(f)), "{after:?}");
    assert_eq!(sorted(&ctx, "SELECT * FROM d").await, rows);
    assert_eq!(pyiceberg_rows(dir, "history.d"), rows);
    assert_eq!(duckdb_rows(dir, "history.d"), rows);

    // A condition that is NULL for some rows keeps them; the first 'a' file is rewritten
    // without its matching row.
    let before = rows.len();
    let deleted = ok(&ctx, "DELETE FROM d WHERE v < 2 OR id = 3").await;
    rows.retain(|r| !(r[0] == "3" || (r[2] != "NULL" && r[2].parse::<f64>().unwrap() < 2.0)));
    assert_eq!(deleted, [[(before - rows.len()).to_string()]]);
    assert_eq!(ok(&ctx, latest).await, [["overwrite", "2", "1", "3"]]);
    assert!(rows.iter().any(|r| r[2] == "NULL"), "{rows:?}");
    assert_eq!(sorted(&ctx, "SELECT * FROM d").await, rows);
    assert_eq!(pyiceberg_rows(dir, "history.d"), rows);
    assert_eq!(duckdb_rows(dir, "history.d"), rows);

    // Conditions the optimizer folds away, or that DataFusion would hand over as no
    // condition, delete nothing or are refused; none deletes every row.
    let snapshots = ok(&ctx, "SELECT count(*) FROM \"d$snapshots\"").await;
    for text in [
        "DELETE FROM d WHERE false",
        "DELETE FROM d WHERE NULL",
        "DELETE FROM d WHERE 1 = 2",
    ] {
        assert_eq!(ok(&ctx, text).await, [["0"]], "{text}");
    }
    for (text, says) in [
        (
            "DELETE FROM d WHERE id IN (SELECT id FROM events)",
            "subquery",
        ),
        (
            "DELETE FROM d WHERE EXISTS (SELECT 1 FROM events WHERE events.id = d.id)",
            "subquery",
        ),
        (
            "DELETE FROM d WHERE v > (SELECT min(id) FROM events)",
            "subquery",
        ),
        ("DELETE FROM d WHERE id IN (SELECT 4)", "subquery"),
        ("DELETE FROM d WHERE id IN (VALUES (1), (2))", "subquery"),
        ("DELETE FROM d WHERE v > random()", "volatile"),
        ("DELETE FROM \"d$files\"", "read-only"),
    ] {
        let status = unimplemented(&ctx, text).await;
        assert!(status.message().contains(says), "{text}: {status}");
    }
    for text in [
        "DELETE FROM d WHERE count(*) > 1",
        "DELETE FROM d WHERE row_number() OVER () = 1",
    ] {
        let err = sql(&ctx, text).await.unwrap_err();
        let status = iceflight::flight::status::to_status(err);
        assert_eq!(
            status.code(),
            tonic::Code::InvalidArgument,
            "{text}: {status}"
        );
        assert!(!status.message().contains('\n'), "{text}: {status}");
    }
    // EXPLAIN plans the statement without running it.
    let explained = ok(&ctx, "EXPLAIN DELETE FROM d WHERE id = 1").await;
    assert!(
        explained
            .iter()
            .any(|r| r[1].contains("IcebergDelete: table=history.d")),
        "{explained:?}"
    );
    assert_eq!(
        ok(&ctx, "SELECT count(*) FROM \"d$snapshots\"").await,
        snapshots
    );
    assert_eq!(sorted(&ctx, "SELECT * FROM d").await, rows);

    // pyiceberg's delete, read by us.
    pyiceberg(dir, &["delete", "history.d", "id == 4"]);
    rows.retain(|r| r[0] != "4");
    assert_eq!(sorted(&ctx, "SELECT * FROM d").await, rows);
    assert_eq!(pyiceberg_rows(dir, "history.d"), rows);

    // Every row.
    let deleted = ok(&ctx, "DELETE FROM d").await;
    assert_eq!(deleted, [[rows.len().to_string()]]);
    assert_eq!(ok(&ctx, "SELECT count(*) FROM d").await, [["0"]]);
    assert_eq!(pyiceberg_files(dir, "history.d"), Vec::<String>::new());
    assert_eq!(duckdb_rows(dir, "history.d"), Vec::<Vec<String>>::new());
}

/// iceflight deleting rows one statement at a time while pyiceberg appends to the same table:
/// every delete that lost a race is run again on the new snapshot, so each deletes its row
/// once and no appended row is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_concurrent_with_pyiceberg_appends_lose_nothing() {
    let (dir, _engine, ctx) = common::history_session().await;
    ok(&ctx, "CREATE TABLE c (id BIGINT, who VARCHAR)").await;
    ok(
        &ctx,
        "INSERT INTO c SELECT value, 'iceflight' FROM generate_series(0, 99)",
    )
    .await;
    let path = dir.path().to_path_buf();
    let python =
        std::thread::spawn(move || pyiceberg(&path, &["append", "history.c", "1000", "15"]));
    let mut deleted = 0;
    while deleted < 10 || (!python.is_finished() && deleted < 99) {
        let n = ok(&ctx, &format!("DELETE FROM c WHERE id = {deleted}")).await;
        assert_eq!(n, [["1"]], "DELETE of id {deleted}");
        deleted += 1;
    }
    python.join().unwrap();
    let counts = ok(
        &ctx,
        "SELECT who, count(*), min(id), max(id) FROM c GROUP BY who ORDER BY who",
    )
    .await;
    assert_eq!(
        counts,
        [
            [
                "iceflight",
                &(100 - deleted).to_string(),
                &deleted.to_string(),
                "99"
            ],
            ["pyiceberg", "15", "1000", "1014"]
        ]
    );
    assert_eq!(
        pyiceberg_rows(dir.path(), "history.c"),
        sorted(&ctx, "SELECT * FROM c").await
    );
    // The two writers overlapped: in commit order, deletes and appends alternate at least
    // twice (after the first insert).
    let operations = ok(
        &ctx,
        "SELECT operation FROM \"c$snapshots\" ORDER BY committed_at, snapshot_id",
    )
    .await;
    let switches = operations[1..].windows(2).filter(|w| w[0] != w[1]).count();
    assert!(switches >= 2, "the writers did not overlap: {operations:?}");
}
