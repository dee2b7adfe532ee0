//! Faults under a running Flight SQL server: a data file deleted under a table, a data file
//! whose Parquet footer is corrupted, a client that disconnects mid-stream. Each query fails
//! (or ends) with a precise status naming the file, the server keeps serving, and afterwards no
//! query is registered as running.

mod common;

use std::time::Duration;

use arrow_flight::sql::client::FlightSqlServiceClient;
use futures::StreamExt;
use iceflight::config::Config;
use iceflight::session::Engine;
use tonic::transport::Channel;

async fn client(addr: std::net::SocketAddr) -> FlightSqlServiceClient<Channel> {
    common::flight_client(addr, "alice", "secret").await
}

use common::flight_run as run;

/// The data files of table `t` (`$files`).
async fn files(client: &mut FlightSqlServiceClient<Channel>, table: &str) -> Vec<String> {
    let batches = run(
        client,
        &format!("SELECT file_path FROM \"{table}$files\" ORDER BY 1"),
    )
    .await
    .unwrap();
    common::rows(&batches)
        .into_iter()
        .map(|r| r[0].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_files_and_a_vanished_client_leave_the_server_serving() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        default_schema: Some("f".into()),
        ..Config::default()
    };
    let engine = Engine::connect(config).await.unwrap();
    let addr = common::serve_flight(engine, &["alice:secret"]).await;
    let mut alice = client(addr).await;
    for sql in [
        "CREATE SCHEMA local.f",
        "CREATE TABLE gone (id BIGINT, s VARCHAR)",
        "INSERT INTO gone SELECT value, 'row ' || value FROM generate_series(1, 1000)",
        "CREATE TABLE torn (id BIGINT, s VARCHAR)",
        "INSERT INTO torn SELECT value, 'row ' || value FROM generate_series(1, 1000)",
        "CREATE TABLE big (id BIGINT, s VARCHAR)",
        "INSERT INTO big SELECT value, repeat('x', 100) FROM generate_series(1, 300000)",
    ] {
        run(&mut alice, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    // A data file deleted under the table.
    let gone = files(&mut alice, "gone").await;
    std::fs::remove_file(gone[0].trim_start_matches("file://")).unwrap();
    let e = run(&mut alice, "SELECT count(*), max(s) FROM gone")
        .await
        .unwrap_err();
    let name = gone[0].rsplit('/').next().unwrap();
    assert!(e.contains(name), "{e}");
    assert!(!e.contains('\n'), "{e}");

    // A data file whose footer is corrupted.
    let torn = files(&mut alice, "torn").await;
    let path = torn[0].trim_start_matches("file://");
    let mut bytes = std::fs::read(path).unwrap();
    let n = bytes.len();
    bytes[n - 8..n - 4].copy_from_slice(&[0xff, 0xff, 0xff, 0x7f]);
    std::fs::write(path, bytes).unwrap();
    let e = run(&mut alice, "SELECT count(*), max(s) FROM torn")
        .await
        .unwrap_err();
    let name = torn[0].rsplit('/').next().unwrap();
    assert!(e.contains(name), "{e}");
    assert!(!e.contains('\n'), "{e}");

    // A client that reads one batch of a large result and goes away.
    {
        let mut leaver = client(addr).await;
        let info = leaver
            .execute("SELECT * FROM big".to_string(), None)
            .await
            .unwrap();
        let ticket = info.endpoint[0].ticket.clone().unwrap();
        let mut stream = leaver.do_get(ticket).await.unwrap();
        assert!(stream.next().await.unwrap().is_ok());
        assert_eq!(common::running_queries(&mut alice).await, 1);
    }
    let mut left = false;
    for _ in 0..50 {
        if common::running_queries(&mut alice).await == 0 {
            left = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(left, "the abandoned query is still registered as running");
    let states = run(
        &mut alice,
        "SELECT state FROM system.runtime.queries WHERE query = 'SELECT * FROM big'",
    )
    .await
    .unwrap();
    assert_eq!(common::rows(&states), [["CANCELLED"]]);

    // Still serving.
    let counted = run(&mut alice, "SELECT count(*) FROM big").await.unwrap();
    assert_eq!(common::rows(&counted), [["300000"]]);
}
