//! Login throttling through the real Flight SQL handshake (`server/src/flight/login_throttle.rs`):
//! after `max_failed_logins` wrong passwords a user name is refused, even with the right
//! password, until the lockout ends; other users are let in meanwhile.

mod common;

use std::time::Duration;

use arrow_flight::sql::client::FlightSqlServiceClient;
use iceflight::config::Config;
use iceflight::session::Engine;
use tonic::transport::Channel;

/// A handshake; the error's text (arrow-flight's client folds the status into it) on failure.
async fn login(addr: std::net::SocketAddr, user: &str, password: &str) -> Result<(), String> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = FlightSqlServiceClient::new(channel);
    client
        .handshake(user, password)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_lock_the_user_name_for_the_lockout() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config {
        data_dir: dir.path().to_path_buf(),
        ..Config::default()
    };
    config.server.max_failed_logins = 3;
    config.server.login_lockout_secs = 2;
    let engine = Engine::connect(config).await.unwrap();
    let addr = common::serve_flight(engine, &["alice:secret", "bob:hunter2"]).await;

    for _ in 0..3 {
        let e = login(addr, "alice", "guess").await.unwrap_err();
        assert!(e.contains("valid authentication credentials"), "{e}");
        assert!(e.contains("\"invalid user name or password\""), "{e}");
    }
    let locked = login(addr, "alice", "secret").await.unwrap_err();
    assert!(
        locked.contains("valid authentication credentials"),
        "{locked}"
    );
    assert!(
        locked.contains("\"too many failed logins for user alice; retry in"),
        "{locked}"
    );
    // Another user from the same address is let in (3 failures are below the peer's 12).
    login(addr, "bob", "hunter2").await.unwrap();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    login(addr, "alice", "secret").await.unwrap();
    // Success forgot the failures: two more wrong passwords do not lock.
    for _ in 0..2 {
        assert!(login(addr, "alice", "guess").await.is_err());
    }
    login(addr, "alice", "secret").await.unwrap();
}
