//! An Iceberg REST catalog (Polaris, SeaweedFS, Apache Iceberg's reference server) that keeps
//! working across token expiry and outages.
//!
//! ```text
//!   every Catalog call ──► current client (token still fresh?) ── no ──► fetch a token, new client
//!                           │
//!                           ▼
//!                    iceberg-catalog-rest call ── 401/419 ──► fetch a token, retry once
//!                           │ 5xx / connection error ──► retry after 100 ms, 400 ms
//!                           ▼
//!                    errors typed: Unauthenticated / Unavailable (naming catalog and URI)
//! ```
//!
//! iceberg-catalog-rest 0.10.1 fetches an OAuth2 token once and never refreshes it, so this
//! wrapper owns the client-credentials flow: it requests tokens itself (`POST
//! <oauth2-server-uri | uri/v1/oauth/tokens>`), hands each to a fresh `RestCatalog` as its
//! static token, and replaces the client at 90 % of `expires_in` (capped by the catalog's
//! `token_lifetime`) or when the server answers 401. The client is built lazily: a catalog that
//! is down at start-up only fails the queries that use it. Secrets are never logged. Storage
//! credentials vended at table load (asked for with `vended_credentials`) win over configured
//! ones (which only fill in); vended ones with an expiry are renewed by loading the table again
//! before they expire (`vended_storage.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::cached_storage::{CachingStorageFactory, StorageCache};
use crate::vended_storage::{CredentialSource, Renewal, RenewingStorageFactory, expires};
use async_trait::async_trait;
use futures::FutureExt;
use futures::future::BoxFuture;
use iceberg::table::Table;
use iceberg::{
    Catalog, CatalogBuilder, Error, ErrorKind, Namespace, NamespaceIdent, Result, TableCommit,
    TableCreation, TableIdent, TableRequirement, TableUpdate,
};
use iceberg_catalog_rest::{RestCatalog, RestCatalogBuilder};
use iceflight_iceberg::commit::CommitCatalog;

use crate::config::CatalogConfig;
use crate::error::CatalogError;

/// A catalog that does not accept a connection this fast is unavailable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A catalog request (or token request) that takes longer than this fails as unavailable, and
/// is not retried: a hung catalog costs each query at most this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Waits before the 2nd and 3rd attempt of a call that failed with a 5xx status or a connection
/// error.
const BACKOFF: [Duration; 2] = [Duration::from_millis(100), Duration::from_millis(400)];

/// Storage credential properties. iceberg-catalog-rest 0.10.1 lets the client's properties win
/// over what the server vends at table load; these are kept back and only fill in when nothing
/// was vended.
const STORAGE_SECRETS: [&str; 3] = [
    "s3.access-key-id",
    "s3.secret-access-key",
    "s3.session-token",
];

/// `vended` (a table's FileIO properties after load) completed by `fallback` where the server
/// vended no access key.
fn with_fallback_credentials(
    vended: &HashMap<String, String>,
    fallback: &HashMap<String, String>,
) -> Option<HashMap<String, String>> {
    if fallback.is_empty() || vended.contains_key("s3.access-key-id") {
        return None;
    }
    let mut props = vended.clone();
    props.extend(fallback.iter().map(|(k, v)| (k.clone(), v.clone())));
    Some(props)
}

/// What a REST catalog fetched to stay signed in, counted since it was connected. Clones share
/// the counts.
#[derive(Debug, Default, Clone)]
pub struct CredentialCounters {
    tokens_fetched: Arc<AtomicU64>,
    storage_renewed: Arc<AtomicU64>,
}

/// The counts of a [`CredentialCounters`] at one moment (`/metrics`, tests).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CredentialStats {
    /// OAuth2 tokens fetched, refreshes and replacements of rejected tokens included.
    pub tokens_fetched: u64,
    /// Vended storage credentials renewed, over all tables (`vended_storage.rs`).
    pub storage_renewed: u64,
}

impl CredentialCounters {
    /// The counts now.
    pub fn get(&self) -> CredentialStats {
        CredentialStats {
            tokens_fetched: self.tokens_fetched.load(Ordering::Relaxed),
            storage_renewed: self.storage_renewed.load(Ordering::Relaxed),
        }
    }
}

/// A REST catalog client with token refresh, retries and typed errors (module docs).
pub struct ManagedRestCatalog {
    name: String,
    uri: String,
    /// Properties for `RestCatalogBuilder` (uri, warehouse, headers, FileIO settings), without
    /// credentials.
    props: HashMap<String, String>,
    /// Configured storage credentials (`s3.access-key-id`, …), used only for tables whose load
    /// response vended none: vended credentials take precedence.
    fallback_storage: HashMap<String, String>,
    /// OAuth2 client credentials `(id, secret)`.
    credential: Option<(String, String)>,
    scope: Option<String>,
    token_uri: String,
    /// A configured bearer token, used until the server rejects it (then `credential`, if any).
    static_token: Option<String>,
    /// Upper bound on how long a fetched token is used (`token_lifetime`).
    token_lifetime: Option<Duration>,
    http: reqwest::Client,
    client: tokio::sync::Mutex<Option<Client>>,
    counters: CredentialCounters,
    /// The storage of every table's `FileIO` (the engine's block cache, if any).
    storage: Arc<CachingStorageFactory>,
    /// Upper bound on how long vended storage credentials are used (`credential_lifetime`).
    credential_lifetime: Option<Duration>,
    /// This catalog, for the tables whose vended credentials it renews ([`Self::shared`]; empty
    /// when built without it: nothing is renewed).
    this: Weak<Self>,
}

/// Names and endpoints only: no credential, token or storage secret.
impl std::fmt::Debug for ManagedRestCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagedRestCatalog")
            .field("name", &self.name)
            .field("uri", &self.uri)
            .field("token_uri", &self.token_uri)
            .field("counters", &self.counters.get())
            .finish_non_exhaustive()
    }
}

/// One `RestCatalog` with the token it was built with.
#[derive(Debug, Clone)]
struct Client {
    catalog: Arc<RestCatalog>,
    /// The bearer token `catalog` sends (`None`: none), for the requests made here.
    token: Option<String>,
    /// When to fetch a new token (`None`: never, a static token).
    refresh_at: Option<Instant>,
}

/// How a failed call is handled.
enum Failure {
    /// 401 / 419: the token is not (or no longer) accepted.
    Unauthorized,
    /// 403: the principal may not do this.
    Forbidden,
    /// 5xx or the server could not be reached: worth another attempt.
    Transient,
    /// No answer within [`REQUEST_TIMEOUT`]: unavailable at once.
    TimedOut,
    /// Anything else (not found, conflict, bad request): returned as is.
    Final,
}

/// The HTTP status iceberg-catalog-rest attached to `e` (its `status` context line, never
/// text from the response body). iceberg 0.10.1 has no accessor for an error's context; its
/// Debug rendering is the only place the line appears (catalog/UPSTREAM.md, "A REST error's
/// HTTP status is only in its Debug rendering").
fn http_status(e: &Error) -> Option<u16> {
    format!("{e:?}").lines().find_map(|line| {
        let v = line.trim_start().strip_prefix("status: ")?;
        v.get(..3)?.parse().ok()
    })
}

/// `e`'s sources, outermost first.
fn sources(e: &Error) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    std::iter::successors(std::error::Error::source(e), |s| s.source())
}

/// The transport failure among `e`'s sources, if any: `Some(true)` for a timeout.
fn transport_failure(e: &Error) -> Option<bool> {
    let r = sources(e).find_map(|s| s.downcast_ref::<reqwest::Error>())?;
    if r.is_timeout() {
        return Some(true);
    }
    (r.is_connect() || r.is_request()).then_some(false)
}

fn classify(e: &Error) -> Failure {
    match http_status(e) {
        Some(401 | 419) => Failure::Unauthorized,
        Some(403) => Failure::Forbidden,
        Some(s) if s >= 500 => Failure::Transient,
        Some(_) => Failure::Final,
        None => match transport_failure(e) {
            Some(true) => Failure::TimedOut,
            Some(false) => Failure::Transient,
            None => Failure::Final,
        },
    }
}

impl ManagedRestCatalog {
    /// A client for `config` (type `rest`); no request is made until the first call. Vended
    /// storage credentials are renewed only once it is [`Self::shared`].
    ///
    /// Errors: [`CatalogError::Config`] for a `credential` without `:`.
    pub fn new(config: &CatalogConfig) -> std::result::Result<Self, CatalogError> {
        let mut props: HashMap<String, String> = config.properties.clone().into_iter().collect();
        props.insert("uri".into(), config.uri.clone());
        if let Some(w) = &config.warehouse {
            props.insert("warehouse".into(), w.clone());
        }
        let credential = match &config.credential {
            None => None,
            Some(c) => {
                let (id, secret) = c.split_once(':').ok_or_else(|| {
                    CatalogError::Config(format!(
                        "catalog {}: credential must be client_id:client_secret",
                        config.name
                    ))
                })?;
                Some((id.to_string(), secret.to_string()))
            }
        };
        let fallback_storage: HashMap<String, String> = STORAGE_SECRETS
            .iter()
            .filter_map(|k| props.remove(*k).map(|v| (k.to_string(), v)))
            .collect();
        if config.vended_credentials {
            props
                .entry("header.X-Iceberg-Access-Delegation".into())
                .or_insert_with(|| "vended-credentials".into());
        }
        let token_uri = props
            .remove("oauth2-server-uri")
            .unwrap_or_else(|| format!("{}/v1/oauth/tokens", config.uri.trim_end_matches('/')));
        Ok(Self {
            name: config.name.clone(),
            uri: config.uri.clone(),
            props,
            fallback_storage,
            credential,
            scope: config.scope.clone(),
            token_uri,
            static_token: config.token.clone(),
            token_lifetime: config.token_lifetime,
            http: reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .timeout(REQUEST_TIMEOUT)
                .build()
                .map_err(|e| CatalogError::Config(format!("catalog {}: {e}", config.name)))?,
            client: tokio::sync::Mutex::new(None),
            counters: CredentialCounters::default(),
            storage: Arc::new(CachingStorageFactory::new(None)),
            credential_lifetime: config.credential_lifetime,
            this: Weak::new(),
        })
    }

    /// This catalog behind an `Arc`, able to renew its tables' vended storage credentials (one
    /// used without it never renews them).
    pub fn shared(self) -> Arc<Self> {
        Arc::new_cyclic(|this| Self {
            this: this.clone(),
            ..self
        })
    }

    /// Tables read through `cache` (uncached with `None`, the default).
    pub fn with_storage_cache(mut self, cache: Option<StorageCache>) -> Self {
        self.storage = Arc::new(CachingStorageFactory::new(cache));
        self
    }

    /// The counters of this catalog's credentials, shared (they keep counting).
    pub fn counters(&self) -> CredentialCounters {
        self.counters.clone()
    }

    fn unavailable(&self, message: String) -> Error {
        wrap(CatalogError::Unavailable {
            catalog: self.name.clone(),
            uri: self.uri.clone(),
            message,
        })
    }

    fn unauthenticated(&self, message: String) -> Error {
        wrap(CatalogError::Unauthenticated {
            catalog: self.name.clone(),
            message,
        })
    }

    /// `POST` the client credentials to the token endpoint: `(token, expires_in)`.
    async fn fetch_token(&self) -> Result<(String, Option<Duration>)> {
        let Some((id, secret)) = &self.credential else {
            return Err(self.unauthenticated(
                "the server refused the configured token and no credential is configured".into(),
            ));
        };
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("client_id", id.as_str()),
            ("client_secret", secret.as_str()),
        ];
        if let Some(scope) = &self.scope {
            form.push(("scope", scope.as_str()));
        }
        // The catalog's extra headers (`header.Polaris-Realm`, …) go to the token endpoint too.
        let request = self
            .request(reqwest::Method::POST, &self.token_uri, None)
            .form(&form);
        let response = request.send().await.map_err(|e| {
            let what = if e.is_timeout() {
                format!("no answer within {}s", REQUEST_TIMEOUT.as_secs())
            } else {
                "unreachable".to_string()
            };
            self.unavailable(format!("token endpoint {} {what}: {e}", self.token_uri))
        })?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| self.unavailable(format!("token endpoint {}: {e}", self.token_uri)))?;
        if status.is_server_error() {
            return Err(self.unavailable(format!("token endpoint answered {status}")));
        }
        if !status.is_success() {
            return Err(self.unauthenticated(format!(
                "token endpoint {} refused the credential ({status})",
                self.token_uri
            )));
        }
        let json: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| self.unauthenticated(format!("token endpoint answered no token: {e}")))?;
        let token = json
            .get("access_token")
            .and_then(|t| t.as_str())
            .ok_or_else(|| {
                self.unauthenticated("token endpoint answered no access_token".into())
            })?;
        let expires_in = json
            .get("expires_in")
            .and_then(|v| v.as_u64())
            .map(Duration::from_secs);
        self.counters.tokens_fetched.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(catalog = %self.name, expires_in = ?expires_in, "fetched an OAuth2 token");
        Ok((token.to_string(), expires_in))
    }

    /// A client built with `token` (or with none).
    async fn build(&self, token: Option<String>, lifetime: Option<Duration>) -> Result<Client> {
        let mut props = self.props.clone();
        if let Some(t) = &token {
            props.insert("token".into(), t.clone());
        }
        let catalog = RestCatalogBuilder::default()
            .with_storage_factory(Arc::clone(&self.storage) as _)
            .with_client(self.http.clone())
            .load(self.name.clone(), props)
            .await?;
        let lifetime = match (lifetime, self.token_lifetime) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(Client {
            catalog: Arc::new(catalog),
            token,
            // Refresh at 90 % of the lifetime, so a token never expires mid-request.
            refresh_at: lifetime.map(|l| Instant::now() + l.mul_f64(0.9)),
        })
    }

    /// The client to use now. `rejected`: the client whose token the server just refused; it is
    /// replaced unless another caller replaced it already (concurrent 401s fetch one token).
    async fn client(&self, rejected: Option<&Arc<RestCatalog>>) -> Result<Arc<RestCatalog>> {
        let mut slot = self.client.lock().await;
        let current = slot.as_ref().map(|c| Arc::clone(&c.catalog));
        let renew = match (rejected, &current) {
            (Some(r), Some(c)) => Arc::ptr_eq(r, c),
            _ => false,
        };
        let stale = slot
            .as_ref()
            .is_some_and(|c| c.refresh_at.is_some_and(|at| Instant::now() >= at));
        if let (Some(c), false, false) = (&current, renew, stale) {
            return Ok(Arc::clone(c));
        }
        let built = match (&self.static_token, current.is_some()) {
            // A configured token first; once rejected (or on a refresh), the credential.
            (Some(t), false) => self.build(Some(t.clone()), None).await,
            _ if self.credential.is_some() => match self.fetch_token().await {
                Ok((token, expires_in)) => self.build(Some(token), expires_in).await,
                Err(e) => Err(e),
            },
            (Some(t), true) => self.build(Some(t.clone()), None).await,
            (None, _) => self.build(None, None).await,
        };
        let client = match (built, &current) {
            (Ok(client), _) => client,
            // A proactive refresh that failed: the current token may still be valid.
            (Err(e), Some(c)) if !renew => {
                tracing::warn!(catalog = %self.name, error = %e.message(), "token refresh failed; keeping the current token");
                return Ok(Arc::clone(c));
            }
            (Err(e), _) => return Err(e),
        };
        let catalog = Arc::clone(&client.catalog);
        *slot = Some(client);
        Ok(catalog)
    }

    /// `table` as the server answers its load (retried, typed errors), before [`Self::complete`].
    async fn fetch_table(&self, table: &TableIdent) -> Result<Table> {
        self.call(true, |c| {
            let t = table.clone();
            async move { c.load_table(&t).await }
        })
        .await
    }

    /// `table` with the configured storage credentials when its load vended none, or with
    /// storage that renews vended credentials that expire.
    fn complete(&self, table: Table) -> Result<Table> {
        let vended = table.file_io().config().props();
        let file_io = if let Some(props) = with_fallback_credentials(vended, &self.fallback_storage)
        {
            iceberg::io::FileIOBuilder::new(Arc::clone(&self.storage) as _).with_props(props)
        } else if let (true, Some(this)) = (expires(vended), self.this.upgrade()) {
            let renewal = Renewal::new(
                Arc::new(TableCredentials {
                    catalog: Arc::downgrade(&this),
                    table: table.identifier().clone(),
                }),
                self.credential_lifetime,
                Arc::clone(&self.counters.storage_renewed),
            );
            let factory = RenewingStorageFactory::new((*self.storage).clone(), renewal);
            iceberg::io::FileIOBuilder::new(Arc::new(factory)).with_props(vended.clone())
        } else {
            return Ok(table);
        };
        let file_io = file_io.build();
        let mut builder = Table::builder()
            .metadata(table.metadata_ref())
            .identifier(table.identifier().clone())
            .file_io(file_io)
            .readonly(table.readonly())
            .runtime(iceberg::Runtime::current());
        if let Some(location) = table.metadata_location() {
            builder = builder.metadata_location(location);
        }
        builder.build()
    }

    /// `e` as Unauthenticated / Unavailable when it is one, else unchanged.
    fn typed(&self, e: Error) -> Error {
        match classify(&e) {
            Failure::Unauthorized => {
                self.unauthenticated(format!("the server refused the token: {}", e.message()))
            }
            Failure::Forbidden => self.unauthenticated(format!(
                "the server forbids this to the configured principal (403): {}",
                e.message()
            )),
            Failure::Transient => self.unavailable(with_cause(&e)),
            Failure::TimedOut => self.unavailable(format!(
                "no answer within {}s: {}",
                REQUEST_TIMEOUT.as_secs(),
                e.message()
            )),
            Failure::Final => e,
        }
    }

    /// Runs `op` with typed errors: after a 401 once more with a new token (the request was not
    /// applied); after a 5xx or a transport error up to twice more when `idempotent` (reads; a
    /// write may have been applied before the error).
    async fn call<T, F, Fut>(&self, idempotent: bool, op: F) -> Result<T>
    where
        F: Fn(Arc<RestCatalog>) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut renewed = false;
        let mut attempt = 0;
        loop {
            let catalog = self.client(None).await?;
            let e = match op(Arc::clone(&catalog)).await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            match classify(&e) {
                Failure::Unauthorized if !renewed => {
                    renewed = true;
                    self.client(Some(&catalog)).await?;
                }
                Failure::Transient if idempotent && attempt < BACKOFF.len() => {
                    tokio::time::sleep(BACKOFF[attempt]).await;
                    attempt += 1;
                }
                _ => return Err(self.typed(e)),
            }
        }
    }
}

/// `e`'s message and the innermost error under it (`Failed to execute http request: Connection
/// refused (os error 111)`) rather than iceberg's rendering with its kind and every layer; the
/// whole rendering when nothing lies under it (an HTTP status is in its context).
fn with_cause(e: &Error) -> String {
    match sources(e).last() {
        Some(cause) => format!("{}: {cause}", e.message()),
        None => e.to_string(),
    }
}

/// An iceberg error carrying a [`CatalogError`] as its source (found again by
/// [`crate::error::to_df_error`]).
fn wrap(e: CatalogError) -> Error {
    let kind = match e {
        CatalogError::Unauthenticated { .. } => ErrorKind::DataInvalid,
        _ => ErrorKind::Unexpected,
    };
    Error::new(kind, e.to_string()).with_source(e)
}

#[async_trait]
impl Catalog for ManagedRestCatalog {
    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> Result<Vec<NamespaceIdent>> {
        let parent = parent.cloned();
        self.call(true, |c| {
            let parent = parent.clone();
            async move { c.list_namespaces(parent.as_ref()).await }
        })
        .await
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<Namespace> {
        self.call(false, |c| {
            let (n, p) = (namespace.clone(), properties.clone());
            async move { c.create_namespace(&n, p).await }
        })
        .await
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> Result<Namespace> {
        self.call(true, |c| {
            let n = namespace.clone();
            async move { c.get_namespace(&n).await }
        })
        .await
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> Result<bool> {
        self.call(true, |c| {
            let n = namespace.clone();
            async move { c.namespace_exists(&n).await }
        })
        .await
    }

    async fn update_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<()> {
        self.call(false, |c| {
            let (n, p) = (namespace.clone(), properties.clone());
            async move { c.update_namespace(&n, p).await }
        })
        .await
    }

    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> Result<()> {
        self.call(false, |c| {
            let n = namespace.clone();
            async move { c.drop_namespace(&n).await }
        })
        .await
    }

    async fn list_tables(&self, namespace: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        self.call(true, |c| {
            let n = namespace.clone();
            async move { c.list_tables(&n).await }
        })
        .await
    }

    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        creation: TableCreation,
    ) -> Result<Table> {
        // Not retried: the creation is consumed, and it may have been applied before the error.
        let catalog = self.client(None).await?;
        let table = catalog
            .create_table(namespace, creation)
            .await
            .map_err(|e| self.typed(e))?;
        self.complete(table)
    }

    async fn load_table(&self, table: &TableIdent) -> Result<Table> {
        let loaded = self.fetch_table(table).await?;
        self.complete(loaded)
    }

    async fn drop_table(&self, table: &TableIdent) -> Result<()> {
        self.call(false, |c| {
            let t = table.clone();
            async move { c.drop_table(&t).await }
        })
        .await
    }

    async fn purge_table(&self, table: &TableIdent) -> Result<()> {
        self.call(false, |c| {
            let t = table.clone();
            async move { c.purge_table(&t).await }
        })
        .await
    }

    async fn table_exists(&self, table: &TableIdent) -> Result<bool> {
        self.call(true, |c| {
            let t = table.clone();
            async move { c.table_exists(&t).await }
        })
        .await
    }

    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> Result<()> {
        self.call(false, |c| {
            let (s, d) = (src.clone(), dest.clone());
            async move { c.rename_table(&s, &d).await }
        })
        .await
    }

    async fn register_table(&self, table: &TableIdent, metadata_location: String) -> Result<Table> {
        let registered = self
            .call(false, |c| {
                let (t, m) = (table.clone(), metadata_location.clone());
                async move { c.register_table(&t, m).await }
            })
            .await?;
        self.complete(registered)
    }

    async fn update_table(&self, commit: TableCommit) -> Result<Table> {
        // Not retried: a commit may have been applied before the error.
        let catalog = self.client(None).await?;
        let updated = catalog
            .update_table(commit)
            .await
            .map_err(|e| self.typed(e))?;
        self.complete(updated)
    }
}

/// Fresh vended credentials for one table: the table loaded again, through the catalog's token
/// refresh and retries.
#[derive(Debug)]
struct TableCredentials {
    /// Weak: a table's storage does not keep its catalog alive.
    catalog: Weak<ManagedRestCatalog>,
    table: TableIdent,
}

impl CredentialSource for TableCredentials {
    fn renew(&self) -> BoxFuture<'static, Result<HashMap<String, String>>> {
        let (catalog, table) = (self.catalog.upgrade(), self.table.clone());
        async move {
            let Some(catalog) = catalog else {
                return Err(Error::new(
                    ErrorKind::Unexpected,
                    format!("the catalog of {table} is closed"),
                ));
            };
            let loaded = catalog.fetch_table(&table).await?;
            Ok(loaded.file_io().config().props().clone())
        }
        .boxed()
    }
}

/// `POST /v1/{prefix}/namespaces/{namespace}/tables/{table}` with a `CommitTableRequest`, the
/// REST protocol's commit, sent here because iceberg-catalog-rest sends only a `TableCommit`
/// (`iceberg/src/commit.rs`). With the client's token and the catalog's extra headers; a token
/// the server refuses is renewed once. Not retried otherwise: the commit may have been applied.
#[async_trait]
impl CommitCatalog for ManagedRestCatalog {
    async fn commit_updates(
        &self,
        table: &TableIdent,
        requirements: Vec<TableRequirement>,
        updates: Vec<TableUpdate>,
    ) -> Result<()> {
        let body = serde_json::json!({
            "identifier": { "namespace": table.namespace().as_ref(), "name": table.name() },
            "requirements": requirements,
            "updates": updates,
        });
        let mut renewed = false;
        loop {
            let catalog = self.client(None).await?;
            let token = self
                .client
                .lock()
                .await
                .as_ref()
                .and_then(|c| c.token.clone());
            let (uri, prefix) = self.endpoint(token.as_deref()).await?;
            // The prefix as the server wrote it (Nessie's is already escaped: `main%7Cwarehouse`).
            let base = match prefix {
                Some(p) => format!("{}/v1/{p}", uri.trim_end_matches('/')),
                None => format!("{}/v1", uri.trim_end_matches('/')),
            };
            let mut url = reqwest::Url::parse(&base)
                .map_err(|e| self.unavailable(format!("uri {base}: {e}")))?;
            url.path_segments_mut()
                .map_err(|_| self.unavailable(format!("uri {base} has no path")))?
                .push("namespaces")
                .push(&table.namespace().as_ref().join("\u{1f}"))
                .push("tables")
                .push(table.name());
            let response = self
                .request(reqwest::Method::POST, url, token.as_deref())
                .json(&body)
                .send()
                .await
                .map_err(|e| self.unavailable(format!("commit to {table}: {e}")))?;
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            match status {
                200..=299 => return Ok(()),
                401 | 419 if !renewed => {
                    renewed = true;
                    self.client(Some(&catalog)).await?;
                }
                409 => {
                    return Err(Error::new(
                        ErrorKind::CatalogCommitConflicts,
                        format!("table {table} was changed by another commit"),
                    )
                    .with_retryable(true));
                }
                404 => {
                    return Err(Error::new(
                        ErrorKind::TableNotFound,
                        format!("table {table} does not exist"),
                    ));
                }
                _ => {
                    let message = serde_json::from_str::<serde_json::Value>(&text)
                        .ok()
                        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
                        .unwrap_or(text);
                    let e = Error::new(
                        ErrorKind::Unexpected,
                        format!("commit to {table} answered {status}: {message}"),
                    );
                    return Err(if status >= 500 {
                        self.unavailable(e.message().to_string())
                    } else {
                        e
                    });
                }
            }
        }
    }
}

impl ManagedRestCatalog {
    /// A request to the catalog with `token` and the configured `header.*` headers.
    fn request(
        &self,
        method: reqwest::Method,
        url: impl reqwest::IntoUrl,
        token: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, url);
        if let Some(t) = token {
            request = request.bearer_auth(t);
        }
        for (k, v) in &self.props {
            if let Some(name) = k.strip_prefix("header.") {
                request = request.header(name, v);
            }
        }
        request
    }

    /// The catalog's base URI and path prefix as iceberg-catalog-rest 0.10.1 merges them
    /// (`RestCatalogConfig::merge_with_config`): `GET /v1/config` (for the configured
    /// warehouse); its `overrides` first, then the configured properties, then its `defaults`.
    async fn endpoint(&self, token: Option<&str>) -> Result<(String, Option<String>)> {
        let mut url = reqwest::Url::parse(&format!("{}/v1/config", self.uri.trim_end_matches('/')))
            .map_err(|e| self.unavailable(format!("uri {}: {e}", self.uri)))?;
        if let Some(w) = self.props.get("warehouse") {
            url.query_pairs_mut().append_pair("warehouse", w);
        }
        let response = self
            .request(reqwest::Method::GET, url, token)
            .send()
            .await
            .map_err(|e| self.unavailable(format!("GET /v1/config: {e}")))?;
        let status = response.status();
        if !status.is_success() {
            return Err(self.unavailable(format!("GET /v1/config answered {status}")));
        }
        let config: serde_json::Value = response
            .json()
            .await
            .map_err(|e| self.unavailable(format!("GET /v1/config: {e}")))?;
        let setting = |key: &str| {
            config["overrides"][key]
                .as_str()
                .map(str::to_string)
                .or_else(|| self.props.get(key).cloned())
                .or_else(|| config["defaults"][key].as_str().map(str::to_string))
        };
        let uri = setting("uri").unwrap_or_else(|| self.uri.clone());
        Ok((uri, setting("prefix")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(kind: ErrorKind, message: &str, status: Option<&str>) -> &'static str {
        let mut e = Error::new(kind, message.to_string());
        if let Some(s) = status {
            e = e.with_context("status", s.to_string());
        }
        match classify(&e) {
            Failure::Unauthorized => "unauthorized",
            Failure::Forbidden => "forbidden",
            Failure::TimedOut => "timed out",
            Failure::Transient => "transient",
            Failure::Final => "final",
        }
    }

    #[test]
    fn vended_credentials_take_precedence() {
        let fallback: HashMap<String, String> =
            [("s3.access-key-id".to_string(), "configured".to_string())].into();
        let vended: HashMap<String, String> = [
            ("s3.access-key-id".to_string(), "vended".to_string()),
            ("s3.endpoint".to_string(), "http://x".to_string()),
        ]
        .into();
        assert_eq!(with_fallback_credentials(&vended, &fallback), None);
        let none_vended: HashMap<String, String> =
            [("s3.endpoint".to_string(), "http://x".to_string())].into();
        let props = with_fallback_credentials(&none_vended, &fallback).unwrap();
        assert_eq!(props["s3.access-key-id"], "configured");
        assert_eq!(props["s3.endpoint"], "http://x");
        assert_eq!(
            with_fallback_credentials(&none_vended, &HashMap::new()),
            None
        );
    }

    #[test]
    fn responses_are_classified_for_retry_and_refresh() {
        let unexpected = "Received response with unexpected status code";
        assert_eq!(
            failure(ErrorKind::Unexpected, unexpected, Some("401 Unauthorized")),
            "unauthorized"
        );
        assert_eq!(
            failure(
                ErrorKind::Unexpected,
                unexpected,
                Some("503 Service Unavailable")
            ),
            "transient"
        );
        assert_eq!(
            failure(
                ErrorKind::Unexpected,
                unexpected,
                Some("500 Internal Server Error")
            ),
            "transient"
        );
        assert_eq!(
            failure(ErrorKind::Unexpected, unexpected, Some("403 Forbidden")),
            "forbidden"
        );
        // Text in a message or body never decides: only the status context line and a
        // transport error among the sources do.
        assert_eq!(
            failure(
                ErrorKind::Unexpected,
                "snapshot 12341419 status: 500 timed out",
                None
            ),
            "final"
        );
        assert_eq!(
            failure(ErrorKind::TableNotFound, "no such table", None),
            "final"
        );
        assert_eq!(
            failure(ErrorKind::Unexpected, unexpected, Some("400 Bad Request")),
            "final"
        );
    }
}
