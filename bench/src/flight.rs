//! `iceflight-bench flight`: loopback Flight SQL throughput and latency.
//!
//! ```text
//!   (a) FlightSqlServiceClient ──► iceflight serve (in process) ──► SELECT * FROM lineitem
//!   (b) FlightServiceClient    ──► raw arrow-flight DoGet of the same batches held in memory
//!   (c) SELECT 1 round trips (GetFlightInfo + DoGet), p50 / p99
//! ```
//! Throughput is Arrow IPC bytes on the wire (FlightData header + body) per second.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use datafusion::arrow::array::RecordBatch;
use datafusion::common::Result;
use futures::{Stream, TryStreamExt};
use iceflight::config::Config;
use iceflight::flight;
use iceflight::session::Engine;
use tonic::transport::Channel;
use tonic::{Request, Response, Status, Streaming};

use crate::error::ext;

type BoxStream<T> = Pin<Box<dyn Stream<Item = std::result::Result<T, Status>> + Send>>;

/// The limit: a Flight service that only streams batches it already holds.
#[derive(Clone)]
struct MemoryFlight {
    batches: Arc<Vec<RecordBatch>>,
}

#[tonic::async_trait]
impl FlightService for MemoryFlight {
    type HandshakeStream = BoxStream<HandshakeResponse>;
    type ListFlightsStream = BoxStream<FlightInfo>;
    type DoGetStream = BoxStream<FlightData>;
    type DoPutStream = BoxStream<PutResult>;
    type DoActionStream = BoxStream<arrow_flight::Result>;
    type ListActionsStream = BoxStream<ActionType>;
    type DoExchangeStream = BoxStream<FlightData>;

    async fn handshake(
        &self,
        _: Request<Streaming<HandshakeRequest>>,
    ) -> std::result::Result<Response<Self::HandshakeStream>, Status> {
        Err(Status::unimplemented("handshake"))
    }
    async fn list_flights(
        &self,
        _: Request<Criteria>,
    ) -> std::result::Result<Response<Self::ListFlightsStream>, Status> {
        Err(Status::unimplemented("list_flights"))
    }
    async fn get_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        Err(Status::unimplemented("get_flight_info"))
    }
    async fn poll_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<PollInfo>, Status> {
        Err(Status::unimplemented("poll_flight_info"))
    }
    async fn get_schema(
        &self,
        _: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<SchemaResult>, Status> {
        Err(Status::unimplemented("get_schema"))
    }
    async fn do_get(
        &self,
        _: Request<Ticket>,
    ) -> std::result::Result<Response<Self::DoGetStream>, Status> {
        let batches = Arc::clone(&self.batches);
        let schema = batches[0].schema();
        let input = futures::stream::iter((0..batches.len()).map(move |i| Ok(batches[i].clone())));
        let stream = FlightDataEncoderBuilder::new()
            .with_schema(schema)
            .build(input);
        Ok(Response::new(Box::pin(
            stream.map_err(|e| Status::internal(e.to_string())),
        )))
    }
    async fn do_put(
        &self,
        _: Request<Streaming<FlightData>>,
    ) -> std::result::Result<Response<Self::DoPutStream>, Status> {
        Err(Status::unimplemented("do_put"))
    }
    async fn do_action(
        &self,
        _: Request<Action>,
    ) -> std::result::Result<Response<Self::DoActionStream>, Status> {
        Err(Status::unimplemented("do_action"))
    }
    async fn list_actions(
        &self,
        _: Request<Empty>,
    ) -> std::result::Result<Response<Self::ListActionsStream>, Status> {
        Err(Status::unimplemented("list_actions"))
    }
    async fn do_exchange(
        &self,
        _: Request<Streaming<FlightData>>,
    ) -> std::result::Result<Response<Self::DoExchangeStream>, Status> {
        Err(Status::unimplemented("do_exchange"))
    }
}

/// Reads a raw DoGet stream; returns (wire bytes, seconds).
async fn drain(mut client: FlightServiceClient<Channel>, ticket: Ticket) -> Result<(u64, f64)> {
    let start = Instant::now();
    let mut stream = client.do_get(ticket).await.map_err(ext)?.into_inner();
    let mut bytes = 0u64;
    while let Some(m) = stream.message().await.map_err(ext)? {
        bytes += (m.data_header.len() + m.data_body.len()) as u64;
    }
    Ok((bytes, start.elapsed().as_secs_f64()))
}

async fn channel(addr: SocketAddr) -> Result<Channel> {
    Channel::from_shared(format!("http://{addr}"))
        .map_err(ext)?
        .connect()
        .await
        .map_err(ext)
}

pub async fn run(data_dir: PathBuf, namespace: &str, rounds: usize, calls: usize) -> Result<()> {
    let mut config = Config {
        data_dir,
        default_schema: Some(namespace.to_string()),
        ..Config::default()
    };
    config.server.auth = iceflight::config::AuthMode::None;
    config.query.target_partitions = 2;
    let engine = Engine::connect(config).await.map_err(ext)?;
    let ctx = engine.session(None, None, &[])?;
    let batches = ctx.sql("SELECT * FROM lineitem").await?.collect().await?;
    let users = flight::users(&engine.config().server, &[]).map_err(ext)?;

    let iceflight_addr = flight::serve_on_loopback(engine, users)
        .await
        .map_err(ext)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(ext)?;
    let memory_addr = listener.local_addr().map_err(ext)?;
    let memory = MemoryFlight {
        batches: Arc::new(batches),
    };
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(FlightServiceServer::new(memory))
            .serve_with_incoming(
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            ),
    );

    let mut sql = FlightSqlServiceClient::new(channel(iceflight_addr).await?);
    let mut results: Vec<(&str, Vec<f64>, u64)> = vec![
        ("iceflight DoGet (scan + Flight)", vec![], 0),
        ("raw arrow-flight DoGet from memory", vec![], 0),
    ];
    for round in 0..=rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let (bytes, secs) = if i == 0 {
                let info = sql
                    .execute("SELECT * FROM lineitem".into(), None)
                    .await
                    .map_err(ext)?;
                let ticket = info.endpoint[0].ticket.clone().expect("ticket");
                drain(
                    FlightServiceClient::new(channel(iceflight_addr).await?),
                    ticket,
                )
                .await?
            } else {
                drain(
                    FlightServiceClient::new(channel(memory_addr).await?),
                    Ticket::new("all"),
                )
                .await?
            };
            if round > 0 {
                results[i].1.push(bytes as f64 / secs / 1e9);
                results[i].2 = bytes;
            }
        }
    }
    println!(
        "DoGet of all of lineitem over loopback, {rounds} alternating rounds, GB/s of Arrow IPC: median [min, max]"
    );
    for (name, mut gbps, bytes) in results {
        gbps.sort_by(|a, b| a.total_cmp(b));
        println!(
            "  {name:<38} {:.2} [{:.2}, {:.2}]  ({:.2} GB per read)",
            gbps[gbps.len() / 2],
            gbps[0],
            gbps[gbps.len() - 1],
            bytes as f64 / 1e9
        );
    }

    let mut latencies = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        let info = sql.execute("SELECT 1".into(), None).await.map_err(ext)?;
        let ticket = info.endpoint[0].ticket.clone().expect("ticket");
        let stream = sql.do_get(ticket).await.map_err(ext)?;
        let _: Vec<RecordBatch> = stream.try_collect().await.map_err(ext)?;
        latencies.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    latencies.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    println!(
        "SELECT 1 round trip (GetFlightInfo + DoGet), {calls} calls: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        pct(0.5),
        pct(0.99),
        latencies[latencies.len() - 1]
    );
    Ok(())
}
