//! Table maintenance from SQL (`ALTER TABLE … EXECUTE`, `server/src/sql/procedures.rs`):
//! `optimize` on tables written by iceflight (with position delete files and deletion vectors)
//! and by pyiceberg, read back identically by iceflight, pyiceberg and DuckDB;
//! `expire_snapshots` deleting exactly the files no kept snapshot reaches;
//! `rollback_to_snapshot`; `optimize_manifests`; `remove_orphan_files` deleting only what nothing
//! references; Z-order; concurrent INSERTs losing nothing; bad input in one line.

mod common;

use common::{refused, statement_ok as ok, statement_sorted as sorted};

use std::collections::BTreeMap;
use std::path::Path;

use datafusion::prelude::SessionContext;

/// An engine on a fresh embedded catalog with namespace `history`, whose `expire_snapshots`
/// floor is `min_retention`, and a session in `history`.
async fn session(
    min_retention: std::time::Duration,
) -> (
    tempfile::TempDir,
    iceflight::session::Engine,
    SessionContext,
) {
    let dir = tempfile::tempdir().unwrap();
    common::make_history(dir.path());
    let mut config = iceflight::config::Config {
        data_dir: dir.path().to_path_buf(),
        ..Default::default()
    };
    config.query.target_partitions = 2;
    config.maintenance.min_retention = min_retention;
    // add_files takes files from the test's own directory (`[maintenance] import_roots`).
    config.maintenance.import_roots = vec![dir.path().display().to_string()];
    let engine = iceflight::session::Engine::connect(config).await.unwrap();
    let ctx = engine.session(None, Some("history"), &[]).unwrap();
    (dir, engine, ctx)
}

/// pyiceberg's (`read`) or DuckDB's (`duckdb`) rows of `table`, sorted as text.
fn oracle(dir: &Path, command: &str, table: &str) -> Vec<Vec<String>> {
    common::oracle_rows(&common::pyiceberg_rw(dir, &[command, table])[0])
}

/// A procedure's answer as metric → value.
async fn metrics(ctx: &SessionContext, text: &str) -> BTreeMap<String, i64> {
    ok(ctx, text)
        .await
        .into_iter()
        .map(|r| (r[0].clone(), r[1].parse().unwrap()))
        .collect()
}

/// Live data files (content 0) and delete files (content 1, 2) of `table`.
async fn file_counts(ctx: &SessionContext, table: &str) -> (i64, i64) {
    let rows = ok(
        ctx,
        &format!(
            "SELECT count(*) FILTER (WHERE content = 0), count(*) FILTER (WHERE content > 0) \
             FROM \"{table}$files\""
        ),
    )
    .await;
    (rows[0][0].parse().unwrap(), rows[0][1].parse().unwrap())
}

/// Every snapshot's operation, oldest first.
async fn operations(ctx: &SessionContext, table: &str) -> Vec<String> {
    ok(
        ctx,
        &format!("SELECT operation FROM \"{table}$snapshots\" ORDER BY committed_at"),
    )
    .await
    .into_iter()
    .map(|r| r[0].clone())
    .collect()
}

/// optimize on a partitioned v2 table with merge-on-read position delete files and on a v3
/// table with deletion vectors: the rows stay (three readers), small files become one per
/// partition, the delete files are applied and gone from the snapshot, the snapshot is a
/// `replace`; `WHERE` on the partition column compacts only that partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optimize_compacts_and_applies_deletes() {
    let (dir, _engine, ctx) = session(std::time::Duration::from_secs(7 * 86400)).await;
    for (table, version) in [("c2", 2), ("c3", 3)] {
        ok(
            &ctx,
            &format!(
                "CREATE TABLE {table} (id BIGINT, part VARCHAR, v BIGINT) WITH (format_version \
                 = {version}, partitioning = ARRAY['part'], sorted_by = ARRAY['id'], \
                 'write.delete.mode' = 'merge-on-read')"
            ),
        )
        .await;
        for k in 0..4 {
            ok(
                &ctx,
                &format!(
                    "INSERT INTO {table} VALUES ({a}, 'a', {k}), ({b}, 'b', {k}), ({c}, 'a', {k})",
                    a = 100 - k * 2,
                    b = 200 - k,
                    c = 101 - k * 2
                ),
            )
            .await;
        }
        ok(
            &ctx,
            &format!("DELETE FROM {table} WHERE v = 1 AND part = 'a'"),
        )
        .await;
        let before = sorted(&ctx, &format!("SELECT * FROM {table}")).await;
        assert_eq!(before.len(), 10);
        let (data, deletes) = file_counts(&ctx, table).await;
        assert_eq!((data, deletes), (8, 1), "{table}");

        // Only partition b: its 4 files become 1; a keeps its files and delete file.
        let m = metrics(
            &ctx,
            &format!("ALTER TABLE {table} EXECUTE optimize WHERE part = 'b'"),
        )
        .await;
        assert_eq!(m["rewritten_data_files_count"], 4, "{m:?}");
        assert_eq!(m["added_data_files_count"], 1, "{m:?}");
        assert_eq!(file_counts(&ctx, table).await, (5, 1), "{table}");
        assert_eq!(
            sorted(&ctx, &format!("SELECT * FROM {table}")).await,
            before
        );

        let m = metrics(
            &ctx,
            &format!("ALTER TABLE {table} EXECUTE optimize(file_size_threshold => '10MB')"),
        )
        .await;
        assert_eq!(m["rewritten_data_files_count"], 4, "{m:?}");
        assert_eq!(m["applied_delete_files_count"], 1, "{m:?}");
        assert_eq!(m["rewritten_rows_count"], 6, "{m:?}");
        assert_eq!(file_counts(&ctx, table).await, (2, 0), "{table}");
        assert_eq!(
            sorted(&ctx, &format!("SELECT * FROM {table}")).await,
            before
        );
        let name = format!("history.{table}");
        let expected: Vec<Vec<String>> = before.clone();
        assert_eq!(oracle(dir.path(), "read", &name), expected, "pyiceberg");
        assert_eq!(oracle(dir.path(), "duckdb", &name), expected, "duckdb");
        // Written in the sort order: ids ascend within the new file of a.
        let ids = ok(
            &ctx,
            &format!("SELECT id FROM {table} WHERE part = 'a' ORDER BY _pos"),
        )
        .await;
        let mut sorted_ids = ids.clone();
        sorted_ids.sort_by_key(|r| r[0].parse::<i64>().unwrap());
        assert_eq!(ids, sorted_ids);
        let ops = operations(&ctx, table).await;
        assert_eq!(&ops[ops.len() - 2..], ["replace", "replace"], "{ops:?}");
        // Nothing left to do: no snapshot.
        let m = metrics(&ctx, &format!("ALTER TABLE {table} EXECUTE optimize")).await;
        assert_eq!(m["rewritten_data_files_count"], 0, "{m:?}");
        assert_eq!(operations(&ctx, table).await.len(), ops.len());
    }

    // A table pyiceberg wrote, five commits of one row.
    ok(&ctx, "CREATE TABLE pw (id BIGINT, who VARCHAR)").await;
    common::pyiceberg_rw(dir.path(), &["append", "history.pw", "1", "5"]);
    assert_eq!(file_counts(&ctx, "pw").await, (5, 0));
    let before = oracle(dir.path(), "read", "history.pw");
    let m = metrics(&ctx, "ALTER TABLE pw EXECUTE optimize").await;
    assert_eq!(m["rewritten_data_files_count"], 5, "{m:?}");
    assert_eq!(file_counts(&ctx, "pw").await, (1, 0));
    assert_eq!(oracle(dir.path(), "read", "history.pw"), before);
    assert_eq!(oracle(dir.path(), "duckdb", "history.pw"), before);
    assert_eq!(sorted(&ctx, "SELECT * FROM pw").await, before);
}

/// expire_snapshots with the floor lowered to 0 for the test: every snapshot but the current
/// goes, the files only they reached (the data files a copy-on-write DELETE replaced, their
/// manifests and manifest lists) are gone from storage, every file the current snapshot reads
/// is still there, and pyiceberg reads the same rows. Then rollback_to_snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expire_snapshots_deletes_only_unreachable_files() {
    let (dir, _engine, ctx) = session(std::time::Duration::ZERO).await;
    ok(&ctx, "CREATE TABLE e (id BIGINT, v BIGINT)").await;
    for k in 0..3 {
        ok(
            &ctx,
            &format!("INSERT INTO e VALUES ({k}, {k}), ({}, 0)", k + 10),
        )
        .await;
    }
    let old_files: Vec<String> = ok(&ctx, "SELECT file_path FROM \"e$files\"")
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    ok(&ctx, "DELETE FROM e WHERE id = 1").await;
    let live: Vec<String> = ok(&ctx, "SELECT file_path FROM \"e$files\"")
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    let exists = |p: &str| Path::new(p.strip_prefix("file://").unwrap_or(p)).exists();
    let replaced: Vec<&String> = old_files.iter().filter(|p| !live.contains(p)).collect();
    assert_eq!(replaced.len(), 1, "{old_files:?} {live:?}");
    assert!(exists(replaced[0]));
    let rows = sorted(&ctx, "SELECT * FROM e").await;
    assert_eq!(
        ok(&ctx, "SELECT count(*) FROM \"e$snapshots\"").await,
        [["4"]]
    );

    let m = metrics(
        &ctx,
        "ALTER TABLE e EXECUTE expire_snapshots(retention_threshold => '0s')",
    )
    .await;
    assert_eq!(m["deleted_snapshots_count"], 3, "{m:?}");
    assert_eq!(m["deleted_data_files_count"], 1, "{m:?}");
    assert_eq!(m["deleted_manifest_lists_count"], 3, "{m:?}");
    assert_eq!(m["files_not_deleted_count"], 0, "{m:?}");
    assert!(!exists(replaced[0]), "the replaced data file is gone");
    for path in &live {
        assert!(exists(path), "{path} is read by the current snapshot");
    }
    assert_eq!(
        ok(&ctx, "SELECT count(*) FROM \"e$snapshots\"").await,
        [["1"]]
    );
    assert_eq!(sorted(&ctx, "SELECT * FROM e").await, rows);
    assert_eq!(oracle(dir.path(), "read", "history.e"), rows);
    let again = metrics(
        &ctx,
        "ALTER TABLE e EXECUTE expire_snapshots(retention_threshold => '0s')",
    )
    .await;
    assert_eq!(again["deleted_snapshots_count"], 0, "{again:?}");

    // Rollback: two more inserts, back to the first of them.
    ok(&ctx, "INSERT INTO e VALUES (50, 5)").await;
    let first: String = ok(
        &ctx,
        "SELECT snapshot_id FROM \"e$snapshots\" ORDER BY committed_at DESC LIMIT 1",
    )
    .await[0][0]
        .clone();
    ok(&ctx, "INSERT INTO e VALUES (60, 6)").await;
    ok(
        &ctx,
        &format!("ALTER TABLE e EXECUTE rollback_to_snapshot(snapshot_id => {first})"),
    )
    .await;
    assert_eq!(
        ok(&ctx, "SELECT count(*) FROM e WHERE id >= 50").await,
        [["1"]]
    );
    assert_eq!(
        oracle(dir.path(), "read", "history.e").len(),
        rows.len() + 1
    );
    // Trino's older form; the snapshot after it is no ancestor now.
    let later: String = ok(
        &ctx,
        "SELECT snapshot_id FROM \"e$snapshots\" ORDER BY committed_at DESC LIMIT 1",
    )
    .await[0][0]
        .clone();
    refused(
        &ctx,
        &format!("CALL system.rollback_to_snapshot('history', 'e', {later})"),
        tonic::Code::InvalidArgument,
        "is not an ancestor",
    )
    .await;
}

/// Every file under `dir`, at any depth.
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            match path.is_dir() {
                true => stack.push(path),
                false => out.push(path),
            }
        }
    }
    out
}

/// Sets `path`'s last-modified time `age` back.
fn age(path: &Path, age: std::time::Duration) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(std::time::SystemTime::now() - age)
        .unwrap();
}

/// optimize_manifests on a v3 table of six commits (one a copy-on-write DELETE): one manifest
/// afterwards, the same rows and row ids, every snapshot still readable, pyiceberg and DuckDB
/// read the same. Then remove_orphan_files with every file of the table made two days old:
/// only the files nothing references go (two planted strays, not the young one nor the
/// neighbouring table's), every snapshot still reads, the readers agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optimize_manifests_and_remove_orphan_files() {
    let day = std::time::Duration::from_secs(86400);
    let (dir, _engine, ctx) = session(day).await;
    ok(
        &ctx,
        "CREATE TABLE o (id BIGINT, v BIGINT) WITH (format_version = 3)",
    )
    .await;
    ok(&ctx, "CREATE TABLE o2 (id BIGINT)").await;
    ok(&ctx, "INSERT INTO o2 VALUES (1)").await;
    for k in 0..5 {
        ok(
            &ctx,
            &format!("INSERT INTO o VALUES ({k}, {k}), ({}, 0)", k + 10),
        )
        .await;
    }
    ok(&ctx, "DELETE FROM o WHERE id = 1").await;
    let rows = sorted(&ctx, "SELECT * FROM o").await;
    let row_ids = sorted(&ctx, "SELECT id, _row_id FROM o").await;
    let snapshots: Vec<String> = ok(&ctx, "SELECT snapshot_id FROM \"o$snapshots\"")
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    let mut history = vec![];
    for id in &snapshots {
        history.push(sorted(&ctx, &format!("SELECT * FROM o FOR VERSION AS OF {id}")).await);
    }
    let manifests: i64 = ok(&ctx, "SELECT count(*) FROM \"o$manifests\"").await[0][0]
        .parse()
        .unwrap();
    assert!(manifests >= 5, "{manifests} manifests");

    let m = metrics(&ctx, "ALTER TABLE o EXECUTE optimize_manifests").await;
    assert_eq!(m["rewritten_manifests_count"], manifests, "{m:?}");
    assert_eq!(m["added_manifests_count"], 1, "{m:?}");
    assert_eq!(m["processed_entries_count"], 5, "{m:?}");
    assert_eq!(
        ok(&ctx, "SELECT count(*) FROM \"o$manifests\"").await,
        [["1"]]
    );
    assert_eq!(operations(&ctx, "o").await.last().unwrap(), "replace");
    assert_eq!(sorted(&ctx, "SELECT * FROM o").await, rows);
    assert_eq!(sorted(&ctx, "SELECT id, _row_id FROM o").await, row_ids);
    assert_eq!(oracle(dir.path(), "read", "history.o"), rows);
    assert_eq!(oracle(dir.path(), "duckdb", "history.o"), rows);
    let again = metrics(&ctx, "ALTER TABLE o EXECUTE optimize_manifests").await;
    assert_eq!(again["rewritten_manifests_count"], 0, "{again:?}");

    // Orphans: the table's own files are all made old, so only references protect them.
    let live: String = ok(&ctx, "SELECT file_path FROM \"o$files\" LIMIT 1").await[0][0].clone();
    let live = live.strip_prefix("file://").unwrap_or(&live).to_string();
    let table_dir = Path::new(&live[..live.find("/data/").unwrap()]).to_path_buf();
    let neighbour = table_dir.with_file_name("o2");
    assert!(neighbour.is_dir(), "{}", neighbour.display());
    let stray_data = table_dir.join("data/stray-0001.parquet");
    let stray_manifest = table_dir.join("metadata/stray-m0.avro");
    let young = table_dir.join("data/young-0001.parquet");
    for path in [&stray_data, &stray_manifest] {
        std::fs::write(path, b"PAR1").unwrap();
    }
    for path in files_under(&table_dir)
        .iter()
        .chain(&files_under(&neighbour))
    {
        age(path, 2 * day);
    }
    std::fs::write(&young, b"PAR1").unwrap();
    let kept_before = files_under(&table_dir).len();
    let neighbour_files = files_under(&neighbour);

    refused(
        &ctx,
        "ALTER TABLE o EXECUTE remove_orphan_files(retention_threshold => '1h')",
        tonic::Code::InvalidArgument,
        "shorter than the minimum retention 86400s",
    )
    .await;
    let m = metrics(
        &ctx,
        "ALTER TABLE o EXECUTE remove_orphan_files(retention_threshold => '1d')",
    )
    .await;
    assert_eq!(m["deleted_files_count"], 2, "{m:?}");
    assert_eq!(m["scanned_files_count"] as usize, kept_before, "{m:?}");
    assert_eq!(m["files_not_deleted_count"], 0, "{m:?}");
    assert!(!stray_data.exists() && !stray_manifest.exists());
    assert!(young.exists(), "younger than the retention");
    assert_eq!(files_under(&table_dir).len(), kept_before - 2);
    assert_eq!(files_under(&neighbour), neighbour_files);
    for (id, expected) in snapshots.iter().zip(&history) {
        assert_eq!(
            &sorted(&ctx, &format!("SELECT * FROM o FOR VERSION AS OF {id}")).await,
            expected,
            "snapshot {id}"
        );
    }
    assert_eq!(oracle(dir.path(), "read", "history.o"), rows);
    assert_eq!(oracle(dir.path(), "duckdb", "history.o"), rows);
    assert_eq!(ok(&ctx, "SELECT count(*) FROM o2").await, [["1"]]);
}

/// optimize(sort_by => 'zorder(a, b)') clusters both columns: in a table of several files whose
/// rows were in scrambled order, a filter on either column alone prunes files, where a plain
/// sort by (a, b) prunes files only for a filter on a. Counted as files read by the scans
/// (`system.runtime.table_access`), not timed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zorder_clusters_each_column() {
    let (_dir, _engine, ctx) = session(std::time::Duration::from_secs(7 * 86400)).await;
    // Files roll between batches: small batches, so the 16 384 rows make several files.
    ok(&ctx, "SET datafusion.execution.batch_size = 1024").await;
    for table in ["z", "l"] {
        ok(
            &ctx,
            &format!("CREATE TABLE {table} (a BIGINT, b BIGINT, pad VARCHAR)"),
        )
        .await;
        ok(
            &ctx,
            &format!(
                "ALTER TABLE {table} SET TBLPROPERTIES ('write.target-file-size-bytes' = '65536')"
            ),
        )
        .await;
        // Every point of a 128 x 128 grid once, in a scrambled order (7919 is prime).
        ok(
            &ctx,
            &format!(
                "INSERT INTO {table} SELECT y % 128, y / 128, md5(CAST(y AS VARCHAR)) FROM \
                 (SELECT (value * 7919) % 16384 AS y FROM generate_series(0, 16383))"
            ),
        )
        .await;
    }
    let rows = sorted(&ctx, "SELECT a, b FROM z").await;
    assert_eq!(rows.len(), 16384);
    ok(
        &ctx,
        "ALTER TABLE z EXECUTE optimize(sort_by => 'zorder(a, b)')",
    )
    .await;
    ok(&ctx, "ALTER TABLE l EXECUTE optimize(sort_by => 'a, b')").await;
    assert_eq!(sorted(&ctx, "SELECT a, b FROM z").await, rows);
    assert_eq!(sorted(&ctx, "SELECT a, b FROM l").await, rows);
    let files = |t: &'static str| {
        let ctx = ctx.clone();
        async move {
            ok(&ctx, &format!("SELECT count(*) FROM \"{t}$files\"")).await[0][0]
                .parse::<i64>()
                .unwrap()
        }
    };
    let (zf, lf) = (files("z").await, files("l").await);
    assert!(zf >= 4 && lf >= 4, "files: z {zf}, l {lf}");
    // Files each filter opens: the scans' record, newest last.
    let read = |table: &'static str, query: &'static str| {
        let ctx = ctx.clone();
        async move {
            let (n, files) = common::rows_and_files_read(&ctx, table, query).await;
            assert_eq!(n.len(), 1);
            (n[0][0].clone(), files as i64)
        }
    };
    let (za, zr_a) = read("history.z", "SELECT count(*) FROM z WHERE a < 16").await;
    let (zb, zr_b) = read("history.z", "SELECT count(*) FROM z WHERE b < 16").await;
    let (la, lr_a) = read("history.l", "SELECT count(*) FROM l WHERE a < 16").await;
    let (lb, lr_b) = read("history.l", "SELECT count(*) FROM l WHERE b < 16").await;
    assert_eq!((za.as_str(), zb.as_str()), ("2048", "2048"));
    assert_eq!((la, lb), (za, zb));
    println!(
        "files read, a < 16 / b < 16: z-order {zr_a}/{zr_b} of {zf}, (a, b) {lr_a}/{lr_b} of {lf}"
    );
    assert!(
        lr_a < lf && lr_b == lf,
        "lexicographic: a {lr_a}, b {lr_b} of {lf}"
    );
    assert!(
        zr_a < zf && zr_b < zf,
        "z-order: a {zr_a}, b {zr_b} of {zf}"
    );
}

/// optimize and expire_snapshots while another session inserts: every inserted row is there
/// afterwards (a procedure commits on top of appends). The retention (4 s, floor 1 s for the
/// test) is longer than an INSERT takes: no snapshot an INSERT started from is expired under it
/// (what the 7-day floor guarantees in earnest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_inserts_lose_nothing() {
    let (_dir, engine, ctx) = session(std::time::Duration::from_secs(1)).await;
    ok(&ctx, "CREATE TABLE ci (id BIGINT)").await;
    for k in 0..6 {
        ok(&ctx, &format!("INSERT INTO ci VALUES ({k})")).await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    ok(&ctx, "INSERT INTO ci VALUES (6)").await;
    let writer = engine.session(None, Some("history"), &[]).unwrap();
    let inserts = tokio::spawn(async move {
        for k in 100..112 {
            ok(&writer, &format!("INSERT INTO ci VALUES ({k})")).await;
        }
    });
    let mut expired = 0;
    for _ in 0..3 {
        ok(&ctx, "ALTER TABLE ci EXECUTE optimize").await;
        let m = metrics(
            &ctx,
            "ALTER TABLE ci EXECUTE expire_snapshots(retention_threshold => '4s')",
        )
        .await;
        expired += m["deleted_snapshots_count"];
    }
    inserts.await.unwrap();
    assert!(
        expired >= 6,
        "the first inserts' snapshots expired: {expired}"
    );
    assert_eq!(
        ok(&ctx, "SELECT count(*), count(DISTINCT id) FROM ci").await,
        [["19", "19"]]
    );
}

/// Bad input: one line, nothing committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_procedure_calls_are_one_line() {
    let (_dir, _engine, ctx) = session(std::time::Duration::from_secs(7 * 86400)).await;
    ok(
        &ctx,
        "CREATE TABLE b (id BIGINT, part VARCHAR) WITH (partitioning = ARRAY['part'])",
    )
    .await;
    ok(&ctx, "INSERT INTO b VALUES (1, 'a')").await;
    ok(&ctx, "INSERT INTO b VALUES (2, 'a')").await;
    let snapshots = ok(&ctx, "SELECT count(*) FROM \"b$snapshots\"").await;
    let invalid = tonic::Code::InvalidArgument;
    for (text, says) in [
        ("ALTER TABLE b EXECUTE vacuum", "unknown procedure vacuum"),
        (
            "ALTER TABLE b EXECUTE optimize(threshold => '1MB')",
            "has no argument threshold; it takes file_size_threshold",
        ),
        (
            "ALTER TABLE b EXECUTE optimize(file_size_threshold => 'big')",
            "file_size_threshold",
        ),
        (
            "ALTER TABLE b EXECUTE optimize WHERE id = 1",
            "only identity-partition columns of history.b (part); id is not one",
        ),
        (
            "ALTER TABLE b EXECUTE expire_snapshots(retention_threshold => '1h')",
            "shorter than the minimum retention 604800s",
        ),
        (
            "ALTER TABLE b EXECUTE expire_snapshots(retention_threshold => 'soon')",
            "not a duration",
        ),
        (
            "ALTER TABLE b EXECUTE expire_snapshots WHERE part = 'a'",
            "takes no WHERE clause",
        ),
        (
            "ALTER TABLE b EXECUTE rollback_to_snapshot(snapshot_id => 42)",
            "has no snapshot 42",
        ),
        (
            "CALL system.vacuum('history', 'b')",
            "unknown procedure system.vacuum",
        ),
    ] {
        refused(&ctx, text, invalid, says).await;
    }
    refused(
        &ctx,
        "ALTER TABLE nope EXECUTE optimize",
        tonic::Code::NotFound,
        "nope",
    )
    .await;
    assert_eq!(
        ok(&ctx, "SELECT count(*) FROM \"b$snapshots\"").await,
        snapshots
    );
}

/// The workload test: SSB's 13 queries on a lineorder in TPC-H's order (dates shuffled); the
/// layout advice names a sort column from what the scans recorded; a copy of lineorder
/// optimized with that column (small files, so files can be pruned) answers the same 13
/// queries identically while reading a fraction of the bytes, both in one run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layout_advice_from_the_ssb_workload() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::engine(dir.path(), 2).await;
    let catalog = std::sync::Arc::clone(engine.catalogs().get("local").unwrap());
    let options = iceflight_datagen::load::LoadOptions {
        scale: 0.02,
        target_file_size: 256 * 1024,
        row_group_rows: 8192,
        progress: false,
        ..Default::default()
    };
    let namespace = iceberg::NamespaceIdent::new("ssb".into());
    iceflight_datagen::load::load_ssb(&catalog, &namespace, &options, false)
        .await
        .unwrap();
    let ctx = engine.session(None, Some("ssb"), &[]).unwrap();
    let queries: Vec<(String, String)> = {
        let folder = common::repo_root().join("bench/queries/ssb");
        let mut names: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        names
            .into_iter()
            .map(|p| {
                let name = p.file_stem().unwrap().to_string_lossy().to_string();
                (name, std::fs::read_to_string(p).unwrap())
            })
            .collect()
    };
    assert_eq!(queries.len(), 13);
    let mut answers = vec![];
    for (name, text) in &queries {
        answers.push((name.clone(), ok(&ctx, text).await));
    }
    let advice = ok(
        &ctx,
        "SELECT sort_by, scans, scans_filtering, read_share_now, read_share_sorted, statement \
         FROM system.runtime.layout_advice WHERE \"table\" = 'ssb.lineorder'",
    )
    .await;
    assert_eq!(advice.len(), 1, "{advice:?}");
    let column = advice[0][0].clone();
    assert!(column.starts_with("lo_"), "{advice:?}");
    let scans: u64 = advice[0][1].parse().unwrap();
    assert!(
        (10..=13).contains(&scans),
        "the scans that read rows: {advice:?}"
    );
    let now: f64 = advice[0][3].parse().unwrap();
    let sorted_share: f64 = advice[0][4].parse().unwrap();
    assert!(sorted_share < now, "{advice:?}");
    println!("advice: {advice:?}");

    // EXPLAIN VERBOSE of a query on the table shows the advice.
    let explain = ok(
        &ctx,
        "EXPLAIN VERBOSE SELECT count(*) FROM lineorder WHERE lo_quantity < 5",
    )
    .await;
    let text = format!("{explain:?}");
    assert!(
        text.contains(&format!("layout_advice=[sort by {column}")),
        "{text}"
    );

    // The copy, rewritten as advised.
    ok(
        &ctx,
        "CREATE TABLE lineorder_sorted AS SELECT * FROM lineorder",
    )
    .await;
    ok(
        &ctx,
        "ALTER TABLE lineorder_sorted SET TBLPROPERTIES ('write.target-file-size-bytes' = '262144')",
    )
    .await;
    let statement = advice[0][5].replace("ssb.lineorder", "lineorder_sorted");
    let m = metrics(&ctx, &statement).await;
    assert!(m["added_data_files_count"] > 1, "{m:?}");

    let bytes = |table: &'static str| {
        let ctx = ctx.clone();
        async move {
            ok(
                &ctx,
                &format!(
                    "SELECT coalesce(sum(bytes_read), 0), count(*) FROM system.runtime.table_access \
                     WHERE \"table\" = 'ssb.{table}'"
                ),
            )
            .await[0]
                .iter()
                .map(|v| v.parse::<u64>().unwrap())
                .collect::<Vec<_>>()
        }
    };
    let before = bytes("lineorder").await;
    for (name, text) in &queries {
        ok(&ctx, text).await;
        let sorted = ok(&ctx, &text.replace("lineorder", "lineorder_sorted")).await;
        let expected = &answers.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(&sorted, expected, "{name}");
    }
    let after = bytes("lineorder").await;
    let untouched = after[0] - before[0];
    let optimized = bytes("lineorder_sorted").await;
    assert_eq!(after[1] - before[1], 13);
    assert_eq!(
        optimized[1],
        13 + 1,
        "13 queries and the optimize's own read"
    );
    // The optimize's own read of every file is in there too: count the queries' reads only.
    let rows = ok(
        &ctx,
        "SELECT bytes_read FROM system.runtime.table_access \
         WHERE \"table\" = 'ssb.lineorder_sorted' ORDER BY ended",
    )
    .await;
    let queries_read: u64 = rows[1..].iter().map(|r| r[0].parse::<u64>().unwrap()).sum();
    println!(
        "13 SSB queries read {untouched} bytes of lineorder and {queries_read} of lineorder \
         sorted by {column} ({:.3})",
        queries_read as f64 / untouched as f64
    );
    assert!(
        queries_read * 10 < untouched * 9,
        "sorted by {column}: {queries_read} of {untouched} bytes"
    );
}

/// Writes Parquet files with DuckDB (no field ids, columns in DuckDB's order): each `(name,
/// query)` becomes `dir/name`.
fn duckdb_parquet(dir: &Path, files: &[(&str, &str)]) {
    for (name, _) in files {
        std::fs::create_dir_all(dir.join(name).parent().unwrap()).unwrap();
    }
    let script: String = files
        .iter()
        .map(|(name, query)| {
            format!(
                "duckdb.sql(\"COPY ({query}) TO '{}' (FORMAT parquet)\")\n",
                dir.join(name).display()
            )
        })
        .collect();
    let out = std::process::Command::new(common::python())
        .args(["-c", &format!("import duckdb\n{script}")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `add_files` brings DuckDB-written Parquet files (no field ids, columns in another order
/// than the table's) into a table as they are: one `append` snapshot; iceflight, pyiceberg and
/// DuckDB read the rows DuckDB wrote (by name, through the name mapping set in that commit);
/// the files' bounds prune. A file whose columns do not fit, a file already in the table, no
/// file at all, another format or a partitioned table fail in one line and commit nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_files_brings_parquet_files_in_place() {
    let (dir, _engine, ctx) = session(std::time::Duration::from_secs(0)).await;
    ok(
        &ctx,
        "CREATE TABLE imported (id BIGINT NOT NULL, name VARCHAR, price DECIMAL(10, 2), d DATE)",
    )
    .await;
    ok(
        &ctx,
        "INSERT INTO imported VALUES (0, 'own', 1.50, DATE '2020-01-01')",
    )
    .await;
    let incoming = dir.path().join("incoming");
    duckdb_parquet(
        &incoming,
        &[
            (
                "a.parquet",
                "SELECT 'n' || i AS name, i::BIGINT AS id, DATE '2024-01-01' + i::INT AS d, \
                 (i / 4)::DECIMAL(10, 2) AS price FROM range(1, 101) t(i)",
            ),
            (
                "nested/b.parquet",
                "SELECT i::BIGINT AS id, NULL::VARCHAR AS name, (i * 2)::DECIMAL(10, 2) AS price \
                 FROM range(1001, 1051) t(i)",
            ),
        ],
    );
    std::fs::write(incoming.join("_SUCCESS"), "").unwrap();
    let added = metrics(
        &ctx,
        &format!(
            "ALTER TABLE imported EXECUTE add_files(location => '{}', format => 'PARQUET')",
            incoming.display()
        ),
    )
    .await;
    assert_eq!(added["added_data_files_count"], 2, "{added:?}");
    assert_eq!(added["added_rows_count"], 150, "{added:?}");
    assert_eq!(operations(&ctx, "imported").await.last().unwrap(), "append");

    let ours = sorted(&ctx, "SELECT * FROM imported").await;
    assert_eq!(ours.len(), 151);
    assert!(
        ours.contains(&vec![
            "1001".into(),
            "NULL".into(),
            "2002.00".into(),
            "NULL".into()
        ]),
        "{ours:?}"
    );
    assert!(
        ours.contains(&vec![
            "7".into(),
            "n7".into(),
            "1.75".into(),
            "2024-01-08".into()
        ]),
        "{ours:?}"
    );
    assert_eq!(
        oracle(dir.path(), "read", "history.imported"),
        ours,
        "pyiceberg"
    );
    assert_eq!(
        oracle(dir.path(), "duckdb", "history.imported"),
        ours,
        "DuckDB"
    );
    // The manifests carry the files' bounds: ids over 1000 are in one file.
    let (rows, files) = common::rows_and_files_read(
        &ctx,
        "history.imported",
        "SELECT * FROM imported WHERE id > 1000",
    )
    .await;
    assert_eq!((rows.len(), files), (50, 1));

    // Bad input commits nothing.
    let snapshots = operations(&ctx, "imported").await.len();
    let bad = dir.path().join("bad");
    duckdb_parquet(
        &bad.join("extra"),
        &[("x.parquet", "SELECT 1::BIGINT AS id, 'x' AS colour")],
    );
    duckdb_parquet(&bad.join("type"), &[("x.parquet", "SELECT 'one' AS id")]);
    duckdb_parquet(
        &bad.join("nulls"),
        &[("x.parquet", "SELECT NULL::BIGINT AS id, 'x' AS name")],
    );
    duckdb_parquet(&bad.join("noid"), &[("x.parquet", "SELECT 'x' AS name")]);
    std::fs::create_dir_all(bad.join("empty")).unwrap();
    std::fs::write(bad.join("empty/readme.txt"), "no data").unwrap();
    let call = |sub: &str| {
        format!(
            "ALTER TABLE imported EXECUTE add_files(location => '{}')",
            bad.join(sub).display()
        )
    };
    use tonic::Code::{InvalidArgument, Unimplemented};
    refused(
        &ctx,
        &call("extra"),
        InvalidArgument,
        "column colour is not a column of the table",
    )
    .await;
    refused(&ctx, &call("type"), InvalidArgument, "column id is Utf8").await;
    refused(
        &ctx,
        &call("nulls"),
        InvalidArgument,
        "column id holds NULL",
    )
    .await;
    refused(
        &ctx,
        &call("noid"),
        InvalidArgument,
        "NOT NULL column id is not in the file",
    )
    .await;
    refused(
        &ctx,
        &call("empty"),
        InvalidArgument,
        "no Parquet file under",
    )
    .await;
    refused(
        &ctx,
        &format!(
            "ALTER TABLE imported EXECUTE add_files(location => '{}')",
            incoming.display()
        ),
        InvalidArgument,
        "is already a data file of",
    )
    .await;
    refused(
        &ctx,
        &format!(
            "ALTER TABLE imported EXECUTE add_files(location => '{}', format => 'ORC')",
            incoming.display()
        ),
        InvalidArgument,
        "format ORC",
    )
    .await;
    assert_eq!(operations(&ctx, "imported").await.len(), snapshots);
    ok(
        &ctx,
        "CREATE TABLE parted (id BIGINT, p VARCHAR) WITH (partitioning = ARRAY['p'])",
    )
    .await;
    refused(
        &ctx,
        &format!(
            "ALTER TABLE parted EXECUTE add_files(location => '{}')",
            incoming.display()
        ),
        Unimplemented,
        "partitioned table",
    )
    .await;
    assert_eq!(sorted(&ctx, "SELECT * FROM imported").await, ours);

    // A column added since: the name mapping gains it, so a later file's values are read.
    ok(&ctx, "ALTER TABLE imported ADD COLUMN extra INT").await;
    let later = dir.path().join("later");
    duckdb_parquet(
        &later,
        &[("c.parquet", "SELECT 5000::BIGINT AS id, 42::INT AS extra")],
    );
    let added = metrics(
        &ctx,
        &format!(
            "ALTER TABLE imported EXECUTE add_files(location => '{}')",
            later.display()
        ),
    )
    .await;
    assert_eq!(added["added_data_files_count"], 1, "{added:?}");
    assert_eq!(
        ok(&ctx, "SELECT extra, name FROM imported WHERE id = 5000").await,
        [["42", "NULL"]]
    );
    assert_eq!(
        oracle(dir.path(), "read", "history.imported").len(),
        ours.len() + 1
    );
}
