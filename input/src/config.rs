//! The server's configuration: one typed struct read from TOML (`--config FILE`), then overridden
//! by `ICEFLIGHT_*` environment variables and command-line flags (flags win; see `cli.rs`).
//! `config/iceflight.toml` documents every key; the server's `cli.rs` applies it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::catalog_config::{CatalogConfig, CatalogKind, DEFAULT_CATALOG_NAME};
use crate::units::ByteSize;
use serde::{Deserialize, Serialize};

/// Default data directory (embedded catalog and warehouse), relative to the working directory.
pub const DEFAULT_DATA_DIR: &str = "./iceflight-data";

/// Default log filter: warnings and errors (failed logins, failed queries), nothing per query.
pub const DEFAULT_LOG: &str = "warn";

/// Everything iceflight reads from its configuration file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Directory of the embedded catalog (`catalog.db`) and its warehouse (`warehouse/`).
    pub data_dir: PathBuf,
    /// Catalog used for unqualified names; defaults to the first configured catalog.
    pub default_catalog: Option<String>,
    /// Namespace (schema) used for unqualified names; absent = the default catalog's only
    /// namespace when it holds exactly one, else none (unqualified names then fail with an error
    /// listing the namespaces).
    pub default_schema: Option<String>,
    /// Log filter (tracing's `EnvFilter` syntax: `warn`, `info`, `iceflight=debug,warn`); the
    /// `ICEFLIGHT_LOG` environment variable wins over it. Logs go to stderr.
    pub log: String,
    /// Query execution settings.
    pub query: QueryConfig,
    /// The byte and metadata caches under the scan.
    pub cache: CacheConfig,
    /// Flight SQL server settings.
    pub server: ServerConfig,
    /// Running on datafusion-distributed: this process's role and the coordinator's workers.
    pub distributed: DistributedConfig,
    /// Table maintenance (`ALTER TABLE … EXECUTE`).
    pub maintenance: MaintenanceConfig,
    /// Configured catalogs; none means the embedded catalog `local` in `data_dir`.
    #[serde(rename = "catalog")]
    pub catalogs: Vec<CatalogConfig>,
    /// One warning per renamed key the file still used (`deprecated_keys.rs`); the server logs
    /// them at start. Never read from or written to the file.
    #[serde(skip)]
    pub deprecated_keys: Vec<String>,
}

/// Execution settings applied to every session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueryConfig {
    /// Partitions per query (`datafusion.execution.target_partitions`); 0 = number of cores.
    pub target_partitions: usize,
    /// Rows per batch (`datafusion.execution.batch_size`).
    pub batch_size: usize,
    /// Memory for all running queries together, e.g. `"4GiB"` (DataFusion's memory pool; operators
    /// that can spill do, others fail with `ResourceExhausted`). Absent =
    /// [`DEFAULT_QUERY_MEMORY_SHARE`] of the machine's memory, so that an oversized query fails
    /// and the server lives.
    pub memory_limit: Option<ByteSize>,
    /// Longest a query may run, from its start to its last row sent, e.g. `"5m"` (statements
    /// that write are not cut short). Absent = no limit.
    #[serde(with = "crate::units::duration_text::option")]
    pub timeout: Option<Duration>,
    /// Largest result a query may send, in bytes sent (its Arrow IPC messages), e.g. `"1GiB"`. Absent = no limit.
    pub max_result_bytes: Option<ByteSize>,
    /// Directory for the files of operators that spill under `memory_limit`. Absent = the OS's
    /// temporary directory.
    pub spill_dir: Option<PathBuf>,
    /// Directories whose files Flight SQL statements may read and write: `read_parquet`,
    /// `read_csv`, `read_json`, `COPY … TO`, `CREATE EXTERNAL TABLE` (symbolic links followed
    /// before the check). Empty (the default): none; those statements are refused with
    /// `PermissionDenied`. The CLI's `sql` reads and writes any path.
    pub file_roots: Vec<PathBuf>,
}

impl QueryConfig {
    /// `timeout`, checked. Errors: zero.
    pub fn timeout(&self) -> Result<Option<Duration>, ConfigError> {
        match self.timeout {
            Some(d) if d.is_zero() => Err(ConfigError::Invalid(
                "query.timeout must be a positive duration such as \"5m\", got 0".into(),
            )),
            other => Ok(other),
        }
    }

    /// `memory_limit` in bytes (saturating on a 32-bit machine), else
    /// [`DEFAULT_QUERY_MEMORY_SHARE`] of the machine's memory.
    pub fn memory_limit_bytes(&self) -> usize {
        let bytes = match self.memory_limit {
            Some(limit) => limit.bytes(),
            None => (machine_memory() as f64 * DEFAULT_QUERY_MEMORY_SHARE) as u64,
        };
        usize::try_from(bytes).unwrap_or(usize::MAX)
    }

    /// `max_result_bytes` in bytes.
    pub fn max_result_bytes(&self) -> Option<u64> {
        self.max_result_bytes.map(ByteSize::bytes)
    }
}

/// `[maintenance]`: limits of `ALTER TABLE … EXECUTE` (`server/src/sql/procedures.rs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MaintenanceConfig {
    /// The shortest `retention_threshold` `expire_snapshots` and `remove_orphan_files` accept,
    /// e.g. `"7d"` (Trino's `iceberg.expire-snapshots.min-retention`, 7 days): a writer whose
    /// snapshot is younger than it never loses a file it may still read.
    #[serde(with = "crate::units::duration_text")]
    pub min_retention: Duration,
    /// A JSON-lines file the workload record (`system.runtime.table_access`, the layout
    /// advice) is appended to and read back from at start, so it survives restarts; unset:
    /// kept in memory only. Bounded: rewritten to the last 10 000 scans.
    pub table_access_file: Option<PathBuf>,
    /// Where `add_files` may take files from besides the table's own location: directories
    /// (symbolic links followed) or URL prefixes (`s3://bucket/imports/`). Empty: only from
    /// under the table's location, so that a table never takes (and `expire_snapshots` never
    /// deletes) files of another table or from elsewhere on the storage.
    pub import_roots: Vec<String>,
}

impl Default for MaintenanceConfig {
    fn default() -> Self {
        Self {
            min_retention: Duration::from_secs(7 * 86400),
            table_access_file: None,
            import_roots: vec![],
        }
    }
}

/// `[cache]`: what the engine keeps of the lake's immutable files between queries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Keep blocks of remote files in memory (`false`: every read goes to the object store).
    pub enabled: bool,
    /// Bound of the block cache, e.g. `"6GiB"`. Absent = [`DEFAULT_CACHE_MEMORY_SHARE`] of the
    /// machine's memory. Outside DataFusion's memory pool (`[query] memory_limit`).
    pub memory: Option<ByteSize>,
    /// Size of one cached block, e.g. `"1MiB"` (reads are cut into aligned blocks).
    pub block_size: ByteSize,
    /// Cache local files (`file://`, plain paths) too. On: even with the files in the OS page
    /// cache, TPC-H SF 1 on local files ran 17 % faster warm with it
    /// (`bench/reports/block-cache-20261201.md`).
    pub local_files: bool,
    /// Bound of the decoded Parquet footers kept, e.g. `"256MiB"`.
    pub metadata_memory: ByteSize,
    /// A directory for the block cache's disk tier (emptied at start); absent = no disk tier.
    pub disk: Option<std::path::PathBuf>,
    /// Bound of the disk tier, e.g. `"20GiB"` (at least 32 MiB).
    pub disk_capacity: ByteSize,
}

/// `[distributed]`: scaling out on datafusion-distributed (docs/scaling-out.md,
/// `server/src/distributed/`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DistributedConfig {
    /// `single` (default: everything in this process), `coordinator` (Flight SQL; stages run
    /// on `workers`) or `worker` (runs a coordinator's stages; no Flight SQL).
    pub role: Role,
    /// A coordinator's workers, `http://host:port` each (`--worker URL` adds to them).
    pub workers: Vec<String>,
    /// How often a coordinator probes its workers, e.g. `"1s"`: a dead worker gets no new
    /// tasks once a probe or a query finds it down; a restarted one gets them after a probe.
    #[serde(with = "crate::units::duration_text")]
    pub health_interval: Duration,
    /// A file holding the cluster's shared secret (at least 32 characters, trailing whitespace
    /// trimmed): coordinators and workers present it on every call of a worker, and a worker
    /// refuses a call without it (`Unauthenticated`, logged). Same file on every member.
    pub secret_file: Option<PathBuf>,
    /// `[distributed.tls]`: TLS between the cluster's members, certificates checked both ways.
    pub tls: Option<ClusterTlsConfig>,
    /// Lets a worker listen beyond loopback with neither `secret_file` nor `tls`, admitting any
    /// caller (a network the operator trusts); otherwise such a worker refuses to start.
    pub allow_unauthenticated: bool,
}

/// `[distributed.tls]`: PEM files of this process's certificate and key and of the CA that signs
/// every member's certificate. A worker serves its certificate and admits only callers with a
/// certificate the CA signed (mutual TLS); callers reach workers at `https://` URLs, check the
/// worker's certificate against the CA and present their own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterTlsConfig {
    /// This process's certificate chain, end-entity certificate first (PEM); a worker's names
    /// the host of its URL.
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The CA certificates members' certificates are checked against (PEM).
    pub ca: PathBuf,
}

impl Default for DistributedConfig {
    fn default() -> Self {
        Self {
            role: Role::Single,
            workers: vec![],
            health_interval: Duration::from_secs(1),
            secret_file: None,
            tls: None,
            allow_unauthenticated: false,
        }
    }
}

impl DistributedConfig {
    /// `health_interval`, checked. Errors: zero.
    pub fn health_interval(&self) -> Result<Duration, ConfigError> {
        if self.health_interval.is_zero() {
            return Err(ConfigError::Invalid(
                "distributed.health_interval must be a positive duration such as \"1s\", got 0"
                    .into(),
            ));
        }
        Ok(self.health_interval)
    }
}

/// Which part a process plays (`[distributed] role`, `iceflight serve --role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Plans and runs every query in this process.
    #[default]
    Single,
    /// Takes Flight SQL queries, plans them with the distributed planner and runs their stages
    /// on the configured workers.
    Coordinator,
    /// Runs the stages coordinators send; serves no Flight SQL.
    Worker,
}

impl Role {
    /// The role as written in the config and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Single => "single",
            Self::Coordinator => "coordinator",
            Self::Worker => "worker",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "single" => Ok(Self::Single),
            "coordinator" => Ok(Self::Coordinator),
            "worker" => Ok(Self::Worker),
            other => Err(format!(
                "unknown role {other}: must be single, coordinator or worker"
            )),
        }
    }
}

/// A coordinator's worker URLs, checked: `https://host:port` when the cluster speaks TLS
/// (`tls`, `[distributed.tls]`), `http://host:port` otherwise.
///
/// Errors: none given, a URL of another form, a URL given twice.
pub fn parse_worker_urls(urls: &[String], tls: bool) -> Result<Vec<url::Url>, ConfigError> {
    if urls.is_empty() {
        return Err(ConfigError::Invalid(
            "role = \"coordinator\" needs workers: [distributed] workers = [\"http://host:port\", …] \
             or --worker URL"
                .into(),
        ));
    }
    let mut out: Vec<url::Url> = vec![];
    for u in urls {
        let url = url::Url::parse(u).map_err(|e| {
            ConfigError::Invalid(format!("distributed.workers: {u} is not a URL: {e}"))
        })?;
        let (scheme, why) = if tls {
            ("https", "[distributed.tls] is set")
        } else {
            ("http", "https:// needs [distributed.tls]")
        };
        if url.scheme() != scheme || url.host().is_none() || url.port().is_none() {
            return Err(ConfigError::Invalid(format!(
                "distributed.workers: {u} must be {scheme}://host:port ({why})"
            )));
        }
        if out.contains(&url) {
            return Err(ConfigError::Invalid(format!(
                "distributed.workers: {u} is listed twice"
            )));
        }
        out.push(url);
    }
    Ok(out)
}

/// Share of the machine's memory the block cache may use when `[cache] memory` is absent.
pub const DEFAULT_CACHE_MEMORY_SHARE: f64 = 0.25;

/// Share of the machine's memory running queries may use together when `[query] memory_limit`
/// is absent (beside the block cache's quarter).
pub const DEFAULT_QUERY_MEMORY_SHARE: f64 = 0.5;

/// The machine's memory: `MemTotal` in `/proc/meminfo` (8 GiB assumed where that file is
/// missing).
pub fn machine_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(8 << 30)
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            memory: None,
            block_size: ByteSize(1 << 20),
            local_files: true,
            metadata_memory: ByteSize(256 << 20),
            disk: None,
            disk_capacity: ByteSize(10 << 30),
        }
    }
}

impl CacheConfig {
    /// The block cache's bound in bytes: `memory`, else the default share of `MemTotal` in
    /// `/proc/meminfo` (8 GiB assumed where that file is missing).
    pub fn memory_bytes(&self) -> u64 {
        match self.memory {
            Some(m) => m.bytes(),
            None => (machine_memory() as f64 * DEFAULT_CACHE_MEMORY_SHARE) as u64,
        }
    }

    /// `block_size` in bytes (at most 64 MiB once [`Config::validate`] passed).
    pub fn block_size_bytes(&self) -> u64 {
        self.block_size.bytes()
    }

    /// `disk_capacity` in bytes.
    pub fn disk_capacity_bytes(&self) -> u64 {
        self.disk_capacity.bytes()
    }

    /// `metadata_memory` in bytes.
    pub fn metadata_memory_bytes(&self) -> u64 {
        self.metadata_memory.bytes()
    }
}

impl Default for QueryConfig {
    fn default() -> Self {
        Self {
            target_partitions: 0,
            batch_size: 8192,
            memory_limit: None,
            timeout: None,
            max_result_bytes: None,
            spill_dir: None,
            file_roots: vec![],
        }
    }
}

/// `[server]`: the Flight SQL endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to listen on.
    pub listen: String,
    /// How clients log in: `"basic"` (the default) or `"none"` (say so explicitly).
    pub auth: AuthMode,
    /// Users with argon2 password hashes (`iceflight hash-password` prints one).
    #[serde(rename = "user")]
    pub users: Vec<UserConfig>,
    /// Queries running at once; more wait in a queue.
    pub max_concurrent_queries: usize,
    /// How long a query waits in the queue before failing with `ResourceExhausted`, e.g. `"30s"`.
    #[serde(with = "crate::units::duration_text")]
    pub queue_timeout: Duration,
    /// How long an unused prepared statement handle lives (clients such as JDBC leak them),
    /// e.g. `"5m"`; at least 1 s.
    #[serde(with = "crate::units::duration_text")]
    pub prepared_statement_ttl: Duration,
    /// How long an idle session (bearer token) lives, e.g. `"1h"`; at least 1 s.
    #[serde(with = "crate::units::duration_text")]
    pub session_ttl: Duration,
    /// `[server.tls]`: serve TLS only (`flight/tls.rs`); `None`: plaintext.
    pub tls: Option<TlsConfig>,
    /// Failed logins within 5 minutes that lock a user name for `login_lockout` (a peer
    /// address: 4 × that; `flight/login_throttle.rs`). 0: no throttling.
    pub max_failed_logins: u32,
    /// How long a locked user name or peer address is refused, e.g. `"60s"`.
    #[serde(with = "crate::units::duration_text")]
    pub login_lockout: Duration,
    /// How long a result may wait for its client to read on before its query ends and frees
    /// its slots (a client that stopped reading), e.g. `"5m"`. `"0s"`: no limit.
    #[serde(with = "crate::units::duration_text")]
    pub stream_idle_timeout: Duration,
    /// Address of the Prometheus `/metrics` listener (`metrics.rs`), e.g. `"127.0.0.1:9464"`;
    /// absent: none.
    pub metrics_listen: Option<String>,
    /// Queries one user may run at once (within `max_concurrent_queries`); more wait in the
    /// queue like any query. 0: no per-user bound.
    pub max_queries_per_user: usize,
    /// Sessions at once, parked ones (connections closed, token still valid) included; at
    /// the bound the parked session used least recently ends, and a login beyond live ones
    /// fails with `ResourceExhausted`. 0: no bound.
    pub max_sessions: usize,
    /// Users who hold every privilege, see every row of `system.runtime.queries` and
    /// `sessions`, may kill any query (`CALL system.runtime.kill_query`) and change the
    /// settings of the process (`datafusion.runtime.*`); the others see and kill only their own.
    pub admins: Vec<String>,
    /// A JSON file of privileges per catalog, schema and table in the shape of Trino's
    /// file-based access control (docs/operations.md, "Privileges"), read again when it
    /// changes. Absent: every user holds every privilege.
    pub access_rules: Option<PathBuf>,
    /// Sessions one user may hold at once, live or parked (a client's connections closed,
    /// its token still valid for `session_ttl`); at the bound the user's parked session used
    /// least recently ends, and a login beyond live ones fails with `ResourceExhausted`. 0: no
    /// bound.
    pub max_sessions_per_user: usize,
    /// Prepared statements one session keeps at once; a new one beyond it closes the one
    /// used least recently (clients such as JDBC leak their handles until the TTL).
    pub max_prepared_statements: usize,
    /// Parameter rows bound and not yet executed, in Arrow bytes, one session may hold at once
    /// (each upload is at most 64 MiB); an upload beyond it fails with `ResourceExhausted`.
    pub max_pending_parameter_bytes: ByteSize,
    /// `[server.jwt]`: clients may log in with a bearer JWT verified against these keys.
    pub jwt: Option<JwtConfig>,
}

/// `[server.jwt]`: JSON Web Tokens from an identity provider, as Trino's and GizmoSQL's JWT
/// authentication: a client sends `authorization: Bearer <jwt>` (ADBC's
/// `adbc.flight.sql.authorization_header`, JDBC's `token`), the token's signature is checked
/// against the provider's keys (a JWKS), its issuer, audience and expiry, and the user and
/// groups are read from its claims.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    /// The provider's JSON Web Key Set: a file path, or an `https://` (or `http://`) URL read
    /// at start and again, at most once a minute, when a token names a key it does not hold.
    pub jwks: String,
    /// The `iss` every token must carry.
    pub issuer: String,
    /// The `aud` every token must carry (one of its values, when it is a list).
    pub audience: String,
    /// The claim that names the user (Trino: `http-server.authentication.jwt.principal-field`).
    #[serde(default = "default_user_claim")]
    pub user_claim: String,
    /// The claim that lists the user's groups, a string array (absent in a token: no groups).
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// Clock skew allowed when checking `exp` and `nbf`, e.g. `"60s"`.
    #[serde(default = "default_leeway", with = "crate::units::duration_text")]
    pub leeway: Duration,
}

fn default_user_claim() -> String {
    "sub".into()
}

fn default_groups_claim() -> String {
    "groups".into()
}

fn default_leeway() -> Duration {
    Duration::from_secs(60)
}

/// `[server] auth`: how Flight SQL clients log in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// User and password (the Flight `Basic` handshake), then a bearer token per session.
    #[default]
    Basic,
    /// No login at all: anyone who reaches the port can query every table.
    None,
}

/// `[server.tls]`: PEM files of the listener's certificate chain and key, and optionally of the
/// CA that client certificates must be signed by (mTLS). SIGHUP reads `cert` and `key` again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// Certificate chain, end-entity certificate first (PEM).
    pub cert: PathBuf,
    /// Private key of the certificate (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates client certificates are checked against (PEM); set: clients without a
    /// certificate it signed are refused.
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
}

impl ServerConfig {
    /// Whether clients must log in.
    pub fn auth_required(&self) -> bool {
        self.auth == AuthMode::Basic
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:50051".to_string(),
            auth: AuthMode::Basic,
            users: vec![],
            max_concurrent_queries: 8,
            queue_timeout: Duration::from_secs(30),
            prepared_statement_ttl: Duration::from_secs(300),
            session_ttl: Duration::from_secs(3600),
            tls: None,
            max_failed_logins: 5,
            login_lockout: Duration::from_secs(60),
            max_queries_per_user: 0,
            max_sessions: 0,
            admins: vec![],
            access_rules: None,
            max_sessions_per_user: 100,
            max_prepared_statements: 1000,
            max_pending_parameter_bytes: ByteSize(256 << 20),
            jwt: None,
            metrics_listen: None,
            stream_idle_timeout: Duration::from_secs(300),
        }
    }
}

/// `[[server.user]]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    /// User name.
    pub name: String,
    /// argon2 PHC string, e.g. `$argon2id$v=19$m=19456,t=2,p=1$...`.
    pub password_hash: String,
    /// The groups the user belongs to, which access rules can name (`group`).
    #[serde(default)]
    pub groups: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            default_catalog: None,
            default_schema: None,
            log: DEFAULT_LOG.to_string(),
            query: QueryConfig::default(),
            cache: CacheConfig::default(),
            server: ServerConfig::default(),
            distributed: DistributedConfig::default(),
            maintenance: MaintenanceConfig::default(),
            catalogs: vec![],
            deprecated_keys: vec![],
        }
    }
}

/// A configuration file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// File given.
        path: PathBuf,
        /// I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML for [`Config`].
    #[error("invalid config file {path}: {message}")]
    Parse {
        /// File given.
        path: PathBuf,
        /// Parser message (line, column, key).
        message: String,
    },
    /// The values do not fit together.
    #[error("invalid configuration: {0}")]
    Invalid(String),
    /// A command that only reads found no embedded catalog in the data directory.
    #[error(
        "no iceflight catalog in data directory {} ({} does not exist): check --data-dir \
         (or ICEFLIGHT_DATA_DIR, data_dir in the config); `iceflight init` creates an empty \
         one, `iceflight demo` or `iceflight load tpch --scale 0.1 --namespace tpch` one with \
         data",
        dir.display(),
        dir.join("catalog.db").display()
    )]
    NoCatalog {
        /// The data directory.
        dir: PathBuf,
    },
}

impl Config {
    /// Reads and parses a TOML file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml(&text).map_err(|message| ConfigError::Parse {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Parses TOML text; the error is the parser's one-line message. Keys renamed since an
    /// earlier release are read under their new names, each with a warning in
    /// [`Self::deprecated_keys`] (`deprecated_keys.rs`).
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let parse_error = |e: toml::de::Error| match e.span() {
            Some(span) => e.message().to_string() + &location(text, Some(span)),
            // Read from the migrated table (old keys present): no line, but its Display names
            // the key (`… in `cache.memory``).
            None => e
                .to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        };
        let mut table: toml::Table = toml::from_str(text).map_err(parse_error)?;
        let warnings = crate::deprecated_keys::migrate(&mut table)?;
        if warnings.is_empty() {
            // From the text, so an error names its line.
            return toml::from_str(text).map_err(parse_error);
        }
        let mut config: Self = table.try_into().map_err(parse_error)?;
        config.deprecated_keys = warnings;
        Ok(config)
    }

    /// Checks values that parse but cannot work together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.distributed.health_interval()?;
        self.query.timeout()?;
        match self.distributed.role {
            Role::Coordinator => {
                parse_worker_urls(&self.distributed.workers, self.distributed.tls.is_some())?;
            }
            role if !self.distributed.workers.is_empty() => {
                return Err(ConfigError::Invalid(format!(
                    "distributed.workers (--worker) are for role = \"coordinator\"; this process's role is {}",
                    role.as_str()
                )));
            }
            _ => {}
        }
        for c in &self.catalogs {
            if c.kind == CatalogKind::Sql
                && (c.vended_credentials || c.credential_lifetime.is_some())
            {
                return Err(ConfigError::Invalid(format!(
                    "catalog {}: vended_credentials and credential_lifetime apply to type = \"rest\" only",
                    c.name
                )));
            }
            for (key, value) in [
                ("token_lifetime", c.token_lifetime),
                ("credential_lifetime", c.credential_lifetime),
            ] {
                if value.is_some_and(|d| d.is_zero()) {
                    return Err(ConfigError::Invalid(format!(
                        "catalog {}: {key} must be longer than 0s",
                        c.name
                    )));
                }
            }
        }
        if self.cache.block_size_bytes() > 64 << 20 {
            return Err(ConfigError::Invalid(format!(
                "cache.block_size must be at most 64MiB, got {}",
                self.cache.block_size
            )));
        }
        if self.cache.disk.is_some() {
            if self.cache.block_size_bytes() > 16 << 20 {
                return Err(ConfigError::Invalid(format!(
                    "cache.block_size must be at most 16MiB with a disk tier (cache.disk), got {}",
                    self.cache.block_size
                )));
            }
            if self.cache.disk_capacity_bytes() < 32 << 20 {
                return Err(ConfigError::Invalid(format!(
                    "cache.disk_capacity must be at least 32MiB, got {}",
                    self.cache.disk_capacity
                )));
            }
        }
        Ok(())
    }

    /// Checks that the embedded default catalog (no `[[catalog]]` configured) already exists in
    /// `data_dir`, for commands that only read (`sql`, `serve`): they never create one, so a
    /// mistyped `--data-dir` is an error instead of a new, empty catalog.
    ///
    /// Errors: [`ConfigError::NoCatalog`] naming the directory.
    pub fn require_existing_catalog(&self) -> Result<(), ConfigError> {
        if self.catalogs.is_empty() && !self.data_dir.join("catalog.db").is_file() {
            return Err(ConfigError::NoCatalog {
                dir: self.data_dir.clone(),
            });
        }
        Ok(())
    }

    /// The catalogs to connect: the configured ones, or the embedded default in `data_dir`.
    pub fn effective_catalogs(&self) -> Vec<CatalogConfig> {
        if self.catalogs.is_empty() {
            vec![CatalogConfig::embedded(&absolute(&self.data_dir))]
        } else {
            self.catalogs.clone()
        }
    }

    /// The catalog for unqualified names. Errors if `default_catalog` names no configured catalog.
    pub fn effective_default_catalog(&self) -> Result<String, ConfigError> {
        let catalogs = self.effective_catalogs();
        match &self.default_catalog {
            Some(name) if catalogs.iter().any(|c| &c.name == name) => Ok(name.clone()),
            Some(name) => Err(ConfigError::Invalid(format!(
                "default catalog {name} is not configured (configured: {})",
                catalogs
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
            None => Ok(catalogs
                .first()
                .map(|c| c.name.clone())
                .unwrap_or_else(|| DEFAULT_CATALOG_NAME.to_string())),
        }
    }
}

fn location(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    match span {
        Some(r) => {
            let line = text[..r.start.min(text.len())].matches('\n').count() + 1;
            format!(" (line {line})")
        }
        None => String::new(),
    }
}

/// `path` made absolute against the working directory (so `file://` URLs are well formed).
pub fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_are_checked_with_the_key_and_the_value_given() {
        let invalid = |toml: &str| -> String {
            Config::from_toml(toml)
                .unwrap()
                .validate()
                .unwrap_err()
                .to_string()
        };
        // A size that is not one fails while the file is read, naming its line.
        assert_eq!(
            Config::from_toml("[cache]\nmemory = \"lots\"").unwrap_err(),
            "invalid size \"lots\" (e.g. 4MiB, 512MB, 1048576) (line 2)"
        );
        assert_eq!(
            invalid("[cache]\nblock_size = \"128MiB\""),
            "invalid configuration: cache.block_size must be at most 64MiB, got 128MiB"
        );
        assert_eq!(
            invalid("[cache]\ndisk = \"/d\"\nblock_size = \"32MiB\""),
            "invalid configuration: cache.block_size must be at most 16MiB with a disk tier \
             (cache.disk), got 32MiB"
        );
        assert_eq!(
            invalid("[cache]\ndisk = \"/d\"\ndisk_capacity = \"1MiB\""),
            "invalid configuration: cache.disk_capacity must be at least 32MiB, got 1MiB"
        );
        let c = Config::from_toml("[cache]\nmemory = \"2GiB\"").unwrap();
        assert_eq!(c.cache.memory_bytes(), 2 << 30);
        assert!(c.cache.local_files && c.cache.enabled && c.cache.disk.is_none());
    }

    #[test]
    fn defaults_to_embedded_local() {
        let c = Config::from_toml("").unwrap();
        let catalogs = c.effective_catalogs();
        assert_eq!(catalogs.len(), 1);
        assert_eq!(catalogs[0].name, "local");
        assert!(
            catalogs[0].uri.ends_with("iceflight-data/catalog.db"),
            "{}",
            catalogs[0].uri
        );
        assert_eq!(c.effective_default_catalog().unwrap(), "local");
    }

    #[test]
    fn parses_catalogs_and_rejects_unknown_keys() {
        let c = Config::from_toml(
            r#"
            data_dir = "/tmp/x"
            default_schema = "tpch"
            log = "info"
            [query]
            target_partitions = 3
            [[catalog]]
            name = "lake"
            type = "rest"
            uri = "http://127.0.0.1:8181"
            [catalog.properties]
            "s3.endpoint" = "http://127.0.0.1:8333"
            "#,
        )
        .unwrap();
        assert_eq!(c.query.target_partitions, 3);
        assert_eq!(c.default_schema.as_deref(), Some("tpch"));
        assert_eq!(c.log, "info");
        assert_eq!(
            c.catalogs[0].properties["s3.endpoint"],
            "http://127.0.0.1:8333"
        );
        assert_eq!(c.effective_default_catalog().unwrap(), "lake");

        let err = Config::from_toml("data_dri = 1").unwrap_err();
        assert!(err.contains("unknown field `data_dri`"), "{err}");
        let err = Config::from_toml("[[catalog]]\nname = \"x\"\ntype = \"nope\"\nuri = \"u\"")
            .unwrap_err();
        assert!(err.contains("unknown variant `nope`"), "{err}");
    }

    #[test]
    fn documented_example_parses_to_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/iceflight.toml");
        let c = Config::from_file(&path).unwrap();
        assert_eq!(
            c,
            Config::default(),
            "config/iceflight.toml must show the defaults"
        );
        c.validate().unwrap();
    }

    /// Every key of the configuration reference (docs/configuration.md, its table of keys) is
    /// shown in config/iceflight.toml under its section (commented or not), and the line shown
    /// parses in that section.
    #[test]
    fn every_documented_key_is_in_the_example_file_and_parses() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let reference = std::fs::read_to_string(root.join("docs/configuration.md")).unwrap();
        let example = std::fs::read_to_string(root.join("config/iceflight.toml")).unwrap();
        // The example's lines by section, comment marks taken off: a line in force belongs to
        // the last header in force, a commented one (an example) to the last header shown.
        let mut sections: Vec<(String, Vec<String>)> = vec![(String::new(), vec![])];
        let (mut in_force, mut shown) = (0, 0);
        for line in example.lines() {
            let bare = line.trim_start_matches('#').trim();
            if bare.starts_with('[') && (line.starts_with('[') || line.starts_with("# [")) {
                let name = bare.split(']').next().unwrap().trim_start_matches('[');
                sections.push((name.to_string(), vec![]));
                shown = sections.len() - 1;
                if line.starts_with('[') {
                    in_force = shown;
                }
            } else {
                let at = if line.starts_with('#') {
                    shown
                } else {
                    in_force
                };
                sections[at].1.push(bare.to_string());
            }
        }
        let mut checked = 0;
        for row in reference.lines().filter(|l| l.starts_with("| `[")) {
            let cell = row.split('|').nth(1).unwrap();
            let tokens: Vec<&str> = cell.split('`').skip(1).step_by(2).collect();
            let (section, first) = tokens[0].rsplit_once(']').unwrap();
            let array = section.starts_with("[[");
            let section = section.trim_start_matches('[').trim_end_matches(']');
            let mut keys: Vec<&str> = tokens[1..].to_vec();
            if !first.trim().is_empty() {
                keys.insert(0, first.trim());
            }
            let lines = sections
                .iter()
                .filter(|(name, _)| name == section)
                .flat_map(|(_, lines)| lines)
                .collect::<Vec<_>>();
            assert!(
                sections.iter().any(|(name, _)| name == section),
                "config/iceflight.toml has no [{section}] section (docs/configuration.md: {cell})"
            );
            let key_of = |line: &str| line.split('=').next().map(|k| k.trim().to_string());
            for key in &keys {
                assert!(
                    lines.iter().any(|l| key_of(l).as_deref() == Some(*key)),
                    "config/iceflight.toml shows no {key} under [{section}]"
                );
                checked += 1;
            }
            // The lines shown in a table section parse together there (some sections need
            // several keys, `[server.jwt]` its issuer and audience); comments after a value
            // and prose are left out.
            if !array && !keys.is_empty() {
                let mut seen = std::collections::BTreeSet::new();
                let shown: Vec<&str> = lines
                    .iter()
                    .map(|l| l.split(" #").next().unwrap())
                    .filter(|l| {
                        // A `key = value` line of TOML, not prose with an `=` in it.
                        toml::from_str::<toml::Table>(l).is_ok()
                            && key_of(l).is_some_and(|k| seen.insert(k))
                    })
                    .collect();
                let text = format!("[{section}]\n{}", shown.join("\n"));
                Config::from_toml(&text).unwrap_or_else(|e| {
                    panic!("config/iceflight.toml's [{section}] lines do not parse: {e}\n{text}")
                });
            }
        }
        assert!(
            checked > 50,
            "only {checked} keys found in docs/configuration.md"
        );
    }

    #[test]
    fn invalid_values_are_refused() {
        let err = Config::from_toml("[server]\nauth = \"maybe\"").unwrap_err();
        assert!(
            err.contains("unknown variant `maybe`, expected `basic` or `none`"),
            "{err}"
        );
        let err = Config::from_toml("[query]\nmemory_limit = \"lots\"").unwrap_err();
        assert!(err.starts_with("invalid size \"lots\""), "{err}");
        // Next to a renamed key (read through the migrated table): the key is named instead
        // of the line.
        let err = Config::from_toml("[server]\nsession_ttl_secs = 60\n[cache]\nmemory = \"lots\"")
            .unwrap_err();
        assert!(
            err.starts_with("invalid size \"lots\"") && err.contains("cache.memory"),
            "{err}"
        );
    }

    #[test]
    fn vending_options_on_an_embedded_catalog_are_refused() {
        let text = "[[catalog]]\nname = \"local\"\ntype = \"sql\"\nuri = \"sqlite:/x\"\nvended_credentials = true";
        let err = Config::from_toml(text).unwrap().validate().unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration: catalog local: vended_credentials and credential_lifetime apply to type = \"rest\" only"
        );
    }

    #[test]
    fn a_zero_token_or_credential_lifetime_is_refused() {
        for key in ["token_lifetime", "credential_lifetime"] {
            let text = format!(
                "[[catalog]]\nname = \"lake\"\ntype = \"rest\"\nuri = \"http://x\"\n{key} = \"0s\""
            );
            let err = Config::from_toml(&text).unwrap().validate().unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("invalid configuration: catalog lake: {key} must be longer than 0s")
            );
        }
    }

    #[test]
    fn unknown_default_catalog_is_an_error() {
        let c = Config {
            default_catalog: Some("nope".into()),
            ..Config::default()
        };
        let err = c.effective_default_catalog().unwrap_err().to_string();
        assert!(
            err.contains("default catalog nope is not configured"),
            "{err}"
        );
    }

    /// Worker URLs must be `http://host:port` (`https://` under TLS), each once.
    #[test]
    fn urls_are_checked() {
        assert!(parse_worker_urls(&[], false).is_err());
        assert!(parse_worker_urls(&["localhost:1".into()], false).is_err());
        assert!(parse_worker_urls(&["http://localhost".into()], false).is_err());
        assert!(parse_worker_urls(&["http://localhost:50061".into()], false).is_ok());
        assert!(parse_worker_urls(&["https://localhost:50061".into()], false).is_err());
        assert!(parse_worker_urls(&["https://localhost:50061".into()], true).is_ok());
        let e = parse_worker_urls(&["http://localhost:50061".into()], true).unwrap_err();
        assert!(e.to_string().contains("must be https://host:port"), "{e}");
        let twice = [
            "http://localhost:50061".to_string(),
            "http://localhost:50061".into(),
        ];
        assert!(parse_worker_urls(&twice, false).is_err());
    }
}
