//! Prometheus metrics on a listener of their own (`[server] metrics_listen`): `GET /metrics`
//! answers the text exposition format (prometheus-client's encoder), anything else 404.
//!
//! | metric | type | what |
//! |---|---|---|
//! | `iceflight_queries` (`_total`) `{state}` | counter | finished queries: `FINISHED`, `FAILED`, `CANCELLED` |
//! | `iceflight_query_duration_seconds` | histogram | their durations, start to last row sent |
//! | `iceflight_result_rows` / `iceflight_result_bytes` (`_total`) | counter | rows and bytes sent (Arrow IPC messages) |
//! | `iceflight_queries_running` | gauge | queries running now |
//! | `iceflight_sessions_active` | gauge | open sessions (logins not yet expired or closed) |
//! | `iceflight_login_failures` (`_total`) | counter | logins refused (wrong or missing credentials, locked) |
//! | `iceflight_cache_hits` / `iceflight_cache_misses` (`_total`) `{cache}` | counter | block (lake files), footer, table (catalog loads) |
//! | `iceflight_cache_bytes` `{cache}` | gauge | bytes held by the block and footer caches |
//! | `iceflight_storage_read_bytes` (`_total`) | counter | bytes read from the lake's storage (block cache misses) |
//! | `iceflight_catalog_tokens_fetched` (`_total`) `{catalog}` | counter | OAuth2 tokens a REST catalog fetched (refreshes included) |
//! | `iceflight_storage_credentials_renewed` (`_total`) `{catalog}` | counter | vended storage credentials renewed |
//!
//! The first four come from the queries' history (`query_history.rs`); the rest are read from
//! the sessions, caches and catalogs at each scrape.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::flight::sessions::Sessions;
use crate::session::Engine;

/// The registry of one server: the query metrics of `engine` and a collector of its sessions
/// and caches.
pub fn registry(engine: &Engine, sessions: Arc<Sessions>) -> Registry {
    let mut registry = Registry::with_prefix("iceflight");
    let m = &engine.history().metrics;
    registry.register("queries", "Finished queries by state", m.queries.clone());
    registry.register(
        "query_duration_seconds",
        "Durations of finished queries, start to last row sent",
        m.latency.clone(),
    );
    registry.register("result_rows", "Rows sent to clients", m.rows.clone());
    registry.register(
        "result_bytes",
        "Bytes sent to clients (Arrow IPC messages)",
        m.bytes.clone(),
    );
    registry.register_collector(Box::new(Now {
        engine: engine.clone(),
        sessions,
    }));
    registry
}

/// What is read at each scrape: running queries, sessions, caches.
#[derive(Debug)]
struct Now {
    engine: Engine,
    sessions: Arc<Sessions>,
}

impl Collector for Now {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gauge = |encoder: &mut DescriptorEncoder, name: &str, help: &str, v: i64| {
            let g = ConstGauge::new(v);
            g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)
        };
        gauge(
            &mut encoder,
            "queries_running",
            "Queries running now",
            self.engine.history().running() as i64,
        )?;
        gauge(
            &mut encoder,
            "sessions_active",
            "Open sessions",
            self.sessions.counts().0 as i64,
        )?;
        let failed = ConstCounter::new(self.sessions.failed_logins());
        failed.encode(encoder.encode_descriptor(
            "login_failures",
            "Logins refused: wrong or missing credentials, or a locked name or address",
            None,
            failed.metric_type(),
        )?)?;

        let caches = self.engine.caches();
        let mut hits: Vec<(&str, u64)> = vec![];
        let mut misses: Vec<(&str, u64)> = vec![];
        let mut held: Vec<(&str, u64)> = vec![];
        let mut storage = 0;
        if let Some(blocks) = &caches.blocks {
            let s = blocks.stats();
            hits.push(("block", s.hits));
            misses.push(("block", s.misses));
            held.push(("block", s.bytes));
            storage = s.remote_bytes;
        }
        let f = caches.footers.stats();
        hits.push(("footer", f.hits));
        misses.push(("footer", f.misses));
        held.push(("footer", f.bytes));
        let [_, _, table_hits, table_misses] = self.engine.catalogs().table_stats();
        hits.push(("table", table_hits));
        misses.push(("table", table_misses));

        for (name, help, values) in [
            ("cache_hits", "Cache hits by cache", &hits),
            ("cache_misses", "Cache misses by cache", &misses),
        ] {
            counters(&mut encoder, name, help, "cache", values)?;
        }
        let mut family = encoder.encode_descriptor(
            "cache_bytes",
            "Bytes held by each cache",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for (cache, v) in &held {
            let labels = [("cache", *cache)];
            ConstGauge::new(*v as i64).encode(family.encode_family(&labels)?)?;
        }
        let c = ConstCounter::new(storage);
        c.encode(encoder.encode_descriptor(
            "storage_read_bytes",
            "Bytes read from the lake's storage",
            None,
            c.metric_type(),
        )?)?;

        // The workload record's totals per table (`scan/src/read/table_access.rs`).
        let totals = caches.access.totals();
        for (name, help, value) in [
            (
                "table_scans",
                "Executed scans by table",
                (|t| t.scans) as fn(&iceflight_scan::read::table_access::AccessTotals) -> u64,
            ),
            ("table_files_pruned", "Data files pruned by table", |t| {
                t.files_pruned
            }),
            ("table_files_read", "Data files opened by table", |t| {
                t.files_read
            }),
            ("table_read_bytes", "Bytes scans read by table", |t| {
                t.bytes_read
            }),
        ] {
            let values: Vec<(&str, u64)> = totals
                .iter()
                .map(|(table, t)| (table.as_str(), value(t)))
                .collect();
            counters(&mut encoder, name, help, "table", &values)?;
        }

        // What the REST catalogs fetched to stay signed in (`catalog/src/rest.rs`).
        let credentials = self.engine.catalogs().credential_stats();
        for (name, help, value) in [
            (
                "catalog_tokens_fetched",
                "OAuth2 tokens fetched by catalog",
                (|c| c.tokens_fetched) as fn(&iceflight_catalog::rest::CredentialStats) -> u64,
            ),
            (
                "storage_credentials_renewed",
                "Vended storage credentials renewed, by catalog",
                |c| c.storage_renewed,
            ),
        ] {
            let values: Vec<(&str, u64)> = credentials
                .iter()
                .map(|(catalog, c)| (catalog.as_str(), value(c)))
                .collect();
            counters(&mut encoder, name, help, "catalog", &values)?;
        }
        Ok(())
    }
}

/// One counter family `name` with a counter per `(label value, count)` of `values`, labelled
/// `label`.
fn counters(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    values: &[(&str, u64)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(
        name,
        help,
        None,
        prometheus_client::metrics::MetricType::Counter,
    )?;
    for (value, count) in values {
        let labels = [(label, *value)];
        ConstCounter::new(*count).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Serves `GET /metrics` from `registry` on `addr` until the process ends; returns the bound
/// address (port 0 picks a free one).
///
/// Errors: the address cannot be bound ([`crate::serving::ServeError::Listen`]).
pub async fn serve(
    addr: SocketAddr,
    registry: Registry,
) -> Result<SocketAddr, crate::serving::ServeError> {
    let (listener, bound) = crate::serving::listen(addr, "metrics").await?;
    let registry = Arc::new(registry);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let registry = Arc::clone(&registry);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: Request<_>| {
                    let registry = Arc::clone(&registry);
                    async move { Ok::<_, std::convert::Infallible>(answer(&request, &registry)) }
                });
                let io = hyper_util::rt::TokioIo::new(tcp);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    Ok(bound)
}

/// The response to one request.
fn answer<B>(request: &Request<B>, registry: &Registry) -> Response<Full<Bytes>> {
    let plain = |status: StatusCode, body: String, kind: &str| {
        Response::builder()
            .status(status)
            .header("content-type", kind)
            .body(Full::new(Bytes::from(body)))
            .expect("a valid response")
    };
    if request.method() != hyper::Method::GET || request.uri().path() != "/metrics" {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: GET /metrics\n".into(),
            "text/plain",
        );
    }
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, registry) {
        Ok(()) => plain(
            StatusCode::OK,
            text,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        Err(e) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding metrics: {e}\n"),
            "text/plain",
        ),
    }
}
