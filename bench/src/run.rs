//! `iceflight-bench run`: one suite's queries on several engines over the same Iceberg files, in
//! one process, with alternating engine order per round.
//!
//! ```text
//!   warm-up round (not counted) ──► N rounds, engine order reversed every other round
//!     iceflight            Flight SQL over loopback (in-process server; the protocol is timed)
//!     duckdb               DuckDB 1.5.5 iceberg_scan views, warm connection (duckdb_worker.py)
//!     datafusion-parquet   DataFusion 53.1 ListingTable over the same data files (the ceiling)
//!     iceberg-datafusion   upstream iceberg-datafusion 0.10.1 IcebergStaticTableProvider
//!     trino                Trino (bench/scripts/trino.sh) over its Iceberg REST catalog, which
//!                          must hold the same tables (iceflight load … --catalog <rest>)
//!   ──► answers compared across engines (numbers to 1e-9 relative or the printed precision; a mismatch fails the run)
//!   ──► iceflight's scan counters from one more, untimed, in-process run per query
//!   ──► bench/results/<suite>-sf<scale>-<yyyymmdd>.json and .md
//! ```
//!
//! An engine that cannot run (Trino without `--trino-url`) is listed with status `missing` and
//! the reason.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use arrow_flight::sql::client::FlightSqlServiceClient;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::TryStreamExt;
use iceberg::{NamespaceIdent, TableIdent};
use iceflight::config::Config;
use iceflight::flight;
use iceflight::session::Engine;
use iceflight_scan::IcebergScanExec;
use iceflight_scan::metrics_index::FileMetricsIndex;
use serde_json::{Value, json};
use tonic::transport::Channel;

fn ext(e: impl std::error::Error + Send + Sync + 'static) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// Options of one run.
pub struct Args {
    pub data_dir: PathBuf,
    pub namespace: String,
    pub suite: String,
    pub scale: String,
    pub engines: Vec<String>,
    pub rounds: usize,
    pub queries: Option<Vec<String>>,
    pub out_dir: PathBuf,
    pub python: PathBuf,
    /// Trino's HTTP URI (`bench/scripts/trino.sh start`), catalog `iceberg`.
    pub trino_url: Option<String>,
    /// Trino's schema for the suite (default: `namespace`).
    pub trino_schema: Option<String>,
}

/// Rows as strings (`None` = NULL), the form every engine's answer is compared in.
type Rows = Vec<Vec<Option<String>>>;

fn rows_of(batches: &[RecordBatch]) -> Result<Rows> {
    let options = FormatOptions::default();
    let mut out = vec![];
    for b in batches {
        let formatters = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for i in 0..b.num_rows() {
            out.push(
                b.columns()
                    .iter()
                    .zip(&formatters)
                    .map(|(c, f)| (!c.is_null(i)).then(|| f.value(i).to_string()))
                    .collect(),
            );
        }
    }
    Ok(out)
}

/// Digits after the decimal point of a number as an engine printed it.
fn decimals(v: &str) -> Option<usize> {
    let v = v.trim();
    if v.contains(['e', 'E']) {
        return None;
    }
    Some(v.split_once('.').map_or(0, |(_, f)| f.len()))
}

/// Whether two printed numbers agree: to 1e-9 relative, or, when one engine printed fewer
/// decimals (Trino keeps a decimal's scale for `avg`; DataFusion truncates `avg` of a decimal to
/// 6 places where DuckDB prints a double), to one unit of that last digit (rounding or
/// truncation).
fn numbers_agree(x: &str, y: &str, p: f64, q: f64) -> bool {
    if (p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1.0) {
        return true;
    }
    match (decimals(x), decimals(y)) {
        (Some(a), Some(b)) if a != b => {
            let unit = 10f64.powi(-(a.min(b) as i32));
            (p - q).abs() <= unit + 1e-9 * p.abs().max(q.abs())
        }
        _ => false,
    }
}

/// Whether two answers agree: same shape, numbers as [`numbers_agree`], text exactly.
fn same_answer(a: &Rows, b: &Rows) -> bool {
    let cell = |x: &Option<String>, y: &Option<String>| match (x, y) {
        (None, None) => true,
        (Some(x), Some(y)) => match (x.trim().parse::<f64>(), y.trim().parse::<f64>()) {
            (Ok(p), Ok(q)) => numbers_agree(x, y, p, q),
            _ => x.trim_end() == y.trim_end(),
        },
        _ => false,
    };
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(r, s)| r.len() == s.len() && r.iter().zip(s).all(|(x, y)| cell(x, y)))
}

/// One engine under test.
enum Runner {
    Iceflight {
        client: FlightSqlServiceClient<Channel>,
    },
    DataFusion {
        ctx: SessionContext,
    },
    DuckDb {
        child: Child,
        stdin: ChildStdin,
        stdout: BufReader<ChildStdout>,
    },
    /// Trino's HTTP protocol (`POST /v1/statement`, then `nextUri` until done), catalog and
    /// schema set per request.
    Trino {
        http: reqwest::Client,
        url: String,
        catalog: String,
        schema: String,
    },
}

impl Runner {
    /// Runs `sql`: the answer and the wall time in ms.
    async fn run(&mut self, sql: &str) -> Result<(Rows, f64)> {
        match self {
            Self::Iceflight { client } => {
                let start = Instant::now();
                let info = client.execute(sql.to_string(), None).await.map_err(ext)?;
                let mut batches = vec![];
                for endpoint in info.endpoint {
                    let ticket = endpoint
                        .ticket
                        .ok_or_else(|| DataFusionError::Internal("no ticket".into()))?;
                    let stream = client.do_get(ticket).await.map_err(ext)?;
                    batches.extend(stream.try_collect::<Vec<_>>().await.map_err(ext)?);
                }
                let ms = start.elapsed().as_secs_f64() * 1e3;
                Ok((rows_of(&batches)?, ms))
            }
            Self::DataFusion { ctx } => {
                let start = Instant::now();
                let batches = ctx.sql(sql).await?.collect().await?;
                let ms = start.elapsed().as_secs_f64() * 1e3;
                Ok((rows_of(&batches)?, ms))
            }
            Self::Trino {
                http,
                url,
                catalog,
                schema,
            } => {
                let start = Instant::now();
                let mut response: Value = http
                    .post(format!("{url}/v1/statement"))
                    .header("X-Trino-User", "bench")
                    .header("X-Trino-Catalog", catalog.as_str())
                    .header("X-Trino-Schema", schema.as_str())
                    .body(sql.trim().trim_end_matches(';').to_string())
                    .send()
                    .await
                    .map_err(ext)?
                    .json()
                    .await
                    .map_err(ext)?;
                let mut rows: Rows = vec![];
                loop {
                    if let Some(e) = response.get("error") {
                        return Err(DataFusionError::Execution(format!(
                            "trino: {}",
                            e["message"].as_str().unwrap_or("error")
                        )));
                    }
                    for r in response["data"].as_array().into_iter().flatten() {
                        rows.push(
                            r.as_array()
                                .into_iter()
                                .flatten()
                                .map(|c| match c {
                                    Value::Null => None,
                                    Value::String(s) => Some(s.clone()),
                                    other => Some(other.to_string()),
                                })
                                .collect(),
                        );
                    }
                    let Some(next) = response["nextUri"].as_str().map(String::from) else {
                        break;
                    };
                    response = http
                        .get(next)
                        .send()
                        .await
                        .map_err(ext)?
                        .json()
                        .await
                        .map_err(ext)?;
                }
                Ok((rows, start.elapsed().as_secs_f64() * 1e3))
            }
            Self::DuckDb { stdin, stdout, .. } => {
                writeln!(stdin, "{}", json!({ "sql": sql })).map_err(ext)?;
                let mut line = String::new();
                stdout.read_line(&mut line).map_err(ext)?;
                let v: Value = serde_json::from_str(&line).map_err(ext)?;
                if let Some(e) = v.get("error") {
                    return Err(DataFusionError::Execution(format!("duckdb: {e}")));
                }
                let rows = v["rows"]
                    .as_array()
                    .map(|rs| {
                        rs.iter()
                            .map(|r| {
                                r.as_array()
                                    .map(|cs| {
                                        cs.iter().map(|c| c.as_str().map(String::from)).collect()
                                    })
                                    .unwrap_or_default()
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                Ok((rows, v["ms"].as_f64().unwrap_or(f64::NAN)))
            }
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Self::DuckDb { child, .. } = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

async fn iceflight_runner(engine: &Engine) -> Result<Runner> {
    let users = flight::users(&engine.config().server, &["bench:bench".to_string()])
        .map_err(|e| DataFusionError::Plan(e.to_string()))?;
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let served = engine.clone();
    tokio::spawn(async move {
        flight::serve(
            served,
            users,
            "127.0.0.1:0".parse().expect("address"),
            std::future::pending::<()>(),
            move |a| {
                let _ = ready_tx.send(a);
            },
        )
        .await
    });
    let addr = ready_rx.await.map_err(ext)?;
    let channel = Channel::from_shared(format!("http://{addr}"))
        .map_err(ext)?
        .connect()
        .await
        .map_err(ext)?;
    let mut client = FlightSqlServiceClient::new(channel);
    client.handshake("bench", "bench").await.map_err(ext)?;
    Ok(Runner::Iceflight { client })
}

/// A DataFusion `ListingTable` over Parquet data files (`paths`: URLs such as `file:///…`).
pub async fn listing_table<'a>(
    ctx: &SessionContext,
    paths: impl Iterator<Item = &'a str>,
) -> Result<ListingTable> {
    let urls = paths
        .map(ListingTableUrl::parse)
        .collect::<Result<Vec<_>>>()?;
    let options =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    let config = ListingTableConfig::new_with_multi_paths(urls)
        .with_listing_options(options)
        .infer_schema(&ctx.state())
        .await?;
    ListingTable::try_new(config)
}

/// How a plain DataFusion engine reads each table of the embedded catalog.
#[derive(Clone, Copy)]
enum Reader {
    /// `ListingTable` over the snapshot's data files: DataFusion 53.1's own Parquet path.
    RawParquet,
    /// Upstream iceberg-datafusion 0.10.1's `IcebergStaticTableProvider` (what a Rust user
    /// would pick today).
    Upstream,
}

/// A DataFusion session with every table of `namespace` registered through `reader`.
async fn datafusion_runner(
    engine: &Engine,
    namespace: &str,
    partitions: usize,
    reader: Reader,
) -> Result<Runner> {
    let catalog = engine.catalogs().get("local").map_err(ext)?;
    let ns = NamespaceIdent::new(namespace.into());
    let ctx =
        SessionContext::new_with_config(SessionConfig::new().with_target_partitions(partitions));
    for ident in catalog.list_tables(&ns).await.map_err(ext)? {
        let table = catalog
            .load_table(&TableIdent::new(ns.clone(), ident.name().to_string()))
            .await
            .map_err(ext)?;
        let provider: Arc<dyn datafusion::catalog::TableProvider> = match reader {
            Reader::RawParquet => {
                let index = FileMetricsIndex::load(&table).await.map_err(ext)?;
                Arc::new(listing_table(&ctx, index.paths()).await?)
            }
            Reader::Upstream => Arc::new(
                iceberg_datafusion::IcebergStaticTableProvider::try_new_from_table(table)
                    .await
                    .map_err(ext)?,
            ),
        };
        ctx.register_table(ident.name(), provider)?;
    }
    Ok(Runner::DataFusion { ctx })
}

fn duckdb_runner(python: &Path, data_dir: &Path, namespace: &str) -> Result<Runner> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/duckdb_worker.py");
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(ext)?;
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    writeln!(
        stdin,
        "{}",
        json!({ "data_dir": data_dir, "namespace": namespace })
    )
    .map_err(ext)?;
    let mut ready = String::new();
    stdout.read_line(&mut ready).map_err(ext)?;
    if !ready.contains("\"ready\"") {
        return Err(DataFusionError::Execution(format!(
            "duckdb worker did not start: {ready}"
        )));
    }
    Ok(Runner::DuckDb {
        child,
        stdin,
        stdout,
    })
}

/// iceflight's scan counters for `sql`, summed over its scans (one untimed in-process run).
async fn counters(engine: &Engine, namespace: &str, sql: &str) -> Result<Value> {
    let ctx = engine.session(None, Some(namespace), &[])?;
    let plan = ctx.sql(sql).await?.create_physical_plan().await?;
    collect(Arc::clone(&plan), ctx.task_ctx()).await?;
    let mut sums: BTreeMap<&str, usize> = BTreeMap::new();
    let names = [
        "bytes_scanned",
        "files_opened",
        "files_pruned_manifest",
        "files_pruned_statistics",
        "files_pruned_dynamic",
        "row_groups_pruned",
    ];
    let mut stack: Vec<Arc<dyn ExecutionPlan>> = vec![plan];
    while let Some(p) = stack.pop() {
        if p.as_any().is::<IcebergScanExec>()
            && let Some(m) = p.metrics()
        {
            for n in names {
                *sums.entry(n).or_default() +=
                    m.sum_by_name(n).map(|v| v.as_usize()).unwrap_or_default();
            }
            *sums.entry("scan_output_rows").or_default() += m.output_rows().unwrap_or_default();
        }
        stack.extend(p.children().into_iter().cloned());
    }
    Ok(json!(sums))
}

fn machine() -> Value {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let mem_kib: u64 = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    json!({
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "memory_gib": mem_kib as f64 / 1024.0 / 1024.0,
        "loadavg": read("/proc/loadavg").split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    })
}

fn stats(times: &[f64]) -> (f64, f64, f64) {
    let mut t = times.to_vec();
    t.sort_by(|a, b| a.total_cmp(b));
    if t.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    (t[t.len() / 2], t[0], t[t.len() - 1])
}

/// Runs the benchmark and writes the results; errors after writing them when answers differ.
pub async fn run(args: Args) -> Result<()> {
    if args.rounds == 0 {
        return Err(DataFusionError::Plan("--rounds must be at least 1".into()));
    }
    let known = [
        "iceflight",
        "duckdb",
        "datafusion-parquet",
        "trino",
        "iceberg-datafusion",
    ];
    let trino_missing = args.trino_url.is_none().then_some(
        "no --trino-url: start it with bench/scripts/trino.sh on a REST copy of the data",
    );
    let missing_reason = |e: &str| match e {
        "trino" => trino_missing,
        _ => None,
    };
    for e in &args.engines {
        if !known.contains(&e.as_str()) && missing_reason(e).is_none() {
            return Err(DataFusionError::Plan(format!(
                "unknown engine {e} (known: iceflight, duckdb, datafusion-parquet, trino, iceberg-datafusion)"
            )));
        }
    }
    let qdir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("queries")
        .join(&args.suite);
    let mut queries: Vec<(String, String)> = vec![];
    let mut files: Vec<PathBuf> = std::fs::read_dir(&qdir)
        .map_err(|e| DataFusionError::Plan(format!("{}: {e}", qdir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    files.sort();
    for f in files {
        let name = f
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if args.queries.as_ref().is_none_or(|q| q.contains(&name)) {
            queries.push((name, std::fs::read_to_string(&f).map_err(ext)?));
        }
    }

    let mut config = Config {
        data_dir: args.data_dir.clone(),
        default_schema: args.namespace.clone(),
        ..Config::default()
    };
    config.query.target_partitions = 0;
    let engine = Engine::connect(config).await.map_err(ext)?;
    let partitions = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mut runners: Vec<(String, Runner)> = vec![];
    for e in &args.engines {
        let runner = match e.as_str() {
            "iceflight" => iceflight_runner(&engine).await?,
            "duckdb" => duckdb_runner(&args.python, &args.data_dir, &args.namespace)?,
            "datafusion-parquet" => {
                datafusion_runner(&engine, &args.namespace, partitions, Reader::RawParquet).await?
            }
            "iceberg-datafusion" => {
                datafusion_runner(&engine, &args.namespace, partitions, Reader::Upstream).await?
            }
            "trino" => match &args.trino_url {
                Some(url) => Runner::Trino {
                    http: reqwest::Client::new(),
                    url: url.trim_end_matches('/').to_string(),
                    catalog: "iceberg".into(),
                    schema: args
                        .trino_schema
                        .clone()
                        .unwrap_or_else(|| args.namespace.clone()),
                },
                None => continue,
            },
            _ => continue,
        };
        runners.push((e.clone(), runner));
    }

    let bar =
        indicatif::ProgressBar::new(((args.rounds + 1) * queries.len() * runners.len()) as u64);
    let mut times: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut answers: BTreeMap<(String, String), std::result::Result<Rows, String>> =
        BTreeMap::new();
    for round in 0..=args.rounds {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..runners.len()).collect()
        } else {
            (0..runners.len()).rev().collect()
        };
        for (q, sql) in &queries {
            for &i in &order {
                let (name, runner) = &mut runners[i];
                let key = (q.clone(), name.clone());
                match runner.run(sql).await {
                    Ok((rows, ms)) => {
                        if round > 0 {
                            times.entry(key.clone()).or_default().push(ms);
                        }
                        answers.insert(key, Ok(rows));
                    }
                    Err(e) => {
                        answers.insert(key, Err(e.to_string()));
                    }
                }
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();

    let mut mismatches = vec![];
    let mut results = vec![];
    for (q, sql) in &queries {
        let reference = args
            .engines
            .iter()
            .find_map(|e| answers.get(&(q.clone(), e.clone()))?.as_ref().ok());
        let iceflight_counters = if args.engines.iter().any(|e| e == "iceflight") {
            counters(&engine, &args.namespace, sql).await.ok()
        } else {
            None
        };
        for e in &args.engines {
            let key = (q.clone(), e.clone());
            let mut entry = json!({ "query": q, "engine": e });
            match (missing_reason(e), answers.get(&key)) {
                (Some(reason), _) => {
                    entry["status"] = json!("missing");
                    entry["reason"] = json!(reason);
                }
                (None, Some(Ok(rows))) => {
                    let (median, min, max) =
                        stats(times.get(&key).map(Vec::as_slice).unwrap_or(&[]));
                    entry["median_ms"] = json!(median);
                    entry["min_ms"] = json!(min);
                    entry["max_ms"] = json!(max);
                    entry["rows"] = json!(rows.len());
                    entry["status"] = json!("ok");
                    if reference.is_some_and(|r| !same_answer(r, rows)) {
                        entry["status"] = json!("mismatch");
                        mismatches.push(format!("{q} on {e}"));
                    }
                    if e == "iceflight"
                        && let Some(c) = &iceflight_counters
                    {
                        entry["counters"] = c.clone();
                    }
                }
                (None, Some(Err(msg))) => {
                    entry["status"] = json!("error");
                    entry["error"] = json!(msg);
                }
                (None, None) => entry["status"] = json!("error"),
            }
            results.push(entry);
        }
    }
    let report = json!({
        "suite": args.suite,
        "scale": args.scale,
        "rounds": args.rounds,
        "machine": machine(),
        "engines": args.engines,
        "queries": results,
    });
    std::fs::create_dir_all(&args.out_dir).map_err(ext)?;
    let stem = format!(
        "{}-sf{}-{}",
        args.suite,
        args.scale,
        chrono::Local::now().format("%Y%m%d")
    );
    let json_path = args.out_dir.join(format!("{stem}.json"));
    std::fs::write(
        &json_path,
        serde_json::to_string_pretty(&report).map_err(ext)?,
    )
    .map_err(ext)?;
    let md = markdown(&report, &args.engines);
    std::fs::write(args.out_dir.join(format!("{stem}.md")), &md).map_err(ext)?;
    println!("{md}");
    eprintln!("wrote {}", json_path.display());
    if !mismatches.is_empty() {
        return Err(DataFusionError::Execution(format!(
            "answers differ across engines: {}",
            mismatches.join(", ")
        )));
    }
    Ok(())
}

/// Per-query medians (ms) per engine and each engine's total relative to iceflight.
fn markdown(report: &Value, engines: &[String]) -> String {
    let mut out = format!(
        "{} SF {}, {} alternating rounds after a warm-up; median ms (status when not ok)\n\n| query |",
        report["suite"].as_str().unwrap_or(""),
        report["scale"].as_str().unwrap_or(""),
        report["rounds"]
    );
    for e in engines {
        out.push_str(&format!(" {e} |"));
    }
    out.push_str(&format!("\n|---|{}\n", "---|".repeat(engines.len())));
    let mut totals = vec![0.0; engines.len()];
    let entries = report["queries"].as_array().cloned().unwrap_or_default();
    let mut queries: Vec<String> = entries
        .iter()
        .filter_map(|e| e["query"].as_str().map(String::from))
        .collect();
    queries.dedup();
    for q in &queries {
        out.push_str(&format!("| {q} |"));
        for (i, e) in engines.iter().enumerate() {
            let entry = entries
                .iter()
                .find(|x| x["query"] == json!(q) && x["engine"] == json!(e));
            let cell = match entry {
                Some(x) if x["status"] == json!("ok") => {
                    let ms = x["median_ms"].as_f64().unwrap_or(f64::NAN);
                    totals[i] += ms;
                    format!("{ms:.1}")
                }
                Some(x) => x["status"].as_str().unwrap_or("?").to_string(),
                None => "?".into(),
            };
            out.push_str(&format!(" {cell} |"));
        }
        out.push('\n');
    }
    out.push_str("| total |");
    for t in &totals {
        out.push_str(&format!(" {t:.1} |"));
    }
    out.push('\n');
    if let Some(base) = engines
        .iter()
        .position(|e| e == "iceflight")
        .map(|i| totals[i])
    {
        out.push_str("| total / iceflight |");
        for t in &totals {
            out.push_str(&format!(" {:.2} |", t / base));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(cells: &[&[Option<&str>]]) -> Rows {
        cells
            .iter()
            .map(|r| r.iter().map(|c| c.map(String::from)).collect())
            .collect()
    }

    #[test]
    fn answers_compare_numbers_by_value_and_printed_precision() {
        let a = rows(&[&[Some("A"), Some("0.050009"), None]]);
        // Trino prints avg(decimal(15,2)) at scale 2: agrees to a unit of that digit.
        assert!(same_answer(&a, &rows(&[&[Some("A"), Some("0.05"), None]])));
        assert!(!same_answer(&a, &rows(&[&[Some("A"), Some("0.07"), None]])));
        // DataFusion truncates avg(decimal) to 6 places; DuckDB prints the double.
        assert!(same_answer(
            &rows(&[&[Some("25.522005")]]),
            &rows(&[&[Some("25.522005853257337")]])
        ));
        // Same printed precision: 1e-9 relative only.
        assert!(same_answer(
            &rows(&[&[Some("1193053.2253")]]),
            &rows(&[&[Some("1193053.2253000001")]])
        ));
        assert!(!same_answer(
            &rows(&[&[Some("1193053.2253")]]),
            &rows(&[&[Some("1193053.2353")]])
        ));
        // Text, NULLs and shape are exact.
        assert!(!same_answer(&a, &rows(&[&[Some("B"), Some("0.05"), None]])));
        assert!(!same_answer(
            &a,
            &rows(&[&[Some("A"), Some("0.05"), Some("x")]])
        ));
        assert!(!same_answer(&a, &rows(&[])));
    }
}
