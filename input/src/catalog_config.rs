//! Catalog configuration: one `[[catalog]]` table per catalog in the server's TOML file
//! (`iceflight-catalog` connects them).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Name of the embedded catalog used when the configuration names none.
pub const DEFAULT_CATALOG_NAME: &str = "local";

/// Which catalog implementation serves a [`CatalogConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatalogKind {
    /// iceberg's SQL catalog on a sqlite file (`iceberg-catalog-sql`), "embedded".
    Sql,
    /// An Iceberg REST catalog (Polaris, SeaweedFS, Apache Iceberg's reference server).
    Rest,
}

/// One named catalog, exposed to SQL as `<name>.<namespace>.<table>`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogConfig {
    /// SQL name of the catalog.
    pub name: String,
    /// Implementation.
    #[serde(rename = "type")]
    pub kind: CatalogKind,
    /// `sql`: sqlx URI of the catalog database, e.g. `sqlite:/data/catalog.db`.
    /// `rest`: base URI of the REST service, e.g. `http://127.0.0.1:8181`.
    pub uri: String,
    /// Warehouse: `sql` a URL such as `file:///data/warehouse`; `rest` the warehouse name.
    #[serde(default)]
    pub warehouse: Option<String>,
    /// `rest`: OAuth2 client credentials `client_id:client_secret`.
    #[serde(default)]
    pub credential: Option<String>,
    /// `rest`: a static bearer token (wins over `credential`).
    #[serde(default)]
    pub token: Option<String>,
    /// `rest`: OAuth2 scope, e.g. `PRINCIPAL_ROLE:ALL`.
    #[serde(default)]
    pub scope: Option<String>,
    /// `rest`: use a fetched token at most this long (e.g. `600s`), even when the server grants
    /// it for longer; it is refreshed at 90 % of the shorter lifetime.
    #[serde(default, with = "crate::units::duration_text::option")]
    pub token_lifetime: Option<std::time::Duration>,
    /// `rest`: ask the catalog for storage credentials scoped to each table (the REST header
    /// `X-Iceberg-Access-Delegation: vended-credentials`, as Trino's
    /// `iceberg.rest-catalog.vended-credentials-enabled`). A vended access key, secret and
    /// session token win over configured ones; ones that carry an expiry
    /// (`s3.session-token-expires-at-ms`) are renewed from the catalog before they expire
    /// (`catalog/src/vended_storage.rs`).
    #[serde(default)]
    pub vended_credentials: bool,
    /// `rest`: use vended storage credentials at most this long after the table load (e.g.
    /// `600s`), even when they are valid for longer; they are renewed at 90 % of the shorter
    /// lifetime, and at most once a second. Must be longer than `0s`.
    #[serde(default, with = "crate::units::duration_text::option")]
    pub credential_lifetime: Option<std::time::Duration>,
    /// How long a loaded table is reused before the catalog is asked again (default `0s`: every
    /// query plans against the catalog's current metadata). `cache.rs`.
    #[serde(default, with = "crate::units::duration_text::option")]
    pub metadata_cache_ttl: Option<std::time::Duration>,
    /// How long namespace and table listings are reused (default `5s`).
    #[serde(default, with = "crate::units::duration_text::option")]
    pub listing_cache_ttl: Option<std::time::Duration>,
    /// Extra iceberg catalog / FileIO properties (`s3.endpoint`, `header.X-...`, ...).
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// Secrets are never printed: `credential` and `token` show as `***`.
impl std::fmt::Debug for CatalogConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hide = |v: &Option<String>| v.as_ref().map(|_| "***");
        f.debug_struct("CatalogConfig")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("uri", &self.uri)
            .field("warehouse", &self.warehouse)
            .field("credential", &hide(&self.credential))
            .field("token", &hide(&self.token))
            .field("scope", &self.scope)
            .field("token_lifetime", &self.token_lifetime)
            .field("vended_credentials", &self.vended_credentials)
            .field("credential_lifetime", &self.credential_lifetime)
            .field("metadata_cache_ttl", &self.metadata_cache_ttl)
            .field("listing_cache_ttl", &self.listing_cache_ttl)
            .field("properties", &self.properties.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl CatalogConfig {
    /// The embedded default: catalog `local` on `<data_dir>/catalog.db` with warehouse
    /// `<data_dir>/warehouse` — the layout pyiceberg's
    /// `SqlCatalog("local", uri="sqlite:///<data_dir>/catalog.db", warehouse="file://<data_dir>/warehouse")`
    /// opens too.
    pub fn embedded(data_dir: &Path) -> Self {
        Self {
            name: DEFAULT_CATALOG_NAME.to_string(),
            kind: CatalogKind::Sql,
            uri: format!("sqlite:{}/catalog.db", data_dir.display()),
            warehouse: Some(format!("file://{}/warehouse", data_dir.display())),
            credential: None,
            token: None,
            scope: None,
            token_lifetime: None,
            vended_credentials: false,
            credential_lifetime: None,
            metadata_cache_ttl: None,
            listing_cache_ttl: None,
            properties: BTreeMap::new(),
        }
    }
}
