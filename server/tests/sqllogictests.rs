//! The sqllogictest harness: every `.slt` file under `server/tests/slt/<fixture>/` runs as one
//! test against an iceflight engine on that fixture, through the statement path a Flight SQL
//! client takes (`sql::parse_statements` / `execute_statement`).
//!
//! Fixtures (built once per process, on first use, in a temporary directory):
//! - `cases`: the tables of `docs/cases.md` that pyiceberg writes (`tests/fixtures/make_cases.py`),
//!   namespace `cases`, 2 target partitions;
//! - `tpch`: TPC-H SF 0.01 loaded by iceflight's loader (512 KiB files, 8 Ki-row row groups),
//!   namespace `tpch`, 2 target partitions.
//!
//! Besides SQL, a record may use two harness statements (`slt/README.md`):
//! - `METRICS(name, …) <query>` runs the query and answers one row per named scan counter,
//!   `name value`, summed over every Iceberg scan of the plan (`table.name` sums one table's
//!   scans; `table.output_rows` is the rows a table's scans returned);
//! - `PLAN <query>` runs the query and answers the executed physical plan, one row per line, as
//!   `EXPLAIN ANALYZE` shows it without its metrics (dynamic filters as they ended).
//!
//! Numbers compare with a tolerance where the reference is a double (`validate`). Run with
//! `ICEFLIGHT_SLT_COMPLETE=1` to rewrite the expected output of the files that run from what the
//! engine answers — only for plans and counters, whose reference is the engine itself; answers
//! come from an independent oracle.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::Mutex;

use arrow::datatypes::DataType;
use async_trait::async_trait;
use datafusion::common::{DataFusionError, Result, plan_err};
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;
use iceflight::session::Engine;
use iceflight::sql::{execute_statement, parse_statements, plan_statement};
use sqllogictest::harness::{Arguments, Failed, Trial};
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType, Normalizer, Runner};

/// A fixture: a temporary data directory of the embedded catalog, built on first use.
struct Fixture {
    name: &'static str,
    namespace: &'static str,
    dir: Mutex<Option<tempfile::TempDir>>,
}

static FIXTURES: [Fixture; 2] = [
    Fixture {
        name: "cases",
        namespace: "cases",
        dir: Mutex::const_new(None),
    },
    Fixture {
        name: "tpch",
        namespace: "tpch",
        dir: Mutex::const_new(None),
    },
];

impl Fixture {
    fn named(name: &str) -> &'static Fixture {
        FIXTURES
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no fixture `{name}` (directories of server/tests/slt)"))
    }

    /// The fixture's data directory, built by the first caller while later ones wait.
    async fn path(&self) -> PathBuf {
        let mut dir = self.dir.lock().await;
        if dir.is_none() {
            let d = tempfile::tempdir().unwrap();
            self.build(d.path()).await;
            *dir = Some(d);
        }
        dir.as_ref().unwrap().path().to_path_buf()
    }

    async fn build(&self, dir: &Path) {
        match self.name {
            "cases" => common::make_case_fixtures(dir),
            "tpch" => {
                let engine = common::engine(dir, 2).await;
                let catalog = Arc::clone(engine.catalogs().get("local").unwrap());
                let options = iceflight_datagen::load::LoadOptions {
                    scale: 0.01,
                    target_file_size: 512 * 1024,
                    row_group_rows: 8192,
                    progress: false,
                    ..Default::default()
                };
                let namespace = iceberg::NamespaceIdent::new("tpch".into());
                iceflight_datagen::load::load_tpch(&catalog, &namespace, &options)
                    .await
                    .expect("load TPC-H SF 0.01");
            }
            other => unreachable!("fixture {other}"),
        }
    }
}

/// One connection of a test file: an engine on the fixture and a session in its namespace.
struct Iceflight {
    _engine: Engine,
    ctx: SessionContext,
    /// The fixture's directory, written `<fixture>` in plans.
    dir: String,
}

impl Iceflight {
    async fn connect(fixture: &Fixture) -> Result<Self> {
        let dir = fixture.path().await;
        let engine = common::engine(&dir, 2).await;
        let ctx = engine.session(None, Some(fixture.namespace), &[])?;
        Ok(Self {
            _engine: engine,
            ctx,
            dir: dir.display().to_string(),
        })
    }

    /// Plans and runs one query, keeping its executed physical plan.
    async fn executed(&self, sql: &str) -> Result<Arc<dyn ExecutionPlan>> {
        let mut statements = parse_statements(sql)?;
        if statements.len() != 1 {
            return plan_err!("the harness runs one statement at a time");
        }
        let logical = plan_statement(&self.ctx, statements.remove(0)).await?;
        let plan = self.ctx.state().create_physical_plan(&logical).await?;
        collect(Arc::clone(&plan), self.ctx.task_ctx()).await?;
        Ok(plan)
    }

    async fn metrics(&self, names: &str, sql: &str) -> Result<Vec<Vec<String>>> {
        let plan = self.executed(sql).await?;
        Ok(names
            .split(',')
            .map(str::trim)
            .map(|name| {
                let value = match name.split_once('.') {
                    Some((table, metric)) => common::table_scan_metric(&plan, table, metric),
                    None => common::scan_metric(&plan, name),
                };
                vec![name.to_string(), value.to_string()]
            })
            .collect())
    }

    async fn plan(&self, sql: &str) -> Result<Vec<Vec<String>>> {
        let plan = self.executed(sql).await?;
        Ok(common::plan_text(&plan)
            .lines()
            .map(|line| vec![line.replace(&self.dir, "<fixture>")])
            .collect())
    }

    async fn statements(&self, sql: &str) -> Result<(Vec<DefaultColumnType>, Vec<Vec<String>>)> {
        let mut types = vec![];
        let mut rows = vec![];
        for statement in parse_statements(sql)? {
            let stream = execute_statement(&self.ctx, statement).await?;
            types = stream
                .schema()
                .fields()
                .iter()
                .map(|f| column_type(f.data_type()))
                .collect();
            let batches: Vec<_> = stream.try_collect().await?;
            rows = common::rows(&batches);
        }
        let rows = rows
            .into_iter()
            .map(|row| {
                row.into_iter()
                    .map(|cell| {
                        if cell.is_empty() {
                            "(empty)".into()
                        } else {
                            cell
                        }
                    })
                    .collect()
            })
            .collect();
        Ok((types, rows))
    }
}

#[async_trait]
impl AsyncDB for Iceflight {
    type Error = DataFusionError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>> {
        let sql = sql.trim_start();
        if let Some(rest) = sql.strip_prefix("METRICS(") {
            let Some((names, query)) = rest.split_once(')') else {
                return plan_err!("METRICS(name, …) <query>: no closing parenthesis");
            };
            let rows = self.metrics(names, query).await?;
            let types = vec![DefaultColumnType::Text, DefaultColumnType::Integer];
            return Ok(DBOutput::Rows { types, rows });
        }
        if let Some(query) = sql.strip_prefix("PLAN ") {
            let rows = self.plan(query).await?;
            let types = vec![DefaultColumnType::Text];
            return Ok(DBOutput::Rows { types, rows });
        }
        let (types, rows) = self.statements(sql).await?;
        Ok(DBOutput::Rows { types, rows })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "iceflight"
    }

    async fn sleep(dur: std::time::Duration) {
        tokio::time::sleep(dur).await
    }
}

fn column_type(t: &DataType) -> DefaultColumnType {
    if t.is_integer() {
        DefaultColumnType::Integer
    } else if t.is_floating() || matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..)) {
        DefaultColumnType::FloatingPoint
    } else {
        DefaultColumnType::Text
    }
}

/// Compares whitespace-separated tokens. Tokens equal as text (trailing fractional zeros
/// ignored: DuckDB writes a decimal at its declared scale) match; so do two numbers within
/// 1e-9 relative. Where the expected number has more than 8 fractional digits (a double, as
/// DuckDB prints `avg`), the actual one may also differ by one unit in its own last place: a
/// DataFusion decimal of that scale is truncated, not rounded.
fn validate(normalizer: Normalizer, actual: &[Vec<String>], expected: &[String]) -> bool {
    let actual: Vec<String> = actual
        .iter()
        .map(|row| row.iter().map(normalizer).collect::<Vec<_>>().join(" "))
        .collect();
    if actual.len() != expected.len() {
        return false;
    }
    actual.iter().zip(expected).all(|(a, e)| {
        let (a, e): (Vec<&str>, Vec<&str>) = (
            a.split_whitespace().collect(),
            e.split_whitespace().collect(),
        );
        a.len() == e.len() && a.iter().zip(&e).all(|(a, e)| token_matches(a, e))
    })
}

fn token_matches(actual: &str, expected: &str) -> bool {
    let (actual, expected) = (trim_fraction(actual), trim_fraction(expected));
    if actual == expected {
        return true;
    }
    let (Ok(a), Ok(e)) = (actual.parse::<f64>(), expected.parse::<f64>()) else {
        return false;
    };
    let digits = |s: &str| s.split_once('.').map_or(0, |(_, f)| f.len());
    let mut tolerance = 1e-9 * a.abs().max(e.abs());
    if digits(expected) > 8 {
        tolerance += 10f64.powi(-(digits(actual) as i32));
    }
    (a - e).abs() <= tolerance
}

/// `1.50` → `1.5`, `2.00` → `2`; anything without a `.` as it is.
fn trim_fraction(s: &str) -> &str {
    if s.contains('.') && s.parse::<f64>().is_ok() {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

fn run_file(path: &Path, fixture: &'static Fixture) -> std::result::Result<(), Failed> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut runner = Runner::new(move || Iceflight::connect(fixture));
        runner.with_validator(validate);
        if std::env::var_os("ICEFLIGHT_SLT_COMPLETE").is_some() {
            runner
                .update_test_file(
                    path,
                    " ",
                    validate,
                    sqllogictest::default_normalizer,
                    sqllogictest::default_column_validator,
                )
                .await
                .map_err(|e| Failed::from(e.to_string()))
        } else {
            runner
                .run_file_async(path)
                .await
                .map_err(|e| Failed::from(e.display(true).to_string()))
        }
    })
}

fn main() {
    let args = Arguments::from_args();
    let root = common::repo_root().join("server/tests/slt");
    let mut files: Vec<PathBuf> =
        sqllogictest::harness::glob(&format!("{}/*/*.slt", root.display()))
            .unwrap()
            .map(|p| p.unwrap())
            .collect();
    files.sort();
    assert!(!files.is_empty(), "no .slt file under {}", root.display());
    let trials = files
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(&root).unwrap().display().to_string();
            let fixture = path
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_str()
                .unwrap();
            let fixture = Fixture::named(fixture);
            Trial::test(relative, move || run_file(&path, fixture))
        })
        .collect();
    let conclusion = sqllogictest::harness::run(&args, trials);
    // The fixtures' directories are removed before exiting (statics are never dropped).
    for fixture in &FIXTURES {
        fixture.dir.blocking_lock().take();
    }
    conclusion.exit();
}
