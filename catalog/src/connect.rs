//! Builds iceberg catalogs (each a [`CommitCatalog`]) from [`CatalogConfig`]s.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::CatalogBuilder;
use iceberg_catalog_sql::SqlCatalogBuilder;
use iceflight_iceberg::commit::CommitCatalog;

use crate::cached_storage::{CachingStorageFactory, StorageCache};
use crate::commit::EmbeddedCatalog;
use crate::config::{CatalogConfig, CatalogKind};
use crate::error::CatalogError;
use crate::rest::CredentialCounters;

/// The file of an embedded catalog's sqlx URI: `sqlite:/data/catalog.db`,
/// `sqlite:///data/catalog.db?mode=rwc` → `/data/catalog.db`; `None` for any other scheme.
pub fn sqlite_file(uri: &str) -> Option<&str> {
    let path = uri.strip_prefix("sqlite:")?.trim_start_matches("//");
    Some(path.split('?').next().unwrap_or(path))
}

/// Connects to one configured catalog.
///
/// `sql`: creates the sqlite file and its parent directory if missing (`?mode=rwc`), and the
/// warehouse directory for `file://` warehouses. Storage for every scheme (`file`, `s3`, ...) goes
/// through iceberg-storage-opendal's resolving factory, under `cache` when given
/// (`cached_storage.rs`).
///
/// Returns the catalog and, for a REST catalog, the counters of its credentials.
///
/// Errors: [`CatalogError::Unavailable`] naming the catalog and URI when it cannot be reached.
pub async fn connect(
    config: &CatalogConfig,
    cache: Option<&StorageCache>,
) -> Result<(Arc<dyn CommitCatalog>, Option<CredentialCounters>), CatalogError> {
    let config = &resolve_secrets(config)?;
    let storage = Arc::new(CachingStorageFactory::new(cache.cloned()));
    let mut props: HashMap<String, String> = config.properties.clone().into_iter().collect();
    let unavailable = |e: iceberg::Error| CatalogError::Unavailable {
        catalog: config.name.clone(),
        uri: config.uri.clone(),
        message: e.to_string(),
    };
    match config.kind {
        CatalogKind::Sql => {
            sqlx::any::install_default_drivers();
            let mut uri = config.uri.clone();
            if let Some(file) = sqlite_file(&config.uri) {
                if let Some(parent) = std::path::Path::new(file).parent() {
                    std::fs::create_dir_all(parent).map_err(|e| CatalogError::Unavailable {
                        catalog: config.name.clone(),
                        uri: config.uri.clone(),
                        message: format!("cannot create {}: {e}", parent.display()),
                    })?;
                }
                if !uri.contains('?') {
                    uri.push_str("?mode=rwc");
                }
            }
            let warehouse = config.warehouse.clone().ok_or_else(|| {
                CatalogError::Config(format!(
                    "catalog {}: type \"sql\" needs a warehouse (e.g. file:///data/warehouse)",
                    config.name
                ))
            })?;
            if let Some(dir) = warehouse.strip_prefix("file://") {
                if !dir.starts_with('/') {
                    return Err(CatalogError::Config(format!(
                        "catalog {}: warehouse {warehouse} must be an absolute file:// URL \
                         (file:///abs/path)",
                        config.name
                    )));
                }
                std::fs::create_dir_all(dir).map_err(|e| CatalogError::Unavailable {
                    catalog: config.name.clone(),
                    uri: warehouse.clone(),
                    message: format!("cannot create warehouse directory: {e}"),
                })?;
            }
            props.insert("uri".into(), uri.clone());
            props.insert("warehouse".into(), warehouse.clone());
            let dollar = props
                .entry("sql_bind_style".into())
                .or_insert_with(|| "QMark".into())
                == "DollarNumeric";
            let catalog = SqlCatalogBuilder::default()
                .with_storage_factory(storage)
                .load(config.name.clone(), props)
                .await
                .map_err(unavailable)?;
            let catalog =
                EmbeddedCatalog::connect(catalog, config.name.clone(), &uri, dollar, warehouse)
                    .await
                    .map_err(unavailable)?;
            Ok((Arc::new(catalog), None))
        }
        CatalogKind::Rest => {
            let rest = crate::rest::ManagedRestCatalog::new(config)?
                .with_storage_cache(cache.cloned())
                .shared();
            let counters = rest.counters();
            Ok((rest, Some(counters)))
        }
    }
}

/// `config` with every `env:NAME` value (credential, token, properties) replaced by the
/// environment variable `NAME`, so secrets need not sit in the file.
///
/// Errors: [`CatalogError::Config`] naming the catalog and the variable when it is unset.
pub fn resolve_secrets(config: &CatalogConfig) -> Result<CatalogConfig, CatalogError> {
    let resolve = |what: &str, v: &str| -> Result<String, CatalogError> {
        match v.strip_prefix("env:") {
            None => Ok(v.to_string()),
            Some(var) => std::env::var(var).map_err(|_| {
                CatalogError::Config(format!(
                    "catalog {}: {what} names the environment variable {var}, which is not set",
                    config.name
                ))
            }),
        }
    };
    let mut out = config.clone();
    out.credential = config
        .credential
        .as_deref()
        .map(|v| resolve("credential", v))
        .transpose()?;
    out.token = config
        .token
        .as_deref()
        .map(|v| resolve("token", v))
        .transpose()?;
    for (k, v) in out.properties.iter_mut() {
        *v = resolve(k, v)?;
    }
    Ok(out)
}
