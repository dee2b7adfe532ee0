//! iceflight's catalogs: connects the configured Iceberg catalogs (embedded SQL, REST) and
//! exposes them to DataFusion. Generated data and its loading are in `iceflight-datagen`.
//!
//! ```text
//!   [[catalog]] config ──► connect ──► Arc<dyn iceberg::Catalog>
//!                                        └─► IcebergCatalogProvider ──► IcebergSchemaProvider
//!                                                                         └─► IcebergTableProvider
//! ```

pub mod alter;
pub(crate) mod cache;
pub mod cached_storage;
pub(crate) mod commit;
/// `[[catalog]]` configuration, parsed in `iceflight-input` (no DataFusion there, so it is fuzzed).
pub use iceflight_input::catalog_config as config;
pub(crate) mod connect;
pub(crate) mod error;
pub mod listing;
pub mod metadata_tables;
pub mod names;
pub mod provider;
pub mod rest;
pub mod table_ref;
pub mod tables;
pub mod vended_storage;

use std::sync::Arc;

use datafusion::prelude::SessionContext;
use iceberg::Catalog;
use iceflight_iceberg::commit::CommitCatalog;

pub use config::{CatalogConfig, CatalogKind, DEFAULT_CATALOG_NAME};
pub use connect::sqlite_file;
pub use error::{CatalogError, to_df_error};
pub use provider::{IcebergCatalogProvider, IcebergSchemaProvider, NO_DEFAULT_SCHEMA};

/// The connected catalogs of one server or CLI run, by name.
#[derive(Debug, Default, Clone)]
pub struct Catalogs {
    /// `(name, uri, catalog)` in configuration order; every catalog behind its cache.
    entries: Vec<(String, String, Arc<dyn Catalog>)>,
    /// The caches, by catalog name.
    caches: Vec<(String, Arc<cache::CachingCatalog>)>,
    /// The credential counters of the REST catalogs, by catalog name.
    credentials: Vec<(String, rest::CredentialCounters)>,
}

impl Catalogs {
    /// Connects every configured catalog, its tables read through `cache` when given. Errors on
    /// a duplicate name or the first catalog that cannot be reached.
    pub async fn connect(
        configs: &[CatalogConfig],
        cache: Option<&cached_storage::StorageCache>,
    ) -> Result<Self, CatalogError> {
        let mut entries: Vec<(String, String, Arc<dyn Catalog>)> =
            Vec::with_capacity(configs.len());
        let mut caches = Vec::with_capacity(configs.len());
        let mut credentials = vec![];
        for c in configs {
            if entries.iter().any(|(n, _, _)| n == &c.name) {
                return Err(CatalogError::Config(format!(
                    "catalog {} is configured twice",
                    c.name
                )));
            }
            let (catalog, counters) = connect::connect(c, cache).await?;
            if let Some(counters) = counters {
                credentials.push((c.name.clone(), counters));
            }
            let cached = Arc::new(cache::CachingCatalog::new(
                catalog,
                c.metadata_cache_ttl.unwrap_or(cache::DEFAULT_METADATA_TTL),
                c.listing_cache_ttl.unwrap_or(cache::DEFAULT_LISTING_TTL),
            ));
            caches.push((c.name.clone(), Arc::clone(&cached)));
            entries.push((c.name.clone(), c.uri.clone(), cached as Arc<dyn Catalog>));
        }
        Ok(Self {
            entries,
            caches,
            credentials,
        })
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

    /// Drops the cached tables and listings of catalog `name` (every catalog when `None`);
    /// returns how many entries were dropped. Errors with [`CatalogError::NotFound`] for an
    /// unknown name.
    pub fn invalidate(&self, name: Option<&str>) -> Result<usize, CatalogError> {
        if let Some(n) = name {
            self.get(n)?;
        }
        Ok(self
            .caches
            .iter()
            .filter(|(c, _)| name.is_none_or(|n| n == c))
            .map(|(_, cache)| cache.invalidate())
            .sum())
    }

    /// The table caches of every catalog, summed: `(cached tables, requests, hits, misses)`
    /// ([`cache::TableCacheStats`]).
    pub fn table_stats(&self) -> [u64; 4] {
        self.caches.iter().fold([0; 4], |mut acc, (_, c)| {
            for (a, v) in acc.iter_mut().zip(c.table_stats()) {
                *a += v;
            }
            acc
        })
    }

    /// Per REST catalog, in configuration order: its name and what it fetched to stay signed in.
    pub fn credential_stats(&self) -> Vec<(String, rest::CredentialStats)> {
        self.credentials
            .iter()
            .map(|(n, c)| (n.clone(), c.get()))
            .collect()
    }

    /// Catalog names in configuration order.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|(n, _, _)| n.as_str()).collect()
    }

    /// Registers every catalog with `ctx` under its name (after the session's table functions,
    /// which the providers learn here), seen as `visibility` lets the session see them
    /// (`None`: everything).
    pub fn register(
        &self,
        ctx: &SessionContext,
        visibility: Option<Arc<dyn provider::Visibility>>,
    ) {
        let table_functions = Arc::new(ctx.state().table_functions().keys().cloned().collect());
        let indexes = iceflight_scan::read::caches::ScanCaches::of(&ctx.copied_config())
            .indexes
            .clone();
        // `caches` is in the order of `entries`: the same catalogs, typed for commits.
        for ((name, uri, _), (_, cached)) in self.entries.iter().zip(&self.caches) {
            let catalog = Arc::clone(cached) as Arc<dyn CommitCatalog>;
            let mut provider = IcebergCatalogProvider::new(name.clone(), uri.clone(), catalog)
                .with_table_functions(Arc::clone(&table_functions))
                .with_statistics(indexes.clone());
            if let Some(visibility) = &visibility {
                provider = provider.with_visibility(Arc::clone(visibility));
            }
            ctx.register_catalog(name.as_str(), Arc::new(provider));
        }
    }
}

/// Workers load the tables of the scans they are sent through their own configuration of the
/// same catalogs (`iceflight_scan::distributed::codec`). A failure travels back to the coordinator through
/// datafusion-distributed, which keeps an error's variant and an I/O error's kind but turns
/// other typed errors into text, so the outcomes a client must tell apart are I/O errors:
/// `NotFound` for a catalog or table this worker does not have, `ConnectionRefused` for a
/// catalog it cannot reach or that refuses its credentials (the coordinator answers
/// `NotFound` and `Unavailable`).
#[async_trait::async_trait]
impl iceflight_scan::distributed::codec::TableLoader for Catalogs {
    async fn load_table(
        &self,
        catalog: &str,
        ident: &iceberg::TableIdent,
    ) -> datafusion::common::Result<iceberg::table::Table> {
        use std::io::{Error, ErrorKind};
        let io = |kind, text: String| {
            datafusion::common::DataFusionError::IoError(Error::new(kind, text))
        };
        let name = format!("{catalog}.{}.{}", ident.namespace().join("."), ident.name());
        const SAME: &str = "workers need the coordinator's catalogs under the same names";
        let Ok(found) = self.get(catalog) else {
            return Err(io(
                ErrorKind::NotFound,
                format!("catalog {catalog} is not configured on a worker ({SAME})"),
            ));
        };
        found.load_table(ident).await.map_err(|e| {
            let e = error::to_df_error(e);
            let typed = match &e {
                datafusion::common::DataFusionError::External(inner) => {
                    inner.downcast_ref::<CatalogError>()
                }
                _ => None,
            };
            match typed {
                Some(CatalogError::NotFound(_)) => io(
                    ErrorKind::NotFound,
                    format!("table {name} not found on a worker ({SAME})"),
                ),
                Some(
                    c @ (CatalogError::Unavailable { .. } | CatalogError::Unauthenticated { .. }),
                ) => io(ErrorKind::ConnectionRefused, format!("on a worker: {c}")),
                _ => e,
            }
        })
    }
}
