//! How a failed statement is classified for the client (`flight/status.rs`): a table, schema or
//! catalog that does not exist is `NotFound`, decided from the catalogs (`session::
//! plan_statement`), never from DataFusion's message; any other planning error is
//! `InvalidArgument`. Every message is one line.

mod common;

use common::{statement_ok as ok, statement_rows as sql};
use datafusion::prelude::SessionContext;
use iceflight::flight::status::to_status;
use iceflight::session::Engine;
use tonic::Code;

/// An empty embedded catalog with table `shop.items (id INT)`, and a session in `shop`.
async fn shop() -> (tempfile::TempDir, Engine, SessionContext) {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::engine(dir.path(), 2).await;
    let ctx = engine.session(None, None, &[]).unwrap();
    ok(&ctx, "CREATE SCHEMA local.shop").await;
    ok(&ctx, "CREATE TABLE local.shop.items (id INT)").await;
    let ctx = engine.session(None, Some("shop"), &[]).unwrap();
    (dir, engine, ctx)
}

/// The status `text` fails with: its code and one-line message.
async fn refused(ctx: &SessionContext, text: &str) -> (Code, String) {
    let status = to_status(sql(ctx, text).await.expect_err(text));
    assert!(!status.message().contains('\n'), "{status}");
    (status.code(), status.message().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_table_schema_or_catalog_is_not_found_naming_it() {
    let (_dir, _engine, ctx) = shop().await;
    for (text, message) in [
        ("SELECT * FROM nope", "table local.shop.nope does not exist"),
        (
            "SELECT * FROM local.nope.items",
            "schema local.nope does not exist",
        ),
        (
            "SELECT * FROM lake.shop.items",
            "catalog lake does not exist",
        ),
        (
            "EXPLAIN SELECT * FROM nope",
            "table local.shop.nope does not exist",
        ),
        (
            "INSERT INTO nope VALUES (1)",
            "table local.shop.nope does not exist",
        ),
        (
            "SELECT * FROM items JOIN gone ON items.id = gone.id",
            "table local.shop.gone does not exist",
        ),
        ("DROP TABLE nope", "table local.shop.nope does not exist"),
        (
            "DROP TABLE local.nope.items",
            "schema local.nope does not exist",
        ),
    ] {
        assert_eq!(
            refused(&ctx, text).await,
            (Code::NotFound, message.to_string()),
            "{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_planning_errors_are_invalid_argument() {
    let (_dir, _engine, ctx) = shop().await;
    for text in [
        // The tables exist; something else is wrong.
        "SELECT nope FROM items",
        "SELECT * FROM information_schema.tables WHERE nope = 1",
        // The new table's own name is not looked up.
        "CREATE TABLE fresh AS SELECT nope FROM items",
        "SELECT no_such_function(id) FROM items",
    ] {
        let (code, message) = refused(&ctx, text).await;
        assert_eq!(code, Code::InvalidArgument, "{text}: {message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_schema_drops_an_empty_namespace_and_refuses_one_with_tables() {
    let (_dir, _engine, ctx) = shop().await;
    let (code, message) = refused(&ctx, "DROP SCHEMA local.shop").await;
    assert_eq!(code, Code::InvalidArgument, "{message}");
    assert!(
        message.contains("Cannot drop non-empty schema local.shop: it holds 1 table(s)"),
        "{message}"
    );
    let (code, message) = refused(&ctx, "DROP SCHEMA local.shop CASCADE").await;
    assert_eq!(code, Code::InvalidArgument, "{message}");
    assert!(message.contains("CASCADE is not supported"), "{message}");
    let schemas = "SELECT schema_name FROM information_schema.schemata \
                   WHERE catalog_name = 'local' AND schema_name <> 'information_schema' \
                   ORDER BY 1";
    ok(&ctx, "CREATE SCHEMA local.empty").await;
    assert_eq!(ok(&ctx, schemas).await, [["empty"], ["shop"]]);
    ok(&ctx, "DROP SCHEMA local.empty").await;
    assert_eq!(ok(&ctx, schemas).await, [["shop"]]);
    let (code, message) = refused(&ctx, "DROP SCHEMA local.empty").await;
    assert_eq!(
        (code, message.as_str()),
        (Code::NotFound, "schema local.empty does not exist"),
    );
    ok(&ctx, "DROP SCHEMA IF EXISTS local.empty").await;
    ok(&ctx, "DROP TABLE local.shop.items").await;
    ok(&ctx, "DROP SCHEMA local.shop").await;
    assert!(ok(&ctx, schemas).await.is_empty());
}
