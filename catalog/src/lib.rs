//! iceflight's catalogs: connects the configured Iceberg catalogs (embedded SQL, REST) and
//! exposes them to DataFusion; also loads generated data (TPC-H, the nested-field table) into them.
//!
//! ```text
//!   [[catalog]] config ──► connect ──► Arc<dyn iceberg::Catalog>
//!                                        └─► IcebergCatalogProvider ──► IcebergSchemaProvider
//!                                                                         └─► IcebergTableProvider
//! ```

pub mod config;
pub mod connect;
pub mod error;
pub mod load;
pub mod nested;
pub mod provider;
pub mod rest;
pub mod tpch;

use std::sync::Arc;

use datafusion::prelude::SessionContext;
use iceberg::Catalog;

pub use config::{CatalogConfig, CatalogKind, DEFAULT_CATALOG_NAME};
pub use error::CatalogError;
pub use provider::{IcebergCatalogProvider, IcebergSchemaProvider};

/// The connected catalogs of one server or CLI run, by name.
#[derive(Debug, Default, Clone)]
pub struct Catalogs {
    /// `(name, uri, catalog)` in configuration order.
    entries: Vec<(String, String, Arc<dyn Catalog>)>,
}

impl Catalogs {
    /// Connects every configured catalog. Errors on a duplicate name or the first catalog that
    /// cannot be reached.
    pub async fn connect(configs: &[CatalogConfig]) -> Result<Self, CatalogError> {
        let mut entries: Vec<(String, String, Arc<dyn Catalog>)> =
            Vec::with_capacity(configs.len());
        for c in configs {
            if entries.iter().any(|(n, _, _)| n == &c.name) {
                return Err(CatalogError::Config(format!(
                    "catalog {} is configured twice",
                    c.name
                )));
            }
            entries.push((c.name.clone(), c.uri.clone(), connect::connect(c).await?));
        }
        Ok(Self { entries })
    }

    /// The catalog called `name`. Errors with [`CatalogError::NotFound`] listing the known names.
    pub fn get(&self, name: &str) -> Result<&Arc<dyn Catalog>, CatalogError> {
        self.entries
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, _, c)| c)
            .ok_or_else(|| {
                let known: Vec<&str> = self.entries.iter().map(|(n, _, _)| n.as_str()).collect();
                CatalogError::NotFound(format!(
                    "unknown catalog {name} (configured: {})",
                    known.join(", ")
                ))
            })
    }

    /// Catalog names in configuration order.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|(n, _, _)| n.as_str()).collect()
    }

    /// Registers every catalog with `ctx` under its name.
    pub fn register(&self, ctx: &SessionContext) {
        for (name, uri, catalog) in &self.entries {
            ctx.register_catalog(
                name.as_str(),
                Arc::new(IcebergCatalogProvider::new(
                    name.clone(),
                    uri.clone(),
                    Arc::clone(catalog),
                )),
            );
        }
    }
}
