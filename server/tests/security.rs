//! A server many people share, attacked by its own logged-in users over Flight SQL: every probe
//! refused with the right status and nothing read, written or deleted (files checked on disk,
//! rows and snapshots counted). `access/` decides; the real ADBC and JDBC clients repeat the
//! attacks and the privilege checks in `tests/flight/test_security.py` and
//! `tests/flight/jdbc/SecurityTest.java` (the last test here runs them).
//!
//! ```text
//!   users: admin ([server] admins), alice (owns schema alice), bob (group eng: owns schema eng),
//!          carol (reads only shared); rules in rules.json (Trino's shape), file root imports/
//!   tables: local.alice.private, local.eng.events, local.shared.notes (2 rows each)
//! ```

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow_flight::error::FlightError;
use arrow_flight::sql::client::FlightSqlServiceClient;
use futures::TryStreamExt;
use iceflight::config::{Config, UserConfig};
use iceflight::session::Engine;
use tonic::Code;
use tonic::transport::Channel;

/// The rules every test starts from.
const RULES: &str = r#"{
  "catalogs": [{"allow": "all"}],
  "schemas": [
    {"user": "alice", "schema": "alice", "owner": true},
    {"group": "eng", "schema": "eng", "owner": true}
  ],
  "tables": [
    {"user": "alice", "schema": "alice", "privileges": ["SELECT", "INSERT", "DELETE", "UPDATE", "OWNERSHIP"]},
    {"group": "eng", "schema": "eng", "privileges": ["SELECT", "INSERT", "DELETE", "UPDATE", "OWNERSHIP"]},
    {"schema": "shared", "privileges": ["SELECT"]}
  ]
}"#;

/// A server with the users, rules, tables and directories of the module docs.
struct Lab {
    dir: tempfile::TempDir,
    engine: Engine,
    addr: std::net::SocketAddr,
}

impl Lab {
    async fn start(adjust: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in ["data", "imports", "outside"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("imports/ok.csv"), "a,b\n1,x\n2,y\n").unwrap();
        std::fs::write(root.join("outside/secret.csv"), "a,b\n42,secret\n").unwrap();
        std::os::unix::fs::symlink(root.join("outside"), root.join("imports/leak")).unwrap();
        std::fs::write(root.join("rules.json"), RULES).unwrap();
        let mut config = Config {
            data_dir: root.join("data"),
            ..Config::default()
        };
        config.query.target_partitions = 2;
        config.query.file_roots = vec![root.join("imports")];
        config.maintenance.import_roots = vec![root.join("imports").display().to_string()];
        config.server.admins = vec!["admin".into()];
        config.server.access_rules = Some(root.join("rules.json"));
        config.server.users = vec![UserConfig {
            name: "bob".into(),
            password_hash: iceflight::flight::auth::hash_password("bobpw").unwrap(),
            groups: vec!["eng".into()],
        }];
        adjust(&mut config);
        let engine = Engine::connect(config).await.unwrap();
        let ctx = engine.session(None, None, &[]).unwrap();
        for schema in ["alice", "eng", "shared"] {
            common::statement_ok(&ctx, &format!("CREATE SCHEMA local.{schema}")).await;
        }
        for table in ["alice.private", "eng.events", "shared.notes"] {
            common::statement_ok(
                &ctx,
                &format!("CREATE TABLE local.{table} AS VALUES (1, 'one'), (2, 'two')"),
            )
            .await;
        }
        let addr = common::serve_flight(
            engine.clone(),
            &["admin:adminpw", "alice:alicepw", "carol:carolpw"],
        )
        .await;
        Self { dir, engine, addr }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    async fn client(&self, user: &str) -> FlightSqlServiceClient<Channel> {
        common::flight_client(self.addr, user, &format!("{user}pw")).await
    }

    /// Rows of `table` and its snapshots, read as the operator.
    async fn state_of(&self, table: &str) -> (usize, usize) {
        let ctx = self.engine.session(None, None, &[]).unwrap();
        let rows = common::statement_ok(&ctx, &format!("SELECT * FROM local.{table}"))
            .await
            .len();
        let snapshots = common::statement_ok(
            &ctx,
            &format!(
                "SELECT snapshot_id FROM local.{}",
                quoted_metadata(table, "snapshots")
            ),
        )
        .await
        .len();
        (rows, snapshots)
    }

    fn rewrite_rules(&self, rules: &str) {
        // A different length as well as a new time: the change is seen at the next look.
        std::fs::write(self.path("rules.json"), rules).unwrap();
    }
}

fn quoted_metadata(table: &str, kind: &str) -> String {
    let (schema, name) = table.split_once('.').unwrap();
    format!("{schema}.\"{name}${kind}\"")
}

/// Runs `sql` as a statement (GetFlightInfo, then DoGet): its batches, or the status.
async fn run(
    client: &mut FlightSqlServiceClient<Channel>,
    sql: &str,
) -> Result<Vec<RecordBatch>, tonic::Status> {
    let status = |e: FlightError| match e {
        FlightError::Tonic(s) => *s,
        other => tonic::Status::unknown(other.to_string()),
    };
    let info = client
        .execute(sql.to_string(), None)
        .await
        .map_err(status)?;
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    client
        .do_get(ticket)
        .await
        .map_err(status)?
        .try_collect()
        .await
        .map_err(status)
}

/// `sql` must fail with `code`, in one line containing `says`.
async fn refused(client: &mut FlightSqlServiceClient<Channel>, sql: &str, code: Code, says: &str) {
    let status = run(client, sql)
        .await
        .err()
        .unwrap_or_else(|| panic!("{sql}: ran"));
    assert_eq!(status.code(), code, "{sql}: {status}");
    assert!(status.message().contains(says), "{sql}: {status}");
    assert!(!status.message().contains('\n'), "{sql}: {status}");
}

/// `sql` must run; its rows as text.
async fn ok(client: &mut FlightSqlServiceClient<Channel>, sql: &str) -> Vec<Vec<String>> {
    let batches = run(client, sql)
        .await
        .unwrap_or_else(|s| panic!("{sql}: {s}"));
    common::rows(&batches)
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// No statement reaches a file outside `[query] file_roots`, whoever sends it (admins too):
/// `COPY … TO`, `CREATE EXTERNAL TABLE`, `read_csv`, with `..`, a link out of the root,
/// `file://` and other schemes; inside the root they work. `system.runtime` takes no table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_outside_the_roots_are_refused() {
    let lab = Lab::start(|_| {}).await;
    let outside = lab.path("outside").display().to_string();
    let imports = lab.path("imports").display().to_string();
    for user in ["carol", "admin"] {
        let mut c = lab.client(user).await;
        for target in [
            format!("{outside}/pwned.csv"),
            format!("{imports}/../outside/pwned.csv"),
            format!("{imports}/leak/pwned.csv"),
            format!("file://{outside}/pwned.csv"),
            // Escapes DataFusion decodes when it parses the location as a URL.
            format!("file://{imports}/%2e%2e/outside/pwned.csv"),
            format!("file://{imports}/.%2e/outside/pwned.csv"),
            format!("file://{imports}/..\\outside\\pwned.csv"),
            "s3://bucket/pwned.csv".to_string(),
            "relative/pwned.csv".to_string(),
        ] {
            refused(
                &mut c,
                &format!("COPY (SELECT 'pwned' AS x) TO '{target}' STORED AS CSV"),
                Code::PermissionDenied,
                "COPY … TO may not use",
            )
            .await;
        }
        for location in [
            format!("{outside}/"),
            format!("{imports}/leak/"),
            "/etc/".into(),
        ] {
            refused(
                &mut c,
                &format!(
                    "CREATE EXTERNAL TABLE local.shared.x{user} (a BIGINT, b VARCHAR) STORED AS CSV \
                     LOCATION '{location}' OPTIONS ('format.has_header' 'true')"
                ),
                Code::PermissionDenied,
                "CREATE EXTERNAL TABLE may not use",
            )
            .await;
        }
        for path in [
            format!("{outside}/secret.csv"),
            format!("{imports}/leak/secret.csv"),
            format!("{imports}/../outside/secret.csv"),
            "/etc/passwd".into(),
        ] {
            refused(
                &mut c,
                &format!("SELECT * FROM read_csv('{path}')"),
                Code::PermissionDenied,
                "read_csv may not use",
            )
            .await;
        }
        refused(
            &mut c,
            "CREATE EXTERNAL TABLE system.runtime.x (l VARCHAR) STORED AS CSV LOCATION '/etc/'",
            Code::PermissionDenied,
            "CREATE EXTERNAL TABLE may not use",
        )
        .await;
        // The system catalog takes no table: refused by the rules for a user, by the catalog
        // itself for an admin.
        let (code, says) = match user {
            "admin" => (Code::InvalidArgument, "system.runtime is read-only"),
            _ => (
                Code::PermissionDenied,
                "no OWNERSHIP privilege on table system.runtime.v",
            ),
        };
        refused(
            &mut c,
            "CREATE VIEW system.runtime.v AS SELECT 1",
            code,
            says,
        )
        .await;
    }
    assert_eq!(
        files_under(&lab.path("outside")),
        [lab.path("outside/secret.csv")],
        "nothing written outside the root"
    );
    // Inside the root: read, and written by a user who may.
    let mut carol = lab.client("carol").await;
    assert_eq!(
        ok(
            &mut carol,
            &format!("SELECT a, b FROM read_csv('{imports}/ok.csv') ORDER BY a")
        )
        .await,
        [["1", "x"], ["2", "y"]]
    );
    ok(
        &mut carol,
        &format!("COPY (SELECT 3 AS a) TO '{imports}/out.csv' STORED AS CSV"),
    )
    .await;
    assert!(lab.path("imports/out.csv").exists());
}

/// Names that would be paths are refused; a table's location is its own: a new table of a
/// renamed table's name, or of a nested namespace, gets another; location properties stay
/// inside the table; `add_files` takes files only under the table or an import root;
/// `remove_orphan_files` refuses a location holding another table's metadata.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locations_belong_to_one_table() {
    let lab = Lab::start(|_| {}).await;
    let mut alice = lab.client("alice").await;
    for name in ["\"..\"", "\".\"", "\"a/b\"", "\"a\\b\"", "\"\u{1}x\""] {
        refused(
            &mut alice,
            &format!("CREATE TABLE local.alice.{name} (a INT)"),
            Code::InvalidArgument,
            "would become part of a file path",
        )
        .await;
    }
    let mut admin = lab.client("admin").await;
    for name in ["\"x/../../y\"", "\"..\"", "\"a\\b\""] {
        refused(
            &mut admin,
            &format!("CREATE SCHEMA local.{name}"),
            Code::InvalidArgument,
            "",
        )
        .await;
    }
    let namespaces = ok(&mut admin, "SELECT schema_name FROM information_schema.schemata WHERE catalog_name = 'local' ORDER BY 1").await;
    assert_eq!(namespaces, [["alice"], ["eng"], ["shared"]]);
    refused(
        &mut alice,
        "ALTER TABLE local.alice.private RENAME TO \"..\"",
        Code::InvalidArgument,
        "would become part of a file path",
    )
    .await;

    // Rename, then a new table of the old name: two locations, neither inside the other.
    let catalog = Arc::clone(lab.engine.catalogs().get("local").unwrap());
    let location = |name: &str| {
        let catalog = Arc::clone(&catalog);
        let ident = iceberg::TableIdent::from_strs(["alice", name]).unwrap();
        async move {
            catalog
                .load_table(&ident)
                .await
                .unwrap()
                .metadata()
                .location()
                .to_string()
        }
    };
    let first = location("private").await;
    ok(&mut alice, "ALTER TABLE local.alice.private RENAME TO kept").await;
    ok(&mut alice, "CREATE TABLE local.alice.private (a INT)").await;
    let second = location("private").await;
    assert_eq!(location("kept").await, first);
    assert!(
        !second.starts_with(&format!("{first}/"))
            && second != first
            && !first.starts_with(&format!("{second}/")),
        "{first} vs {second}"
    );
    assert!(
        second.contains("/private-"),
        "a location of its own: {second}"
    );

    // Location properties: inside the table, not elsewhere.
    let outside = lab.path("outside").display().to_string();
    refused(
        &mut alice,
        &format!("ALTER TABLE local.alice.kept SET TBLPROPERTIES ('write.data.path' = 'file://{outside}')"),
        Code::InvalidArgument,
        "must lie inside the table's location",
    )
    .await;
    ok(
        &mut alice,
        &format!(
            "ALTER TABLE local.alice.kept SET TBLPROPERTIES ('write.data.path' = '{first}/data2')"
        ),
    )
    .await;
    refused(
        &mut alice,
        "CREATE TABLE local.alice.t2 WITH ('write.data.path' = '/tmp/x') AS SELECT 1 AS a",
        Code::InvalidArgument,
        "table property write.data.path is not supported",
    )
    .await;

    // add_files: not from outside; from an import root.
    let before = lab.state_of("alice.kept").await;
    refused(
        &mut alice,
        &format!("ALTER TABLE local.alice.kept EXECUTE add_files(location => '{outside}')"),
        Code::PermissionDenied,
        "add_files may take files only from under the table's location",
    )
    .await;
    assert_eq!(lab.state_of("alice.kept").await, before);

    // remove_orphan_files: a location holding another table's metadata is refused, and no
    // file goes.
    let kept_dir = PathBuf::from(first.trim_start_matches("file://"));
    let foreign = files_under(
        &PathBuf::from(
            location_of(&lab, "eng", "events")
                .await
                .trim_start_matches("file://"),
        )
        .join("metadata"),
    )
    .into_iter()
    .find(|p| p.to_string_lossy().ends_with(".metadata.json"))
    .unwrap();
    std::fs::copy(
        &foreign,
        kept_dir.join("metadata/00000-foreign.metadata.json"),
    )
    .unwrap();
    let files = files_under(&kept_dir);
    refused(
        &mut alice,
        "ALTER TABLE local.alice.kept EXECUTE remove_orphan_files(retention_threshold => '7d')",
        Code::InvalidArgument,
        "holds the metadata of another table",
    )
    .await;
    assert_eq!(files_under(&kept_dir), files, "nothing deleted");
}

async fn location_of(lab: &Lab, schema: &str, table: &str) -> String {
    let catalog = Arc::clone(lab.engine.catalogs().get("local").unwrap());
    catalog
        .load_table(&iceberg::TableIdent::from_strs([schema, table]).unwrap())
        .await
        .unwrap()
        .metadata()
        .location()
        .to_string()
}

/// Each user sees and changes exactly what the rules give: reads, writes of each kind, DDL and
/// maintenance, time travel and metadata tables, listings (Flight SQL's GetTables,
/// information_schema, SHOW TABLES, system tables); an admin everything. A change of the rules
/// file takes effect without a restart, also for a prepared statement made before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn privileges_follow_the_rules_file() {
    let lab = Lab::start(|_| {}).await;
    let (mut alice, mut bob, mut carol, mut admin) = (
        lab.client("alice").await,
        lab.client("bob").await,
        lab.client("carol").await,
        lab.client("admin").await,
    );
    // Reads.
    assert_eq!(
        ok(&mut alice, "SELECT count(*) FROM local.alice.private").await,
        [["2"]]
    );
    assert_eq!(
        ok(&mut carol, "SELECT count(*) FROM local.shared.notes").await,
        [["2"]]
    );
    for (client, table) in [
        (&mut carol, "local.alice.private"),
        (&mut bob, "local.alice.private"),
        (&mut alice, "local.eng.events"),
    ] {
        refused(
            client,
            &format!("SELECT * FROM {table}"),
            Code::PermissionDenied,
            "has no privilege on table",
        )
        .await;
    }
    let snapshot = ok(
        &mut admin,
        "SELECT snapshot_id FROM local.alice.\"private$snapshots\"",
    )
    .await[0][0]
        .clone();
    for sql in [
        "SELECT * FROM local.alice.\"private$files\"".to_string(),
        "SELECT * FROM local.alice.\"private$snapshots\"".to_string(),
        format!("SELECT * FROM local.alice.private FOR VERSION AS OF {snapshot}"),
        "SELECT * FROM local.shared.notes WHERE column1 IN (SELECT column1 FROM local.alice.private)".into(),
        "WITH p AS (SELECT * FROM local.alice.private) SELECT * FROM p".into(),
        "DESCRIBE local.alice.private".into(),
        "SHOW COLUMNS FROM local.alice.private".into(),
    ] {
        refused(&mut carol, &sql, Code::PermissionDenied, "alice.private").await;
    }
    // Writes: each kind needs its privilege; a refused one changes nothing.
    let shared = lab.state_of("shared.notes").await;
    for sql in [
        "INSERT INTO local.shared.notes VALUES (3, 'three')",
        "DELETE FROM local.shared.notes WHERE column1 = 1",
        "UPDATE local.shared.notes SET column2 = 'x'",
        "INSERT OVERWRITE local.shared.notes VALUES (9, 'nine')",
        "MERGE INTO local.shared.notes t USING (SELECT 1 AS k) s ON t.column1 = s.k \
         WHEN MATCHED THEN DELETE",
        "DROP TABLE local.shared.notes",
        "ALTER TABLE local.shared.notes ADD COLUMN c INT",
        "ALTER TABLE local.shared.notes RENAME TO gone",
        "ALTER TABLE local.shared.notes EXECUTE optimize",
        "ALTER TABLE local.shared.notes EXECUTE expire_snapshots(retention_threshold => '7d')",
        "CREATE TABLE local.shared.mine (a INT)",
        "CREATE TABLE local.shared.mine AS SELECT 1 AS a",
        "DROP SCHEMA local.shared",
    ] {
        let status = run(&mut bob, sql)
            .await
            .err()
            .unwrap_or_else(|| panic!("{sql}: ran"));
        assert_eq!(status.code(), Code::PermissionDenied, "{sql}: {status}");
        assert!(status.message().contains("user bob"), "{sql}: {status}");
    }
    assert_eq!(lab.state_of("shared.notes").await, shared);
    // What the rules give runs.
    ok(&mut bob, "INSERT INTO local.eng.events VALUES (3, 'three')").await;
    ok(
        &mut bob,
        "UPDATE local.eng.events SET column2 = 'THREE' WHERE column1 = 3",
    )
    .await;
    ok(&mut bob, "DELETE FROM local.eng.events WHERE column1 = 3").await;
    ok(
        &mut bob,
        "CREATE TABLE local.eng.copy AS SELECT * FROM local.shared.notes",
    )
    .await;
    ok(&mut bob, "ALTER TABLE local.eng.copy EXECUTE optimize").await;
    ok(&mut bob, "DROP TABLE local.eng.copy").await;
    ok(
        &mut alice,
        "INSERT INTO local.alice.private SELECT * FROM local.shared.notes",
    )
    .await;
    // Reading one table to write another needs SELECT on the first.
    refused(
        &mut bob,
        "INSERT INTO local.eng.events SELECT * FROM local.alice.private",
        Code::PermissionDenied,
        "alice.private",
    )
    .await;
    ok(
        &mut admin,
        "INSERT INTO local.alice.private VALUES (7, 'admin')",
    )
    .await;

    // Listings: GetTables, information_schema, SHOW TABLES, table_access.
    let listed = |client: &mut FlightSqlServiceClient<Channel>| {
        let mut client = client.clone();
        async move {
            let info = client
                .get_tables(arrow_flight::sql::CommandGetTables {
                    catalog: Some("local".into()),
                    db_schema_filter_pattern: None,
                    table_name_filter_pattern: None,
                    table_types: vec![],
                    include_schema: false,
                })
                .await
                .unwrap();
            let ticket = info.endpoint[0].ticket.clone().unwrap();
            let batches: Vec<RecordBatch> = client
                .do_get(ticket)
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            let mut names: Vec<String> = common::rows(&batches)
                .into_iter()
                .map(|r| format!("{}.{}", r[1], r[2]))
                .filter(|n| !n.starts_with("information_schema."))
                .collect();
            names.sort();
            names
        }
    };
    assert_eq!(listed(&mut carol).await, ["shared.notes"]);
    assert_eq!(listed(&mut bob).await, ["eng.events", "shared.notes"]);
    assert_eq!(listed(&mut alice).await, ["alice.private", "shared.notes"]);
    assert_eq!(
        listed(&mut admin).await,
        ["alice.private", "eng.events", "shared.notes"]
    );
    assert_eq!(
        ok(
            &mut carol,
            "SELECT table_schema, table_name FROM information_schema.tables \
             WHERE table_catalog = 'local' AND table_schema <> 'information_schema' ORDER BY 1, 2"
        )
        .await,
        [["shared", "notes"]]
    );
    assert_eq!(
        ok(&mut carol, "SELECT schema_name FROM information_schema.schemata WHERE catalog_name = 'local' AND schema_name <> 'information_schema'").await,
        [["shared"]]
    );
    let access = ok(
        &mut carol,
        "SELECT DISTINCT \"table\" FROM system.runtime.table_access ORDER BY 1",
    )
    .await;
    assert_eq!(
        access,
        [["shared.notes"]],
        "scans of other tables are not shown"
    );
    let all = ok(
        &mut admin,
        "SELECT DISTINCT \"table\" FROM system.runtime.table_access ORDER BY 1",
    )
    .await;
    assert!(
        all.iter().any(|r| r[0] == "eng.events"),
        "an admin sees every table's scans: {all:?}"
    );

    // A prepared statement made while the rules allowed it is checked again when run.
    let mut prepared = carol
        .prepare("SELECT count(*) FROM local.shared.notes".into(), None)
        .await
        .unwrap();
    let counted = |info: arrow_flight::FlightInfo| {
        let mut carol = carol.clone();
        async move {
            let ticket = info.endpoint[0].ticket.clone().unwrap();
            let batches: Vec<RecordBatch> = carol.do_get(ticket).await?.try_collect().await?;
            Ok::<_, FlightError>(common::rows(&batches))
        }
    };
    assert_eq!(
        counted(prepared.execute().await.unwrap()).await.unwrap(),
        [["2"]]
    );
    lab.rewrite_rules(&RULES.replace(
        r#"{"schema": "shared", "privileges": ["SELECT"]}"#,
        r#"{"user": "carol", "schema": "eng", "privileges": ["SELECT"]}"#,
    ));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let status = prepared.execute().await.unwrap_err().to_string();
    assert!(
        status.contains("does not have permission") && status.contains("shared.notes"),
        "{status}"
    );
    assert_eq!(
        ok(&mut carol, "SELECT count(*) FROM local.eng.events").await,
        [["2"]]
    );
    assert_eq!(listed(&mut carol).await, ["eng.events"]);
    // A broken rules file keeps the rules in force.
    lab.rewrite_rules("{\"tables\": [");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        ok(&mut carol, "SELECT count(*) FROM local.eng.events").await,
        [["2"]]
    );
}

/// Settings that change the process are the admins': `SET datafusion.runtime.*` and the
/// parser's recursion limit over SQL or Flight SQL's `SetSessionOptions` (error ERROR); the
/// others are anyone's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_settings_are_the_admins() {
    let lab = Lab::start(|_| {}).await;
    let mut carol = lab.client("carol").await;
    for sql in [
        "SET datafusion.runtime.memory_limit = '100G'",
        "SET datafusion.runtime.temp_directory = '/tmp'",
        "SET datafusion.sql_parser.recursion_limit = 100000",
        "SET datafusion.catalog.location = '/etc'",
        "RESET datafusion.runtime.memory_limit",
    ] {
        refused(
            &mut carol,
            sql,
            Code::PermissionDenied,
            "only admins may change",
        )
        .await;
    }
    ok(&mut carol, "SET datafusion.execution.batch_size = 1024").await;
    ok(
        &mut carol,
        "SET datafusion.catalog.default_schema = 'shared'",
    )
    .await;
    assert_eq!(ok(&mut carol, "SELECT count(*) FROM notes").await, [["2"]]);
    let mut admin = lab.client("admin").await;
    ok(&mut admin, "SET datafusion.runtime.memory_limit = '1G'").await;

    // SetSessionOptions: the same rule, answered with the error code.
    use iceflight_input::session_options::{
        SessionOptionValue, SetSessionOptionsRequest, SetSessionOptionsResult,
    };
    use prost::Message;
    let request = SetSessionOptionsRequest {
        session_options: [(
            "datafusion.runtime.memory_limit".to_string(),
            SessionOptionValue::string("100G"),
        )]
        .into(),
    };
    let mut results = carol
        .do_action(arrow_flight::Action::new(
            "SetSessionOptions",
            request.encode_to_vec(),
        ))
        .await
        .unwrap();
    let body = results.try_next().await.unwrap().unwrap().body;
    let answer = SetSessionOptionsResult::decode(body).unwrap();
    assert_eq!(
        answer.errors["datafusion.runtime.memory_limit"].value,
        iceflight_input::session_options::ERROR
    );
}

/// Every statement takes a slot and obeys the timeout, writes and procedures too: an `INSERT`
/// waits behind a running query and gives up with `ResourceExhausted`; one cut short by the
/// timeout commits nothing. A user's table named like `kill_query`'s is no way around the
/// slots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_statement_takes_a_slot_and_obeys_the_timeout() {
    let lab = Lab::start(|c| {
        c.server.max_concurrent_queries = 1;
        c.server.queue_timeout = Duration::from_millis(800);
    })
    .await;
    let mut alice = lab.client("alice").await;
    ok(
        &mut alice,
        "CREATE TABLE local.alice.iceflight_kill_query AS SELECT 1 AS a",
    )
    .await;
    // A query whose result nobody reads holds the only slot.
    let mut holder = lab.client("admin").await;
    let info = holder
        .execute("SELECT * FROM generate_series(1, 100000000)".into(), None)
        .await
        .unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let held = holder.do_get(ticket).await.unwrap();
    let before = lab.state_of("alice.private").await;
    for sql in [
        "INSERT INTO local.alice.private VALUES (5, 'five')",
        "ALTER TABLE local.alice.private EXECUTE optimize",
        "SELECT * FROM local.alice.iceflight_kill_query",
    ] {
        refused(
            &mut alice,
            sql,
            Code::ResourceExhausted,
            "too many concurrent queries",
        )
        .await;
    }
    drop(held);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(lab.state_of("alice.private").await, before);
    // The session's timeout cuts a write short; it commits nothing.
    ok(&mut alice, "SET iceflight.query.timeout = '50ms'").await;
    refused(
        &mut alice,
        "INSERT INTO local.alice.private SELECT value, 'x' FROM generate_series(1, 30000000)",
        Code::DeadlineExceeded,
        "",
    )
    .await;
    assert_eq!(lab.state_of("alice.private").await, before);
}

/// A prepared statement's handle, made with the raw Flight call (`CreatePreparedStatement`).
async fn raw_prepare(addr: std::net::SocketAddr, token: &str, sql: &str) -> bytes::Bytes {
    use arrow_flight::sql::{
        ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult, Any,
        ProstMessageExt,
    };
    use prost::Message;
    let mut flight =
        arrow_flight::flight_service_client::FlightServiceClient::new(common::channel(addr).await);
    let create = ActionCreatePreparedStatementRequest {
        query: sql.into(),
        transaction_id: None,
    };
    let mut results = flight
        .do_action(common::with_token(
            arrow_flight::Action::new("CreatePreparedStatement", create.as_any().encode_to_vec()),
            token,
        ))
        .await
        .unwrap()
        .into_inner();
    let body = results.try_next().await.unwrap().unwrap().body;
    let created: ActionCreatePreparedStatementResult =
        Any::decode(body).unwrap().unpack().unwrap().unwrap();
    created.prepared_statement_handle
}

/// Binds `messages` (Arrow IPC as `FlightData`) to prepared statement `handle` with a raw
/// `DoPut(CommandPreparedStatementQuery)`.
async fn raw_bind(
    addr: std::net::SocketAddr,
    token: &str,
    handle: bytes::Bytes,
    mut messages: Vec<arrow_flight::FlightData>,
) -> Result<(), tonic::Status> {
    use arrow_flight::sql::{CommandPreparedStatementQuery, ProstMessageExt};
    use prost::Message;
    let mut flight =
        arrow_flight::flight_service_client::FlightServiceClient::new(common::channel(addr).await);
    let command = CommandPreparedStatementQuery {
        prepared_statement_handle: handle,
    };
    messages[0].flight_descriptor = Some(arrow_flight::FlightDescriptor::new_cmd(
        command.as_any().encode_to_vec(),
    ));
    let request = common::with_token(futures::stream::iter(messages), token);
    let answers: Vec<_> = flight
        .do_put(request)
        .await?
        .into_inner()
        .try_collect()
        .await?;
    let _ = answers;
    Ok(())
}

/// `batch` as a client's upload, its buffers compressed with `codec` when given.
fn upload(
    batch: RecordBatch,
    codec: Option<arrow::ipc::CompressionType>,
) -> Vec<arrow_flight::FlightData> {
    let options = arrow::ipc::writer::IpcWriteOptions::default()
        .try_with_compression(codec)
        .unwrap();
    futures::executor::block_on(
        arrow_flight::encode::FlightDataEncoderBuilder::new()
            .with_options(options)
            .build(futures::stream::iter([Ok(batch)]))
            .try_collect(),
    )
    .unwrap()
}

fn one_string(value: String) -> RecordBatch {
    RecordBatch::try_from_iter([(
        "0",
        Arc::new(arrow::array::StringArray::from(vec![value])) as arrow::array::ArrayRef,
    )])
    .unwrap()
}

/// What one session holds is bounded: its oldest prepared statement is closed beyond
/// `max_prepared_statements`, and bound parameters beyond `max_pending_parameter_bytes` are
/// refused (`ResourceExhausted`) while the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_and_bindings_are_bounded() {
    let lab = Lab::start(|c| {
        c.server.max_prepared_statements = 3;
        c.server.max_pending_parameter_bytes = iceflight_input::units::ByteSize(256 << 10);
    })
    .await;
    let carol = lab.client("carol").await;
    let token = carol.token().unwrap().clone();
    let mut handles = vec![];
    for i in 0..5 {
        handles.push(raw_prepare(lab.addr, &token, &format!("SELECT {i} AS n, $1 AS p")).await);
    }
    // The two oldest are closed.
    for (i, handle) in handles.iter().enumerate() {
        let bound = raw_bind(
            lab.addr,
            &token,
            handle.clone(),
            upload(one_string("x".into()), None),
        )
        .await;
        match i {
            0 | 1 => assert_eq!(bound.unwrap_err().code(), Code::NotFound, "handle {i}"),
            _ => bound.unwrap(),
        }
    }
    // 80 KiB pending on one statement fits (counted at most twice: upload and values); 80 KiB
    // more on another of the session does not.
    let big = || upload(one_string("x".repeat(80 << 10)), None);
    raw_bind(lab.addr, &token, handles[3].clone(), big())
        .await
        .unwrap();
    let e = raw_bind(lab.addr, &token, handles[4].clone(), big())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    assert!(e.message().contains("max_pending_parameter_bytes"), "{e}");
    // The same statement rebound replaces its own binding.
    raw_bind(lab.addr, &token, handles[3].clone(), big())
        .await
        .unwrap();
}

/// Uploads and statements built to exhaust the server are refused in one line and the server
/// goes on: a compressed upload declaring a terabyte (LZ4 and ZSTD), 10 000 nested `OR`s and
/// parentheses, a query past the memory pool (`ResourceExhausted`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_input_is_refused_and_the_server_lives() {
    let lab = Lab::start(|c| {
        c.query.memory_limit = Some(iceflight_input::units::ByteSize(64 << 20));
    })
    .await;
    let mut carol = lab.client("carol").await;
    let token = carol.token().unwrap().clone();
    let handle = raw_prepare(lab.addr, &token, "SELECT $1 AS p").await;
    for codec in [
        arrow::ipc::CompressionType::LZ4_FRAME,
        arrow::ipc::CompressionType::ZSTD,
    ] {
        let mut messages = upload(one_string("y".repeat(4096)), Some(codec));
        let last = messages.last_mut().unwrap();
        let header = arrow::ipc::root_as_message(&last.data_header).unwrap();
        let offset = header
            .header_as_record_batch()
            .unwrap()
            .buffers()
            .unwrap()
            .iter()
            .rfind(|b| b.length() >= 8)
            .unwrap()
            .offset() as usize;
        let mut body = last.data_body.to_vec();
        body[offset..offset + 8].copy_from_slice(&(1i64 << 40).to_le_bytes());
        last.data_body = body.into();
        let e = raw_bind(lab.addr, &token, handle.clone(), messages)
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(
            e.message()
                .contains("declares 1099511627776 uncompressed bytes"),
            "{e}"
        );
    }
    // Deep statements.
    let ors = (0..10_000)
        .map(|i| format!("column1 = {i}"))
        .collect::<Vec<_>>()
        .join(" OR ");
    let deep = format!("SELECT count(*) FROM local.shared.notes WHERE {ors}");
    refused(&mut carol, &deep, Code::InvalidArgument, "more than 2000").await;
    let nested = format!("SELECT {}1{}", "(".repeat(10_000), ")".repeat(10_000));
    refused(&mut carol, &nested, Code::InvalidArgument, "more than 2000").await;
    for chain in [" = true", " IS NULL", "::int"] {
        let sql = format!("SELECT true{}", chain.repeat(10_000));
        refused(&mut carol, &sql, Code::InvalidArgument, "more than 2000").await;
    }
    // A dialect whose comments the generic tokenizer would not read hides nothing.
    ok(&mut carol, "SET datafusion.sql_parser.dialect = 'MySQL'").await;
    let hidden = format!("SELECT /* /* */ 1{} /* */", " OR 1".repeat(10_000));
    refused(&mut carol, &hidden, Code::InvalidArgument, "more than 2000").await;
    ok(&mut carol, "SET datafusion.sql_parser.dialect = 'generic'").await;
    // Batch sizes are sized outside the memory pool: bounded for a user.
    refused(
        &mut carol,
        "SET datafusion.execution.batch_size = 2000000000",
        Code::PermissionDenied,
        "above 1048576",
    )
    .await;
    // Up to the bound such a statement runs (planned on the server's own stacks).
    let ors = (0..800)
        .map(|i| format!("column1 = {i}"))
        .collect::<Vec<_>>()
        .join(" OR ");
    assert_eq!(
        ok(
            &mut carol,
            &format!("SELECT count(*) FROM local.shared.notes WHERE {ors}")
        )
        .await,
        [["2"]]
    );
    // Past the memory pool: the query fails, the server answers the next one.
    refused(
        &mut carol,
        "SELECT count(*) FROM generate_series(1, 20000000) a JOIN generate_series(1, 20000000) b \
         ON a.value = b.value",
        Code::ResourceExhausted,
        "",
    )
    .await;
    assert_eq!(ok(&mut carol, "SELECT 1").await, [["1"]]);
}

/// Without `[query] memory_limit` the pool is half the machine's memory, not unbounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_pool_is_bounded_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::engine(dir.path(), 2).await;
    let limit = match engine.runtime().memory_pool.memory_limit() {
        datafusion::execution::memory_pool::MemoryLimit::Finite(n) => n as u64,
        _ => panic!("the default memory pool is unbounded"),
    };
    let machine = iceflight_input::config::machine_memory();
    assert_eq!(limit, machine / 2, "{limit} of {machine}");
}

/// Keys and tokens of an identity provider, made by `tests/fixtures/jwt_tokens.py` into `dir`.
fn make_tokens(dir: &Path) {
    let out = std::process::Command::new(common::python())
        .arg(common::repo_root().join("tests/fixtures/jwt_tokens.py"))
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn jwt_config(dir: &Path) -> iceflight_input::config::JwtConfig {
    iceflight_input::config::JwtConfig {
        jwks: dir.join("jwks.json").display().to_string(),
        issuer: "https://idp.iceflight.test/".into(),
        audience: "iceflight".into(),
        user_claim: "sub".into(),
        groups_claim: "groups".into(),
        leeway: Duration::from_secs(30),
    }
}

/// Runs `sql` with a bearer token on every call (no handshake): ADBC's
/// `authorization_header`, JDBC's `token`.
async fn run_with_token(
    addr: std::net::SocketAddr,
    token: &str,
    sql: &str,
) -> Result<Vec<Vec<String>>, tonic::Status> {
    use arrow_flight::sql::{CommandStatementQuery, ProstMessageExt};
    use prost::Message;
    let mut flight =
        arrow_flight::flight_service_client::FlightServiceClient::new(common::channel(addr).await);
    let descriptor = arrow_flight::FlightDescriptor::new_cmd(
        CommandStatementQuery {
            query: sql.into(),
            transaction_id: None,
        }
        .as_any()
        .encode_to_vec(),
    );
    let info = flight
        .get_flight_info(common::with_token(descriptor, token))
        .await?
        .into_inner();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let data: Vec<arrow_flight::FlightData> = flight
        .do_get(common::with_token(ticket, token))
        .await?
        .into_inner()
        .try_collect()
        .await?;
    let batches: Vec<RecordBatch> =
        arrow_flight::decode::FlightRecordBatchStream::new_from_flight_data(futures::stream::iter(
            data.into_iter().map(Ok),
        ))
        .try_collect()
        .await
        .map_err(|e| tonic::Status::internal(e.to_string()))?;
    Ok(common::rows(&batches))
}

/// Bearer JWTs log in as their user claim, with the groups of their groups claim, on every
/// call or through the handshake; expired, wrong-audience, wrongly signed and HMAC tokens are
/// refused with `Unauthenticated` naming why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_logins() {
    let keys = tempfile::tempdir().unwrap();
    make_tokens(keys.path());
    let token =
        |name: &str| std::fs::read_to_string(keys.path().join(format!("{name}.jwt"))).unwrap();
    let jwt = jwt_config(keys.path());
    let lab = Lab::start(|c| c.server.jwt = Some(jwt)).await;
    let alice = token("alice");
    assert_eq!(
        run_with_token(lab.addr, &alice, "SELECT count(*) FROM local.alice.private")
            .await
            .unwrap(),
        [["2"]]
    );
    assert_eq!(
        run_with_token(
            lab.addr,
            &alice,
            "SELECT \"user\" FROM system.runtime.sessions"
        )
        .await
        .unwrap(),
        [["alice"]]
    );
    let e = run_with_token(lab.addr, &alice, "SELECT * FROM local.eng.events")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e}");
    // Groups come from the token: bob's says eng.
    assert_eq!(
        run_with_token(
            lab.addr,
            &token("bob"),
            "SELECT count(*) FROM local.eng.events"
        )
        .await
        .unwrap(),
        [["2"]]
    );
    for (name, says) in [
        ("expired", "expired"),
        ("wrong_audience", "audience"),
        ("wrong_signature", "signature"),
        ("hs256", "algorithm"),
        ("no_kid_other_key", "signature"),
    ] {
        let e = run_with_token(lab.addr, &token(name), "SELECT 1")
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{name}: {e}");
        assert!(e.message().contains(says), "{name}: {e}");
    }
    // The handshake with a bearer JWT answers a session token.
    let mut flight = arrow_flight::flight_service_client::FlightServiceClient::new(
        common::channel(lab.addr).await,
    );
    let response = flight
        .handshake(common::with_token(
            futures::stream::iter(vec![arrow_flight::HandshakeRequest::default()]),
            &alice,
        ))
        .await
        .unwrap();
    let session = response
        .metadata()
        .get("authorization")
        .unwrap()
        .to_str()
        .unwrap()
        .trim_start_matches("Bearer ")
        .to_string();
    assert_ne!(session, alice);
    assert_eq!(
        run_with_token(
            lab.addr,
            &session,
            "SELECT count(*) FROM local.alice.private"
        )
        .await
        .unwrap(),
        [["2"]]
    );
    let e = flight
        .handshake(common::with_token(
            futures::stream::iter(vec![arrow_flight::HandshakeRequest::default()]),
            &token("expired"),
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e}");
}

/// The provider's keys may come from a URL (`jwks = "http://…"`), as identity providers
/// publish them: served here by Python's HTTP server from the directory the keys were made in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_keys_from_a_url() {
    let keys = tempfile::tempdir().unwrap();
    make_tokens(keys.path());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut http = std::process::Command::new(common::python())
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--directory",
        ])
        .arg(keys.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/jwks.json");
    let started = std::time::Instant::now();
    while reqwest::get(&url).await.is_err() && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut jwt = jwt_config(keys.path());
    jwt.jwks = url;
    let lab = Lab::start(|c| c.server.jwt = Some(jwt)).await;
    let alice = std::fs::read_to_string(keys.path().join("alice.jwt")).unwrap();
    let answer = run_with_token(lab.addr, &alice, "SELECT count(*) FROM local.alice.private").await;
    let _ = http.kill();
    let _ = http.wait();
    assert_eq!(answer.unwrap(), [["2"]]);
}

/// The real clients as two users and an attacker (`tests/flight/test_security.py` with ADBC,
/// `tests/flight/jdbc/SecurityTest.java` with JDBC), then what is on disk and in the tables
/// is checked here: nothing the attacks aimed at changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adbc_and_jdbc_clients_are_held_to_the_rules() {
    let keys = tempfile::tempdir().unwrap();
    make_tokens(keys.path());
    let jwt = jwt_config(keys.path());
    let lab = Lab::start(|c| c.server.jwt = Some(jwt)).await;
    let before = [
        lab.state_of("alice.private").await,
        lab.state_of("shared.notes").await,
    ];
    let script = common::repo_root().join("tests/flight/run_clients.sh");
    let out = tokio::process::Command::new("bash")
        .arg(script)
        .args(["security", "jdbc-security"])
        .env("ICEFLIGHT_URI", format!("grpc://{}", lab.addr))
        .env("ICEFLIGHT_SECURITY_DIR", lab.dir.path())
        .env("ICEFLIGHT_JWT_DIR", keys.path())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "client suites failed:\n{stdout}");
    assert!(
        stdout.contains("clients: 2 passed, 0 failed, 0 skipped"),
        "{stdout}"
    );
    assert_eq!(
        [
            lab.state_of("alice.private").await,
            lab.state_of("shared.notes").await,
        ],
        before,
        "the attacks changed nothing"
    );
    assert_eq!(
        files_under(&lab.path("outside")),
        [lab.path("outside/secret.csv")]
    );
}

/// One user's sessions are bounded, parked ones (connection closed, token still valid)
/// included: the parked one used least recently makes room; live ones refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_sessions_are_bounded() {
    let lab = Lab::start(|c| c.server.max_sessions_per_user = 2).await;
    let mut kept = lab.client("carol").await;
    let parked = lab.client("carol").await;
    let parked_token = parked.token().unwrap().clone();
    drop(parked);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut third = lab.client("carol").await;
    let e = run_with_token(lab.addr, &parked_token, "SELECT 1")
        .await
        .unwrap_err();
    assert_eq!(
        e.code(),
        Code::Unauthenticated,
        "the parked session made room: {e}"
    );
    let mut fourth = FlightSqlServiceClient::new(common::channel(lab.addr).await);
    let e = fourth
        .handshake("carol", "carolpw")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("too many sessions of user carol"), "{e}");
    // Others are not held back by carol's sessions.
    lab.client("alice").await;
    assert_eq!(ok(&mut kept, "SELECT 1").await, [["1"]]);
    assert_eq!(ok(&mut third, "SELECT 1").await, [["1"]]);
}
