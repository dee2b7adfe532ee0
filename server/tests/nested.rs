//! Nested struct-field pushdown: every supported operator on a nested leaf (and mixed with a
//! top-level column) returns the rows the SQL rule says and prunes like the flat control column;
//! refusal under lists and maps; a struct child added by schema evolution; a dotted top-level
//! name; a join on a nested key; case c01.
//!
//! Data: `iceflight load nested` (20 000 rows, 1 000-row row groups, ~5 files, clustered on
//! `s.key`; `flat_key` = `s.key`, `s` NULL when key % 97 = 0) and the pyiceberg fixtures of
//! `tests/fixtures/make_cases.py`, in one embedded catalog.

mod common;

use std::sync::Arc;

use common::{column, execute, make_case_fixtures, query, rows, scan_lines, scan_metric};
use datafusion::prelude::SessionContext;
use iceberg::NamespaceIdent;
use iceflight::session::Engine;
use iceflight_datagen::load::{LoadOptions, load_nested};
use iceflight_datagen::nested::{NULL_STRUCT_EVERY, NestedLayout};

const ROWS: usize = 20_000;

async fn setup() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    make_case_fixtures(dir.path());
    let engine = common::engine(dir.path(), 2).await;
    let catalog = Arc::clone(engine.catalogs().get("local").unwrap());
    let options = LoadOptions {
        target_file_size: 256 * 1024,
        row_group_rows: 1000,
        progress: false,
        ..LoadOptions::default()
    };
    let report = load_nested(
        &catalog,
        &NamespaceIdent::new("nest".into()),
        ROWS,
        NestedLayout::Clustered,
        &options,
    )
    .await
    .unwrap();
    assert!(report.tables[0].2 >= 3, "several data files: {report:?}");
    (dir, engine)
}

/// `s` of the row with key `k` is NULL.
fn null_struct(k: i64) -> bool {
    k % NULL_STRUCT_EVERY as i64 == 0
}

/// `s.addr.city` of key `k` (`nested.rs`: 50 cities, `rows / 50` keys each).
fn city(k: i64) -> String {
    format!("city-{:02}", k as usize / ROWS.div_ceil(50))
}

/// The keys, ascending, for which `keep` holds.
fn keys(keep: impl Fn(i64) -> bool) -> Vec<String> {
    (0..ROWS as i64)
        .filter(|k| keep(*k))
        .map(|k| k.to_string())
        .collect()
}

/// The same filter inside an aggregate FILTER, which is never pushed into the scan: the
/// reference count and sum of `flat_key`.
async fn unpushed(ctx: &SessionContext, predicate: &str) -> Vec<Vec<String>> {
    query(
        ctx,
        &format!(
            "SELECT count(*) FILTER (WHERE {predicate}), sum(flat_key) FILTER (WHERE {predicate}) FROM nested"
        ),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_leaf_predicates_prune_and_keep_every_row() {
    let (_dir, engine) = setup().await;
    let ctx = engine.session(None, Some("nest"), &[]).unwrap();
    type Rule = Box<dyn Fn(i64) -> bool>;
    // (predicate, which keys pass by SQL's rules: a NULL `s` makes every leaf NULL).
    let present = |f: fn(i64) -> bool| -> Rule { Box::new(move |k| !null_struct(k) && f(k)) };
    let cases: Vec<(&str, Rule)> = vec![
        ("s.key = 5001", present(|k| k == 5001)),
        ("s['key'] = 5001", present(|k| k == 5001)),
        ("s.key <> 5001", present(|k| k != 5001)),
        ("s.key < 1500", present(|k| k < 1500)),
        ("s.key <= 1500", present(|k| k <= 1500)),
        ("s.key > 18500", present(|k| k > 18500)),
        ("s.key >= 18500", present(|k| k >= 18500)),
        (
            "s.key BETWEEN 7000 AND 7200",
            present(|k| (7000..=7200).contains(&k)),
        ),
        (
            "s.key IN (3, 9001, 15002)",
            present(|k| [3, 9001, 15002].contains(&k)),
        ),
        (
            "s.key NOT IN (3, 9001)",
            present(|k| ![3, 9001].contains(&k)),
        ),
        ("s.key IS NULL", Box::new(null_struct)),
        ("s.key IS NOT NULL", Box::new(|k| !null_struct(k))),
        ("s.addr.city = 'city-07'", present(|k| city(k) == "city-07")),
        (
            "s['addr']['city'] = 'city-07'",
            present(|k| city(k) == "city-07"),
        ),
        ("s.name = 'user-0012345'", present(|k| k == 12345)),
        (
            "s.key < 1000 AND flat_key > 500",
            present(|k| k > 500 && k < 1000),
        ),
        (
            "s.key < 10 OR flat_key > 19990",
            Box::new(|k| (k < 10 && !null_struct(k)) || k > 19990),
        ),
        ("s.key = -1", present(|_| false)),
    ];
    for (predicate, rule) in &cases {
        let sql = format!("SELECT flat_key FROM nested WHERE {predicate} ORDER BY flat_key");
        let got = column(&ctx, &sql).await;
        let want = keys(rule);
        assert_eq!(got.len(), want.len(), "{predicate}");
        assert_eq!(got, want, "{predicate}");
        let reference = unpushed(&ctx, predicate).await;
        let sum: i64 = want.iter().map(|k| k.parse::<i64>().unwrap()).sum();
        let sum = if want.is_empty() {
            "NULL".to_string()
        } else {
            sum.to_string()
        };
        assert_eq!(reference, [[want.len().to_string(), sum]], "{predicate}");
    }

    // Pruning, from deterministic counters. A point lookup reads one row group of one file.
    let full = execute(&ctx, "SELECT * FROM nested").await.unwrap();
    let full_bytes = scan_metric(&full.plan, "bytes_scanned");
    let point = execute(&ctx, "SELECT * FROM nested WHERE s.key = 5001")
        .await
        .unwrap();
    assert_eq!(rows(&point.batches).len(), 1);
    let files = full_files(&full);
    assert_eq!(
        scan_metric(&point.plan, "files_pruned_statistics"),
        files - 1,
        "manifest bounds of the nested leaf (field id) leave one file"
    );
    assert!(scan_metric(&point.plan, "row_groups_pruned") > 0);
    assert!(
        scan_metric(&point.plan, "bytes_scanned") * 10 < full_bytes,
        "{} of {full_bytes} bytes",
        scan_metric(&point.plan, "bytes_scanned")
    );
    insta::assert_snapshot!("point_lookup_on_a_nested_key", scan_lines(&point.plan));

    // The flat control column prunes exactly as much (files at planning, row groups at open).
    for (nested, flat) in [
        ("s.key = 5001", "flat_key = 5001"),
        (
            "s.key BETWEEN 7000 AND 7200",
            "flat_key BETWEEN 7000 AND 7200",
        ),
        (
            "s.key BETWEEN 2000 AND 3999",
            "flat_key BETWEEN 2000 AND 3999",
        ),
    ] {
        let n = execute(&ctx, &format!("SELECT * FROM nested WHERE {nested}"))
            .await
            .unwrap();
        let f = execute(&ctx, &format!("SELECT * FROM nested WHERE {flat}"))
            .await
            .unwrap();
        let files_pruned = |e: &common::Executed| {
            scan_metric(&e.plan, "files_pruned_manifest")
                + scan_metric(&e.plan, "files_pruned_statistics")
        };
        assert_eq!(files_pruned(&n), files_pruned(&f), "{nested}");
        assert_eq!(
            scan_metric(&n.plan, "row_groups_pruned"),
            scan_metric(&f.plan, "row_groups_pruned"),
            "{nested}"
        );
        assert!(files_pruned(&n) + scan_metric(&n.plan, "row_groups_pruned") > 0);
    }

    // An absent value: no file is opened.
    let absent = execute(&ctx, "SELECT * FROM nested WHERE s.key = -1")
        .await
        .unwrap();
    assert_eq!(scan_metric(&absent.plan, "files_opened"), 0);
    assert_eq!(scan_metric(&absent.plan, "bytes_scanned"), 0);

    // IS NULL on a leaf never prunes: its null count need not count NULL parents (c01).
    let is_null = execute(&ctx, "SELECT * FROM nested WHERE s.key IS NULL")
        .await
        .unwrap();
    assert_eq!(scan_metric(&is_null.plan, "row_groups_pruned"), 0);
    assert_eq!(scan_metric(&is_null.plan, "files_pruned_statistics"), 0);
}

fn full_files(full: &common::Executed) -> usize {
    scan_metric(&full.plan, "files_opened")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_on_a_nested_key_gets_a_dynamic_domain() {
    let (_dir, engine) = setup().await;
    let ctx = engine.session(None, Some("nest"), &[]).unwrap();
    let sql = "SELECT n.flat_key FROM nested n \
               JOIN (VALUES (CAST(5001 AS BIGINT)), (5002), (17000)) AS d(k) ON n.s.key = d.k \
               ORDER BY n.flat_key";
    let run = execute(&ctx, sql).await.unwrap();
    assert_eq!(rows(&run.batches), [["5001"], ["5002"], ["17000"]]);
    insta::assert_snapshot!("join_on_a_nested_key", scan_lines(&run.plan));
    let pruned = scan_metric(&run.plan, "files_pruned_dynamic")
        + scan_metric(&run.plan, "row_groups_pruned");
    assert!(pruned > 0, "{}", scan_lines(&run.plan));
    assert!(
        scan_metric(&run.plan, "output_rows") < ROWS / 4,
        "{}",
        scan_lines(&run.plan)
    );

    // Pruning off: the same rows, nothing pruned by the dynamic filter.
    let off = engine
        .session(
            None,
            Some("nest"),
            &[(
                "iceflight.scan.dynamic_filter_pruning".into(),
                "false".into(),
            )],
        )
        .unwrap();
    let run_off = execute(&off, sql).await.unwrap();
    assert_eq!(rows(&run_off.batches), rows(&run.batches));
    assert_eq!(scan_metric(&run_off.plan, "files_pruned_dynamic"), 0);
    assert_eq!(scan_metric(&run_off.plan, "row_groups_pruned"), 0);

    // A null-equal join whose build side is only NULL: DataFusion's filter is `false`, yet the
    // NULL keys join (case c04); the scan must not use it.
    let null_equal = execute(
        &ctx,
        "SELECT count(*) FROM nested a JOIN (VALUES (CAST(NULL AS BIGINT))) v(k) \
         ON a.s.key IS NOT DISTINCT FROM v.k",
    )
    .await
    .unwrap();
    let nulls = (0..ROWS as i64).filter(|k| null_struct(*k)).count();
    assert_eq!(rows(&null_equal.batches), [[nulls.to_string()]]);
    insta::assert_snapshot!(
        "null_equal_join_on_a_nested_key",
        scan_lines(&null_equal.plan)
    );

    // NOT IN over a subquery holding a NULL key is empty, with an inner join above it.
    assert!((15_001..ROWS as i64).any(null_struct));
    assert_eq!(
        column(
            &ctx,
            "SELECT count(*) FROM (VALUES (CAST(5000 AS BIGINT)), (5001)) c(k) \
             JOIN (SELECT flat_key AS k FROM nested \
                   WHERE flat_key NOT IN (SELECT s.key FROM nested WHERE flat_key > 15000)) x \
             ON x.k = c.k"
        )
        .await,
        ["0"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusal_schema_evolution_dotted_names_and_c01() {
    let (_dir, engine) = setup().await;
    let ctx = engine.session(None, Some("cases"), &[]).unwrap();

    // c01: a NULL parent makes the child NULL; `s.a > 50` prunes the row group holding 1–3.
    assert_eq!(
        column(&ctx, "SELECT id FROM c01_nested WHERE s.a = 7").await,
        ["1"]
    );
    assert_eq!(
        column(&ctx, "SELECT id FROM c01_nested WHERE s['a'] = 7").await,
        ["1"]
    );
    assert_eq!(
        column(&ctx, "SELECT id FROM c01_nested WHERE s IS NULL").await,
        ["3"]
    );
    let gt = execute(&ctx, "SELECT id FROM c01_nested WHERE s.a > 50")
        .await
        .unwrap();
    assert_eq!(rows(&gt.batches), [["4"]]);
    assert_eq!(scan_metric(&gt.plan, "row_groups_pruned"), 1);
    // The second file's leaf has no NULL at all; IS NULL still prunes nothing.
    let is_null = execute(
        &ctx,
        "SELECT id FROM c01_nested WHERE s.a IS NULL ORDER BY id",
    )
    .await
    .unwrap();
    assert_eq!(rows(&is_null.batches), [["2"], ["3"]]);
    assert_eq!(scan_metric(&is_null.plan, "row_groups_pruned"), 0);
    assert_eq!(scan_metric(&is_null.plan, "files_opened"), 2);

    // Under a list element or a map value nothing is constrained; the rows are still right.
    for (name, sql, want) in [
        (
            "map_value",
            "SELECT id FROM nested_refusal WHERE attrs['k'] = 1 ORDER BY id",
            vec!["1"],
        ),
        (
            "list_element",
            "SELECT id FROM nested_refusal WHERE tags[1]['x'] = 5 ORDER BY id",
            vec!["1", "3"],
        ),
        (
            "or_with_a_map_value",
            "SELECT id FROM nested_refusal WHERE s.a = 20 OR attrs['j'] = 1 ORDER BY id",
            vec!["2", "3"],
        ),
    ] {
        let run = execute(&ctx, sql).await.unwrap();
        let got: Vec<String> = rows(&run.batches)
            .into_iter()
            .map(|r| r[0].clone())
            .collect();
        assert_eq!(got, want, "{sql}");
        insta::assert_snapshot!(format!("refused_{name}"), scan_lines(&run.plan));
    }
    // A struct leaf beside them still prunes (two files, s.a 10–20 and 30).
    let run = execute(&ctx, "SELECT id FROM nested_refusal WHERE s.a = 30")
        .await
        .unwrap();
    assert_eq!(rows(&run.batches), [["3"]]);
    assert_eq!(scan_metric(&run.plan, "row_groups_pruned"), 1);

    // s.b was added after the first file: NULL there, and nothing is pruned wrongly.
    assert_eq!(
        query(&ctx, "SELECT id, s.b FROM nested_evolved ORDER BY id").await,
        [["1", "NULL"], ["2", "NULL"], ["3", "30"], ["4", "NULL"]]
    );
    assert_eq!(
        column(&ctx, "SELECT id FROM nested_evolved WHERE s.b = 30").await,
        ["3"]
    );
    assert_eq!(
        column(
            &ctx,
            "SELECT id FROM nested_evolved WHERE s.b IS NULL ORDER BY id"
        )
        .await,
        ["1", "2", "4"]
    );
    assert_eq!(
        column(
            &ctx,
            "SELECT id FROM nested_evolved WHERE s.b < 100 OR s.a = 1 ORDER BY id"
        )
        .await,
        ["1", "3"]
    );
    assert_eq!(
        query(&ctx, "SELECT s FROM nested_evolved WHERE id = 1").await,
        [["{a: 1, b: NULL}"]]
    );

    // A dotted top-level name is that column, not a path, and prunes by its own bounds.
    let run = execute(&ctx, "SELECT id FROM dotted WHERE \"x.y\" = 30")
        .await
        .unwrap();
    assert_eq!(rows(&run.batches), [["3"]]);
    assert_eq!(
        scan_metric(&run.plan, "files_pruned_manifest")
            + scan_metric(&run.plan, "files_pruned_statistics"),
        1
    );
    insta::assert_snapshot!("dotted_top_level_name", scan_lines(&run.plan));
}
