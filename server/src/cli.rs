//! Command line: `iceflight sql ...` and `iceflight load tpch ...`.
//!
//! Settings are resolved as: config file (`--config` / `ICEFLIGHT_CONFIG`) < `ICEFLIGHT_*`
//! environment variables < flags (clap reads each flag's variable when the flag is absent).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use iceberg::NamespaceIdent;
use iceflight_catalog::load::{LoadOptions, load_tpch, parse_size};

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
}

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
    }
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
        .map_err(|e| CliError(e.strip_backtrace()))?;
    let results = run_sql(&ctx, &sql)
        .await
        .map_err(|e| CliError(e.strip_backtrace()))?;
    for r in results {
        output::write(out, args.format, &r.schema, &r.batches).map_err(CliError::from_display)?;
    }
    Ok(())
}

async fn run_load(config: Config, args: TpchArgs, out: &mut dyn Write) -> Result<(), CliError> {
    if !(args.scale > 0.0) {
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
    let catalog_name = match &args.catalog {
        Some(c) => c.clone(),
        None => engine
            .config()
            .effective_default_catalog()
            .map_err(CliError::from_display)?,
    };
    let catalog = engine
        .catalogs()
        .get(&catalog_name)
        .map_err(CliError::from_display)?;
    let started = std::time::Instant::now();
    let report = load_tpch(catalog, &namespace, &options)
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
