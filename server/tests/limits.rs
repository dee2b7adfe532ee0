//! Limits of queries, through the Flight SQL service and the engine:
//! - `query.memory_limit` with spill: a sort, an aggregate and a sort-merge join larger than the
//!   pool finish with the rows an unlimited engine gives, and say they spilled;
//! - `query.timeout`: a long query is stopped with `DeadlineExceeded`, the server keeps serving
//!   and nothing stays registered as running; a session's `SET iceflight.query.timeout` stops
//!   its queries sooner, never later;
//! - `query.max_result_bytes`: a large result ends in `ResourceExhausted`, a small one passes,
//!   counted as sent (a one-row answer counts its row, not the batch it came from);
//! - `server.max_queries_per_user`: a user's second query waits, then fails, while another
//!   user's runs.

mod common;

use std::sync::Arc;
use std::time::Duration;

use arrow_flight::sql::client::FlightSqlServiceClient;
use iceflight::config::Config;
use iceflight::session::Engine;
use tonic::transport::Channel;

/// An engine on TPC-H SF 0.01 (namespace `tpch`) in `dir`, configured by `tune`.
async fn engine(dir: &std::path::Path, tune: impl FnOnce(&mut Config)) -> Engine {
    let mut config = Config {
        data_dir: dir.to_path_buf(),
        default_schema: Some("tpch".into()),
        ..Config::default()
    };
    config.query.target_partitions = 2;
    tune(&mut config);
    let engine = Engine::connect(config).await.unwrap();
    if engine.catalogs().get("local").is_ok() {
        let listed = common::statement_rows(
            &engine.session(None, None, &[]).unwrap(),
            "SELECT 1 FROM information_schema.tables WHERE table_name = 'lineitem'",
        )
        .await
        .unwrap_or_default();
        if listed.is_empty() {
            common::load_tpch_local(&engine, 0.01).await;
        }
    }
    engine
}

/// The spill files written by every operator of `plan`.
fn spills(plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>) -> usize {
    let own = plan.metrics().and_then(|m| m.spill_count()).unwrap_or(0);
    own + plan.children().iter().map(|c| spills(c)).sum::<usize>()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_larger_than_the_pool_spill_and_finish() {
    let dir = tempfile::tempdir().unwrap();
    let free = engine(dir.path(), |_| {}).await;
    let spill = tempfile::tempdir().unwrap();
    let spill_dir = spill.path().to_path_buf();
    let bounded = engine(dir.path(), |c| {
        c.query.memory_limit = Some("2MiB".parse().unwrap());
        c.query.target_partitions = 1;
        c.query.spill_dir = Some(spill_dir);
    })
    .await;
    let free = free.session(None, None, &[]).unwrap();
    let bounded = bounded
        .session(
            None,
            None,
            &[(
                "datafusion.optimizer.prefer_hash_join".into(),
                "false".into(),
            )],
        )
        .unwrap();
    // DataFusion holds 10 MB back per sort for merging its spill files by default, more than
    // this whole pool.
    common::statement_ok(
        &bounded,
        "SET datafusion.execution.sort_spill_reservation_bytes = 65536",
    )
    .await;
    // Small batches: merging the spill files holds one batch of each.
    common::statement_ok(&bounded, "SET datafusion.execution.batch_size = 1024").await;
    for sql in [
        "SELECT * FROM lineitem ORDER BY l_comment, l_orderkey, l_linenumber",
        "SELECT l_orderkey, l_partkey, count(*), sum(l_quantity) FROM lineitem GROUP BY 1, 2 ORDER BY 1, 2",
        "SELECT o_orderkey, o_comment, l_linenumber, l_comment FROM orders JOIN lineitem ON o_orderkey = l_orderkey ORDER BY 1, 3",
    ] {
        let want = common::execute(&free, sql).await.unwrap();
        let got = common::execute(&bounded, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(
            common::rows(&got.batches),
            common::rows(&want.batches),
            "{sql}"
        );
        assert!(
            spills(&got.plan) > 0,
            "{sql} did not spill under the 2 MiB pool"
        );
    }
}

/// A Flight SQL server on `engine` with users alice, bob and carol; its address.
async fn serve(engine: Engine) -> std::net::SocketAddr {
    common::serve_flight(engine, &["alice:secret", "bob:secret", "carol:secret"]).await
}

async fn client(addr: std::net::SocketAddr, user: &str) -> FlightSqlServiceClient<Channel> {
    common::flight_client(addr, user, "secret").await
}

/// Runs `sql` to its end: the row count, or the error's text.
async fn run(client: &mut FlightSqlServiceClient<Channel>, sql: &str) -> Result<usize, String> {
    let batches = common::flight_run(client, sql).await?;
    Ok(batches.iter().map(|b| b.num_rows()).sum())
}

/// A query that runs for hours, a batch at a time.
const ENDLESS: &str = "SELECT sum(value) FROM generate_series(1, 1000000000000)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_result_cap_and_per_user_slots() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), |c| {
        c.query.timeout = Some(std::time::Duration::from_secs(3));
        c.query.max_result_bytes = Some("1MiB".parse().unwrap());
        c.server.max_queries_per_user = 1;
        c.server.queue_timeout = std::time::Duration::from_secs(1);
    })
    .await;
    let addr = serve(engine).await;
    let mut alice = client(addr, "alice").await;

    let started = std::time::Instant::now();
    let e = run(&mut alice, ENDLESS).await.unwrap_err();
    assert!(
        e.contains("query exceeded query.timeout of 3s; it was stopped"),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(run(&mut alice, "SELECT 1").await, Ok(1));

    // A session's own timeout, shorter than the server's; a bad one is one line.
    let mut carol = client(addr, "carol").await;
    carol
        .execute_update("SET iceflight.query.timeout = '1s'".to_string(), None)
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let e = run(&mut carol, ENDLESS).await.unwrap_err();
    assert!(e.contains("query exceeded query.timeout of 1s"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let e = match carol
        .execute_update("SET iceflight.query.timeout = 'soon'".to_string(), None)
        .await
        .unwrap_err()
    {
        arrow_flight::error::FlightError::Tonic(status) => *status,
        other => panic!("{other}"),
    };
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");
    assert!(
        e.message()
            .contains("iceflight.query.timeout must be a duration such as 30s or 5m, or none"),
        "{e}"
    );
    assert!(!e.message().contains('\n'), "{e}");
    // Longer than the server's: the server's holds.
    carol
        .execute_update("SET iceflight.query.timeout = '1h'".to_string(), None)
        .await
        .unwrap();
    let e = run(&mut carol, ENDLESS).await.unwrap_err();
    assert!(e.contains("query exceeded query.timeout of 3s"), "{e}");

    let e = run(&mut alice, "SELECT * FROM lineitem").await.unwrap_err();
    assert!(
        e.contains("query result exceeded query.max_result_bytes of 1048576 bytes"),
        "{e}"
    );
    assert_eq!(run(&mut alice, "SELECT * FROM nation").await, Ok(25));

    // alice's open stream holds her only slot: her next query waits out the queue timeout;
    // bob's runs.
    let info = alice.execute(ENDLESS.to_string(), None).await.unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let held = alice.do_get(ticket).await;
    let mut alice2 = client(addr, "alice").await;
    let e = run(&mut alice2, "SELECT 1").await.unwrap_err();
    assert!(
        e.contains("too many concurrent queries of user alice (max 1)"),
        "{e}"
    );
    let mut bob = client(addr, "bob").await;
    assert_eq!(run(&mut bob, "SELECT 1").await, Ok(1));
    drop(held);
    // The refused query is listed, failed, with the reason (to alice: her own queries).
    let refused = common::flight_run(
        &mut alice2,
        "SELECT count(*) FROM system.runtime.queries WHERE state = 'FAILED' \
         AND error LIKE 'ResourceExhausted: too many concurrent queries of user alice%'",
    )
    .await
    .unwrap();
    assert_eq!(common::rows(&refused), [["1"]]);
}

/// A one-row answer counts the bytes sent for it, not the Arrow buffers its row shares with the
/// batch it was filtered from (196 800 bytes were counted once): it passes a 100 KB
/// `max_result_bytes`, and `system.runtime.queries` lists its own size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_row_answer_counts_its_own_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), |c| {
        c.query.max_result_bytes = Some("100KB".parse().unwrap());
    })
    .await;
    let addr = serve(engine).await;
    let mut alice = client(addr, "alice").await;
    let lookup = "SELECT o_orderkey, o_totalprice FROM orders WHERE o_orderkey = 7";
    assert_eq!(run(&mut alice, lookup).await, Ok(1));
    assert_eq!(
        run(&mut alice, "SELECT o_orderkey FROM orders LIMIT 1").await,
        Ok(1)
    );
    let sizes = common::flight_run(
        &mut alice,
        "SELECT query, bytes FROM system.runtime.queries WHERE state = 'FINISHED' \
         AND (query LIKE '%o_orderkey = 7' OR query LIKE '%LIMIT 1') ORDER BY query",
    )
    .await
    .unwrap();
    let sizes = common::rows(&sizes);
    assert_eq!(sizes.len(), 2, "{sizes:?}");
    for row in &sizes {
        let bytes: u64 = row[1].parse().unwrap();
        assert!((1..=1024).contains(&bytes), "{row:?}");
    }
    // A result past the cap still ends in ResourceExhausted.
    let e = run(&mut alice, "SELECT * FROM orders").await.unwrap_err();
    assert!(
        e.contains("query result exceeded query.max_result_bytes of 100000 bytes"),
        "{e}"
    );
}

/// A client that opens a large result and stops reading loses it after
/// `stream_idle_timeout`: the only query slot is free again for the next query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_nobody_reads_frees_its_slot() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), |c| {
        c.server.max_concurrent_queries = 1;
        c.server.queue_timeout = std::time::Duration::from_secs(10);
        c.server.stream_idle_timeout = std::time::Duration::from_secs(1);
    })
    .await;
    let addr = serve(engine).await;
    let mut alice = client(addr, "alice").await;
    let info = alice
        .execute("SELECT * FROM lineitem".to_string(), None)
        .await
        .unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    // Opened, never read.
    let _unread = alice.do_get(ticket).await.unwrap();
    let mut bob = client(addr, "bob").await;
    let started = std::time::Instant::now();
    assert_eq!(run(&mut bob, "SELECT 1").await, Ok(1));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(500) && waited < Duration::from_secs(9),
        "bob waited {waited:?}"
    );
}

/// The status `sql` fails with, planned or run.
async fn refused(client: &mut FlightSqlServiceClient<Channel>, sql: &str) -> tonic::Status {
    use futures::TryStreamExt;
    let status = |e: arrow_flight::error::FlightError| match e {
        arrow_flight::error::FlightError::Tonic(status) => *status,
        other => panic!("{other}"),
    };
    let info = match client.execute(sql.to_string(), None).await {
        Ok(info) => info,
        Err(e) => return status(e),
    };
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let stream = match client.do_get(ticket).await {
        Ok(stream) => stream,
        Err(e) => return status(e),
    };
    match stream.try_collect::<Vec<_>>().await {
        Ok(_) => panic!("{sql} succeeded"),
        Err(e) => status(e),
    }
}

/// Query control: an admin (`server.admins`) sees every user's queries, a user only their
/// own; a query waiting for its user's slot is `QUEUED`; `kill_query` by the owner or an
/// admin ends a running or a queued query with `Cancelled` naming who killed it, and the
/// query is listed as failed with that reason; another user's kill is `PermissionDenied`, an
/// unknown id `NotFound`, each one line; `server.max_sessions` refuses a login beyond it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_queued_state_admins_and_max_sessions() {
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), |c| {
        c.server.max_queries_per_user = 1;
        c.server.queue_timeout = Duration::from_secs(60);
        c.server.admins = vec!["alice".into()];
        c.server.max_sessions = 4;
    })
    .await;
    let addr = serve(engine).await;
    let mut alice = client(addr, "alice").await;
    let mut bob = client(addr, "bob").await;
    let mut carol = client(addr, "carol").await;

    // bob's endless query runs; his second waits for his only slot.
    let info = bob.execute(ENDLESS.to_string(), None).await.unwrap();
    let mut running = bob
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    let mut bob2 = client(addr, "bob").await;
    let queued = tokio::spawn(async move { run(&mut bob2, "SELECT 42").await });
    let list = "SELECT query_id, \"user\", state, query FROM system.runtime.queries \
                WHERE state IN ('RUNNING', 'QUEUED') AND \"user\" = 'bob' ORDER BY state";
    let mut seen = vec![];
    for _ in 0..100 {
        seen = common::rows(&common::flight_run(&mut alice, list).await.unwrap());
        if seen.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        (seen[0][2].as_str(), seen[0][3].as_str()),
        ("QUEUED", "SELECT 42")
    );
    assert_eq!(
        (seen[1][2].as_str(), seen[1][3].as_str()),
        ("RUNNING", ENDLESS)
    );
    let (queued_id, running_id) = (seen[0][0].clone(), seen[1][0].clone());
    // carol sees none of bob's queries, and may not kill them.
    let theirs = common::flight_run(&mut carol, list).await.unwrap();
    assert!(common::rows(&theirs).is_empty());
    let kill = |id: &str| format!("CALL system.runtime.kill_query(query_id => '{id}')");
    let e = refused(&mut carol, &kill(&running_id)).await;
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
    assert!(e.message().contains("only its owner or an admin"), "{e}");
    assert!(!e.message().contains('\n'), "{e}");
    let e = refused(&mut alice, &kill("nope")).await;
    assert_eq!(e.code(), tonic::Code::NotFound, "{e}");
    assert!(
        e.message().contains("no running or queued query nope"),
        "{e}"
    );

    // alice (admin) kills the queued one, bob his own running one.
    let killed = common::flight_run(&mut alice, &kill(&queued_id))
        .await
        .unwrap();
    assert_eq!(common::rows(&killed), [[queued_id.as_str(), "KILLED"]]);
    let e = queued.await.unwrap().unwrap_err();
    assert!(
        e.contains(&format!("query {queued_id} was killed by alice")),
        "{e}"
    );
    common::flight_run(
        &mut bob,
        &format!("CALL system.runtime.kill_query('{running_id}', 'too long')"),
    )
    .await
    .unwrap();
    let mut ended = None;
    while let Some(item) = running.next().await {
        if let Err(e) = item {
            ended = Some(e.to_string());
            break;
        }
    }
    let ended = ended.expect("the killed query's stream ends with an error");
    assert!(
        ended.contains(&format!("query {running_id} was killed by bob: too long")),
        "{ended}"
    );
    let failed = common::flight_run(
        &mut alice,
        "SELECT count(*) FROM system.runtime.queries WHERE \"user\" = 'bob' AND state = 'FAILED' \
         AND error LIKE 'Cancelled: query % was killed by %'",
    )
    .await
    .unwrap();
    assert_eq!(common::rows(&failed), [["2"]]);

    // Live: alice, bob, carol; bob's second closed its connection: parked. A fourth login is
    // let in (the parked session makes room), a fifth refused.
    let _fourth = client(addr, "carol").await;
    let mut fifth =
        arrow_flight::sql::client::FlightSqlServiceClient::new(common::channel(addr).await);
    let e = fifth.handshake("carol", "secret").await.unwrap_err();
    assert!(
        e.to_string()
            .contains("too many sessions (server.max_sessions = 4)"),
        "{e}"
    );
}
