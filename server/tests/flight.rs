//! The Flight SQL server end to end: an in-process `iceflight` server on a free loopback port over
//! TPC-H SF 0.01, exercised by arrow-flight's Rust `FlightSqlServiceClient` (every RPC, malformed
//! requests), then by the real ADBC, flightsql-dbapi and JDBC clients (`tests/flight/run_clients.sh`).

mod common;

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Float64Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::sql::{
    ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult, CommandGetDbSchemas,
    CommandGetTables, CommandPreparedStatementQuery, CommandPreparedStatementUpdate,
    DoPutUpdateResult, ProstMessageExt, SqlInfo,
};
use arrow_flight::{Action, FlightData, FlightDescriptor, FlightInfo, Ticket};
use futures::TryStreamExt;
use iceberg::NamespaceIdent;
use iceflight::config::Config;
use iceflight::flight::{self, service::SERVER_STATUS_ACTION};
use iceflight::session::Engine;
use iceflight_datagen::load::{LoadOptions, load_tpch};
use prost::Message;
use tonic::transport::Channel;

struct Server {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: tokio::task::JoinHandle<Result<(), iceflight::flight::ServeError>>,
    _dir: tempfile::TempDir,
}

async fn start_server() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config {
        data_dir: dir.path().to_path_buf(),
        default_schema: Some("tpch".into()),
        ..Config::default()
    };
    config.query.target_partitions = 2;
    config.server.prepared_statement_ttl = std::time::Duration::from_secs(2);
    let engine = Engine::connect(config).await.unwrap();
    let catalog = Arc::clone(engine.catalogs().get("local").unwrap());
    let options = LoadOptions {
        scale: 0.01,
        progress: false,
        ..LoadOptions::default()
    };
    load_tpch(&catalog, &NamespaceIdent::new("tpch".into()), &options)
        .await
        .unwrap();
    let users = flight::users(&engine.config().server, &["alice:secret".to_string()]).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let handle = tokio::spawn(async move {
        flight::serve(
            engine,
            users,
            "127.0.0.1:0".parse().unwrap(),
            async move {
                let _ = stopped.await;
            },
            move |a| {
                let _ = ready_tx.send(a);
            },
        )
        .await
    });
    let addr = ready_rx.await.unwrap();
    Server {
        addr,
        stop: Some(stop),
        handle,
        _dir: dir,
    }
}

impl Server {
    /// Stops the server and waits for it to finish cleanly.
    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.handle.await.unwrap().unwrap();
    }
}

async fn client(addr: std::net::SocketAddr) -> FlightSqlServiceClient<Channel> {
    let channel = common::channel(addr).await;
    FlightSqlServiceClient::new(channel)
}

async fn fetch(client: &mut FlightSqlServiceClient<Channel>, info: FlightInfo) -> Vec<RecordBatch> {
    let mut out = vec![];
    for endpoint in info.endpoint {
        let ticket = endpoint.ticket.expect("ticket");
        let stream = client.do_get(ticket).await.unwrap();
        out.extend(stream.try_collect::<Vec<_>>().await.unwrap());
    }
    out
}

async fn status(client: &mut FlightSqlServiceClient<Channel>) -> serde_json::Value {
    let mut results = client
        .do_action(Action::new(SERVER_STATUS_ACTION, ""))
        .await
        .unwrap();
    let body = results.try_next().await.unwrap().expect("a result");
    serde_json::from_slice(&body.body).unwrap()
}

fn code<T: std::fmt::Debug>(r: Result<T, arrow_flight::error::FlightError>) -> String {
    format!("{:?}", r.expect_err("expected an error"))
}

/// Sends `CancelFlightInfo` for `info`; returns the `CancelStatus`.
async fn cancel(client: &mut FlightSqlServiceClient<Channel>, info: FlightInfo) -> i32 {
    let request = arrow_flight::CancelFlightInfoRequest::new(info);
    let mut results = client
        .do_action(Action::new(
            "CancelFlightInfo",
            prost::Message::encode_to_vec(&request),
        ))
        .await
        .unwrap();
    let body = results.try_next().await.unwrap().unwrap().body;
    <arrow_flight::CancelFlightInfoResult as prost::Message>::decode(body)
        .unwrap()
        .status
}

/// Whether an error text names a gRPC code (by name or by tonic's description of it).
/// The error of running `sql` as a statement (planned in GetFlightInfo, run in DoGet), as text.
async fn failure(client: &mut FlightSqlServiceClient<Channel>, sql: &str) -> String {
    match client.execute(sql.to_string(), None).await {
        Ok(info) => {
            let ticket = info.endpoint[0].ticket.clone().unwrap();
            match client.do_get(ticket).await {
                Ok(s) => code(s.try_collect::<Vec<_>>().await),
                Err(e) => format!("{e:?}"),
            }
        }
        Err(e) => format!("{e:?}"),
    }
}

fn has(e: &str, code: tonic::Code) -> bool {
    e.contains(&format!("{code:?}")) || e.contains(code.description())
}

/// A server of its own (TPC-H SF 0.01 in a fresh data directory) and a client logged in as
/// alice.
async fn logged_in() -> (Server, FlightSqlServiceClient<Channel>) {
    let server = start_server().await;
    let mut c = client(server.addr).await;
    c.handshake("alice", "secret").await.unwrap();
    (server, c)
}

/// The timing-sensitive tests (a CPU-heavy query, the JVM and Python client suites) run one at a
/// time, so one's load does not stretch the other's time bounds.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Login: a wrong password and missing credentials are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_is_required() {
    let server = start_server().await;
    // Login: wrong password and missing credentials are refused.
    let mut anon = client(server.addr).await;
    let e = code(anon.execute("SELECT 1".into(), None).await);
    assert!(has(&e, tonic::Code::Unauthenticated), "{e}");
    let e = code(anon.handshake("alice", "wrong").await);
    assert!(has(&e, tonic::Code::Unauthenticated), "{e}");
    server.stop().await;
}

/// SELECT without FROM, a TPC-H query against DuckDB's answer, DDL through
/// `CommandStatementUpdate`, EXPLAIN ANALYZE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_run_and_ddl_goes_through_statement_update() {
    let (server, mut c) = logged_in().await;
    let info = c.execute("SELECT 1 AS one".into(), None).await.unwrap();
    let batches = fetch(&mut c, info).await;
    assert_eq!(common::rows(&batches), [["1"]]);
    let sql =
        std::fs::read_to_string(common::repo_root().join("bench/queries/tpch/q06.sql")).unwrap();
    let info = c.execute(sql, None).await.unwrap();
    let batches = fetch(&mut c, info).await;
    let answer: common::Answer = serde_json::from_str(
        &std::fs::read_to_string(common::repo_root().join("bench/answers/tpch/sf0.01/q06.json"))
            .unwrap(),
    )
    .unwrap();
    common::compare(&batches, &answer).unwrap();
    assert_eq!(
        c.execute_update("CREATE SCHEMA local.made_by_test".into(), None)
            .await
            .unwrap(),
        0
    );
    let info = c
        .execute(
            "EXPLAIN ANALYZE SELECT count(*) FROM lineitem WHERE l_quantity > 0".into(),
            None,
        )
        .await
        .unwrap();
    let text = format!("{:?}", common::rows(&fetch(&mut c, info).await));
    assert!(
        text.contains("IcebergScanExec") && text.contains("files_opened"),
        "{text}"
    );
    server.stop().await;
}

/// A syntax error keeps the parser's message (`InvalidArgument`); an unknown table is `NotFound`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_keep_the_parser_message_and_a_missing_table_is_not_found() {
    let (server, mut c) = logged_in().await;
    let e = code(c.execute("SELEC 1".into(), None).await);
    assert!(
        has(&e, tonic::Code::InvalidArgument) && e.contains("SELEC"),
        "{e}"
    );
    let e = code(c.execute("SELECT * FROM nope".into(), None).await);
    assert!(has(&e, tonic::Code::NotFound), "{e}");
    server.stop().await;
}

/// A prepared statement with a parameter, executed three times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_statement_runs_with_each_bound_parameter() {
    let (server, mut c) = logged_in().await;
    let mut stmt = c
        .prepare(
            "SELECT count(*) AS n FROM lineitem WHERE l_orderkey < ?".into(),
            None,
        )
        .await
        .unwrap();
    assert_eq!(stmt.parameter_schema().unwrap().fields().len(), 1);
    for (bound, expected) in [(1i64, 0i64), (100, 97), (60001, 60175)] {
        let param_schema = Arc::new(Schema::new(vec![Field::new("0", DataType::Int64, true)]));
        let params =
            RecordBatch::try_new(param_schema, vec![Arc::new(Int64Array::from(vec![bound]))])
                .unwrap();
        stmt.set_parameters(params).unwrap();
        let info = stmt.execute().await.unwrap();
        let rows = common::rows(&fetch(&mut c, info).await);
        if bound == 100 {
            // Cross-check against a plain query rather than a hard-coded count.
            let info = c
                .execute(
                    "SELECT count(*) FROM lineitem WHERE l_orderkey < 100".into(),
                    None,
                )
                .await
                .unwrap();
            assert_eq!(rows, common::rows(&fetch(&mut c, info).await));
        } else {
            assert_eq!(rows, [[expected.to_string()]], "l_orderkey < {bound}");
        }
    }
    stmt.close().await.unwrap();
    server.stop().await;
}

/// The Arrow schema of the first table a `GetTables(include_schema)` answer lists.
fn first_table_schema(tables: &[RecordBatch]) -> Schema {
    let ipc = tables[0]
        .column_by_name("table_schema")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow::array::BinaryArray>()
        .unwrap()
        .value(0)
        .to_vec();
    arrow::ipc::convert::try_schema_from_ipc_buffer(&ipc).unwrap()
}

/// Catalogs (the engine's `system` catalog too, as in Trino), schemas with a NULL catalog
/// filter, tables with their schemas and the column metadata JDBC's `getColumns` reads, one
/// table type per object across GetTables and information_schema, `GetXdbcTypeInfo`,
/// `GetPrimaryKeys` from identifier fields, SqlInfo, table types.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_commands_answer_as_clients_expect() {
    let (server, mut c) = logged_in().await;
    let info = c.get_catalogs().await.unwrap();
    assert_eq!(
        common::rows(&fetch(&mut c, info).await),
        [["local"], ["system"]]
    );
    let info = c
        .get_db_schemas(CommandGetDbSchemas {
            catalog: None,
            db_schema_filter_pattern: Some("tp%".into()),
        })
        .await
        .unwrap();
    assert_eq!(
        common::rows(&fetch(&mut c, info).await),
        [["local", "tpch"]]
    );
    let info = c
        .get_tables(CommandGetTables {
            catalog: Some("local".into()),
            db_schema_filter_pattern: Some("tpch".into()),
            table_name_filter_pattern: Some("line%".into()),
            table_types: vec![],
            include_schema: true,
        })
        .await
        .unwrap();
    let tables = fetch(&mut c, info).await;
    assert_eq!(tables.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
    // include_schema carries the table's columns with the Flight SQL column metadata keys.
    let table_schema = first_table_schema(&tables);
    let orderkey = table_schema.field_with_name("l_orderkey").unwrap();
    assert_eq!(
        orderkey.metadata()["ARROW:FLIGHT:SQL:TABLE_NAME"],
        "lineitem"
    );
    assert_eq!(orderkey.metadata()["ARROW:FLIGHT:SQL:TYPE_NAME"], "BIGINT");
    let price = table_schema.field_with_name("l_extendedprice").unwrap();
    assert_eq!(price.metadata()["ARROW:FLIGHT:SQL:PRECISION"], "15");
    // JDBC's COLUMN_SIZE is PRECISION where present ("0" included): each type's own size;
    // booleans as FlightSql.proto encodes them, "1" / "0" (the JDBC driver reads "true" as
    // false); an Iceberg table is writable.
    for (column, precision, scale) in [
        ("l_orderkey", "19", "0"),
        ("l_shipdate", "10", "0"),
        ("l_comment", "2147483647", "0"),
        ("l_extendedprice", "15", "2"),
    ] {
        let m = table_schema.field_with_name(column).unwrap().metadata();
        assert_eq!(
            (
                m["ARROW:FLIGHT:SQL:PRECISION"].as_str(),
                m["ARROW:FLIGHT:SQL:SCALE"].as_str()
            ),
            (precision, scale),
            "{column}"
        );
        assert_eq!(m["ARROW:FLIGHT:SQL:IS_READ_ONLY"], "0", "{column}");
        assert_eq!(m["ARROW:FLIGHT:SQL:IS_AUTO_INCREMENT"], "0", "{column}");
        assert_eq!(m["ARROW:FLIGHT:SQL:IS_SEARCHABLE"], "1", "{column}");
    }
    // One table type per object: GetTables says what information_schema says of the system
    // catalog's tables, with or without their schemas; they are read-only.
    let info = c
        .execute(
            "SELECT table_schema, table_name, table_type FROM information_schema.tables \
             WHERE table_catalog = 'system' AND table_schema = 'runtime' ORDER BY 2"
                .into(),
            None,
        )
        .await
        .unwrap();
    let sql_types: Vec<Vec<String>> = common::rows(&fetch(&mut c, info).await)
        .into_iter()
        .map(|r| {
            vec![
                r[0].clone(),
                r[1].clone(),
                r[2].replace("BASE TABLE", "TABLE"),
            ]
        })
        .collect();
    assert!(sql_types.len() >= 3, "{sql_types:?}");
    for include_schema in [false, true] {
        let info = c
            .get_tables(CommandGetTables {
                catalog: Some("system".into()),
                db_schema_filter_pattern: Some("runtime".into()),
                table_name_filter_pattern: None,
                table_types: vec![],
                include_schema,
            })
            .await
            .unwrap();
        let batches = fetch(&mut c, info).await;
        let got: Vec<Vec<String>> = common::rows(&batches)
            .into_iter()
            .map(|r| vec![r[1].clone(), r[2].clone(), r[3].clone()])
            .collect();
        assert_eq!(got, sql_types, "include_schema {include_schema}");
        if include_schema {
            let schema = first_table_schema(&batches);
            assert_eq!(
                schema.field(0).metadata()["ARROW:FLIGHT:SQL:IS_READ_ONLY"],
                "1"
            );
        }
    }
    // information_schema's views: GetTables lists what SHOW TABLES lists (it once listed the
    // schema with no table in it).
    let info = c
        .execute(
            "SELECT table_name FROM information_schema.tables \
             WHERE table_catalog = 'local' AND table_schema = 'information_schema' ORDER BY 1"
                .into(),
            None,
        )
        .await
        .unwrap();
    let shown: Vec<String> = common::rows(&fetch(&mut c, info).await)
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert!(shown.len() >= 7, "{shown:?}");
    let info = c
        .get_tables(CommandGetTables {
            catalog: Some("local".into()),
            db_schema_filter_pattern: Some("information_schema".into()),
            table_name_filter_pattern: None,
            table_types: vec![],
            include_schema: false,
        })
        .await
        .unwrap();
    let mut listed: Vec<String> = common::rows(&fetch(&mut c, info).await)
        .into_iter()
        .map(|r| r[2].clone())
        .collect();
    listed.sort();
    assert_eq!(listed, shown);
    // GetXdbcTypeInfo: every scalar type a column can have, with its JDBC column size.
    let info = c
        .get_xdbc_type_info(arrow_flight::sql::CommandGetXdbcTypeInfo { data_type: None })
        .await
        .unwrap();
    let types = fetch(&mut c, info).await;
    let names: Vec<(String, String)> = common::rows(&types)
        .into_iter()
        .map(|r| (r[0].clone(), r[2].clone()))
        .collect();
    for (name, size) in [
        ("BIGINT", "19"),
        ("VARCHAR", "2147483647"),
        ("DATE", "10"),
        ("TIMESTAMP", "26"),
        ("TIMESTAMP WITH TIME ZONE", "32"),
        ("TIME", "15"),
        ("VARBINARY", "2147483647"),
        ("DECIMAL", "38"),
        ("BOOLEAN", "1"),
    ] {
        assert!(
            names.contains(&(name.to_string(), size.to_string())),
            "{name} {size}: {names:?}"
        );
    }
    // GetPrimaryKeys: an Iceberg table's identifier fields (set by pyiceberg; SQL has no way
    // to), in field id order; none for a table without.
    let info = c
        .execute(
            "CREATE TABLE keyed (a INT NOT NULL, v VARCHAR, k BIGINT NOT NULL)".into(),
            None,
        )
        .await
        .unwrap();
    fetch(&mut c, info).await;
    common::pyiceberg_rw(server._dir.path(), &["set-identifier", "tpch.keyed", "k,a"]);
    let keys = |table: &str| arrow_flight::sql::CommandGetPrimaryKeys {
        catalog: None,
        db_schema: Some("tpch".into()),
        table: table.into(),
    };
    let info = c.get_primary_keys(keys("keyed")).await.unwrap();
    assert_eq!(
        common::rows(&fetch(&mut c, info).await),
        [
            ["local", "tpch", "keyed", "a", "NULL", "1"],
            ["local", "tpch", "keyed", "k", "NULL", "2"]
        ]
    );
    let info = c.get_primary_keys(keys("lineitem")).await.unwrap();
    assert!(common::rows(&fetch(&mut c, info).await).is_empty());
    let info = c
        .get_sql_info(vec![
            SqlInfo::FlightSqlServerName,
            SqlInfo::SqlIdentifierQuoteChar,
        ])
        .await
        .unwrap();
    let text = format!("{:?}", common::rows(&fetch(&mut c, info).await));
    assert!(text.contains("iceflight") && text.contains('"'), "{text}");
    let info = c.get_table_types().await.unwrap();
    assert_eq!(
        common::rows(&fetch(&mut c, info).await),
        [["TABLE"], ["VIEW"]]
    );
    server.stop().await;
}

/// Malformed tickets and actions are `InvalidArgument`; the server keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_input_is_refused_without_a_crash() {
    let (server, mut c) = logged_in().await;
    let e = code(c.do_get(Ticket::new("garbage")).await.map(|_| ()));
    assert!(has(&e, tonic::Code::InvalidArgument), "{e}");
    let e = code(
        c.do_action(Action::new("SetSessionOptions", vec![0xff, 0xff, 0xff]))
            .await
            .map(|_| ()),
    );
    assert!(has(&e, tonic::Code::InvalidArgument), "{e}");
    let e = code(
        c.do_action(Action::new("NoSuchAction", ""))
            .await
            .map(|_| ()),
    );
    assert!(has(&e, tonic::Code::InvalidArgument), "{e}");
    server.stop().await;
}

/// A query bound to more parameter rows than it can plan one by one, and a number an integer
/// placeholder cannot hold exactly, are refused rather than executed, truncated or crashed on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_that_do_not_fit_are_refused() {
    let (server, mut c) = logged_in().await;
    let mut stmt = c
        .prepare(
            "SELECT count(*) FROM lineitem WHERE l_orderkey < $1".into(),
            None,
        )
        .await
        .unwrap();
    let param_schema = Arc::new(Schema::new(vec![Field::new("0", DataType::Int64, true)]));
    let many = RecordBatch::try_new(
        param_schema,
        vec![Arc::new(Int64Array::from_iter_values(0..100_000))],
    )
    .unwrap();
    stmt.set_parameters(many).unwrap();
    let e = code(stmt.execute().await);
    assert!(
        has(&e, tonic::Code::InvalidArgument) && e.contains("at most 1000 parameter rows"),
        "{e}"
    );
    // A number that an integer placeholder cannot hold exactly is refused, not truncated (3.5
    // would count the rows below 3); a whole 3.0 binds as 3.
    let float = |v: f64| {
        let schema = Arc::new(Schema::new(vec![Field::new("0", DataType::Float64, true)]));
        RecordBatch::try_new(schema, vec![Arc::new(Float64Array::from(vec![v]))]).unwrap()
    };
    stmt.set_parameters(float(3.5)).unwrap();
    let e = code(stmt.execute().await);
    assert!(
        has(&e, tonic::Code::InvalidArgument) && e.contains("does not fit Int64 exactly"),
        "{e}"
    );
    stmt.set_parameters(float(3.0)).unwrap();
    let info = stmt.execute().await.unwrap();
    let counted = fetch(&mut c, info).await;
    let info = c
        .execute(
            "SELECT count(*) FROM lineitem WHERE l_orderkey < 3".into(),
            None,
        )
        .await
        .unwrap();
    let expected = fetch(&mut c, info).await;
    assert_eq!(common::rows(&counted), common::rows(&expected));
    stmt.close().await.unwrap();
    server.stop().await;
}

/// `CreatePreparedStatement` by hand (arrow-flight's `PreparedStatement` keeps its handle to
/// itself): the handle.
async fn prepare_handle(c: &mut FlightSqlServiceClient<Channel>, sql: &str) -> bytes::Bytes {
    let request = ActionCreatePreparedStatementRequest {
        query: sql.into(),
        transaction_id: None,
    };
    let mut results = c
        .do_action(Action::new(
            "CreatePreparedStatement",
            request.as_any().encode_to_vec(),
        ))
        .await
        .unwrap();
    let body = results.message().await.unwrap().unwrap().body;
    let any = arrow_flight::sql::Any::decode(body).unwrap();
    any.unpack::<ActionCreatePreparedStatementResult>()
        .unwrap()
        .unwrap()
        .prepared_statement_handle
}

/// `DoPut` of `command` with `rows` (none: the descriptor alone, as arrow-rs's client sends an
/// update): the first `PutResult`'s metadata.
async fn put(
    c: &mut FlightSqlServiceClient<Channel>,
    command: impl arrow_flight::sql::ProstMessageExt,
    rows: Option<RecordBatch>,
) -> Result<bytes::Bytes, arrow_flight::error::FlightError> {
    let descriptor = FlightDescriptor::new_cmd(command.as_any().encode_to_vec());
    let messages: Vec<FlightData> = match rows {
        Some(batch) => FlightDataEncoderBuilder::new()
            .with_flight_descriptor(Some(descriptor))
            .build(futures::stream::iter([Ok(batch)]))
            .try_collect()
            .await
            .unwrap(),
        None => vec![FlightData::new().with_descriptor(descriptor)],
    };
    let mut results = c.do_put(futures::stream::iter(messages)).await?;
    Ok(results.message().await?.unwrap().app_metadata)
}

/// `GetFlightInfo` of `command` (arrow-flight's client sends it only with the parameters it
/// holds).
async fn flight_info(
    c: &mut FlightSqlServiceClient<Channel>,
    command: &CommandPreparedStatementQuery,
) -> Result<FlightInfo, tonic::Status> {
    let descriptor = FlightDescriptor::new_cmd(command.as_any().encode_to_vec());
    let mut request = tonic::Request::new(descriptor);
    let token = format!("Bearer {}", c.token().expect("logged in"));
    request
        .metadata_mut()
        .insert("authorization", token.parse().unwrap());
    let info = c.inner_mut().get_flight_info(request).await?;
    Ok(info.into_inner())
}

/// `(k, v)` rows as a parameter batch, columns named as ADBC names them.
fn key_values(rows: &[(i64, &str)]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("0", DataType::Int64, true),
        Field::new("1", DataType::Utf8, true),
    ]));
    let keys = Int64Array::from_iter_values(rows.iter().map(|r| r.0));
    let values = arrow::array::StringArray::from_iter_values(rows.iter().map(|r| r.1));
    RecordBatch::try_new(schema, vec![Arc::new(keys), Arc::new(values)]).unwrap()
}

/// An update's parameters are the rows of its own `DoPut`, all run as one statement (one
/// snapshot, the rows written answered); a binding of `DoPut(CommandPreparedStatementQuery)`
/// serves the next execution only; an execution without parameters is refused, never run with
/// an earlier one's values; a query bound to several rows answers for each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_updates_take_the_rows_of_their_own_put() {
    let (server, mut c) = logged_in().await;
    c.execute_update("CREATE TABLE pt (k BIGINT, v VARCHAR)".into(), None)
        .await
        .unwrap();
    let handle = prepare_handle(&mut c, "INSERT INTO pt VALUES (?, ?)").await;
    let update = CommandPreparedStatementUpdate {
        prepared_statement_handle: handle.clone(),
    };
    let bind = CommandPreparedStatementQuery {
        prepared_statement_handle: handle.clone(),
    };
    let count = |metadata: bytes::Bytes| DoPutUpdateResult::decode(metadata).unwrap().record_count;

    let written = put(
        &mut c,
        update.clone(),
        Some(key_values(&[(1, "a"), (2, "b")])),
    );
    assert_eq!(count(written.await.unwrap()), 2);
    let e = code(put(&mut c, update.clone(), None).await);
    assert!(
        has(&e, tonic::Code::InvalidArgument) && e.contains("none were bound"),
        "{e}"
    );
    // Bound for the next execution (arrow-rs's client binds, then sends the update empty).
    put(&mut c, bind.clone(), Some(key_values(&[(3, "c")])))
        .await
        .unwrap();
    assert_eq!(count(put(&mut c, update.clone(), None).await.unwrap()), 1);
    let e = code(put(&mut c, update.clone(), None).await);
    assert!(e.contains("none were bound"), "{e}");
    // A binding that an update with rows of its own made unnecessary is gone too.
    put(&mut c, bind.clone(), Some(key_values(&[(99, "stale")])))
        .await
        .unwrap();
    let written = put(&mut c, update.clone(), Some(key_values(&[(4, "d")])));
    assert_eq!(count(written.await.unwrap()), 1);
    let e = code(put(&mut c, update.clone(), None).await);
    assert!(e.contains("none were bound"), "{e}");
    // The wrong number of columns writes nothing.
    let one_column = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("0", DataType::Int64, true)])),
        vec![Arc::new(Int64Array::from(vec![5]))],
    )
    .unwrap();
    let e = code(put(&mut c, update, Some(one_column)).await);
    assert!(
        has(&e, tonic::Code::InvalidArgument) && e.contains("takes 2 parameter(s), 1 were sent"),
        "{e}"
    );

    let info = c
        .execute("SELECT k, v FROM pt ORDER BY k".into(), None)
        .await
        .unwrap();
    let stored = common::rows(&fetch(&mut c, info).await);
    assert_eq!(stored, [["1", "a"], ["2", "b"], ["3", "c"], ["4", "d"]]);
    let info = c
        .execute("SELECT count(*) FROM \"pt$snapshots\"".into(), None)
        .await
        .unwrap();
    assert_eq!(common::rows(&fetch(&mut c, info).await), [["3"]]);

    // A query's binding serves its next execution only.
    let query = prepare_handle(&mut c, "SELECT ? AS x").await;
    let seven = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("0", DataType::Int64, true)])),
        vec![Arc::new(Int64Array::from(vec![7]))],
    )
    .unwrap();
    let command = CommandPreparedStatementQuery {
        prepared_statement_handle: query.clone(),
    };
    put(&mut c, command.clone(), Some(seven)).await.unwrap();
    let info = flight_info(&mut c, &command).await.unwrap();
    let batches = fetch(&mut c, info).await;
    assert_eq!(batches[0].schema().field(0).data_type(), &DataType::Int64);
    assert_eq!(common::rows(&batches), [["7"]]);
    let e = flight_info(&mut c, &command).await.unwrap_err();
    assert!(
        e.code() == tonic::Code::InvalidArgument && e.message().contains("none were bound"),
        "{e}"
    );

    // arrow-rs's client executes a prepared INSERT with GetFlightInfo and may fetch its
    // ticket: the fetch has no rows and the row is written once.
    let mut insert = c
        .prepare("INSERT INTO pt VALUES (?, ?)".into(), None)
        .await
        .unwrap();
    insert.set_parameters(key_values(&[(5, "e")])).unwrap();
    let info = insert.execute().await.unwrap();
    let fetched = fetch(&mut c, info).await;
    assert_eq!(fetched.iter().map(|b| b.num_rows()).sum::<usize>(), 0);
    let info = c
        .execute("SELECT count(*) FROM pt WHERE k = 5".into(), None)
        .await
        .unwrap();
    assert_eq!(common::rows(&fetch(&mut c, info).await), [["1"]]);

    // A query bound to three rows answers for each.
    let mut stmt = c.prepare("SELECT ? * 10 AS x".into(), None).await.unwrap();
    let three = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("0", DataType::Int64, true)])),
        vec![Arc::new(Int64Array::from(vec![1, 2, 3]))],
    )
    .unwrap();
    stmt.set_parameters(three).unwrap();
    let info = stmt.execute().await.unwrap();
    let batches = fetch(&mut c, info).await;
    assert_eq!(batches[0].schema().field(0).data_type(), &DataType::Int64);
    let mut got = common::rows(&batches);
    got.sort();
    assert_eq!(got, [["10"], ["20"], ["30"]]);
    server.stop().await;
}

/// CancelFlightInfo stops a running query; a CPU-heavy query runs apart from the gRPC runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_queries_and_heavy_queries_leave_the_server_responsive() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (server, mut c) = logged_in().await;
    // CancelFlightInfo stops a running query: a cross join of 3.6e9 rows ends at once.
    let info = c
        .execute(
            "SELECT a.l_orderkey, b.l_partkey FROM lineitem a CROSS JOIN lineitem b".into(),
            None,
        )
        .await
        .unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let mut stream = c.do_get(ticket).await.unwrap();
    let first = stream.try_next().await.unwrap().expect("a first batch");
    assert!(first.num_rows() > 0);
    assert_eq!(status(&mut c).await["running_queries"], 1);
    assert_eq!(
        cancel(&mut c, info).await,
        arrow_flight::CancelStatus::Cancelled as i32
    );
    let started = std::time::Instant::now();
    let mut rest = 0usize;
    while let Some(b) = stream.try_next().await.unwrap() {
        rest += b.num_rows();
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "cancelled stream took {:?}",
        started.elapsed()
    );
    assert!(rest < 3_000_000_000, "the query ran to the end");
    assert_eq!(status(&mut c).await["running_queries"], 0);

    // A CPU-heavy query runs apart from the gRPC runtime: others are still served, and a cancel
    // stops it.
    // About 180 M joined rows (several seconds on 2 cores), in batches, so its tasks yield.
    let heavy_sql = "SELECT count(*), max(a.l_comment || b.l_comment) FROM lineitem a JOIN lineitem b ON a.l_suppkey % 20 = b.l_suppkey % 20";
    let heavy = c.execute(heavy_sql.into(), None).await.unwrap();
    let heavy_ticket = heavy.endpoint[0].ticket.clone().unwrap();
    let mut heavy_client = c.clone();
    let heavy_task = tokio::spawn(async move {
        match heavy_client.do_get(heavy_ticket).await {
            Ok(s) => s.try_collect::<Vec<_>>().await.map(|_| ()),
            Err(e) => Err(e),
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    let mut other = client(server.addr).await;
    other.handshake("alice", "secret").await.unwrap();
    let info = other.execute("SELECT 1".into(), None).await.unwrap();
    assert_eq!(common::rows(&fetch(&mut other, info).await), [["1"]]);
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(3),
        "SELECT 1 waited {waited:?} behind a heavy query"
    );
    assert_eq!(status(&mut c).await["running_queries"], 1);
    assert_eq!(
        cancel(&mut c, heavy).await,
        arrow_flight::CancelStatus::Cancelled as i32
    );
    let _ = tokio::time::timeout(Duration::from_secs(10), heavy_task)
        .await
        .expect("cancelled query ended");
    assert_eq!(status(&mut c).await["running_queries"], 0);
    server.stop().await;
}

/// `SET` through a prepared statement (ADBC's only path) runs at execute; errors raised while
/// running are `InvalidArgument`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_runs_through_a_prepared_statement() {
    let (server, mut c) = logged_in().await;
    // Through a prepared statement (ADBC's only path), SET runs at execute, without a fetch;
    // errors raised while running are the statement's fault (InvalidArgument).
    let stmt = c
        .prepare("SET datafusion.execution.batch_size = 1234".into(), None)
        .await
        .unwrap();
    let mut stmt = stmt;
    let info = stmt.execute().await.unwrap();
    // A client that fetches the result anyway (ADBC's DB-API) gets no rows, not an error, and
    // the statement does not run again.
    let fetched = fetch(&mut c, info).await;
    assert_eq!(fetched.iter().map(|b| b.num_rows()).sum::<usize>(), 0);
    stmt.close().await.unwrap();
    let info = c
        .execute("SHOW datafusion.execution.batch_size".into(), None)
        .await
        .unwrap();
    let shown = format!("{:?}", common::rows(&fetch(&mut c, info).await));
    assert!(shown.contains("1234"), "{shown}");
    let e = failure(&mut c, "SELECT 1 / 0").await;
    assert!(
        has(&e, tonic::Code::InvalidArgument) && e.contains("Divide by zero"),
        "{e}"
    );
    // A SET whose value the setting does not take is bad input too, naming key and value.
    let e = failure(&mut c, "SET datafusion.execution.batch_size = 'abc'").await;
    assert!(
        has(&e, tonic::Code::InvalidArgument)
            && e.contains("invalid setting datafusion.execution.batch_size=abc"),
        "{e}"
    );
    server.stop().await;
}

/// The real clients (ADBC, flightsql-dbapi, JDBC: `tests/flight/run_clients.sh`), then the
/// prepared statement handles they leak (JDBC) expire after the TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adbc_dbapi_and_jdbc_clients_pass_their_suites() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (server, mut c) = logged_in().await;
    let script = common::repo_root().join("tests/flight/run_clients.sh");
    let out = tokio::process::Command::new("bash")
        .arg(script)
        .env("ICEFLIGHT_URI", format!("grpc://{}", server.addr))
        .env("ICEFLIGHT_USER", "alice")
        .env("ICEFLIGHT_PASSWORD", "secret")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "client suites failed:\n{stdout}");

    // Leaked prepared statement handles (JDBC) expire after the TTL (2 s here).
    tokio::time::sleep(Duration::from_secs(4)).await;
    let s = status(&mut c).await;
    assert_eq!(s["prepared_statements"], 0, "{s}");
    assert_eq!(s["running_queries"], 0, "{s}");
    server.stop().await;
}
