//! Shared helpers for iceflight's integration tests: Python fixtures, engines on temporary data
//! directories, result formatting and reference-answer comparison.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use iceflight::config::Config;
use iceflight::session::Engine;

/// Repository root (the workspace directory).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The Python of the test venv: `$ICEFLIGHT_PYTHON`, else `$HOME/.cache/iceflight-venv/bin/python`
/// (made by `scripts/setup-python.sh`). Panics with instructions when missing.
pub fn python() -> PathBuf {
    let p = std::env::var_os("ICEFLIGHT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/iceflight-venv/bin/python")
        });
    assert!(
        p.exists(),
        "test Python not found at {} — run scripts/setup-python.sh (or set ICEFLIGHT_PYTHON)",
        p.display()
    );
    p
}

/// Builds the case fixtures (namespace `cases`) with pyiceberg into `dir` (`catalog.db`,
/// `warehouse/`), the layout of iceflight's embedded catalog.
pub fn make_case_fixtures(dir: &Path) {
    let out = Command::new(python())
        .arg(repo_root().join("tests/fixtures/make_cases.py"))
        .arg("--catalog-db")
        .arg(dir.join("catalog.db"))
        .arg("--warehouse")
        .arg(dir.join("warehouse"))
        .arg("--replace")
        .output()
        .expect("run make_cases.py");
    assert!(
        out.status.success(),
        "make_cases.py failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An engine on the embedded catalog in `dir`, with `target_partitions` partitions.
pub async fn engine(dir: &Path, target_partitions: usize) -> Engine {
    let mut config = Config {
        data_dir: dir.to_path_buf(),
        ..Config::default()
    };
    config.query.target_partitions = target_partitions;
    Engine::connect(config)
        .await
        .expect("connect embedded catalog")
}

/// TPC-H at `scale` loaded by our loader into namespace `tpch` of the embedded catalog of
/// `engine` (8 MiB files, 65 536-row row groups: several lineitem files at SF 0.1).
pub async fn load_tpch_local(engine: &Engine, scale: f64) -> iceflight_datagen::load::LoadReport {
    let catalog = Arc::clone(engine.catalogs().get("local").expect("embedded catalog"));
    let options = iceflight_datagen::load::LoadOptions {
        scale,
        target_file_size: 8 * 1024 * 1024,
        row_group_rows: 65536,
        progress: false,
        ..Default::default()
    };
    let namespace = iceberg::NamespaceIdent::new("tpch".into());
    iceflight_datagen::load::load_tpch(&catalog, &namespace, &options)
        .await
        .expect("load TPC-H")
}

/// A query's output and its executed physical plan (for metrics).
pub struct Executed {
    pub batches: Vec<RecordBatch>,
    pub plan: Arc<dyn ExecutionPlan>,
}

/// Plans and runs `sql`, keeping the physical plan.
pub async fn execute(ctx: &SessionContext, sql: &str) -> datafusion::common::Result<Executed> {
    let df = ctx.sql(sql).await?;
    let plan = df.create_physical_plan().await?;
    let batches = collect(Arc::clone(&plan), ctx.task_ctx()).await?;
    Ok(Executed { batches, plan })
}

/// Every `IcebergScanExec` in a plan, once each (a shared subplan's scan sits under each of
/// its consumers).
pub fn scans(plan: &Arc<dyn ExecutionPlan>) -> Vec<Arc<dyn ExecutionPlan>> {
    let mut out: Vec<Arc<dyn ExecutionPlan>> = vec![];
    let mut stack = vec![Arc::clone(plan)];
    while let Some(p) = stack.pop() {
        if p.name() == "IcebergScanExec" && !out.iter().any(|o| Arc::ptr_eq(o, &p)) {
            out.push(Arc::clone(&p));
        }
        stack.extend(p.children().into_iter().cloned());
    }
    out
}

/// Sum of a named metric over every scan in the plan.
pub fn scan_metric(plan: &Arc<dyn ExecutionPlan>, name: &str) -> usize {
    scans(plan)
        .iter()
        .filter_map(|s| s.metrics())
        .filter_map(|m| m.sum_by_name(name))
        .map(|v| v.as_usize())
        .sum()
}

/// Formats every cell as text (`NULL` for nulls), row by row.
pub fn rows(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    let options = FormatOptions::default().with_null("NULL");
    let mut out = vec![];
    for b in batches {
        let formatters: Vec<_> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
            .collect();
        for r in 0..b.num_rows() {
            out.push(formatters.iter().map(|f| f.value(r).to_string()).collect());
        }
    }
    out
}

/// Runs `sql` and returns its rows as text.
pub async fn query(ctx: &SessionContext, sql: &str) -> Vec<Vec<String>> {
    let batches = ctx
        .sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows(&batches)
}

/// Runs `sql` and returns its first column as text.
pub async fn column(ctx: &SessionContext, sql: &str) -> Vec<String> {
    query(ctx, sql)
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect()
}

/// Compares a result cell with a reference cell written by DuckDB (`exp_type` is DuckDB's type
/// name). Decimals compare exactly; doubles to 1e-9 relative; a DataFusion decimal of scale `s`
/// against a DuckDB double (e.g. `avg`) to half a unit in the last place DataFusion keeps.
pub fn cell_matches(
    expected: Option<&str>,
    exp_type: &str,
    ours: &str,
    our_type: &DataType,
) -> bool {
    let Some(expected) = expected else {
        return ours == "NULL";
    };
    if ours == "NULL" {
        return false;
    }
    let exp_decimal = exp_type.starts_with("DECIMAL");
    let exp_float = matches!(exp_type, "DOUBLE" | "FLOAT" | "REAL");
    let our_decimal_scale = match our_type {
        DataType::Decimal128(_, s) | DataType::Decimal256(_, s) => Some(*s),
        _ => None,
    };
    let our_float = matches!(our_type, DataType::Float32 | DataType::Float64);
    if exp_decimal && our_decimal_scale.is_some() {
        return normalize_decimal(expected) == normalize_decimal(ours);
    }
    if exp_float || our_float || exp_decimal || our_decimal_scale.is_some() {
        let (Ok(e), Ok(o)) = (expected.parse::<f64>(), ours.parse::<f64>()) else {
            return false;
        };
        let mut tolerance = 1e-9 * e.abs().max(o.abs()) + 1e-12;
        if let (true, Some(s)) = (exp_float, our_decimal_scale) {
            tolerance += 10f64.powi(-i32::from(s));
        }
        return (e - o).abs() <= tolerance;
    }
    expected == ours
}

fn normalize_decimal(s: &str) -> String {
    let s = s.trim();
    if !s.contains('.') {
        return s.to_string();
    }
    let t = s.trim_end_matches('0').trim_end_matches('.');
    if t == "-0" { "0".into() } else { t.to_string() }
}

/// A reference answer file (`bench/answers/...`).
#[derive(serde::Deserialize)]
pub struct Answer {
    pub columns: Vec<String>,
    pub types: Vec<String>,
    pub rows: Vec<Vec<Option<String>>>,
}

/// Compares batches with a reference answer; `Err` describes the first difference.
pub fn compare(batches: &[RecordBatch], answer: &Answer) -> Result<(), String> {
    let got = rows(batches);
    let types: Vec<DataType> = batches
        .first()
        .map(|b| {
            b.schema()
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect()
        })
        .unwrap_or_default();
    if got.len() != answer.rows.len() {
        return Err(format!(
            "{} rows, expected {}",
            got.len(),
            answer.rows.len()
        ));
    }
    for (i, (g, e)) in got.iter().zip(&answer.rows).enumerate() {
        if g.len() != e.len() {
            return Err(format!(
                "row {i}: {} columns, expected {}",
                g.len(),
                e.len()
            ));
        }
        for (j, (gc, ec)) in g.iter().zip(e).enumerate() {
            if !cell_matches(ec.as_deref(), &answer.types[j], gc, &types[j]) {
                return Err(format!(
                    "row {i} column {} ({}): got {gc}, expected {ec:?}",
                    answer.columns[j], answer.types[j]
                ));
            }
        }
    }
    Ok(())
}

/// Sum of a named metric over the scans of one table (by table name, e.g. `lineitem`).
pub fn table_scan_metric(plan: &Arc<dyn ExecutionPlan>, table: &str, name: &str) -> usize {
    scans(plan)
        .iter()
        .filter(|s| {
            s.downcast_ref::<iceflight_scan::IcebergScanExec>()
                .is_some_and(|e| e.table().identifier().name() == table)
        })
        .filter_map(|s| s.metrics())
        .filter_map(|m| {
            // `output_rows` is not a named counter: `sum_by_name` never matches it.
            if name == "output_rows" {
                m.output_rows()
            } else {
                m.sum_by_name(name).map(|v| v.as_usize())
            }
        })
        .sum()
}

/// The plan as text, with metrics (what EXPLAIN ANALYZE shows).
pub fn plan_text(plan: &Arc<dyn ExecutionPlan>) -> String {
    datafusion::physical_plan::displayable(plan.as_ref())
        .indent(true)
        .to_string()
}

/// The executed plan's `IcebergScanExec` lines, whole and unindented, one per scan: what a
/// snapshot asserts (domains, gate decisions, dynamic filters as they ended), never fragments.
pub fn scan_lines(plan: &Arc<dyn ExecutionPlan>) -> String {
    plan_text(plan)
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("IcebergScanExec: "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs SQL text as a client's statement runs (iceflight's front end: `FOR … AS OF` rewritten,
/// `ALTER TABLE` and `CREATE TABLE … WITH` planned by iceflight); rows as text.
pub async fn statement_rows(
    ctx: &SessionContext,
    text: &str,
) -> datafusion::common::Result<Vec<Vec<String>>> {
    use futures::TryStreamExt;
    let mut out = vec![];
    for statement in iceflight::sql::parse_statements(text)? {
        let stream = iceflight::sql::execute_statement(ctx, statement).await?;
        let batches: Vec<RecordBatch> = stream.try_collect().await?;
        out.extend(rows(&batches));
    }
    Ok(out)
}

/// [`statement_rows`] that must succeed.
pub async fn statement_ok(ctx: &SessionContext, text: &str) -> Vec<Vec<String>> {
    statement_rows(ctx, text)
        .await
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// [`statement_ok`]'s rows sorted as text.
pub async fn statement_sorted(ctx: &SessionContext, text: &str) -> Vec<Vec<String>> {
    let mut out = statement_ok(ctx, text).await;
    out.sort();
    out
}

/// A fresh embedded catalog with namespace `history` (table `events`, partitioned by `p` and
/// `x`, built by `make_history.py`), an engine on it and a session in `history`.
pub async fn history_session() -> (tempfile::TempDir, Engine, SessionContext) {
    let dir = tempfile::tempdir().unwrap();
    make_history(dir.path());
    let engine = engine(dir.path(), 2).await;
    let ctx = engine.session(None, Some("history"), &[]).unwrap();
    (dir, engine, ctx)
}

/// Builds `history.events` with pyiceberg (`tests/fixtures/make_history.py`: snapshots, a tag,
/// a branch, a column and a partition field added) into `dir`; returns what pyiceberg reads of
/// it.
pub fn make_history(dir: &Path) -> serde_json::Value {
    let out = Command::new(python())
        .arg(repo_root().join("tests/fixtures/make_history.py"))
        .arg("--catalog-db")
        .arg(dir.join("catalog.db"))
        .arg("--warehouse")
        .arg(dir.join("warehouse"))
        .output()
        .expect("run make_history.py");
    assert!(
        out.status.success(),
        "make_history.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("make_history.py prints JSON")
}

/// A JSON value of a Python oracle as the text [`rows`] prints (`NULL`, strings unquoted).
pub fn json_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "NULL".to_string(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The rows of `sql`'s (single) Iceberg scan, split into `tasks` worker tasks, each encoded
/// with `codec`, decoded and run as a worker would; unsorted.
pub async fn rows_through_codec(
    ctx: &SessionContext,
    codec: &iceflight_scan::distributed::codec::IcebergScanCodec,
    sql: &str,
    tasks: usize,
) -> datafusion::common::Result<Vec<Vec<String>>> {
    use datafusion_proto::physical_plan::PhysicalExtensionCodec;
    let plan = ctx.sql(sql).await?.create_physical_plan().await?;
    let scan = scans(&plan).pop().expect("a scan");
    let scan = scan
        .downcast_ref::<iceflight_scan::IcebergScanExec>()
        .expect("an Iceberg scan");
    let mut out = vec![];
    for part in scan.split_for_tasks(tasks) {
        let mut bytes = vec![];
        codec.try_encode(Arc::new(part), &mut bytes)?;
        let decoded = codec.try_decode(&bytes, &[], &ctx.task_ctx())?;
        out.extend(rows(&collect(decoded, ctx.task_ctx()).await?));
    }
    Ok(out)
}

/// A Flight SQL server on `engine` in this process, with users `name:password` (each at most
/// once), running until the test ends; its address.
pub async fn serve_flight(engine: Engine, users: &[&str]) -> std::net::SocketAddr {
    let users: Vec<String> = users.iter().map(|u| u.to_string()).collect();
    let users = iceflight::flight::users(&engine.config().server, &users).unwrap();
    iceflight::flight::serve_on_loopback(engine, users)
        .await
        .unwrap()
}

/// A plaintext gRPC channel to `addr` (`host:port`), connected.
pub async fn channel(addr: impl std::fmt::Display) -> tonic::transport::Channel {
    tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// A Flight SQL client of `addr`, logged in as `user` with `password`.
pub async fn flight_client(
    addr: std::net::SocketAddr,
    user: &str,
    password: &str,
) -> arrow_flight::sql::client::FlightSqlServiceClient<tonic::transport::Channel> {
    let mut client = arrow_flight::sql::client::FlightSqlServiceClient::new(channel(addr).await);
    client.handshake(user, password).await.unwrap();
    client
}

/// Runs `sql` as a client's statement (GetFlightInfo, then DoGet of its ticket): its
/// batches, or the error's text.
pub async fn flight_run(
    client: &mut arrow_flight::sql::client::FlightSqlServiceClient<tonic::transport::Channel>,
    sql: &str,
) -> Result<Vec<RecordBatch>, String> {
    use futures::TryStreamExt;
    let info = client
        .execute(sql.to_string(), None)
        .await
        .map_err(|e| e.to_string())?;
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    client
        .do_get(ticket)
        .await
        .map_err(|e| e.to_string())?
        .try_collect()
        .await
        .map_err(|e| e.to_string())
}

/// `message` as a request carrying `token` (`authorization: Bearer <token>`), for calls made
/// without arrow-flight's Flight SQL client.
pub fn with_token<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

/// `running_queries` of the server's status action (`iceflight.ServerStatus`).
pub async fn running_queries(
    client: &mut arrow_flight::sql::client::FlightSqlServiceClient<tonic::transport::Channel>,
) -> u64 {
    use futures::TryStreamExt;
    let mut results = client
        .do_action(arrow_flight::Action::new(
            iceflight::flight::service::SERVER_STATUS_ACTION,
            "",
        ))
        .await
        .unwrap();
    let body = results.try_next().await.unwrap().unwrap().body;
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    status["running_queries"].as_u64().unwrap()
}

/// `tests/fixtures/pyiceberg_rw.py`'s command `args` on the embedded catalog in `dir`; its
/// stdout lines.
#[allow(dead_code)]
pub fn pyiceberg_rw(dir: &Path, args: &[&str]) -> Vec<String> {
    let out = std::process::Command::new(python())
        .arg(repo_root().join("tests/fixtures/pyiceberg_rw.py"))
        .arg("--catalog-db")
        .arg(dir.join("catalog.db"))
        .arg("--warehouse")
        .arg(dir.join("warehouse"))
        .args(args)
        .output()
        .expect("run pyiceberg_rw.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The rows of a `pyiceberg_rw.py` JSON line, each as text (NULL for None), sorted as text.
#[allow(dead_code)]
pub fn oracle_rows(line: &str) -> Vec<Vec<String>> {
    let read: serde_json::Value = serde_json::from_str(line).unwrap();
    let mut rows: Vec<Vec<String>> = read["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(json_text).collect())
        .collect();
    rows.sort();
    rows
}

/// Asserts that the statement `text` fails with `code`, in one line naming `says`.
pub async fn refused(ctx: &SessionContext, text: &str, code: tonic::Code, says: &str) {
    let err = statement_rows(ctx, text).await.unwrap_err();
    let status = iceflight::flight::status::to_status(err);
    assert_eq!(status.code(), code, "{text}: {status}");
    assert!(status.message().contains(says), "{text}: {status}");
    assert!(!status.message().contains('\n'), "{text}: {status}");
}

/// Runs `sql` (one statement reading `table`, `namespace.table`) and answers its rows and the
/// files its scan read, from `system.runtime.table_access`: a scan is recorded once its plan
/// and its partitions' streams are dropped, which may end on the runtime's threads just after
/// the rows arrive, so the record is awaited (up to 2 s).
#[allow(dead_code)]
pub async fn rows_and_files_read(
    ctx: &SessionContext,
    table: &str,
    sql: &str,
) -> (Vec<Vec<String>>, u64) {
    let count =
        format!("SELECT count(*) FROM system.runtime.table_access WHERE \"table\" = '{table}'");
    let before = statement_ok(ctx, &count).await;
    let rows = statement_ok(ctx, sql).await;
    for _ in 0..100 {
        if statement_ok(ctx, &count).await != before {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let files = statement_ok(
        ctx,
        &format!(
            "SELECT files_read FROM system.runtime.table_access WHERE \"table\" = '{table}' \
             ORDER BY ended DESC LIMIT 1"
        ),
    )
    .await;
    (rows, files[0][0].parse().unwrap())
}

/// A certificate authority made for a test (rcgen): its certificate (PEM) and what signs with it.
pub struct TestCa {
    pub pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    /// A self-signed CA named `name`.
    pub fn new(name: &str) -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Self {
            pem,
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A certificate for `names` signed by this CA: `(certificate PEM, key PEM)`.
    pub fn sign(&self, names: &[&str]) -> (String, String) {
        let params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}
