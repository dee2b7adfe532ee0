//! Login and sessions through the real Flight SQL handshake: throttling
//! (`server/src/flight/login_throttle.rs`: after `max_failed_logins` wrong passwords a user name
//! is refused, even with the right password, until the lockout ends; other users are let in
//! meanwhile), and tokens and handles that work in their own session only, are revoked by
//! `CloseSession` and expire when idle (`server/src/flight/sessions.rs`).

mod common;

use std::time::Duration;

use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::sql::{
    ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult, Any,
    CommandPreparedStatementQuery, CommandStatementQuery, ProstMessageExt,
};
use arrow_flight::{Action, FlightData, FlightDescriptor};
use futures::TryStreamExt;
use iceflight::config::Config;
use iceflight::session::Engine;
use prost::Message;
use tonic::Code;
use tonic::transport::Channel;

/// A handshake; the error's text (arrow-flight's client folds the status into it) on failure.
async fn login(addr: std::net::SocketAddr, user: &str, password: &str) -> Result<(), String> {
    let channel = common::channel(addr).await;
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
    config.server.login_lockout = Duration::from_secs(2);
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

/// A Flight client without arrow-flight's Flight SQL wrapper: each call carries the token given.
async fn raw(addr: std::net::SocketAddr) -> FlightServiceClient<Channel> {
    let channel = common::channel(addr).await;
    FlightServiceClient::new(channel)
}

/// A logged-in session's token.
async fn token(addr: std::net::SocketAddr) -> String {
    let client = common::flight_client(addr, "alice", "secret").await;
    client.token().unwrap().clone()
}

fn descriptor(command: impl ProstMessageExt) -> FlightDescriptor {
    FlightDescriptor::new_cmd(command.as_any().encode_to_vec())
}

/// A token or handle works in its own session only: another session of the same user cannot
/// run a prepared statement or a statement ticket it did not create; `CloseSession` revokes the
/// token at once; an idle session's token expires after `session_ttl`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_handles_belong_to_one_session() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config {
        data_dir: dir.path().to_path_buf(),
        ..Config::default()
    };
    config.server.session_ttl = Duration::from_secs(2);
    let engine = Engine::connect(config).await.unwrap();
    let addr = common::serve_flight(engine, &["alice:secret"]).await;
    let (first, second) = (token(addr).await, token(addr).await);
    assert_ne!(first, second);
    let mut flight = raw(addr).await;

    // A prepared statement of the first session.
    let create = ActionCreatePreparedStatementRequest {
        query: "SELECT 42".into(),
        transaction_id: None,
    };
    let mut results = flight
        .do_action(common::with_token(
            Action::new("CreatePreparedStatement", create.as_any().encode_to_vec()),
            &first,
        ))
        .await
        .unwrap()
        .into_inner();
    let body = results.try_next().await.unwrap().unwrap().body;
    let created: ActionCreatePreparedStatementResult =
        Any::decode(body).unwrap().unpack().unwrap().unwrap();
    let prepared = descriptor(CommandPreparedStatementQuery {
        prepared_statement_handle: created.prepared_statement_handle,
    });
    flight
        .get_flight_info(common::with_token(prepared.clone(), &first))
        .await
        .expect("the owner runs its prepared statement");
    let refused = flight
        .get_flight_info(common::with_token(prepared, &second))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::NotFound, "{refused}");

    // A statement ticket of the first session.
    let statement = descriptor(CommandStatementQuery {
        query: "SELECT 7".into(),
        transaction_id: None,
    });
    let info = flight
        .get_flight_info(common::with_token(statement, &first))
        .await
        .unwrap()
        .into_inner();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let refused = flight
        .do_get(common::with_token(ticket.clone(), &second))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::NotFound, "{refused}");
    let batches: Vec<FlightData> = flight
        .do_get(common::with_token(ticket, &first))
        .await
        .expect("the owner runs its ticket")
        .into_inner()
        .try_collect()
        .await
        .unwrap();
    assert!(!batches.is_empty());

    // CloseSession revokes the first token at once; the second session is untouched.
    flight
        .do_action(common::with_token(Action::new("CloseSession", ""), &first))
        .await
        .unwrap();
    let select = || {
        descriptor(CommandStatementQuery {
            query: "SELECT 1".into(),
            transaction_id: None,
        })
    };
    let refused = flight
        .get_flight_info(common::with_token(select(), &first))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused}");
    flight
        .get_flight_info(common::with_token(select(), &second))
        .await
        .expect("the other session lives on");

    // Idle past session_ttl (2 s; the sweeper runs every second): the token expires.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let refused = flight
        .get_flight_info(common::with_token(select(), &second))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused}");
}
