//! Operations through a running Flight SQL server: `system.runtime.queries` lists finished,
//! failed and running queries; Prometheus `/metrics` counts them and reads sessions and caches;
//! the gRPC health service answers SERVING.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use arrow_flight::sql::client::FlightSqlServiceClient;
use iceflight::config::Config;
use iceflight::session::Engine;
use tonic::transport::Channel;

use common::flight_run as run;

/// `GET path` over HTTP/1.1 on loopback `port`: status line and body.
fn get(port: u16, path: &str) -> (String, String) {
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    tcp.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// The value of the sample `line_start …` in a Prometheus text exposition.
fn sample(text: &str, line_start: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(line_start)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sample {line_start} in:\n{text}"))
}

/// A Flight SQL server of one test (users alice and bob, password `secret`, default schema
/// `ops`) with `/metrics` on a port of its own.
struct Server {
    _dir: tempfile::TempDir,
    addr: std::net::SocketAddr,
    metrics_port: u16,
}

impl Server {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut config = Config {
            data_dir: dir.path().to_path_buf(),
            default_schema: Some("ops".into()),
            ..Config::default()
        };
        config.server.metrics_listen = Some(format!("127.0.0.1:{metrics_port}"));
        let engine = Engine::connect(config).await.unwrap();
        let addr = common::serve_flight(engine, &["alice:secret", "bob:secret"]).await;
        Self {
            _dir: dir,
            addr,
            metrics_port,
        }
    }

    async fn alice(&self) -> FlightSqlServiceClient<Channel> {
        common::flight_client(self.addr, "alice", "secret").await
    }

    async fn bob(&self) -> FlightSqlServiceClient<Channel> {
        common::flight_client(self.addr, "bob", "secret").await
    }
}

const VALUES: &str = "SELECT * FROM (VALUES (1), (2), (3)) AS t(x)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queries_table_lists_finished_failed_and_running_queries() {
    let server = Server::start().await;
    let mut alice = server.alice().await;
    let rows = run(&mut alice, VALUES).await.unwrap();
    assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 3);
    let e = run(&mut alice, "SELECT nope").await.unwrap_err();
    assert!(e.contains("nope"), "{e}");
    // The finished query with its rows, the failed one with its error, and the query reading
    // the table itself, running.
    let listed = run(
        &mut alice,
        "SELECT state, \"user\", query, rows, error FROM system.runtime.queries ORDER BY created",
    )
    .await
    .unwrap();
    let text = common::rows(&listed);
    assert_eq!(text[0], ["FINISHED", "alice", VALUES, "3", "NULL"]);
    assert_eq!(text[1][0], "FAILED");
    assert!(text[1][4].starts_with("InvalidArgument: "), "{:?}", text[1]);
    assert!(text[1][4].contains("nope"), "{:?}", text[1]);
    assert_eq!(text[2][0], "RUNNING");
    assert!(
        text[2][2].contains("system.runtime.queries"),
        "{:?}",
        text[2]
    );
    assert_eq!(text.len(), 3, "{text:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_table_shows_a_session_s_catalog_and_schema_but_not_its_token() {
    let server = Server::start().await;
    let mut alice = server.alice().await;
    let sessions = run(
        &mut alice,
        "SELECT \"user\", catalog, schema, prepared_statements, length(session_id) \
         FROM system.runtime.sessions",
    )
    .await
    .unwrap();
    assert_eq!(
        common::rows(&sessions),
        [["alice", "local", "ops", "0", "32"]]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_sees_only_their_own_queries_and_sessions() {
    let server = Server::start().await;
    let mut alice = server.alice().await;
    run(&mut alice, VALUES).await.unwrap();
    let mut bob = server.bob().await;
    let seen = run(
        &mut bob,
        "SELECT (SELECT count(*) FROM system.runtime.queries WHERE \"user\" <> 'bob') AS q, \
         (SELECT count(*) FROM system.runtime.sessions WHERE \"user\" <> 'bob') AS o, \
         (SELECT count(*) FROM system.runtime.sessions) AS s",
    )
    .await
    .unwrap();
    assert_eq!(common::rows(&seen), [["0", "0", "1"]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_queries_rows_sessions_and_refused_logins() {
    let server = Server::start().await;
    let mut alice = server.alice().await;
    run(&mut alice, VALUES).await.unwrap();
    run(&mut alice, "SELECT nope").await.unwrap_err();
    let mut bob = server.bob().await;
    run(&mut bob, "SELECT 1").await.unwrap();
    let channel = common::channel(server.addr).await;
    assert!(
        FlightSqlServiceClient::new(channel)
            .handshake("alice", "wrong")
            .await
            .is_err()
    );
    let (status, body) = get(server.metrics_port, "/metrics");
    assert!(status.contains("200"), "{status}");
    assert_eq!(
        sample(&body, "iceflight_queries_total{state=\"FINISHED\"}"),
        2.0
    );
    assert_eq!(
        sample(&body, "iceflight_queries_total{state=\"FAILED\"}"),
        1.0
    );
    assert_eq!(sample(&body, "iceflight_query_duration_seconds_count"), 3.0);
    assert_eq!(sample(&body, "iceflight_result_rows_total"), 4.0, "{body}");
    assert_eq!(sample(&body, "iceflight_sessions_active"), 2.0);
    assert_eq!(sample(&body, "iceflight_queries_running"), 0.0);
    assert_eq!(sample(&body, "iceflight_login_failures_total"), 1.0);
    assert!(
        body.contains("iceflight_cache_hits_total{cache=\"footer\"}"),
        "{body}"
    );
    // The workload record's per-table families (no Iceberg table was scanned here: no sample),
    // and the REST catalogs' credential counts (none configured here; `rest.rs` counts them).
    for family in [
        "table_scans",
        "table_files_pruned",
        "table_files_read",
        "table_read_bytes",
        "catalog_tokens_fetched",
        "storage_credentials_renewed",
    ] {
        assert!(
            body.contains(&format!("# TYPE iceflight_{family} counter")),
            "{body}"
        );
    }
    let (status, _) = get(server.metrics_port, "/other");
    assert!(status.contains("404"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_health_answers_serving() {
    let server = Server::start().await;
    let channel = common::channel(server.addr).await;
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let answer = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "arrow.flight.protocol.FlightService".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        answer.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
}
