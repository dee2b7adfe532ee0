//! The evolution matrix: every schema evolution × every partition evolution × {no deletes,
//! position deletes, equality deletes}, built by pyiceberg (`tests/fixtures/make_evolution.py`,
//! 84 tables), each read by iceflight unfiltered, filtered on every column (equality and
//! `IS NULL`, renamed, promoted, nested and partition-source columns included), filtered
//! across files and self-joined, against the rows the writer says the table holds. A column the
//! table no longer has (dropped, renamed away, a dropped partition source) fails in one line.
//! All mismatches of all tables are collected, so one failure does not hide the others.

mod common;

use std::process::Command;

use common::json_text as text;
use datafusion::prelude::SessionContext;
use serde_json::Value;

/// Runs `sql`; rows as text, sorted.
async fn rows(ctx: &SessionContext, sql: &str) -> Result<Vec<Vec<String>>, String> {
    let df = ctx.sql(sql).await.map_err(|e| e.to_string())?;
    let batches = df.collect().await.map_err(|e| e.to_string())?;
    let mut rows = common::rows(&batches);
    rows.sort();
    Ok(rows)
}

fn literal(v: &Value) -> String {
    match v {
        Value::String(s) => format!("'{s}'"),
        other => other.to_string(),
    }
}

/// A leaf path of the oracle (`s.a`) as a SQL expression.
fn expr(path: &str) -> String {
    match path.split_once('.') {
        Some((parent, child)) => format!("\"{parent}\"['{child}']"),
        None => format!("\"{path}\""),
    }
}

/// Checks one table; returns its mismatches.
async fn check(ctx: &SessionContext, name: &str, table: &Value) -> Vec<String> {
    let mut problems = vec![];
    let columns: Vec<&str> = table["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let expected: Vec<&Vec<Value>> = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap())
        .collect();
    let t = format!("\"{name}\"");
    let id_at = columns.iter().position(|c| *c == "id").unwrap();
    let select: Vec<String> = columns.iter().map(|c| expr(c)).collect();

    let mut want: Vec<Vec<String>> = expected
        .iter()
        .map(|r| r.iter().map(text).collect())
        .collect();
    want.sort();
    match rows(ctx, &format!("SELECT {} FROM {t}", select.join(", "))).await {
        Ok(got) if got == want => {}
        Ok(got) => problems.push(format!("{name}: unfiltered {got:?}, want {want:?}")),
        Err(e) => problems.push(format!("{name}: unfiltered failed: {e}")),
    }

    let ids = |keep: &dyn Fn(&Vec<Value>) -> bool| -> Vec<Vec<String>> {
        let mut ids: Vec<Vec<String>> = expected
            .iter()
            .filter(|r| keep(r))
            .map(|r| vec![text(&r[id_at])])
            .collect();
        ids.sort();
        ids
    };
    let mut filters: Vec<(String, Vec<Vec<String>>)> = vec![(
        "\"id\" > 6".to_string(),
        ids(&|r| r[id_at].as_i64().unwrap() > 6),
    )];
    for (i, column) in columns.iter().enumerate() {
        if let Some(value) = expected.iter().map(|r| &r[i]).find(|v| !v.is_null()) {
            filters.push((
                format!("{} = {}", expr(column), literal(value)),
                ids(&|r| &r[i] == value),
            ));
        }
        filters.push((
            format!("{} IS NULL", expr(column)),
            ids(&|r| r[i].is_null()),
        ));
    }
    for (filter, want) in filters {
        match rows(ctx, &format!("SELECT \"id\" FROM {t} WHERE {filter}")).await {
            Ok(got) if got == want => {}
            Ok(got) => problems.push(format!("{name}: WHERE {filter}: {got:?}, want {want:?}")),
            Err(e) => problems.push(format!("{name}: WHERE {filter} failed: {e}")),
        }
    }

    let joined = format!(
        "SELECT count(*) FROM {t} a JOIN {t} b ON a.\"id\" = b.\"id\" AND a.\"p\" = b.\"p\""
    );
    match rows(ctx, &joined).await {
        Ok(got) if got == [[expected.len().to_string()]] => {}
        other => problems.push(format!(
            "{name}: self-join {other:?}, want {}",
            expected.len()
        )),
    }

    // Metadata tables read on every evolution (a dropped partition source included, case c10).
    for kind in ["snapshots", "history", "manifests", "files", "partitions"] {
        if let Err(e) = rows(ctx, &format!("SELECT count(*) FROM \"{name}${kind}\"")).await {
            problems.push(format!("{name}: ${kind} failed: {e}"));
        }
    }

    for gone in table["gone"].as_array().unwrap() {
        let gone = gone.as_str().unwrap();
        match rows(
            ctx,
            &format!("SELECT \"id\" FROM {t} WHERE \"{gone}\" IS NULL"),
        )
        .await
        {
            Ok(got) => problems.push(format!(
                "{name}: dropped column {gone} still answers {got:?}"
            )),
            Err(e) if e.contains('\n') || !e.contains(gone) || e.contains("Error {") => problems
                .push(format!(
                    "{name}: dropped column {gone}: not one clear line: {e}"
                )),
            Err(_) => {}
        }
    }
    problems
}

/// Every table of the matrix reads as the writer says it holds (module docs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_evolution_reads_right() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(common::python())
        .arg(common::repo_root().join("tests/fixtures/make_evolution.py"))
        .arg("--catalog-db")
        .arg(dir.path().join("catalog.db"))
        .arg("--warehouse")
        .arg(dir.path().join("warehouse"))
        .output()
        .expect("run make_evolution.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let oracle: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tables = oracle["tables"].as_object().unwrap();
    assert_eq!(tables.len(), 7 * 4 * 3);

    let engine = common::engine(dir.path(), 2).await;
    let ctx = engine.session(None, Some("evolution"), &[]).unwrap();
    let mut problems = vec![];
    for (name, table) in tables {
        problems.extend(check(&ctx, name, table).await);
    }
    assert!(
        problems.is_empty(),
        "{} mismatch(es):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
