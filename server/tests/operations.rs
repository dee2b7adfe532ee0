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

async fn client(addr: std::net::SocketAddr) -> FlightSqlServiceClient<Channel> {
    common::flight_client(addr, "alice", "secret").await
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_table_metrics_and_health() {
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
    let users = ["alice:secret", "bob:secret"];
    let engine = Engine::connect(config).await.unwrap();
    let addr = common::serve_flight(engine, &users).await;
    let mut alice = client(addr).await;

    let rows = run(&mut alice, "SELECT * FROM (VALUES (1), (2), (3)) AS t(x)")
        .await
        .unwrap();
    assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 3);
    let e = run(&mut alice, "SELECT nope").await.unwrap_err();
    assert!(e.contains("nope"), "{e}");

    // The history: the finished query with its rows, the failed one with its error, and the
    // query reading the table itself, running.
    let listed = run(
        &mut alice,
        "SELECT state, \"user\", query, rows, error FROM system.runtime.queries ORDER BY created",
    )
    .await
    .unwrap();
    let text = common::rows(&listed);
    assert_eq!(
        text[0],
        [
            "FINISHED",
            "alice",
            "SELECT * FROM (VALUES (1), (2), (3)) AS t(x)",
            "3",
            "NULL"
        ]
    );
    assert_eq!(text[1][0], "FAILED");
    assert!(text[1][4].starts_with("InvalidArgument: "), "{:?}", text[1]);
    assert!(text[1][4].contains("nope"), "{:?}", text[1]);
    assert_eq!(text[2][0], "RUNNING");
    assert!(
        text[2][2].contains("system.runtime.queries"),
        "{:?}",
        text[2]
    );

    // Sessions: alice's, with its current catalog and schema (not its token).
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

    // bob sees only his own queries and session.
    let mut bob = common::flight_client(addr, "bob", "secret").await;
    let seen = run(
        &mut bob,
        "SELECT (SELECT count(*) FROM system.runtime.queries WHERE \"user\" <> 'bob') AS q, \
         (SELECT count(*) FROM system.runtime.sessions WHERE \"user\" <> 'bob') AS o, \
         (SELECT count(*) FROM system.runtime.sessions) AS s",
    )
    .await
    .unwrap();
    assert_eq!(common::rows(&seen), [["0", "0", "1"]]);

    // A refused login, counted.
    let channel = common::channel(addr).await;
    assert!(
        FlightSqlServiceClient::new(channel)
            .handshake("alice", "wrong")
            .await
            .is_err()
    );

    // Prometheus.
    let (status, body) = get(metrics_port, "/metrics");
    assert!(status.contains("200"), "{status}");
    // The values query, the queries and sessions tables, bob's query.
    assert_eq!(
        sample(&body, "iceflight_queries_total{state=\"FINISHED\"}"),
        4.0
    );
    assert_eq!(
        sample(&body, "iceflight_queries_total{state=\"FAILED\"}"),
        1.0
    );
    assert_eq!(sample(&body, "iceflight_query_duration_seconds_count"), 5.0);
    assert!(
        sample(&body, "iceflight_result_rows_total") >= 6.0,
        "{body}"
    );
    assert_eq!(sample(&body, "iceflight_sessions_active"), 2.0);
    assert_eq!(sample(&body, "iceflight_queries_running"), 0.0);
    assert_eq!(sample(&body, "iceflight_login_failures_total"), 1.0);
    assert!(
        body.contains("iceflight_cache_hits_total{cache=\"footer\"}"),
        "{body}"
    );
    let (status, _) = get(metrics_port, "/other");
    assert!(status.contains("404"), "{status}");

    // gRPC health.
    let channel = common::channel(addr).await;
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
