//! `UPDATE`, `MERGE INTO` and `DELETE` in both write modes (copy-on-write, merge-on-read:
//! Parquet position delete files on a format version 2 table), checked against a model of the
//! rows kept beside the table, and read back by pyiceberg and DuckDB on the same embedded
//! catalog; bad input fails as one clear line and commits nothing.

mod common;

use common::{refused, statement_ok as ok, statement_rows as sql, statement_sorted as sorted};

use std::collections::BTreeMap;
use std::path::Path;

use datafusion::prelude::SessionContext;

/// pyiceberg_rw.py's `command` (`read`: pyiceberg, `duckdb`: DuckDB) on `table` of the catalog
/// in `dir`: the rows, as text, sorted.
fn oracle(dir: &Path, command: &str, table: &str) -> Vec<Vec<String>> {
    common::oracle_rows(&common::pyiceberg_rw(dir, &[command, table])[0])
}

/// The model: rows by id, `(part, v)`, `v` NULL as `None`.
type Model = BTreeMap<i64, (String, Option<i64>)>;

/// The model's rows as the tables print them, sorted as text.
fn rows(model: &Model) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = model
        .iter()
        .map(|(id, (part, v))| {
            vec![
                id.to_string(),
                part.clone(),
                v.map_or("NULL".to_string(), |v| v.to_string()),
            ]
        })
        .collect();
    out.sort();
    out
}

/// The last snapshot's operation and its added / removed data and delete file counts.
async fn last_snapshot(ctx: &SessionContext, table: &str) -> Vec<String> {
    ok(
        ctx,
        &format!(
            "SELECT operation, summary['added-data-files'], summary['deleted-data-files'], \
             summary['added-delete-files'] FROM \"{table}$snapshots\" \
             ORDER BY committed_at DESC, snapshot_id LIMIT 1"
        ),
    )
    .await
    .remove(0)
}

async fn snapshot_count(ctx: &SessionContext, table: &str) -> Vec<Vec<String>> {
    ok(ctx, &format!("SELECT count(*) FROM \"{table}$snapshots\"")).await
}

/// The same statements in both modes: the rows equal the model after each, pyiceberg and
/// DuckDB read them alike, and merge-on-read leaves data files in place and adds delete files
/// while copy-on-write rewrites the files it hits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_merge_and_delete_in_both_modes() {
    let (dir, _engine, ctx) = common::history_session().await;
    for (mode, version) in [
        ("copy-on-write", 2),
        ("merge-on-read", 2),
        ("merge-on-read", 3),
        ("copy-on-write", 3),
    ] {
        let t = format!("rc_{}_v{version}", mode.replace('-', "_"));
        let name = format!("history.{t}");
        ok(
            &ctx,
            &format!(
                "CREATE TABLE {t} (id BIGINT NOT NULL, part VARCHAR, v BIGINT) WITH \
                 (partitioning = ARRAY['part'], format_version = {version}, \
                 'write.delete.mode' = '{mode}', \
                 'write.update.mode' = '{mode}', 'write.merge.mode' = '{mode}')"
            ),
        )
        .await;
        ok(
            &ctx,
            &format!(
                "INSERT INTO {t} VALUES (1, 'a', 10), (2, 'a', 20), (3, 'b', NULL), (4, 'b', 40)"
            ),
        )
        .await;
        ok(
            &ctx,
            &format!("INSERT INTO {t} VALUES (5, 'a', 50), (6, 'c', 60)"),
        )
        .await;
        let mut model: Model = [
            (1, ("a", Some(10))),
            (2, ("a", Some(20))),
            (3, ("b", None)),
            (4, ("b", Some(40))),
            (5, ("a", Some(50))),
            (6, ("c", Some(60))),
        ]
        .into_iter()
        .map(|(id, (p, v))| (id, (p.to_string(), v)))
        .collect();
        let check = |model: &Model| {
            let expected = rows(model);
            let ctx = ctx.clone();
            let t = t.clone();
            let name = name.clone();
            let dir = dir.path().to_path_buf();
            async move {
                assert_eq!(
                    sorted(&ctx, &format!("SELECT * FROM {t}")).await,
                    expected,
                    "{t}"
                );
                assert_eq!(oracle(&dir, "read", &name), expected, "pyiceberg, {t}");
                assert_eq!(oracle(&dir, "duckdb", &name), expected, "duckdb, {t}");
            }
        };

        // UPDATE: a NULL condition leaves the row; the count is the rows updated.
        let n = ok(
            &ctx,
            &format!("UPDATE {t} SET v = v + 1, part = 'z' WHERE v > 15"),
        )
        .await;
        for (_, (part, v)) in model.iter_mut() {
            if v.is_some_and(|v| v > 15) {
                *v = v.map(|v| v + 1);
                *part = "z".to_string();
            }
        }
        assert_eq!(n, [["4"]], "{t}");
        check(&model).await;
        let last = last_snapshot(&ctx, &t).await;
        // Four data files (a and b, then a and c) held an updated row; the updated rows,
        // all in partition z, make one new file.
        assert_eq!(last[0], "overwrite", "{last:?}");
        match mode {
            "copy-on-write" => assert_eq!(last[2], "4", "{last:?}"),
            _ => {
                assert_eq!(
                    last[2], "NULL",
                    "merge-on-read removes no data file: {last:?}"
                );
                assert_eq!(last[3], "4", "one delete file per data file hit: {last:?}");
                // v2: Parquet position delete files; v3: deletion vectors in Puffin files.
                let formats = ok(
                    &ctx,
                    &format!("SELECT DISTINCT file_format FROM \"{t}$files\" WHERE content = 1"),
                )
                .await;
                let format = if version == 2 { "PARQUET" } else { "PUFFIN" };
                assert_eq!(formats, [[format]], "{t}");
            }
        }

        // MERGE: delete, update and insert in one statement; clauses in order.
        let n = ok(
            &ctx,
            &format!(
                "MERGE INTO {t} AS t USING (VALUES (1, 'a', NULL), (2, 'q', 7), (7, 'c', 70), \
                 (8, 'd', NULL)) AS s(id, part, v) ON t.id = s.id \
                 WHEN MATCHED AND s.v IS NULL THEN DELETE \
                 WHEN MATCHED THEN UPDATE SET v = s.v * 2 \
                 WHEN NOT MATCHED AND s.v IS NOT NULL THEN INSERT VALUES (s.id, s.part, s.v)"
            ),
        )
        .await;
        model.remove(&1);
        model.get_mut(&2).unwrap().1 = Some(14);
        model.insert(7, ("c".to_string(), Some(70)));
        assert_eq!(n, [["3"]], "{t}");
        check(&model).await;

        // DELETE in the table's mode.
        let n = ok(&ctx, &format!("DELETE FROM {t} WHERE id IN (3, 4)")).await;
        model.remove(&3);
        model.remove(&4);
        assert_eq!(n, [["2"]], "{t}");
        check(&model).await;
        if mode == "merge-on-read" {
            let last = last_snapshot(&ctx, &t).await;
            // Row 3 is in the first 'b' file, row 4 (updated) in the 'z' file.
            assert_eq!(last[0], "delete", "{last:?}");
            assert_eq!(last[3], "2", "{last:?}");
        }

        // Bad input: one clear line, nothing committed.
        let before = snapshot_count(&ctx, &t).await;
        for (text, says) in [
            (
                format!(
                    "MERGE INTO {t} USING (VALUES (2), (2)) AS s(id) ON {t}.id = s.id \
                     WHEN MATCHED THEN UPDATE SET v = 0"
                ),
                "more than one source row",
            ),
            (format!("UPDATE {t} SET nope = 1"), "no column nope"),
            (format!("UPDATE {t} SET v = 1, v = 2"), "set twice"),
            (format!("UPDATE {t} SET id = NULL WHERE id = 2"), "id"),
            (format!("UPDATE {t} SET v = 'x' WHERE id = 2"), "x"),
            (format!("UPDATE {t} SET v = 3.5 WHERE id = 2"), "fraction"),
        ] {
            refused(&ctx, &text, tonic::Code::InvalidArgument, says).await;
        }
        assert_eq!(snapshot_count(&ctx, &t).await, before, "{t}");
        check(&model).await;
    }
}

/// Two sessions incrementing the same row at once, in each mode: a statement that lost the
/// race runs again on the new snapshot (or, after too many losses, fails with `Aborted` and
/// changes nothing), so the row ends at exactly the number of updates that succeeded; pyiceberg
/// reads the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_updates_of_one_row_lose_no_increment() {
    let (dir, engine, ctx) = common::history_session().await;
    for mode in ["copy-on-write", "merge-on-read"] {
        let t = format!("race_{}", mode.replace('-', "_"));
        ok(
            &ctx,
            &format!(
                "CREATE TABLE {t} (id BIGINT, n BIGINT) WITH ('write.update.mode' = '{mode}')"
            ),
        )
        .await;
        ok(&ctx, &format!("INSERT INTO {t} VALUES (1, 0), (2, 0)")).await;
        let writer = |ctx: SessionContext, t: String| async move {
            let mut done = 0;
            for _ in 0..6 {
                match sql(&ctx, &format!("UPDATE {t} SET n = n + 1 WHERE id = 1")).await {
                    Ok(rows) => {
                        assert_eq!(rows, [["1"]]);
                        done += 1;
                    }
                    Err(e) => {
                        let status = iceflight::flight::status::to_status(e);
                        assert_eq!(status.code(), tonic::Code::Aborted, "{status}");
                        assert!(status.message().contains("nothing was changed"), "{status}");
                    }
                }
            }
            done
        };
        let a = engine.session(None, Some("history"), &[]).unwrap();
        let b = engine.session(None, Some("history"), &[]).unwrap();
        let (da, db) = tokio::join!(
            tokio::spawn(writer(a, t.clone())),
            tokio::spawn(writer(b, t.clone()))
        );
        let done = da.unwrap() + db.unwrap();
        assert!(done > 0, "{t}");
        let expected = vec![
            vec!["1".to_string(), done.to_string()],
            vec!["2".to_string(), "0".to_string()],
        ];
        assert_eq!(
            sorted(&ctx, &format!("SELECT * FROM {t}")).await,
            expected,
            "{t}"
        );
        assert_eq!(
            oracle(dir.path(), "read", &format!("history.{t}")),
            expected,
            "{t}"
        );
    }
}

/// `INSERT OVERWRITE` replaces the partitions its rows fall in and keeps the others; on an
/// unpartitioned table it replaces every row; a query of no rows replaces nothing. pyiceberg
/// and DuckDB read the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_overwrite_replaces_the_partitions_it_writes() {
    let (dir, _engine, ctx) = common::history_session().await;
    let check = |t: &'static str, expected: Vec<Vec<&'static str>>| {
        let ctx = ctx.clone();
        let dir = dir.path().to_path_buf();
        async move {
            let expected: Vec<Vec<String>> = expected
                .into_iter()
                .map(|r| r.into_iter().map(str::to_string).collect())
                .collect();
            assert_eq!(sorted(&ctx, &format!("SELECT * FROM {t}")).await, expected);
            let name = format!("history.{t}");
            assert_eq!(oracle(&dir, "read", &name), expected, "pyiceberg");
            assert_eq!(oracle(&dir, "duckdb", &name), expected, "duckdb");
        }
    };
    ok(
        &ctx,
        "CREATE TABLE o (id BIGINT, part VARCHAR) WITH (partitioning = ARRAY['part'])",
    )
    .await;
    ok(
        &ctx,
        "INSERT INTO o VALUES (1, 'a'), (2, 'a'), (3, 'b'), (4, 'c')",
    )
    .await;
    let n = ok(&ctx, "INSERT OVERWRITE o VALUES (10, 'a'), (11, 'd')").await;
    assert_eq!(n, [["2"]]);
    check(
        "o",
        vec![
            vec!["10", "a"],
            vec!["11", "d"],
            vec!["3", "b"],
            vec!["4", "c"],
        ],
    )
    .await;
    let last = ok(
        &ctx,
        "SELECT operation, summary['deleted-data-files'], summary['deleted-records'] \
         FROM \"o$snapshots\" ORDER BY committed_at DESC, snapshot_id LIMIT 1",
    )
    .await;
    assert_eq!(last, [["overwrite", "1", "2"]]);
    // No row: nothing replaced, no snapshot.
    let snapshots = ok(&ctx, "SELECT count(*) FROM \"o$snapshots\"").await;
    assert_eq!(
        ok(&ctx, "INSERT OVERWRITE o SELECT * FROM o WHERE id < 0").await,
        [["0"]]
    );
    assert_eq!(
        ok(&ctx, "SELECT count(*) FROM \"o$snapshots\"").await,
        snapshots
    );

    ok(&ctx, "CREATE TABLE u (id BIGINT)").await;
    ok(&ctx, "INSERT INTO u VALUES (1), (2)").await;
    ok(&ctx, "INSERT INTO u VALUES (3)").await;
    assert_eq!(
        ok(&ctx, "INSERT OVERWRITE u SELECT id * 10 FROM u").await,
        [["3"]]
    );
    check("u", vec![vec!["10"], vec!["20"], vec!["30"]]).await;
}

/// `ALTER TABLE … SET TBLPROPERTIES` switches the write mode and upgrades the format: a v2
/// table with position delete files becomes v3, and the next delete from the same data file
/// writes a deletion vector holding the earlier positions too; pyiceberg and DuckDB read the
/// rows we read. Bad values are one clear line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_properties_switches_mode_and_upgrades_to_v3() {
    let (dir, _engine, ctx) = common::history_session().await;
    ok(&ctx, "CREATE TABLE p (id BIGINT, v BIGINT)").await;
    ok(&ctx, "INSERT INTO p VALUES (1, 1), (2, 2), (3, 3), (4, 4)").await;
    ok(
        &ctx,
        "ALTER TABLE p SET TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')",
    )
    .await;
    ok(&ctx, "DELETE FROM p WHERE id = 1").await;
    let formats = "SELECT file_format, count(*) FROM \"p$files\" WHERE content = 1 \
                   GROUP BY file_format ORDER BY file_format";
    assert_eq!(ok(&ctx, formats).await, [["PARQUET", "1"]]);
    ok(
        &ctx,
        "ALTER TABLE p SET TBLPROPERTIES ('format-version' = '3')",
    )
    .await;
    ok(&ctx, "DELETE FROM p WHERE id = 3").await;
    assert_eq!(ok(&ctx, formats).await, [["PARQUET", "1"], ["PUFFIN", "1"]]);
    let expected = vec![
        vec!["2".to_string(), "2".to_string()],
        vec!["4".to_string(), "4".to_string()],
    ];
    assert_eq!(sorted(&ctx, "SELECT * FROM p").await, expected);
    assert_eq!(oracle(dir.path(), "read", "history.p"), expected);
    assert_eq!(oracle(dir.path(), "duckdb", "history.p"), expected);
    for (text, says) in [
        (
            "ALTER TABLE p SET TBLPROPERTIES ('write.update.mode' = 'sometimes')",
            "sometimes",
        ),
        (
            "ALTER TABLE p SET TBLPROPERTIES ('format-version' = '2')",
            "cannot go down",
        ),
    ] {
        refused(&ctx, text, tonic::Code::InvalidArgument, says).await;
    }
}

/// A column pyiceberg adds with a default (`initial-default` and `write-default`, which
/// pyiceberg 0.12 writes into a v2 table's schema: it cannot write v3 metadata): rows written
/// before read the default, and an `INSERT` or `MERGE … INSERT` that leaves the column out
/// writes it; pyiceberg reads the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_defaults_are_read_and_written() {
    let (dir, _engine, ctx) = common::history_session().await;
    ok(&ctx, "CREATE TABLE dv (id BIGINT)").await;
    ok(&ctx, "INSERT INTO dv VALUES (1), (2)").await;
    common::pyiceberg_rw(dir.path(), &["add-default", "history.dv", "w", "7"]);
    ok(&ctx, "INSERT INTO dv (id) VALUES (3)").await;
    ok(&ctx, "INSERT INTO dv (id, w) VALUES (4, NULL), (5, 50)").await;
    ok(
        &ctx,
        "MERGE INTO dv USING (VALUES (6)) AS s(id) ON dv.id = s.id \
         WHEN NOT MATCHED THEN INSERT (id) VALUES (s.id)",
    )
    .await;
    let expected: Vec<Vec<String>> = [
        ["1", "7"],
        ["2", "7"],
        ["3", "7"],
        ["4", "NULL"],
        ["5", "50"],
        ["6", "7"],
    ]
    .iter()
    .map(|r| r.iter().map(|v| v.to_string()).collect())
    .collect();
    assert_eq!(sorted(&ctx, "SELECT * FROM dv").await, expected);
    assert_eq!(oracle(dir.path(), "read", "history.dv"), expected);
}

/// `TIMESTAMP(9)` on a format version 3 table is Iceberg's `timestamp_ns`: nanoseconds are
/// kept and compared, rows update, and DuckDB reads the same (manifest bounds in nanoseconds
/// convert for pruning: `scan/src/model/literal.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_ns_columns_keep_nanoseconds() {
    let (dir, _engine, ctx) = common::history_session().await;
    ok(
        &ctx,
        "CREATE TABLE tns (id BIGINT, t TIMESTAMP(9)) WITH (format_version = 3, \
         'write.update.mode' = 'merge-on-read')",
    )
    .await;
    ok(
        &ctx,
        "INSERT INTO tns VALUES (1, TIMESTAMP '2026-01-01 00:00:00.000000001'), \
         (2, TIMESTAMP '2026-01-01 00:00:00.000000002')",
    )
    .await;
    ok(
        &ctx,
        "INSERT INTO tns VALUES (3, TIMESTAMP '2027-01-01 00:00:00')",
    )
    .await;
    assert_eq!(
        ok(
            &ctx,
            "SELECT data_type FROM information_schema.columns \
             WHERE table_name = 'tns' AND column_name = 't'"
        )
        .await,
        [["Timestamp(ns)"]]
    );
    assert_eq!(
        ok(
            &ctx,
            "SELECT id FROM tns WHERE t = TIMESTAMP '2026-01-01 00:00:00.000000002'"
        )
        .await,
        [["2"]]
    );
    ok(
        &ctx,
        "UPDATE tns SET t = t + INTERVAL '1 nanosecond' WHERE id = 1",
    )
    .await;
    let expected: Vec<Vec<String>> = [
        ["1", "2026-01-01T00:00:00.000000002"],
        ["2", "2026-01-01T00:00:00.000000002"],
        ["3", "2027-01-01T00:00:00"],
    ]
    .iter()
    .map(|r| r.iter().map(|v| v.to_string()).collect())
    .collect();
    assert_eq!(sorted(&ctx, "SELECT * FROM tns").await, expected);
    let duckdb = oracle(dir.path(), "duckdb", "history.tns");
    assert_eq!(duckdb.len(), 3, "{duckdb:?}");
    assert!(duckdb[0][1].contains("00:00:00.000000002"), "{duckdb:?}");
}

/// Row lineage on a format version 3 table: `_row_id` numbers each commit's rows from the
/// table's next row id (first row id inherited from the manifest), `_last_updated_sequence_number`
/// is the data sequence number of the file; a row in a file no statement touched keeps both
/// through a copy-on-write DELETE that rewrites its manifest and a merge-on-read DELETE. A query
/// naming a metadata column may filter on it (no pruning by it: files lack such a column); a
/// v2 table has none (NULL), `_file` and `_pos` name every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_lineage_is_inherited_and_kept() {
    let (_dir, _engine, ctx) = common::history_session().await;
    ok(
        &ctx,
        "CREATE TABLE l (id BIGINT, part VARCHAR) WITH (format_version = 3, \
         partitioning = ARRAY['part'])",
    )
    .await;
    // One manifest of two data files (a: 2 rows, b: 1 row), then one of c.
    ok(&ctx, "INSERT INTO l VALUES (1, 'a'), (2, 'a'), (3, 'b')").await;
    ok(&ctx, "INSERT INTO l VALUES (4, 'c'), (5, 'c')").await;
    let lineage = "SELECT id, _row_id, _last_updated_sequence_number FROM l ORDER BY id";
    let before = ok(&ctx, lineage).await;
    let ids = |rows: &[Vec<String>]| -> BTreeMap<String, (String, String)> {
        rows.iter()
            .map(|r| (r[0].clone(), (r[1].clone(), r[2].clone())))
            .collect()
    };
    let before = ids(&before);
    let mut row_ids: Vec<i64> = before.values().map(|(r, _)| r.parse().unwrap()).collect();
    row_ids.sort();
    assert_eq!(row_ids, [0, 1, 2, 3, 4], "{before:?}");
    // Within a file, ids follow positions; the second commit's rows come after the first's.
    assert_eq!(before["4"].0, "3", "{before:?}");
    assert_eq!(before["5"].0, "4", "{before:?}");
    let seqs: Vec<&str> = before.values().map(|(_, s)| s.as_str()).collect();
    assert_eq!(seqs, ["1", "1", "1", "2", "2"], "{before:?}");

    // Copy-on-write: file a rewritten, the manifest holding b written again.
    ok(&ctx, "DELETE FROM l WHERE id = 1").await;
    let after = ids(&ok(&ctx, lineage).await);
    for id in ["3", "4", "5"] {
        assert_eq!(after[id], before[id], "row {id}: {before:?} then {after:?}");
    }
    assert!(!after.contains_key("1"));
    // Merge-on-read on v3: a deletion vector; the other row of c keeps its lineage.
    ok(
        &ctx,
        "ALTER TABLE l SET TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')",
    )
    .await;
    ok(&ctx, "DELETE FROM l WHERE id = 4").await;
    let after = ids(&ok(&ctx, lineage).await);
    assert_eq!(after["5"], before["5"], "{after:?}");
    assert_eq!(after.len(), 3, "{after:?}");

    // Filters on metadata columns: exact, whatever the files' statistics.
    let five = &before["5"].0;
    assert_eq!(
        ok(&ctx, &format!("SELECT id FROM l WHERE _row_id = {five}")).await,
        [["5"]]
    );
    assert_eq!(
        sorted(&ctx, "SELECT id FROM l WHERE _pos = 0").await,
        [["2"], ["3"]],
        "a's rewrite holds only id 2; c's first row (id 4) is deleted"
    );
    assert_eq!(
        sorted(&ctx, "SELECT count(*) FROM l WHERE _row_id IS NULL").await,
        [["0"]]
    );
    let files = sorted(&ctx, "SELECT count(DISTINCT _file) FROM l").await;
    assert_eq!(files, [["3"]]);
    let explain = ok(&ctx, "EXPLAIN SELECT _row_id FROM l").await;
    assert!(format!("{explain:?}").contains("_row_id"), "{explain:?}");

    // A v2 table: no row lineage; metadata columns only where named.
    ok(&ctx, "CREATE TABLE l2 (id BIGINT)").await;
    ok(&ctx, "INSERT INTO l2 VALUES (7), (8)").await;
    assert_eq!(
        sorted(
            &ctx,
            "SELECT id, _pos, _row_id, _last_updated_sequence_number FROM l2"
        )
        .await,
        [["7", "0", "NULL", "1"], ["8", "1", "NULL", "1"]]
    );
    assert_eq!(
        ok(&ctx, "SELECT * FROM l2 ORDER BY id").await,
        [["7"], ["8"]]
    );
}

/// Format v3 types iceflight cannot serve (`variant`, `geometry(…)`, a struct holding a
/// `variant`), added by another writer: the table loads, the other columns and `count(*)`
/// read, a query touching such a column fails in one line naming it and its type, writes are
/// refused (nothing committed), and a schema change written back keeps the types as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columns_of_unsupported_types_fail_only_the_queries_touching_them() {
    let (dir, _engine, ctx) = common::history_session().await;
    ok(&ctx, "CREATE TABLE u (id BIGINT) WITH (format_version = 3)").await;
    ok(&ctx, "INSERT INTO u VALUES (1), (2)").await;
    common::pyiceberg_rw(dir.path(), &["add-unsupported", "history.u"]);
    let snapshots = snapshot_count(&ctx, "u").await;
    assert_eq!(sorted(&ctx, "SELECT id FROM u").await, [["1"], ["2"]]);
    assert_eq!(ok(&ctx, "SELECT count(*) FROM u").await, [["2"]]);
    assert_eq!(
        ok(&ctx, "SELECT id FROM u WHERE id > 1 ORDER BY id").await,
        [["2"]]
    );
    let unimplemented = tonic::Code::Unimplemented;
    for (text, says) in [
        (
            "SELECT v FROM u",
            "column v of table history.u has type variant",
        ),
        ("SELECT * FROM u", "has type variant"),
        (
            "SELECT id FROM u WHERE g IS NULL",
            "column g of table history.u has type geometry(srid:4326)",
        ),
        (
            "SELECT s FROM u",
            "column s of table history.u has type variant",
        ),
        ("INSERT INTO u (id) VALUES (3)", "cannot write yet"),
        ("DELETE FROM u WHERE id = 1", "cannot write yet"),
        ("UPDATE u SET id = 5 WHERE id = 1", "cannot write yet"),
    ] {
        refused(&ctx, text, unimplemented, says).await;
    }
    assert_eq!(
        snapshot_count(&ctx, "u").await,
        snapshots,
        "nothing committed"
    );
    // A schema change rewrites the metadata with every schema: the types stay as written.
    ok(&ctx, "ALTER TABLE u ADD COLUMN z BIGINT").await;
    assert_eq!(
        sorted(&ctx, "SELECT id, z FROM u").await,
        [["1", "NULL"], ["2", "NULL"]]
    );
    refused(
        &ctx,
        "SELECT g FROM u",
        unimplemented,
        "geometry(srid:4326)",
    )
    .await;
    refused(&ctx, "SELECT s FROM u", unimplemented, "type variant").await;
}

/// Forms refused with one line and nothing committed: a subquery in UPDATE or MERGE
/// expressions, `WHEN NOT MATCHED BY SOURCE`, `UPDATE … FROM`, a MERGE UPDATE in a NOT MATCHED
/// clause; a MERGE whose source is a query runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_row_change_forms_are_one_line_and_commit_nothing() {
    let (_dir, _engine, ctx) = common::history_session().await;
    ok(&ctx, "CREATE TABLE r (id BIGINT, v BIGINT)").await;
    ok(&ctx, "INSERT INTO r VALUES (1, 1), (2, 2)").await;
    let snapshots = ok(&ctx, "SELECT count(*) FROM \"r$snapshots\"").await;
    for (text, code, says) in [
        (
            "UPDATE r SET v = 0 WHERE id IN (SELECT id FROM events)",
            tonic::Code::Unimplemented,
            "subquery",
        ),
        (
            "UPDATE r SET v = (SELECT max(id) FROM events)",
            tonic::Code::Unimplemented,
            "subquery",
        ),
        (
            "MERGE INTO r USING (VALUES (1)) AS s(id) ON r.id = s.id \
             WHEN NOT MATCHED BY SOURCE THEN DELETE",
            tonic::Code::Unimplemented,
            "NOT MATCHED BY SOURCE",
        ),
        (
            "MERGE INTO r USING (VALUES (1)) AS s(id) ON r.id = s.id \
             WHEN NOT MATCHED THEN UPDATE SET v = 0",
            tonic::Code::InvalidArgument,
            "not allowed in a NOT MATCHED",
        ),
        (
            "UPDATE r SET v = 0 FROM events WHERE r.id = events.id",
            tonic::Code::Unimplemented,
            "MERGE",
        ),
    ] {
        refused(&ctx, text, code, says).await;
    }
    assert_eq!(
        ok(&ctx, "SELECT count(*) FROM \"r$snapshots\"").await,
        snapshots
    );
    // A MERGE whose source is a query is fine.
    assert_eq!(
        ok(
            &ctx,
            "MERGE INTO r USING (SELECT id, id * 100 AS v FROM r WHERE id = 2) AS s ON r.id = s.id \
             WHEN MATCHED THEN UPDATE SET v = s.v"
        )
        .await,
        [["1"]]
    );
    assert_eq!(
        sorted(&ctx, "SELECT * FROM r").await,
        [["1", "1"], ["2", "200"]]
    );
}
