//! `iceflight-bench clients`: many concurrent Flight SQL clients, each running a fixed mix of
//! queries against one server: errors, latency percentiles per kind, and the server's resident
//! memory (peak against baseline) when its pid is given. Speed goes to
//! `bench/reports/load-20261202.md`; the test at the bottom runs a small version for
//! correctness (no errors, every execution of a query gets the engine's answer, nothing left
//! running).
//!
//! ```text
//!   client 0..N (own connection, own login) ──► M queries each, kind and parameter chosen by
//!   splitmix64(client, i): point 30 % · scan 20 % · join 10 % · metadata 20 % · prepared 20 %
//!   ──► latency per query (GetFlightInfo + DoGet to the last batch), rows, error text
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_flight::FlightInfo;
use arrow_flight::sql::client::{FlightSqlServiceClient, PreparedStatement};
use arrow_flight::sql::{CommandGetDbSchemas, CommandGetTables};
use datafusion::arrow::array::{Int64Array, RecordBatch};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::common::{DataFusionError, Result};
use futures::TryStreamExt;
use tonic::transport::Channel;

use crate::error::ext;

/// What one run is told (`iceflight-bench clients`).
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Flight SQL address of the server, `host:port`.
    #[arg(long, default_value = "127.0.0.1:50051")]
    pub addr: String,
    /// `user:password` to log in with (none: the server runs with `auth = "none"`).
    #[arg(long)]
    pub login: Option<String>,
    /// Concurrent clients, each on its own connection.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Queries per client.
    #[arg(long, default_value_t = 1000)]
    pub queries: usize,
    /// Namespace of the TPC-H tables (`iceflight load tpch`).
    #[arg(long, default_value = "tpch")]
    pub namespace: String,
    /// The server's pid: its resident memory is sampled every 100 ms (Linux `/proc`).
    #[arg(long)]
    pub server_pid: Option<u32>,
}

/// The kinds of query in the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// One order by key.
    Point,
    /// An aggregate over a month of lineitem.
    Scan,
    /// customer ⋈ nation ⋈ orders for one year, top 5 nations.
    Join,
    /// Catalogs, schemas or tables (Flight SQL metadata commands).
    Metadata,
    /// A prepared statement bound to one customer key.
    Prepared,
}

/// Per kind: latencies in ms (successful queries), errors, rows.
#[derive(Debug, Default, Clone)]
pub struct KindStats {
    /// Latency of each successful query, ms.
    pub latencies_ms: Vec<f64>,
    /// Failed queries.
    pub errors: usize,
    /// Rows answered.
    pub rows: u64,
}

/// What a run measured.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Per kind.
    pub kinds: BTreeMap<Kind, KindStats>,
    /// The first 20 error texts.
    pub first_errors: Vec<String>,
    /// Answers seen per query text, as [`fingerprint`]s (one each when answers agree).
    pub answers: BTreeMap<String, BTreeSet<u64>>,
    /// Wall time of the whole run.
    pub wall: Duration,
    /// Server RSS when the clients had connected, after the run, and the highest sample
    /// (every 100 ms) in between, bytes (with `server_pid`).
    pub rss: Option<(u64, u64, u64)>,
}

impl Outcome {
    /// Failed queries of all kinds.
    pub fn errors(&self) -> usize {
        self.kinds.values().map(|k| k.errors).sum()
    }
}

/// splitmix64: the mix's deterministic choices.
fn mix(client: usize, i: usize) -> u64 {
    let mut z = ((client as u64) << 32 | i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn kind(r: u64) -> Kind {
    match r % 10 {
        0..=2 => Kind::Point,
        3 | 4 => Kind::Scan,
        5 => Kind::Join,
        6 | 7 => Kind::Metadata,
        _ => Kind::Prepared,
    }
}

fn sql(kind: Kind, r: u64, ns: &str) -> String {
    let p = r >> 8;
    match kind {
        Kind::Point => format!(
            "SELECT o_orderkey, o_custkey, o_totalprice FROM {ns}.orders WHERE o_orderkey = {}",
            1 + 7 * (p % 2000)
        ),
        Kind::Scan => {
            let month = p % 72;
            let (y, m) = (1992 + month / 12, 1 + month % 12);
            let (y2, m2) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
            format!(
                "SELECT count(*), sum(l_extendedprice * (1 - l_discount)) FROM {ns}.lineitem \
                 WHERE l_shipdate >= DATE '{y}-{m:02}-01' AND l_shipdate < DATE '{y2}-{m2:02}-01'"
            )
        }
        Kind::Join => {
            let y = 1992 + p % 7;
            format!(
                "SELECT n_name, count(*) AS orders FROM {ns}.customer \
                 JOIN {ns}.nation ON c_nationkey = n_nationkey \
                 JOIN {ns}.orders ON o_custkey = c_custkey \
                 WHERE o_orderdate >= DATE '{y}-01-01' AND o_orderdate < DATE '{}-01-01' \
                 GROUP BY n_name ORDER BY orders DESC, n_name LIMIT 5",
                y + 1
            )
        }
        Kind::Metadata => ["catalogs", "schemas", "tables"][(p % 3) as usize].to_string(),
        Kind::Prepared => (1 + p % 1500).to_string(),
    }
}

/// The prepared statement's text, `{ns}` the namespace.
fn prepared_sql(ns: &str) -> String {
    format!("SELECT c_name, c_acctbal FROM {ns}.customer WHERE c_custkey = $1")
}

/// A logged-in client on its own connection.
async fn connect(args: &Args) -> Result<FlightSqlServiceClient<Channel>> {
    let channel = Channel::from_shared(format!("http://{}", args.addr))
        .map_err(ext)?
        .connect()
        .await
        .map_err(ext)?;
    let mut client = FlightSqlServiceClient::new(channel);
    if let Some(login) = &args.login {
        let (user, password) = login
            .split_once(':')
            .ok_or_else(|| DataFusionError::Plan("--login must be user:password".into()))?;
        client.handshake(user, password).await.map_err(ext)?;
    }
    Ok(client)
}

/// A hash of `batches` as arrow prints them: equal answers, equal fingerprints.
pub fn fingerprint(batches: &[RecordBatch]) -> Result<u64> {
    use std::hash::{Hash, Hasher};
    let text = pretty_format_batches(batches)?.to_string();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    Ok(hasher.finish())
}

/// Every batch of every endpoint of `info`.
async fn fetch(
    client: &mut FlightSqlServiceClient<Channel>,
    info: FlightInfo,
) -> Result<Vec<RecordBatch>> {
    let mut all = vec![];
    for endpoint in info.endpoint {
        let ticket = endpoint
            .ticket
            .ok_or_else(|| DataFusionError::Execution("endpoint without a ticket".into()))?;
        let batches: Vec<RecordBatch> = client
            .do_get(ticket)
            .await
            .map_err(ext)?
            .try_collect()
            .await
            .map_err(ext)?;
        all.extend(batches);
    }
    Ok(all)
}

async fn one(
    client: &mut FlightSqlServiceClient<Channel>,
    prepared: &mut PreparedStatement<Channel>,
    namespace: &str,
    kind: Kind,
    text: &str,
) -> Result<Vec<RecordBatch>> {
    let info = match kind {
        Kind::Metadata => match text {
            "catalogs" => client.get_catalogs().await,
            "schemas" => {
                client
                    .get_db_schemas(CommandGetDbSchemas {
                        catalog: None,
                        db_schema_filter_pattern: None,
                    })
                    .await
            }
            _ => {
                client
                    .get_tables(CommandGetTables {
                        catalog: None,
                        db_schema_filter_pattern: Some(namespace.to_string()),
                        table_name_filter_pattern: None,
                        table_types: vec![],
                        include_schema: false,
                    })
                    .await
            }
        },
        Kind::Prepared => {
            let key: i64 = text.parse().expect("a customer key");
            let batch =
                RecordBatch::try_from_iter([("0", Arc::new(Int64Array::from(vec![key])) as _)])?;
            prepared.set_parameters(batch).map_err(ext)?;
            prepared.execute().await
        }
        _ => client.execute(text.to_string(), None).await,
    }
    .map_err(ext)?;
    fetch(client, info).await
}

/// Resident set size of `pid`, bytes (`VmRSS` of `/proc/<pid>/status`).
fn rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

/// Runs the clients to completion. Errors only when a client cannot connect, log in or prepare
/// its statement; a failing query is counted, not returned.
pub async fn drive(args: &Args) -> Result<Outcome> {
    let outcome = Arc::new(Mutex::new(Outcome::default()));
    let mut clients = vec![];
    for c in 0..args.clients {
        let mut client = connect(args).await?;
        let prepared = client
            .prepare(prepared_sql(&args.namespace), None)
            .await
            .map_err(ext)?;
        clients.push((c, client, prepared));
    }
    let peak = Arc::new(AtomicU64::new(0));
    let baseline = args.server_pid.and_then(rss);
    let sampler = args.server_pid.map(|pid| {
        let peak = Arc::clone(&peak);
        tokio::spawn(async move {
            loop {
                if let Some(now) = rss(pid) {
                    peak.fetch_max(now, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    });
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (c, mut client, mut prepared) in clients {
        let (outcome, namespace, queries) =
            (Arc::clone(&outcome), args.namespace.clone(), args.queries);
        tasks.spawn(async move {
            for i in 0..queries {
                let r = mix(c, i);
                let kind = kind(r);
                let text = sql(kind, r, &namespace);
                let began = Instant::now();
                let answer = one(&mut client, &mut prepared, &namespace, kind, &text).await;
                let ms = began.elapsed().as_secs_f64() * 1e3;
                let result = answer.and_then(|batches| {
                    let rows = batches.iter().map(RecordBatch::num_rows).sum::<usize>();
                    Ok((rows, fingerprint(&batches)?))
                });
                let mut o = outcome.lock().expect("outcome lock");
                match result {
                    Ok((rows, answer)) => {
                        let stats = o.kinds.entry(kind).or_default();
                        stats.latencies_ms.push(ms);
                        stats.rows += rows as u64;
                        o.answers.entry(text).or_default().insert(answer);
                    }
                    Err(e) => {
                        o.kinds.entry(kind).or_default().errors += 1;
                        if o.first_errors.len() < 20 {
                            o.first_errors.push(format!("{kind:?} {text}: {e}"));
                        }
                    }
                }
            }
            let _ = prepared.close().await;
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.map_err(ext)?;
    }
    let wall = start.elapsed();
    if let Some(sampler) = sampler {
        sampler.abort();
    }
    let mut outcome = std::mem::take(&mut *outcome.lock().expect("outcome lock"));
    outcome.wall = wall;
    if let (Some(pid), Some(baseline)) = (args.server_pid, baseline) {
        let after = rss(pid).unwrap_or(0);
        outcome.rss = Some((baseline, after, peak.load(Ordering::Relaxed).max(after)));
    }
    Ok(outcome)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The outcome as a Markdown table (kinds, queries, errors, p50 / p99 / max ms, rows).
pub fn report(args: &Args, outcome: &Outcome) -> String {
    let mut out = format!(
        "{} clients × {} queries: {} queries in {:.1} s ({:.0} queries/s), {} errors\n\n\
         | kind | queries | errors | p50 ms | p99 ms | max ms | rows |\n|---|---:|---:|---:|---:|---:|---:|\n",
        args.clients,
        args.queries,
        args.clients * args.queries,
        outcome.wall.as_secs_f64(),
        (args.clients * args.queries) as f64 / outcome.wall.as_secs_f64(),
        outcome.errors()
    );
    let mut all = vec![];
    for (kind, stats) in &outcome.kinds {
        let mut l = stats.latencies_ms.clone();
        l.sort_by(f64::total_cmp);
        all.extend_from_slice(&l);
        out += &format!(
            "| {kind:?} | {} | {} | {:.1} | {:.1} | {:.1} | {} |\n",
            l.len() + stats.errors,
            stats.errors,
            percentile(&l, 0.5),
            percentile(&l, 0.99),
            l.last().copied().unwrap_or(f64::NAN),
            stats.rows
        );
    }
    all.sort_by(f64::total_cmp);
    out += &format!(
        "| all | {} | {} | {:.1} | {:.1} | {:.1} | |\n",
        all.len() + outcome.errors(),
        outcome.errors(),
        percentile(&all, 0.5),
        percentile(&all, 0.99),
        all.last().copied().unwrap_or(f64::NAN)
    );
    if let Some((baseline, after, high)) = outcome.rss {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        out += &format!(
            "\nserver RSS: {:.0} MiB with the clients connected, {:.0} MiB peak (sampled every \
             100 ms), {:.0} MiB after\n",
            mib(baseline),
            mib(high),
            mib(after)
        );
    }
    let inconsistent = outcome.answers.values().filter(|r| r.len() > 1).count();
    out += &format!(
        "\n{} distinct queries; {inconsistent} gave different answers across executions\n",
        outcome.answers.len()
    );
    for e in &outcome.first_errors {
        out += &format!("\nerror: {e}");
    }
    out
}

#[cfg(test)]
mod tests {
    use iceflight::config::Config;
    use iceflight::session::Engine;

    use super::*;

    /// 8 clients × 25 mixed queries on TPC-H SF 0.01 through a server in this process: no
    /// errors, every kind ran, each query text got one answer however many clients ran it,
    /// every SQL answer is the engine's own (the same printed rows), and nothing is left
    /// running.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_clients_get_consistent_answers() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        let engine = Engine::connect(config).await.unwrap();
        let catalog = Arc::clone(engine.catalogs().get("local").unwrap());
        let options = iceflight_datagen::load::LoadOptions {
            scale: 0.01,
            progress: false,
            ..Default::default()
        };
        let namespace = iceberg::NamespaceIdent::new("tpch".into());
        iceflight_datagen::load::load_tpch(&catalog, &namespace, &options)
            .await
            .unwrap();
        let ctx = engine.session(None, None, &[]).unwrap();
        let users = iceflight::flight::users(&engine.config().server, &["u:p".into()]).unwrap();
        let addr = iceflight::flight::serve_on_loopback(engine, users)
            .await
            .unwrap();
        let args = Args {
            addr: addr.to_string(),
            login: Some("u:p".into()),
            clients: 8,
            queries: 25,
            namespace: "tpch".into(),
            server_pid: None,
        };
        let outcome = drive(&args).await.unwrap();
        assert_eq!(outcome.errors(), 0, "{:?}", outcome.first_errors);
        assert_eq!(outcome.kinds.len(), 5, "{:?}", outcome.kinds.keys());
        for (text, answers) in &outcome.answers {
            assert_eq!(answers.len(), 1, "{text}: {answers:?}");
            let expected = match text.parse::<i64>() {
                Ok(key) => prepared_sql("tpch").replace("$1", &key.to_string()),
                Err(_) if text.starts_with("SELECT") => text.clone(),
                Err(_) => continue,
            };
            let batches = ctx.sql(&expected).await.unwrap().collect().await.unwrap();
            assert_eq!(
                answers.first(),
                Some(&fingerprint(&batches).unwrap()),
                "{expected}"
            );
        }
        let mut client = connect(&args).await.unwrap();
        let status = client
            .do_action(arrow_flight::Action::new(
                iceflight::flight::service::SERVER_STATUS_ACTION,
                "",
            ))
            .await
            .unwrap()
            .try_next()
            .await
            .unwrap()
            .unwrap();
        let status: serde_json::Value = serde_json::from_slice(&status.body).unwrap();
        assert_eq!(status["running_queries"], 0, "{status}");
        assert_eq!(status["prepared_statements"], 0, "{status}");
    }
}
