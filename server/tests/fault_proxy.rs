//! Faults between iceflight and its lake: a TCP proxy in this test sits between iceflight and
//! SeaweedFS (`weed mini`: Iceberg REST catalog and S3), and delays, resets or black-holes
//! their connections while queries run over Flight SQL. Each query either answers right
//! (delays) or fails with one precise line (resets, black holes); the server keeps serving; no
//! query is left running and the memory pool is back to empty.
//!
//! ```text
//!   Flight SQL client ──► iceflight ──► proxy ──► weed REST catalog
//!                                   └─► proxy ──► weed S3 (metadata, manifests, data files)
//! ```

mod common;
mod weed;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use arrow_flight::FlightDescriptor;
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::sql::{CommandStatementQuery, ProstMessageExt};
use futures::TryStreamExt;
use iceflight::config::Config;
use iceflight::session::Engine;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::Channel;
use tonic::{Code, Status};
use weed::{KEY, SECRET, Weed, lake};

/// What the proxy does to the bytes coming back from upstream.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// Relays everything.
    Pass,
    /// Holds every chunk this long before relaying it.
    Delay(Duration),
    /// Resets a connection (RST) once it has relayed this many response bytes since the fault
    /// was set (roughly: bytes still in the send buffer at the reset are lost too).
    ResetAfter(usize),
    /// Relays nothing more, in either direction, and keeps the connection open.
    BlackHole,
}

/// A TCP proxy to one upstream address; the fault in force is read at every chunk, so it
/// hits connections already open (pooled keep-alive connections included).
struct Proxy {
    addr: SocketAddr,
    fault: Mutex<Fault>,
    connections: AtomicUsize,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Arc<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = Arc::new(Self {
            addr: listener.local_addr().unwrap(),
            fault: Mutex::new(Fault::Pass),
            connections: AtomicUsize::new(0),
        });
        let p = Arc::clone(&proxy);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                p.connections.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(Arc::clone(&p).relay(client, upstream));
            }
        });
        proxy
    }

    fn set(&self, fault: Fault) {
        *self.fault.lock().unwrap() = fault;
    }

    fn fault(&self) -> Fault {
        *self.fault.lock().unwrap()
    }

    fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Relays one connection in both directions until either side closes or a fault ends it.
    async fn relay(self: Arc<Self>, mut client: TcpStream, upstream: SocketAddr) {
        let Ok(mut server) = TcpStream::connect(upstream).await else {
            return;
        };
        let (mut up, mut down) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
        // Response bytes relayed since the fault in force last changed: a reset counts from
        // when it was set, also on a pooled connection that relayed much before.
        let (mut relayed, mut counting) = (0usize, Fault::Pass);
        loop {
            tokio::select! {
                read = client.read(&mut up) => {
                    let n = match read {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    if self.fault() == Fault::BlackHole {
                        break;
                    }
                    if server.write_all(&up[..n]).await.is_err() {
                        return;
                    }
                }
                read = server.read(&mut down) => {
                    let n = match read {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    let fault = self.fault();
                    if fault != counting {
                        (relayed, counting) = (0, fault);
                    }
                    match fault {
                        Fault::Pass => {}
                        Fault::Delay(d) => tokio::time::sleep(d).await,
                        Fault::ResetAfter(limit) if relayed + n > limit => {
                            let keep = limit.saturating_sub(relayed);
                            let _ = client.write_all(&down[..keep]).await;
                            // SO_LINGER 0: closing sends RST, not FIN.
                            let _ = client.set_zero_linger();
                            return;
                        }
                        Fault::ResetAfter(_) => {}
                        Fault::BlackHole => break,
                    }
                    if client.write_all(&down[..n]).await.is_err() {
                        return;
                    }
                    relayed += n;
                }
            }
        }
        // A black hole: both sockets stay open and nothing more moves, until the test ends.
        std::future::pending::<()>().await;
        drop((client, server));
    }
}

const QUERY: &str = "SELECT sum(id), max(payload) FROM lake.py.big";

/// The right answer of [`QUERY`]: ids 0..800 000, payloads `payload-%08d`.
fn answer() -> Vec<Vec<String>> {
    vec![vec!["319999600000".into(), "payload-00799999".into()]]
}

fn socket(uri: &str) -> SocketAddr {
    uri.trim_start_matches("http://").parse().unwrap()
}

/// After a fault: the proxies pass again, the query answers right, nothing is left running and
/// the memory pool holds nothing.
async fn recovered(
    client: &mut FlightSqlServiceClient<Channel>,
    engine: &Engine,
    proxies: &[&Proxy],
) {
    for p in proxies {
        p.set(Fault::Pass);
    }
    let batches = common::flight_run(client, QUERY).await.unwrap();
    assert_eq!(common::rows(&batches), answer());
    let deadline = Instant::now() + Duration::from_secs(10);
    while common::running_queries(client).await != 0 {
        assert!(
            Instant::now() < deadline,
            "a query is still registered as running"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(engine.runtime().memory_pool.reserved(), 0);
}

/// Runs `sql` over plain Flight calls with `token`: its rows, or the status it failed with.
async fn run(addr: SocketAddr, token: &str, sql: &str) -> Result<Vec<Vec<String>>, Status> {
    let channel = common::channel(addr).await;
    let mut flight = FlightServiceClient::new(channel);
    let command = CommandStatementQuery {
        query: sql.into(),
        transaction_id: None,
    };
    let descriptor = FlightDescriptor::new_cmd(command.as_any().encode_to_vec());
    let info = flight
        .get_flight_info(common::with_token(descriptor, token))
        .await?
        .into_inner();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let data = flight
        .do_get(common::with_token(ticket, token))
        .await?
        .into_inner();
    let batches: Vec<RecordBatch> = FlightRecordBatchStream::new_from_flight_data(
        data.map_err(arrow_flight::error::FlightError::from),
    )
    .try_collect()
    .await
    .map_err(|e| match e {
        arrow_flight::error::FlightError::Tonic(status) => *status,
        other => Status::unknown(other.to_string()),
    })?;
    Ok(common::rows(&batches))
}

/// The status a query failed with: one line, with `code`, naming `names`.
fn failed(result: Result<Vec<Vec<String>>, Status>, code: Code, names: &str) -> Status {
    let status = result.expect_err(names);
    assert_eq!(status.code(), code, "{status}");
    assert!(status.message().contains(names), "{status}");
    assert!(!status.message().contains('\n'), "{status}");
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lake_faults_fail_precisely_and_leave_the_server_serving() {
    let dir = tempfile::tempdir().unwrap();
    let weed = Weed::start(dir.path());
    weed::pyiceberg(
        &weed,
        &weed.rest_uri(),
        &format!("credential=\"{KEY}:{SECRET}\", scope=\"PRINCIPAL_ROLE:ALL\","),
        r#"c.create_namespace("py")
schema = pa.schema([("id", pa.int64()), ("payload", pa.string())])
t = c.create_table("py.big", schema=schema)
for part in range(4):
    ids = range(part * 200000, (part + 1) * 200000)
    t.append(pa.table({"id": pa.array(ids, pa.int64()),
                       "payload": [f"payload-{i:08d}" for i in ids]}, schema=schema))"#,
    );
    let rest = Proxy::start(socket(&weed.rest_uri())).await;
    let s3 = Proxy::start(socket(&weed.s3_uri())).await;
    let mut catalog = lake(&weed, &format!("{KEY}:{SECRET}"));
    catalog.uri = rest.uri();
    catalog.properties.insert("s3.endpoint".into(), s3.uri());
    let mut config = Config {
        data_dir: dir.path().join("local"),
        catalogs: vec![catalog],
        ..Config::default()
    };
    // Every data read goes to storage (no block cache; footers and manifests are still cached);
    // the pool is there to be checked empty afterwards.
    config.cache.enabled = false;
    config.query.memory_limit = Some("512MiB".parse().unwrap());
    let engine = Engine::connect(config).await.unwrap();
    let addr = common::serve_flight(engine.clone(), &["alice:secret"]).await;
    let mut alice = common::flight_client(addr, "alice", "secret").await;
    let token = alice.token().unwrap().clone();

    // Both proxies are in the path.
    recovered(&mut alice, &engine, &[&rest, &s3]).await;
    assert!(rest.connections.load(Ordering::Relaxed) > 0);
    assert!(s3.connections.load(Ordering::Relaxed) > 0);

    // Slow storage and a slow catalog: right answers.
    s3.set(Fault::Delay(Duration::from_millis(3)));
    rest.set(Fault::Delay(Duration::from_millis(100)));
    assert_eq!(run(addr, &token, QUERY).await.unwrap(), answer());
    recovered(&mut alice, &engine, &[&rest, &s3]).await;

    // Storage connections reset mid-response: the storage layer retries, resuming where the
    // bytes stopped, and the answer is right.
    s3.set(Fault::ResetAfter(256 * 1024));
    assert_eq!(run(addr, &token, QUERY).await.unwrap(), answer());
    recovered(&mut alice, &engine, &[&rest, &s3]).await;

    // Storage that resets every connection, or answers nothing (opendal's 10 s I/O timeout,
    // retried): Unavailable, naming the data file.
    for fault in [Fault::ResetAfter(0), Fault::BlackHole] {
        s3.set(fault);
        let status = failed(
            run(addr, &token, QUERY).await,
            Code::Unavailable,
            "could not be read from storage",
        );
        assert!(
            status.message().contains("data file s3://"),
            "{fault:?}: {status}"
        );
        recovered(&mut alice, &engine, &[&rest, &s3]).await;
    }

    // A catalog that resets its connections, or answers nothing (the REST client's 10 s
    // timeout): Unavailable, naming the catalog.
    for fault in [Fault::ResetAfter(0), Fault::BlackHole] {
        rest.set(fault);
        failed(
            run(addr, &token, QUERY).await,
            Code::Unavailable,
            &format!("catalog lake at {} is unavailable", rest.uri()),
        );
        recovered(&mut alice, &engine, &[&rest, &s3]).await;
    }
}
