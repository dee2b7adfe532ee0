//! Command line: `iceflight sql | load | serve | demo | hash-password`.
//!
//! Settings are resolved as: config file (`--config` / `ICEFLIGHT_CONFIG`) < `ICEFLIGHT_*`
//! environment variables < flags (clap reads each flag's variable when the flag is absent).
//!
//! Every failure is one line on stderr, `error: …`, and an exit status ([`CliError::exit_code`]):
//! 0 success (also when the reader of stdout closed it early, `iceflight sql … | head`, and for a
//! server stopped by SIGINT / SIGTERM), 1 a failed command, 2 a command line clap cannot parse,
//! 130 / 143 a load interrupted by SIGINT / SIGTERM (after it removed what it wrote).

use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use datafusion::common::DataFusionError;
use iceberg::NamespaceIdent;
use iceflight_catalog::CatalogError;
use iceflight_datagen::load::{
    LoadOptions, LoadReport, TpchStatus, check_scale, load_nested, load_tpch, parse_size,
    tpch_status,
};
use iceflight_datagen::nested::NestedLayout;

use crate::config::Config;
use crate::message::{message, one_line};
use crate::output::{DEFAULT_MAX_ROWS, Format, OutputError, ResultWriter};
use crate::session::Engine;
use crate::signals::{LoadInterrupt, shutdown_signal};
use crate::sql::{execute_statement, parse_statements};

/// Text after every `--help`: the environment and the exit statuses.
const AFTER_HELP: &str = "\
Environment:
  ICEFLIGHT_LOG     log filter, e.g. info or iceflight=debug,warn (default: `log` in the config,
                    else warn); logs go to stderr
  ICEFLIGHT_CONFIG  configuration file (as --config); other ICEFLIGHT_* variables are listed
                    with the flags they stand for

Exit status: 0 success (also when the reader of stdout closes it early, e.g. `| head`, and for
a server stopped by SIGINT / SIGTERM), 1 the command failed, 2 the command line is invalid,
130 / 143 a load (or the demo's first load) interrupted by SIGINT / SIGTERM, after removing what
it wrote.";

/// Arrow Flight SQL query server for Iceberg tables.
#[derive(Debug, Parser)]
#[command(name = "iceflight", version, about, after_help = AFTER_HELP)]
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
    #[command(after_help = AFTER_HELP)]
    Sql(SqlArgs),
    /// Generate a benchmark data set into Iceberg tables.
    #[command(subcommand)]
    Load(LoadCommand),
    /// Serve Arrow Flight SQL.
    #[command(after_help = AFTER_HELP)]
    Serve(ServeArgs),
    /// Serve the embedded catalog with TPC-H SF 0.1 (loaded on first start) and print how to connect.
    #[command(after_help = AFTER_HELP)]
    Demo(DemoArgs),
    /// Print an argon2 hash of a password read from a prompt or stdin, for
    /// `[[server.user]] password_hash`.
    HashPassword(HashPasswordArgs),
    /// Create an empty embedded catalog in the data directory, with one namespace (`sql` and
    /// `serve` never create one, so that a mistyped --data-dir is an error).
    Init(InitArgs),
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The namespace to create, the default schema of later commands while it is the only one.
    #[arg(long, default_value = "default")]
    pub namespace: String,
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
    /// Schema for unqualified names [default: the default catalog's only namespace].
    #[arg(long, env = "ICEFLIGHT_DEFAULT_SCHEMA")]
    pub default_schema: Option<String>,
    /// single (everything in this process), coordinator (Flight SQL; stages on the workers) or
    /// worker (runs a coordinator's stages); default: the config's distributed.role, else single.
    #[arg(long, env = "ICEFLIGHT_ROLE")]
    pub role: Option<crate::distributed::Role>,
    /// A worker of this coordinator, http://host:port; repeatable (added to the config's distributed.workers).
    #[arg(long = "worker", value_name = "URL")]
    pub workers: Vec<String>,
    /// A file holding the cluster's shared secret, the same on coordinator and workers (sets
    /// the config's distributed.secret_file; docs/scaling-out.md).
    #[arg(long, env = "ICEFLIGHT_CLUSTER_SECRET_FILE", value_name = "PATH")]
    pub cluster_secret_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Address to listen on [default: 127.0.0.1:50051].
    #[arg(long, env = "ICEFLIGHT_LISTEN")]
    pub listen: Option<String>,
}

#[derive(Debug, Args)]
pub struct HashPasswordArgs {
    /// Refused: a password on the command line stays in the shell history.
    #[arg(hide = true)]
    pub password: Option<String>,
}

/// The demo's user name when no user is configured; its password is made at the first start
/// and kept in [`DEMO_PASSWORD_FILE`] of the data directory (no password is fixed anywhere).
pub const DEMO_USER: &str = "demo";

/// The file of the data directory holding the demo user's password (readable by its owner
/// only).
pub const DEMO_PASSWORD_FILE: &str = "demo-password";

/// The demo user's password in `dir`: read from [`DEMO_PASSWORD_FILE`], or 24 random hex
/// characters written there (mode 0600) on the first start.
///
/// Errors: the file can be neither read nor written.
fn demo_password(dir: &std::path::Path) -> Result<String, CliError> {
    let path = dir.join(DEMO_PASSWORD_FILE);
    if let Ok(text) = std::fs::read_to_string(&path)
        && !text.trim().is_empty()
    {
        return Ok(text.trim().to_string());
    }
    let password: String = uuid::Uuid::new_v4().simple().to_string()[..24].to_string();
    std::fs::create_dir_all(dir).map_err(CliError::from_display)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(&path)
        .map_err(|e| CliError::Failed(format!("{}: {e}", path.display())))?;
    writeln!(file, "{password}").map_err(CliError::from_display)?;
    Ok(password)
}

/// Namespace and scale factor of the demo's data.
const DEMO_NAMESPACE: &str = "tpch";
const DEMO_SCALE: f64 = 0.1;

#[derive(Debug, Args)]
pub struct SqlArgs {
    /// Catalog for unqualified table names.
    #[arg(long, env = "ICEFLIGHT_DEFAULT_CATALOG")]
    pub catalog: Option<String>,
    /// Schema (namespace) for unqualified table names [default: the catalog's only namespace].
    #[arg(long, env = "ICEFLIGHT_DEFAULT_SCHEMA")]
    pub schema: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Rows the table format shows, then a count of the rest (0 = all); tables print in pages
    /// of 1000 rows. csv and json print every row.
    #[arg(long, default_value_t = DEFAULT_MAX_ROWS)]
    pub max_rows: usize,
    /// Session setting KEY=VALUE (`datafusion.*` or `iceflight.*`); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
    /// SQL text (one or more statements); read from stdin when absent.
    pub sql: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum LoadCommand {
    /// TPC-H, generated in process (the same rows as dbgen / tpchgen-cli).
    #[command(after_help = AFTER_HELP)]
    Tpch(TpchArgs),
    /// The nested-field table `nested` (a wide struct and a flat control column).
    #[command(after_help = AFTER_HELP)]
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
    /// Scale factor, above 0 and at most 1000 (1 = 6 M lineitem rows, about 1 GB).
    #[arg(long, allow_negative_numbers = true)]
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

/// Why a command failed; printed as one line on stderr (none for [`Self::OutputClosed`]).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The command line cannot be parsed (exit status 2).
    #[error("{0}")]
    Usage(String),
    /// The command failed (exit status 1).
    #[error("{0}")]
    Failed(String),
    /// SIGINT or SIGTERM stopped the command after it cleaned up (exit status `code`).
    #[error("{message}")]
    Interrupted {
        /// What was interrupted and what was removed.
        message: String,
        /// 130 (SIGINT) or 143 (SIGTERM).
        code: i32,
    },
    /// The reader of stdout went away (`| head`): the command stopped, quietly (exit status 0).
    #[error("output closed")]
    OutputClosed,
}

impl CliError {
    fn from_display(e: impl std::fmt::Display) -> Self {
        Self::Failed(one_line(&e.to_string()))
    }

    fn engine(e: &DataFusionError) -> Self {
        Self::Failed(message(e))
    }

    /// The process's exit status for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Usage(_) => 2,
            Self::Failed(_) => 1,
            Self::Interrupted { code, .. } => *code,
            Self::OutputClosed => 0,
        }
    }

    /// One line for a clap error on `args`: the error's first paragraph (`unexpected argument
    /// '--x' found`, with the possible values when clap lists them) and which `--help` to read.
    pub fn usage(e: &clap::Error, args: &[String]) -> Self {
        let (command, sub) = command_path(args);
        if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            let names: Vec<&str> = sub.get_subcommands().map(|c| c.get_name()).collect();
            return Self::Usage(format!(
                "a command is required: {} (see `{command} --help`)",
                names.join(", ")
            ));
        }
        let rendered = e.render().to_string();
        let first: Vec<&str> = rendered
            .lines()
            .map(str::trim)
            .take_while(|l| !l.is_empty())
            .collect();
        let text = first.join(" ");
        let text = text.strip_prefix("error: ").unwrap_or(&text);
        Self::Usage(format!("{text} (see `{command} --help`)"))
    }
}

/// The subcommand `args` (the process arguments, program first) names, as text
/// (`iceflight load tpch`) and as clap's command.
fn command_path(args: &[String]) -> (String, clap::Command) {
    let mut command = <Cli as clap::CommandFactory>::command();
    let mut path = vec!["iceflight".to_string()];
    for arg in args.iter().skip(1) {
        if let Some(sub) = command.find_subcommand(arg) {
            path.push(arg.clone());
            command = sub.clone();
        }
    }
    (path.join(" "), command)
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

/// Runs a parsed command line with its resolved configuration, writing results to `out`.
pub async fn run(cli: Cli, config: Config, out: &mut dyn Write) -> Result<(), CliError> {
    match cli.command {
        Command::Sql(args) => run_sql_command(config, args, out).await,
        Command::Load(LoadCommand::Tpch(args)) => run_load(config, args, out).await,
        Command::Load(LoadCommand::Nested(args)) => run_load_nested(config, args, out).await,
        Command::Serve(args) => run_serve(config, args, out).await,
        Command::Demo(args) => run_demo(config, args, out).await,
        Command::Init(args) => run_init(config, args, out).await,
        Command::HashPassword(args) => {
            let password = read_password(args)?;
            let hash =
                crate::flight::auth::hash_password(&password).map_err(CliError::from_display)?;
            writeln!(out, "{hash}").map_err(CliError::from_display)
        }
    }
}

/// The password for `hash-password`: typed at a prompt (not echoed, asked twice) when stdin is
/// a terminal, else the first line of stdin.
fn read_password(args: HashPasswordArgs) -> Result<String, CliError> {
    if args.password.is_some() {
        return Err(CliError::Usage(
            "hash-password reads the password from a prompt or stdin, not from the command \
             line (it would stay in the shell history): run `iceflight hash-password` and type \
             it, or pipe it in"
                .into(),
        ));
    }
    let password = if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password("password: ").map_err(CliError::from_display)?;
        let again = rpassword::prompt_password("again: ").map_err(CliError::from_display)?;
        if first != again {
            return Err(CliError::Failed("the two passwords differ".into()));
        }
        first
    } else {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| CliError::Failed(format!("reading the password from stdin: {e}")))?;
        line.trim_end_matches(['\n', '\r']).to_string()
    };
    if password.is_empty() {
        return Err(CliError::Failed("an empty password is refused".into()));
    }
    Ok(password)
}

fn listen_addr(config: &Config, flag: Option<&str>) -> Result<std::net::SocketAddr, CliError> {
    let text = flag.unwrap_or(&config.server.listen);
    use std::net::ToSocketAddrs;
    text.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            CliError::Failed(format!(
                "invalid listen address {text:?} (e.g. 127.0.0.1:50051)"
            ))
        })
}

/// What `serve` prints once it listens: address, catalogs, default schema, login, workers,
/// TLS.
fn start_line(engine: &Engine, users: usize, addr: std::net::SocketAddr) -> String {
    let catalogs = engine.catalogs().names().join(", ");
    let schema = match engine.default_schema() {
        Some(s) => format!("default schema {}.{s}", engine.default_catalog()),
        None => format!(
            "no default schema (qualify names; catalog {} does not hold exactly one namespace)",
            engine.default_catalog()
        ),
    };
    let login = if engine.config().server.auth_required() {
        format!(
            "login required ({users} user{})",
            if users == 1 { "" } else { "s" }
        )
    } else {
        "no login (server.auth = \"none\")".to_string()
    };
    let workers = match engine.cluster().and_then(|c| c.workers()) {
        Some(w) => {
            let urls: Vec<String> = w.configured().iter().map(|u| u.to_string()).collect();
            let plural = if urls.len() == 1 { "" } else { "s" };
            format!(
                "; coordinator of {} worker{plural} ({})",
                urls.len(),
                urls.join(", ")
            )
        }
        None => String::new(),
    };
    let tls = match &engine.config().server.tls {
        Some(t) if t.client_ca.is_some() => "; TLS with client certificates",
        Some(_) => "; TLS",
        None => "",
    };
    format!(
        "iceflight {} serving Flight SQL on {addr}: catalogs {catalogs}; {schema}; {login}{workers}{tls}",
        env!("CARGO_PKG_VERSION")
    )
}

/// Warns on stderr when the server takes queries without a login.
fn warn_without_auth(engine: &Engine, addr: std::net::SocketAddr) {
    if !engine.config().server.auth_required() {
        eprintln!(
            "warning: server.auth = \"none\": anyone who can reach {addr} can query every \
             catalog without logging in"
        );
    }
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
        config.default_schema = Some(s);
    }
    if let Some(role) = args.role {
        config.distributed.role = role;
    }
    config.distributed.workers.extend(args.workers);
    if let Some(path) = args.cluster_secret_file {
        config.distributed.secret_file = Some(path);
    }
    config
        .require_existing_catalog()
        .map_err(CliError::from_display)?;
    let addr = listen_addr(&config, args.listen.as_deref())?;
    if config.distributed.role == crate::distributed::Role::Worker {
        if !args.users.is_empty() || !config.server.users.is_empty() {
            eprintln!("warning: a worker takes no login: --user and [[server.user]] are not used");
        }
        let d = &config.distributed;
        let authenticated = d.secret_file.is_some() || d.tls.is_some();
        if !addr.ip().is_loopback() && !authenticated {
            if !d.allow_unauthenticated {
                return Err(CliError::from_display(format!(
                    "a worker listening on {addr} would run any plan sent by anyone who reaches \
                     it: set [distributed] secret_file (or [distributed.tls]) on every member, \
                     or allow_unauthenticated = true on a network you trust"
                )));
            }
            eprintln!(
                "warning: [distributed] allow_unauthenticated: anyone who can reach {addr} can \
                 run plans on this worker"
            );
        } else if !addr.ip().is_loopback() && d.tls.is_none() {
            eprintln!(
                "warning: without [distributed.tls] the cluster's secret and every plan cross \
                 the network in plaintext"
            );
        }
        let engine = Engine::connect(config)
            .await
            .map_err(CliError::from_display)?;
        let catalogs = engine.catalogs().names().join(", ");
        let signal = shutdown_signal();
        return crate::worker::serve(
            engine,
            addr,
            async {
                signal.await;
            },
            |a| {
                let _ = writeln!(
                    out,
                    "iceflight worker listening on {a} (catalogs: {catalogs})"
                );
                let _ = out.flush();
            },
        )
        .await
        .map_err(CliError::from_display);
    }
    let users =
        crate::flight::users(&config.server, &args.users).map_err(CliError::from_display)?;
    if !args.users.is_empty() {
        eprintln!(
            "warning: --user puts a password on the command line, where other local users can \
             read it; for more than a trial, configure [[server.user]] with a password_hash \
             (iceflight hash-password)"
        );
    }
    let engine = Engine::connect(config)
        .await
        .map_err(CliError::from_display)?;
    serve_until_signal(engine, users, addr, out, |start, _| start.to_string()).await
}

/// Serves Flight SQL on `addr` until SIGINT or SIGTERM. Once it listens it prints
/// `banner(start line, address)` to `out` and, when login is off, a warning to stderr.
async fn serve_until_signal(
    engine: Engine,
    users: crate::flight::auth::Users,
    addr: std::net::SocketAddr,
    out: &mut dyn Write,
    banner: impl FnOnce(&str, std::net::SocketAddr) -> String,
) -> Result<(), CliError> {
    let user_count = users.len();
    let shown = engine.clone();
    let signal = shutdown_signal();
    crate::flight::serve(
        engine,
        users,
        addr,
        async {
            signal.await;
        },
        |a| {
            let _ = writeln!(out, "{}", banner(&start_line(&shown, user_count, a), a));
            let _ = out.flush();
            warn_without_auth(&shown, a);
        },
    )
    .await
    .map_err(CliError::from_display)
}

/// `iceflight init`: the embedded catalog of `config.data_dir` created with namespace
/// `args.namespace`. An existing catalog is left as it is (the namespace created if missing).
///
/// Errors: `[[catalog]]` entries configured (init makes only the embedded catalog); the
/// directory or catalog cannot be created.
async fn run_init(config: Config, args: InitArgs, out: &mut dyn Write) -> Result<(), CliError> {
    if !config.catalogs.is_empty() {
        return Err(CliError::Failed(
            "init creates the embedded catalog; this configuration names [[catalog]] entries, \
             which their own services create"
                .to_string(),
        ));
    }
    let dir = crate::config::absolute(&config.data_dir);
    let existed = dir.join("catalog.db").is_file();
    let engine = Engine::connect(config)
        .await
        .map_err(CliError::from_display)?;
    let catalog_name = engine.default_catalog().to_string();
    let catalog = engine
        .catalogs()
        .get(&catalog_name)
        .map_err(CliError::from_display)?;
    let namespace = iceberg::NamespaceIdent::new(args.namespace.clone());
    let made = match catalog.namespace_exists(&namespace).await {
        Ok(true) => false,
        _ => {
            catalog
                .create_namespace(&namespace, Default::default())
                .await
                .map_err(CliError::from_display)?;
            true
        }
    };
    let what = match (existed, made) {
        (false, _) => "created",
        (true, true) => "existed; namespace added",
        (true, false) => "already existed; nothing changed",
    };
    writeln!(
        out,
        "catalog {catalog_name} in {} {what}: namespace {}.{}\nnext: iceflight --data-dir {} sql \"CREATE TABLE t (id BIGINT)\"",
        dir.display(),
        catalog_name,
        args.namespace,
        dir.display()
    )
    .map_err(CliError::from_display)
}

async fn run_demo(mut config: Config, args: DemoArgs, out: &mut dyn Write) -> Result<(), CliError> {
    if config.default_schema.is_none() {
        config.default_schema = Some(DEMO_NAMESPACE.to_string());
    }
    let addr = listen_addr(&config, args.listen.as_deref())?;
    let quick = if config.server.users.is_empty() && config.server.auth_required() {
        let password = demo_password(&crate::config::absolute(&config.data_dir))?;
        vec![format!("{DEMO_USER}:{password}")]
    } else {
        vec![]
    };
    let users = crate::flight::users(&config.server, &quick).map_err(CliError::from_display)?;
    let engine = Engine::connect(config)
        .await
        .map_err(CliError::from_display)?;
    let catalog_name = engine.default_catalog().to_string();
    let catalog = Arc::clone(
        engine
            .catalogs()
            .get(&catalog_name)
            .map_err(CliError::from_display)?,
    );
    let scale = ensure_demo_data(&catalog, &catalog_name, out).await?;
    let (user, password) = quick
        .first()
        .and_then(|q| q.split_once(':'))
        .map(|(u, p)| (u.to_string(), p.to_string()))
        .unwrap_or_else(|| ("<user>".into(), "<password>".into()));
    serve_until_signal(engine, users, addr, out, |start, a| {
        format!(
            "{start}\n\nTPC-H SF {scale} is in {catalog_name}.{DEMO_NAMESPACE}, the default schema.\n\n\
             Python (ADBC):\n  import adbc_driver_flightsql.dbapi as flight_sql\n  \
             conn = flight_sql.connect(\"grpc://{a}\", db_kwargs={{\"username\": \"{user}\", \"password\": \"{password}\"}}, autocommit=True)\n  \
             cur = conn.cursor(); cur.execute(\"SELECT count(*) FROM lineitem\"); print(cur.fetchall())\n\n\
             JDBC (flight-sql-jdbc-driver; on Java 17 start java with --add-opens=java.base/java.nio=ALL-UNNAMED):\n  \
             jdbc:arrow-flight-sql://{a}/?useEncryption=false&user={user}&password={password}\n  \
             (tables of other catalogs by their full names: catalog.schema.table)\n\n\
             Stop with Ctrl-C."
        )
    })
    .await
}

/// Makes sure the demo's TPC-H is complete in `catalog` (every table committed with its rows):
/// loads it on the first start, reloads data an interrupted start left behind, and refuses a
/// namespace that holds other tables. Returns the data's scale factor.
async fn ensure_demo_data(
    catalog: &Arc<dyn iceberg::Catalog>,
    catalog_name: &str,
    out: &mut dyn Write,
) -> Result<f64, CliError> {
    let namespace = NamespaceIdent::new(DEMO_NAMESPACE.into());
    // Listening starts before the first line, so a Ctrl-C after it always cleans up.
    let interrupt = LoadInterrupt::listen();
    let replace = match tpch_status(catalog, &namespace)
        .await
        .map_err(CliError::from_display)?
    {
        TpchStatus::Complete { scale } => {
            interrupt.finish();
            return Ok(scale);
        }
        TpchStatus::Missing => {
            writeln!(
                out,
                "loading TPC-H SF {DEMO_SCALE} into {catalog_name}.{DEMO_NAMESPACE} (first start only)..."
            )
            .map_err(CliError::from_display)?;
            false
        }
        TpchStatus::Incomplete { reason, foreign } if foreign.is_empty() => {
            writeln!(
                out,
                "{catalog_name}.{DEMO_NAMESPACE} is incomplete ({reason}): loading TPC-H SF {DEMO_SCALE} again..."
            )
            .map_err(CliError::from_display)?;
            true
        }
        TpchStatus::Incomplete { reason, foreign } => {
            return Err(CliError::Failed(format!(
                "{catalog_name}.{DEMO_NAMESPACE} is not complete TPC-H data ({reason}) and holds \
                 tables the demo did not write ({}); use another --data-dir, or reload it with \
                 `iceflight load tpch --scale {DEMO_SCALE} --namespace {DEMO_NAMESPACE} --replace`",
                foreign.join(", ")
            )));
        }
    };
    let options = LoadOptions {
        scale: DEMO_SCALE,
        target_file_size: 16 * 1024 * 1024,
        replace,
        cancel: interrupt.token(),
        ..LoadOptions::default()
    };
    load_result(load_tpch(catalog, &namespace, &options).await, interrupt)?;
    Ok(DEMO_SCALE)
}

/// A load's result as the CLI reports it: an interrupted load (it has removed what it wrote)
/// ends with the status of the signal that stopped it.
fn load_result(
    result: Result<LoadReport, CatalogError>,
    interrupt: LoadInterrupt,
) -> Result<LoadReport, CliError> {
    let signal = interrupt.finish();
    match result {
        Err(CatalogError::Interrupted) => Err(CliError::Interrupted {
            message: CatalogError::Interrupted.to_string(),
            code: signal.unwrap_or(crate::signals::EXIT_SIGINT),
        }),
        result => result.map_err(CliError::from_display),
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
                .ok_or_else(|| CliError::Failed(format!("--set expects KEY=VALUE, got {s:?}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let sql = match args.sql {
        Some(s) => s,
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| CliError::Failed(format!("reading SQL from stdin: {e}")))?;
            s
        }
    };
    let statements = parse_statements(&sql).map_err(|e| CliError::engine(&e))?;
    config
        .require_existing_catalog()
        .map_err(CliError::from_display)?;
    // The user's own machine: its sessions carry no access checks, so read_parquet and friends
    // read any of its files (`sql/file_functions.rs`).
    let engine = Engine::connect(config)
        .await
        .map_err(CliError::from_display)?;
    let schema = match (&args.schema, &args.catalog) {
        (Some(schema), _) => Some(schema.clone()),
        (None, Some(catalog)) if catalog != engine.default_catalog() => None,
        (None, _) => demo_schema(&engine).await,
    };
    let ctx = engine
        .session(args.catalog.as_deref(), schema.as_deref(), &settings)
        .map_err(|e| CliError::engine(&e))?;
    let mut writer =
        ResultWriter::new(out, args.format, args.max_rows).for_statements(statements.len());
    for statement in statements {
        let stream = execute_statement(&ctx, statement)
            .await
            .map_err(|e| CliError::engine(&e))?;
        match writer.write_stream(stream).await {
            Ok(_) => {}
            Err(OutputError::Closed) => return Err(CliError::OutputClosed),
            Err(OutputError::Query(e)) => return Err(CliError::engine(&e)),
            Err(e @ OutputError::Write(_)) => return Err(CliError::from_display(e)),
        }
    }
    match writer.finish() {
        Ok(()) => Ok(()),
        Err(OutputError::Closed) => Err(CliError::OutputClosed),
        Err(e) => Err(CliError::from_display(e)),
    }
}

/// The default schema of `iceflight sql` when neither `--schema` nor the configuration names
/// one and the default catalog holds several namespaces: the demo's (`tpch`), as `iceflight
/// demo` chooses it, when the catalog holds it. `None`: the engine's default applies (the only
/// namespace), or there is none and unqualified names are answered with where they are.
async fn demo_schema(engine: &Engine) -> Option<String> {
    if engine.default_schema().is_some() {
        return None;
    }
    let catalog = engine.catalogs().get(engine.default_catalog()).ok()?;
    let namespace = NamespaceIdent::new(DEMO_NAMESPACE.into());
    catalog
        .namespace_exists(&namespace)
        .await
        .ok()?
        .then(|| DEMO_NAMESPACE.to_string())
}

/// Parses `--sort TABLE=COL[,COL..]` values.
fn sort_keys(specs: &[String]) -> Result<HashMap<String, Vec<String>>, CliError> {
    let mut sort: HashMap<String, Vec<String>> = HashMap::new();
    for s in specs {
        let (table, cols) = s.split_once('=').ok_or_else(|| {
            CliError::Failed(format!("--sort expects TABLE=COL[,COL..], got {s:?}"))
        })?;
        sort.insert(
            table.trim().to_string(),
            cols.split(',')
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty())
                .collect(),
        );
    }
    Ok(sort)
}

async fn run_load(config: Config, args: TpchArgs, out: &mut dyn Write) -> Result<(), CliError> {
    check_scale(args.scale)
        .map_err(|e| CliError::Failed(format!("--scale {}: {e}", args.scale)))?;
    let interrupt = LoadInterrupt::listen();
    let options = LoadOptions {
        scale: args.scale,
        sort: sort_keys(&args.sort)?,
        target_file_size: parse_size(&args.target_file_size)
            .map_err(|e| CliError::Failed(format!("--target-file-size: {e}")))?,
        row_group_rows: args.row_group_rows,
        replace: args.replace,
        cancel: interrupt.token(),
        ..LoadOptions::default()
    };
    let namespace =
        NamespaceIdent::from_strs(args.namespace.split('.')).map_err(CliError::from_display)?;
    let engine = Engine::connect(config)
        .await
        .map_err(CliError::from_display)?;
    let (catalog_name, catalog) = load_target(&engine, args.catalog.as_deref())?;
    let started = std::time::Instant::now();
    let report = load_result(load_tpch(&catalog, &namespace, &options).await, interrupt)?;
    summary(
        out,
        &report,
        &format!("TPC-H SF {}", args.scale),
        &catalog_name,
        &args.namespace,
        started,
    )
}

/// The last line of a load on stdout: what was written where.
fn summary(
    out: &mut dyn Write,
    report: &LoadReport,
    what: &str,
    catalog: &str,
    namespace: &str,
    started: std::time::Instant,
) -> Result<(), CliError> {
    let rows: u64 = report.tables.iter().map(|(_, r, _)| r).sum();
    let files: usize = report.tables.iter().map(|(_, _, f)| f).sum();
    writeln!(
        out,
        "loaded {what} into {catalog}.{namespace}: {} tables, {rows} rows, {files} data files in {:.1} s",
        report.tables.len(),
        started.elapsed().as_secs_f64()
    )
    .map_err(CliError::from_display)
}

/// The catalog a load writes into: `--catalog`, else the default catalog.
fn load_target(
    engine: &Engine,
    catalog: Option<&str>,
) -> Result<(String, Arc<dyn iceberg::Catalog>), CliError> {
    let name = catalog.unwrap_or(engine.default_catalog()).to_string();
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
    let interrupt = LoadInterrupt::listen();
    let options = LoadOptions {
        target_file_size: parse_size(&args.target_file_size)
            .map_err(|e| CliError::Failed(format!("--target-file-size: {e}")))?,
        row_group_rows: args.row_group_rows,
        replace: args.replace,
        cancel: interrupt.token(),
        ..LoadOptions::default()
    };
    let namespace =
        NamespaceIdent::from_strs(args.namespace.split('.')).map_err(CliError::from_display)?;
    let engine = Engine::connect(config)
        .await
        .map_err(CliError::from_display)?;
    let (catalog_name, catalog) = load_target(&engine, args.catalog.as_deref())?;
    let started = std::time::Instant::now();
    let report = load_result(
        load_nested(&catalog, &namespace, args.rows, args.layout, &options).await,
        interrupt,
    )?;
    let what = format!("the nested table ({} layout)", args.layout);
    summary(out, &report, &what, &catalog_name, &args.namespace, started)
}
