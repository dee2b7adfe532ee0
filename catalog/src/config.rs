//! Catalog configuration: one `[[catalog]]` table per catalog in the server's TOML file.

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Extra iceberg catalog / FileIO properties (`s3.endpoint`, `header.X-...`, ...).
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
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
            properties: BTreeMap::new(),
        }
    }
}
