//! Command line: `iceflight sql ...` and `iceflight load tpch ...`.
//!
//! Settings are resolved as: config file (`--config` / `ICEFLIGHT_CONFIG`) < `ICEFLIGHT_*`
//! environment variables < flags (clap reads each flag's variable when the flag is absent).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use iceberg::NamespaceIdent;
use iceflight_catalog::load::{LoadOptions, load_nested, load_tpch, parse_size};
use iceflight_catalog::nested::NestedLayout;

use crate::config::Config;
use crate::output::{self, Format};
use crate::session::{Engine, run_sql};

/// Arrow Flight SQL query server for Iceberg tables.
#[derive(Debug, Parser)]
#[command(name = "iceflight", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options shared by every command; each overrides the config file.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// TOML configuration file (see config/iceflight.toml).
    #[arg(long, global = true, env = "ICEFLIGHT_CONFIG")]
    pub config: Option<PathBuf>,
    /// Data directory of the embedded catalog [default: ./iceflight-data].
    #[arg(long, global = true, env = "ICEFLIGHT_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Partitions per query (0 = number of cores).
    #[arg(long, global = true, env = "ICEFLIGHT_TARGET_PARTITIONS")]
    pub target_partitions: Option<usize>,
    /// Rows per batch.
    #[arg(long, global = true, env = "ICEFLIGHT_BATCH_SIZE")]
    pub batch_size: Option<usize>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run SQL statements and print the results.
    Sql(SqlArgs),
    /// Generate a benchmark data set into Iceberg tables.
    #[command(subcommand)]
    Load(LoadCommand),
    /// Serve Arrow Flight SQL.
    Serve(ServeArgs),
    /// Serve the embedded catalog with TPC-H SF 0.1 (loaded on first start) and print how to connect.
    Demo(DemoArgs),
    /// Print an argon2 hash of a password for `[[server.user]] password_hash`.
    HashPassword {
        /// The password.
        password: String,
    },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:50051].
    #[arg(long, env = "ICEFLIGHT_LISTEN")]
    pub listen: Option<String>,
    /// A user NAME:PASSWORD (hashed at start-up); repeatable.
    #[arg(long = "user", value_name = "NAME:PASSWORD")]
    pub users: Vec<String>,
    /// Catalog for unqualified names.
    #[arg(long, env = "ICEFLIGHT_DEFAULT_CATALOG")]
    pub default_catalog: Option<String>,
    /// Schema for unqualified names.
    #[arg(long, env = "ICEFLIGHT_DEFAULT_SCHEMA")]
    pub default_schema: Option<String>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Address to listen on [default: 127.0.0.1:50051].
    #[arg(long, env = "ICEFLIGHT_LISTEN")]
    pub listen: Option<String>,
}

/// The demo's login when no user is configured.
pub const DEMO_USER: &str = "demo:iceflight";

#[derive(Debug, Args)]
pub struct SqlArgs {
    /// Catalog for unqualified table names.
    #[arg(long, env = "ICEFLIGHT_DEFAULT_CATALOG")]
    pub catalog: Option<String>,
    /// Schema (namespace) for unqualified table names.
    #[arg(long, env = "ICEFLIGHT_DEFAULT_SCHEMA")]
    pub schema: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Session setting KEY=VALUE (`datafusion.*` or `iceflight.*`); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
    /// SQL text (one or more statements); read from stdin when absent.
    pub sql: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum LoadCommand {
    /// TPC-H, generated in process (the same rows as dbgen / tpchgen-cli).
    Tpch(TpchArgs),
    /// The nested-field table `nested` (a wide struct and a flat control column).
    Nested(NestedArgs),
}

#[derive(Debug, Args)]
pub struct NestedArgs {
    /// Rows (every key 0..rows once).
    #[arg(long, default_value_t = 400_000)]
    pub rows: usize,
    /// Row order: clustered (by s.key), zorder (s.key with s.addr.zip) or random.
    #[arg(long, default_value = "clustered")]
    pub layout: NestedLayout,
    /// Namespace to create (dots make a multi-level namespace).
    #[arg(long)]
    pub namespace: String,
    /// Catalog to write into [default: the default catalog].
    #[arg(long, env = "ICEFLIGHT_DEFAULT_CATALOG")]
    pub catalog: Option<String>,
    /// Roll to a new data file past this size (e.g. 4MiB).
    #[arg(long, default_value = "512MiB")]
    pub target_file_size: String,
    /// Rows per Parquet row group.
    #[arg(long, default_value_t = 10_000)]
    pub row_group_rows: usize,
    /// Replace an existing namespace.
    #[arg(long)]
    pub replace: bool,
}

#[derive(Debug, Args)]
pub struct TpchArgs {
    /// Scale factor (1 = 6M lineitem rows).
    #[arg(long)]
    pub scale: f64,
    /// Namespace to create (dots make a multi-level namespace).
    #[arg(long)]
    pub namespace: String,
    /// Catalog to write into [default: the default catalog].
    #[arg(long, env = "ICEFLIGHT_DEFAULT_CATALOG")]
    pub catalog: Option<String>,
    /// Sort a table before writing: TABLE=COL[,COL..]; repeatable.
    #[arg(long = "sort", value_name = "TABLE=COL[,COL..]")]
    pub sort: Vec<String>,
    /// Roll to a new data file past this size (e.g. 4MiB).
    #[arg(long, default_value = "512MiB")]
    pub target_file_size: String,
    /// Rows per Parquet row group.
    #[arg(long, default_value_t = 131072)]
    pub row_group_rows: usize,
    /// Replace an existing namespace.
    #[arg(long)]
    pub replace: bool,
}

/// A command failure, printed as one line on stderr.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CliError(pub String);

impl CliError {
    fn from_display(e: impl std::fmt::Display) -> Self {
        Self(e.to_string())
    }
}

/// The message of an engine error for a person: catalog errors without DataFusion's
/// "External error" wrapping, everything else as DataFusion prints it.
fn df_message(e: &datafusion::common::DataFusionError) -> String {
    match e.find_root() {
        datafusion::common::DataFusionError::External(inner) => inner.to_string(),
        _ => e.strip_backtrace(),
    }
}

/// Resolves the configuration: file, then environment and flags.
pub fn resolve_config(global: &GlobalArgs) -> Result<Config, CliError> {
    let mut config = match &global.config {
        Some(path) => Config::from_file(path).map_err(CliError::from_display)?,
        None => Config::default(),
    };
    if let Some(d) = &global.data_dir {
        config.data_dir = d.clone();
    }
    if let Some(n) = global.target_partitions {
        config.query.target_partitions = n;
    }
    if let Some(n) = global.batch_size {
        config.query.batch_size = n;
    }
    Ok(config)
}

/// Runs a parsed command line, writing results to `out`.
pub async fn run(cli: Cli, out: &mut dyn Write) -> Result<(), CliError> {
    let config = resolve_config(&cli.global)?;
    match cli.command {
        Command::Sql(args) => run_sql_command(config, args, out).await,
        Command::Load(LoadCommand::Tpch(args)) => run_load(config, args, out).await,
        Command::Load(LoadCommand::Nested(args)) => run_load_nested(config, args, out).await,
        Command::Serve(args) => run_serve(config, args, out).await,
        Command::Demo(args) => run_demo(config, args, out).await,
        Command::HashPassword { password } => {
            let hash = crate::flight::auth::hash_password(&password).map_err(CliError)?;
            writeln!(out, "{hash}").map_err(CliError::from_display)
        }
    }
}

fn listen_addr(config: &Config, flag: Option<&str>) -> Result<std::net::SocketAddr, CliError> {
    let text = flag.unwrap_or(&config.server.listen);
    use std::net::ToSocketAddrs;
    text.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            CliError(format!(
                "invalid listen address {text:?} (e.g. 127.0.0.1:50051)"
            ))
        })
}

async fn run_serve(
    mut config: Config,
    args: ServeArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if let Some(c) = args.default_catalog {
        config.default_catalog = Some(c);
    }
    if let Some(s) = args.default_schema {
        config.default_schema = s;
    }
    let addr = listen_addr(&config, args.listen.as_deref())?;
    let users = crate::flight::users(&config.server, &args.users).map_err(CliError)?;
    let engine = Engine::connect(config)
        .await
        .map_err(CliError::from_display)?;
    let mut ready = None;
    crate::flight::serve(engine, users, addr, crate::flight::shutdown_signal(), |a| {
        ready = Some(a)
    })
    .await
    .map_err(CliError)?;
    let _ = (ready, out);
    Ok(())
}

async fn run_demo(mut config: Config, args: DemoArgs, out: &mut dyn Write) -> Result<(), CliError> {
    if config.default_schema == Config::default().default_schema {
        config.default_schema = "tpch".to_string();
    }
    let addr = listen_addr(&config, args.listen.as_deref())?;
    let quick = if config.server.users.is_empty() && config.server.auth_required() {
        vec![DEMO_USER.to_string()]
    } else {
        vec![]
    };
    let users = crate::flight::users(&config.server, &quick).map_err(CliError)?;
    let engine = Engine::connect(config)
        .await
        .map_err(CliError::from_display)?;
    let catalog_name = engine
        .config()
        .effective_default_catalog()
        .map_err(CliError::from_display)?;
    let catalog = engine
        .catalogs()
        .get(&catalog_name)
        .map_err(CliError::from_display)?;
    let namespace = NamespaceIdent::new("tpch".into());
    if !catalog
        .namespace_exists(&namespace)
        .await
        .map_err(CliError::from_display)?
    {
        writeln!(
            out,
            "loading TPC-H SF 0.1 into {catalog_name}.tpch (first start only)..."
        )
        .map_err(CliError::from_display)?;
        let options = LoadOptions {
            scale: 0.1,
            target_file_size: 16 * 1024 * 1024,
            ..LoadOptions::default()
        };
        load_tpch(catalog, &namespace, &options)
            .await
            .map_err(CliError::from_display)?;
    }
    let (user, password) = quick
        .first()
        .and_then(|q| q.split_once(':'))
        .map(|(u, p)| (u.to_string(), p.to_string()))
        .unwrap_or_else(|| ("<user>".into(), "<password>".into()));
    let mut banner = String::new();
    crate::flight::serve(engine, users, addr, crate::flight::shutdown_signal(), |a| {
        banner = format!(
            "iceflight {} serving Flight SQL on {a} (catalog {catalog_name}, schema tpch)\n\n\
             Python (ADBC):\n  import adbc_driver_flightsql.dbapi as flight_sql\n  \
             conn = flight_sql.connect(\"grpc://{a}\", db_kwargs={{\"username\": \"{user}\", \"password\": \"{password}\"}})\n  \
             cur = conn.cursor(); cur.execute(\"SELECT count(*) FROM lineitem\"); print(cur.fetchall())\n\n\
             JDBC:\n  jdbc:arrow-flight-sql://{a}/?useEncryption=false&user={user}&password={password}&catalog={catalog_name}\n\n\
             Stop with Ctrl-C.",
            env!("CARGO_PKG_VERSION")
        );
        println!("{banner}");
    })
    .await
    .map_err(CliError)
}

async fn run_sql_command(
    config: Config,
    args: SqlArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let settings = args
        .settings
        .iter()
        .map(|s| {
            s.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| CliError(format!("--set expects KEY=VALUE, got {s:?}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let sql = match args.sql {
        Some(s) => s,
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| CliError(format!("reading SQL from stdin: {e}")))?;
            s
        }
    };
    let engine = Engine::connect(config)
        .await
        .map_err(CliError::from_display)?;
    let ctx = engine
        .session(args.catalog.as_deref(), args.schema.as_deref(), &settings)
        .map_err(|e| CliError(df_message(&e)))?;
    let results = run_sql(&ctx, &sql)
        .await
        .map_err(|e| CliError(df_message(&e)))?;
    for r in results {
        output::write(out, args.format, &r.schema, &r.batches).map_err(CliError::from_display)?;
    }
    Ok(())
}

async fn run_load(config: Config, args: TpchArgs, out: &mut dyn Write) -> Result<(), CliError> {
    if args.scale.is_nan() || args.scale <= 0.0 {
        return Err(CliError(format!(
            "--scale must be positive, got {}",
            args.scale
        )));
    }
    let mut sort: HashMap<String, Vec<String>> = HashMap::new();
    for s in &args.sort {
        let (table, cols) = s
            .split_once('=')
            .ok_or_else(|| CliError(format!("--sort expects TABLE=COL[,COL..], got {s:?}")))?;
        sort.insert(
            table.trim().to_string(),
            cols.split(',')
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty())
                .collect(),
        );
    }
    let options = LoadOptions {
        scale: args.scale,
        sort,
        target_file_size: parse_size(&args.target_file_size).map_err(CliError::from_display)?,
        row_group_rows: args.row_group_rows,
        replace: args.replace,
        progress: true,
    };
    let namespace =
        NamespaceIdent::from_strs(args.namespace.split('.')).map_err(CliError::from_display)?;
    let engine = Engine::connect(config)
        .await
        .map_err(CliError::from_display)?;
    let (catalog_name, catalog) = load_target(&engine, args.catalog.as_deref())?;
    let started = std::time::Instant::now();
    let report = load_tpch(&catalog, &namespace, &options)
        .await
        .map_err(CliError::from_display)?;
    for (table, rows, files) in &report.tables {
        writeln!(
            out,
            "{catalog_name}.{}.{table}: {rows} rows in {files} data files",
            args.namespace
        )
        .map_err(CliError::from_display)?;
    }
    writeln!(
        out,
        "loaded TPC-H SF {} into {catalog_name}.{} in {:.1} s",
        args.scale,
        args.namespace,
        started.elapsed().as_secs_f64()
    )
    .map_err(CliError::from_display)?;
    Ok(())
}

/// The catalog a load writes into: `--catalog`, else the default catalog.
fn load_target(
    engine: &Engine,
    catalog: Option<&str>,
) -> Result<(String, Arc<dyn iceberg::Catalog>), CliError> {
    let name = match catalog {
        Some(c) => c.to_string(),
        None => engine
            .config()
            .effective_default_catalog()
            .map_err(CliError::from_display)?,
    };
    let catalog = engine
        .catalogs()
        .get(&name)
        .map_err(CliError::from_display)?;
    Ok((name, Arc::clone(catalog)))
}

async fn run_load_nested(
    config: Config,
    args: NestedArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let options = LoadOptions {
        target_file_size: parse_size(&args.target_file_size).map_err(CliError::from_display)?,
        row_group_rows: args.row_group_rows,
        replace: args.replace,
        ..LoadOptions::default()
    };
    let namespace =
        NamespaceIdent::from_strs(args.namespace.split('.')).map_err(CliError::from_display)?;
    let engine = Engine::connect(config)
        .await
        .map_err(CliError::from_display)?;
    let (catalog_name, catalog) = load_target(&engine, args.catalog.as_deref())?;
    let started = std::time::Instant::now();
    let report = load_nested(&catalog, &namespace, args.rows, args.layout, &options)
        .await
        .map_err(CliError::from_display)?;
    for (table, rows, files) in &report.tables {
        writeln!(
            out,
            "loaded {catalog_name}.{}.{table}: {rows} rows ({} layout) in {files} data files in {:.1} s",
            args.namespace,
            format!("{:?}", args.layout).to_lowercase(),
            started.elapsed().as_secs_f64()
        )
        .map_err(CliError::from_display)?;
    }
    Ok(())
}
