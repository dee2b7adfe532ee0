//! Time travel and metadata tables against pyiceberg: `tests/fixtures/make_history.py` builds
//! `history.events` (3 snapshots, a tag, a branch, a column added, a partition field added) and
//! prints what pyiceberg reads of it; each test reads the same through iceflight's SQL front end
//! (`parse_statements`, so the `FOR … AS OF` rewrite runs as for a client).

mod common;

use common::{statement_ok as ok, statement_rows as sql, statement_sorted as sorted};

use std::collections::BTreeMap;

use datafusion::common::DataFusionError;
use datafusion::prelude::SessionContext;
use iceflight_catalog::CatalogError;
use serde_json::Value;
use tokio::sync::OnceCell;

/// The fixture's directory (kept for the test run) and pyiceberg's view of it.
struct Fixture {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    oracle: Value,
}

static FIXTURE: OnceCell<Fixture> = OnceCell::const_new();

async fn fixture() -> &'static Fixture {
    FIXTURE
        .get_or_init(|| async {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().to_path_buf();
            let oracle = common::make_history(&path);
            Fixture {
                _dir: dir,
                path,
                oracle,
            }
        })
        .await
}

async fn session() -> (SessionContext, &'static Value) {
    let fixture = fixture().await;
    let engine = common::engine(&fixture.path, 2).await;
    let ctx = engine.session(None, Some("history"), &[]).unwrap();
    (ctx, &fixture.oracle)
}

/// The oracle's rows of `table`, each as the text of `columns` (JSON null as NULL).
fn oracle_rows(oracle: &Value, table: &str, columns: &[&str]) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = oracle[table]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            columns
                .iter()
                .map(|c| {
                    let mut v = row;
                    for part in c.split('.') {
                        v = &v[part];
                    }
                    common::json_text(v)
                })
                .collect()
        })
        .collect();
    rows.sort();
    rows
}

fn snapshot_ids(oracle: &Value) -> Vec<(i64, i64)> {
    // (committed_at ms, snapshot id), oldest first
    let mut ids: Vec<(i64, i64)> = oracle["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["committed_at"].as_i64().unwrap(),
                s["snapshot_id"].as_i64().unwrap(),
            )
        })
        .collect();
    ids.sort();
    ids
}

fn ids_at(oracle: &Value, snapshot: i64) -> Vec<Vec<String>> {
    oracle["ids_at"][snapshot.to_string()]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| vec![v.to_string()])
        .collect()
}

/// `FOR VERSION AS OF <snapshot id>` reads each snapshot's rows, as pyiceberg does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_as_of_reads_each_snapshot() {
    let (ctx, oracle) = session().await;
    let snapshots = snapshot_ids(oracle);
    assert_eq!(snapshots.len(), 3);
    for (_, id) in snapshots {
        let got = ok(
            &ctx,
            &format!("SELECT id FROM events FOR VERSION AS OF {id} ORDER BY id"),
        )
        .await;
        assert_eq!(got, ids_at(oracle, id), "snapshot {id}");
    }
}

/// `FOR TIMESTAMP AS OF` reads the snapshot current at that instant: each snapshot at its own
/// commit time and 1 ms before the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_as_of_reads_the_snapshot_current_then() {
    let (ctx, oracle) = session().await;
    let snapshots = snapshot_ids(oracle);
    for (k, (at, id)) in snapshots.iter().enumerate() {
        let mut instants = vec![*at];
        if let Some((next, _)) = snapshots.get(k + 1) {
            instants.push(next - 1);
        }
        for ms in instants {
            let t = chrono::DateTime::from_timestamp_millis(ms).unwrap();
            let literal = t.format("%Y-%m-%d %H:%M:%S%.3f UTC");
            let got = ok(
                &ctx,
                &format!(
                    "SELECT id FROM events FOR TIMESTAMP AS OF TIMESTAMP '{literal}' ORDER BY id"
                ),
            )
            .await;
            assert_eq!(got, ids_at(oracle, *id), "at {literal}");
        }
    }
    let before = chrono::DateTime::from_timestamp_millis(snapshots[0].0 - 1).unwrap();
    let err = sql(
        &ctx,
        &format!(
            "SELECT id FROM events FOR TIMESTAMP AS OF '{}'",
            before.to_rfc3339()
        ),
    )
    .await
    .unwrap_err();
    assert!(is_not_found(&err), "{err}");
    assert!(
        err.to_string().contains("has no snapshot at or before"),
        "{err}"
    );
}

/// A tag reads with the schema of its snapshot (no `x`, added later, even though the current
/// partition spec uses `x`); a branch with the table's; both as pyiceberg reads them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_and_branches_read_with_their_schema() {
    let (ctx, oracle) = session().await;
    for reference in ["v1", "dev", "main"] {
        let df = ctx
            .sql(&format!("SELECT * FROM \"events@{reference}\""))
            .await
            .unwrap();
        let names: Vec<String> = df
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let want: Vec<String> = oracle["columns_at"][reference]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, want, "{reference}");
    }
    let tag = ok(
        &ctx,
        "SELECT * FROM events FOR VERSION AS OF 'v1' ORDER BY id",
    )
    .await;
    assert_eq!(tag, [["1", "a"], ["2", "b"], ["3", "a"]]);
    let branch = ok(
        &ctx,
        "SELECT id, x FROM events FOR VERSION AS OF 'dev' WHERE x > 40",
    )
    .await;
    assert_eq!(branch, [["5", "50"]]);
}

/// A missing snapshot or reference is `NotFound` naming it; a value iceflight cannot read is a
/// plan error saying the form it takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_versions_are_one_clear_line() {
    let (ctx, _) = session().await;
    for (text, says) in [
        (
            "SELECT * FROM events FOR VERSION AS OF 42",
            "has no snapshot 42",
        ),
        (
            "SELECT * FROM events FOR VERSION AS OF 'nope'",
            "has no branch or tag 'nope'",
        ),
        (
            "SELECT * FROM \"events$nope\"",
            "has no metadata table $nope",
        ),
        (
            "SELECT * FROM events FOR TIMESTAMP AS OF TIMESTAMP '2999-01-01 00:00:00'",
            "timestamp 2999-01-01 00:00:00.000 UTC is in the future",
        ),
    ] {
        let err = sql(&ctx, text).await.unwrap_err();
        assert!(is_not_found(&err), "{text}: {err}");
        assert!(err.to_string().contains(says), "{text}: {err}");
        assert!(!err.to_string().contains('\n'), "{text}: {err}");
    }
    let err = sql(&ctx, "SELECT * FROM events FOR TIMESTAMP AS OF now()")
        .await
        .unwrap_err();
    assert!(matches!(err, DataFusionError::Plan(_)), "{err}");
}

fn is_not_found(e: &DataFusionError) -> bool {
    let mut e = e;
    loop {
        match e {
            DataFusionError::Context(_, inner) => e = inner,
            DataFusionError::External(inner) => {
                return matches!(
                    inner.downcast_ref::<CatalogError>(),
                    Some(CatalogError::NotFound(_))
                );
            }
            _ => return false,
        }
    }
}

/// `$snapshots`, `$history` and `$refs` hold what pyiceberg's `inspect` holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_history_and_refs_match_pyiceberg() {
    let (ctx, oracle) = session().await;
    let ms = "CAST(CAST(committed_at AS BIGINT) / 1000 AS BIGINT)";
    let got = sorted(
        &ctx,
        &format!(
            "SELECT {ms}, snapshot_id, parent_id, operation, manifest_list \
             FROM \"events$snapshots\" ORDER BY 1, 2, 3, 4, 5"
        ),
    )
    .await;
    let want = oracle_rows(
        oracle,
        "snapshots",
        &[
            "committed_at",
            "snapshot_id",
            "parent_id",
            "operation",
            "manifest_list",
        ],
    );
    assert_eq!(got, want);

    let got = sorted(
        &ctx,
        "SELECT CAST(CAST(made_current_at AS BIGINT) / 1000 AS BIGINT), snapshot_id, parent_id, \
         is_current_ancestor FROM \"events$history\" ORDER BY 1, 2, 3, 4",
    )
    .await;
    let want = oracle_rows(
        oracle,
        "history",
        &[
            "made_current_at",
            "snapshot_id",
            "parent_id",
            "is_current_ancestor",
        ],
    );
    assert_eq!(got, want);

    let got = sorted(
        &ctx,
        "SELECT * FROM \"events$refs\" ORDER BY 1, 2, 3, 4, 5, 6",
    )
    .await;
    let want = oracle_rows(
        oracle,
        "refs",
        &[
            "name",
            "type",
            "snapshot_id",
            "max_reference_age_in_ms",
            "min_snapshots_to_keep",
            "max_snapshot_age_in_ms",
        ],
    );
    assert_eq!(got, want);
}

/// `$files`, `$manifests` and `$partitions` hold what pyiceberg's `inspect` holds; the
/// partition struct spans both specs (NULL `x` for files written before it was added).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_manifests_and_partitions_match_pyiceberg() {
    let (ctx, oracle) = session().await;
    let columns = [
        "content",
        "file_path",
        "file_format",
        "spec_id",
        "partition.p",
        "partition.x",
        "record_count",
        "file_size_in_bytes",
    ];
    let got = sorted(
        &ctx,
        "SELECT content, file_path, file_format, spec_id, partition['p'], partition['x'], \
         record_count, file_size_in_bytes FROM \"events$files\" ORDER BY 1, 2, 3, 4, 5, 6, 7, 8",
    )
    .await;
    assert_eq!(got, oracle_rows(oracle, "files", &columns));
    // Metrics maps by field id, as pyiceberg lists them.
    let counts = sorted(
        &ctx,
        "SELECT file_path, value_counts[3], null_value_counts[1] FROM \"events$files\" ORDER BY 1",
    )
    .await;
    let mut want: Vec<Vec<String>> = oracle["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let lookup = |map: &str, id: i64| {
                f[map]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|kv| kv[0].as_i64() == Some(id))
                    .map_or("NULL".to_string(), |kv| kv[1].to_string())
            };
            vec![
                f["file_path"].as_str().unwrap().to_string(),
                lookup("value_counts", 3),
                lookup("null_value_counts", 1),
            ]
        })
        .collect();
    want.sort();
    assert_eq!(counts, want);

    let columns = [
        "content",
        "path",
        "length",
        "partition_spec_id",
        "added_snapshot_id",
        "added_data_files_count",
        "existing_data_files_count",
        "deleted_data_files_count",
        "added_delete_files_count",
        "existing_delete_files_count",
        "deleted_delete_files_count",
    ];
    let got = sorted(
        &ctx,
        &format!("SELECT {} FROM \"events$manifests\"", columns.join(", ")),
    )
    .await;
    assert_eq!(got, oracle_rows(oracle, "manifests", &columns));
    let bounds = sorted(
        &ctx,
        "SELECT path, partition_summaries[1]['lower_bound'], partition_summaries[1]['upper_bound'] \
         FROM \"events$manifests\"",
    )
    .await;
    let mut want: Vec<Vec<String>> = oracle["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let first = &m["partition_summaries"][0];
            vec![
                common::json_text(&m["path"]),
                common::json_text(&first["lower_bound"]),
                common::json_text(&first["upper_bound"]),
            ]
        })
        .collect();
    want.sort();
    assert_eq!(bounds, want);

    let got = sorted(
        &ctx,
        "SELECT partition['p'], partition['x'], record_count, file_count, total_size \
         FROM \"events$partitions\" ORDER BY 1, 2, 3, 4, 5",
    )
    .await;
    let want = oracle_rows(
        oracle,
        "partitions",
        &[
            "partition.p",
            "partition.x",
            "record_count",
            "file_count",
            "total_data_file_size_in_bytes",
        ],
    );
    assert_eq!(got, want);
    let listed: BTreeMap<String, usize> = ok(&ctx, "SHOW TABLES")
        .await
        .into_iter()
        .filter(|r| r[1] == "history")
        .map(|r| (r[2].clone(), 1))
        .collect();
    assert_eq!(
        listed.keys().collect::<Vec<_>>(),
        ["events"],
        "metadata tables are not listed"
    );
}

/// A time-travel scan sent to a worker reads the planned snapshot with the planned schema: the
/// codec's decoding loads the table's current metadata and applies the same rewrite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codec_keeps_the_planned_snapshot() {
    use std::sync::Arc;

    use iceflight_scan::distributed::codec::IcebergScanCodec;

    let fixture = fixture().await;
    let engine = common::engine(&fixture.path, 2).await;
    let ctx = engine.session(None, Some("history"), &[]).unwrap();
    let codec = IcebergScanCodec::new(
        Arc::new(engine.catalogs().clone()),
        Arc::clone(engine.caches()),
    );
    for (_, id) in snapshot_ids(&fixture.oracle) {
        let mut got =
            common::rows_through_codec(&ctx, &codec, &format!("SELECT id FROM \"events@{id}\""), 2)
                .await
                .unwrap();
        got.sort_by_key(|r| r[0].parse::<i64>().unwrap());
        assert_eq!(got, ids_at(&fixture.oracle, id), "snapshot {id}");
    }
}
