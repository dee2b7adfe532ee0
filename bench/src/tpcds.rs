//! TPC-DS for `iceflight-bench load --suite tpcds`: DuckDB's dsdgen data, written into the
//! catalog by one of two writers, so that layouts iceflight did not choose are measured too.
//!
//! ```text
//!   bench/scripts/tpcds.py data ──► <parquet dir>/<table>.parquet    (once per scale, cached)
//!     --writer iceflight  ──► read in generator order ──► create_filled (iceflight's writer,
//!                             the one CREATE TABLE … AS SELECT uses) ──► <ns>.<table>
//!     --writer pyiceberg  ──► bench/scripts/tpcds.py pyiceberg (pyarrow's Parquet defaults;
//!                             embedded catalogs only: pyiceberg opens the same sqlite file)
//! ```
//!
//! The query texts are DuckDB's `tpcds_queries()` (bench/queries/tpcds, written by
//! `tpcds.py queries`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use datafusion::common::{DataFusionError, Result};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use iceberg::{Catalog, NamespaceIdent, TableIdent};
use iceflight_catalog::tables::{TableLayout, create_filled};
use iceflight_catalog::{CatalogConfig, CatalogKind};
use iceflight_datagen::load::drop_namespace;

use crate::error::ext;

/// Rows of `store_sales` at scale factor 1 (dsdgen); the scale of loaded data is its rows over
/// this.
pub const STORE_SALES_SF1: f64 = 2_880_404.0;

/// Where the dsdgen Parquet files of `scale` live: `explicit`, else
/// `$HOME/.cache/iceflight-bench/tpcds-sf<scale>`.
pub fn parquet_dir(explicit: Option<&Path>, scale: &str) -> PathBuf {
    explicit.map(Path::to_path_buf).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
        home.join(".cache/iceflight-bench")
            .join(format!("tpcds-sf{scale}"))
    })
}

/// Runs `tpcds.py data` into `dir` unless it already holds the 24 tables.
///
/// Errors: the script fails (DuckDB or its tpcds wheel missing: `scripts/setup-python.sh`).
fn generate(repo: &Path, python: &Path, scale: &str, dir: &Path) -> Result<()> {
    if dir.join("store_sales.parquet").is_file() && tables_in(dir)?.len() == 24 {
        return Ok(());
    }
    eprintln!(
        "generating TPC-DS SF {scale} with DuckDB's dsdgen into {}",
        dir.display()
    );
    let out = Command::new(python)
        .arg(repo.join("bench/scripts/tpcds.py"))
        .args(["data", "--scale", scale, "--out"])
        .arg(dir)
        .output()
        .map_err(|e| DataFusionError::Plan(format!("{}: {e}", python.display())))?;
    if !out.status.success() {
        return Err(DataFusionError::Execution(format!(
            "tpcds.py data failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// The tables of `dir`: `(name, path)` of every `<name>.parquet`, by name.
fn tables_in(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut tables: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| DataFusionError::Plan(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let name = p
                .file_name()?
                .to_str()?
                .strip_suffix(".parquet")?
                .to_string();
            (!name.starts_with('.')).then_some((name, p))
        })
        .collect();
    tables.sort();
    Ok(tables)
}

/// Which program writes the tables' data files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Writer {
    /// iceflight's writer (iceberg's Parquet writer with the engine's settings).
    Iceflight,
    /// pyiceberg 0.12 with pyarrow's Parquet defaults (embedded catalogs only).
    Pyiceberg,
}

/// What `load` needs beyond the catalog.
pub struct Source<'a> {
    /// The repository (for bench/scripts/tpcds.py).
    pub repo: &'a Path,
    /// Python with duckdb 1.5.5, its tpcds wheel and pyiceberg (scripts/setup-python.sh).
    pub python: &'a Path,
    /// The scale factor as given (`1`, `0.01`): the generator's argument and the cache's name.
    pub scale: &'a str,
    /// The dsdgen Parquet files (see [`parquet_dir`]).
    pub parquet: PathBuf,
    /// Who writes.
    pub writer: Writer,
}

/// Loads the 24 TPC-DS tables into `namespace`: all or nothing (a failed load drops the
/// namespace again). Returns `(table, rows)` by table name.
///
/// Errors: an existing namespace without `replace`; `pyiceberg` on a REST catalog; the
/// generator's, the reader's, the writer's or the catalog's errors.
pub async fn load(
    catalog: &Arc<dyn Catalog>,
    catalog_config: &CatalogConfig,
    namespace: &NamespaceIdent,
    replace: bool,
    source: &Source<'_>,
) -> Result<Vec<(String, u64)>> {
    if source.writer == Writer::Pyiceberg && catalog_config.kind != CatalogKind::Sql {
        return Err(DataFusionError::Plan(format!(
            "--writer pyiceberg writes into embedded (sqlite) catalogs only; {} is a REST catalog",
            catalog_config.name
        )));
    }
    generate(source.repo, source.python, source.scale, &source.parquet)?;
    if catalog.namespace_exists(namespace).await.map_err(ext)? {
        if !replace {
            return Err(DataFusionError::Plan(format!(
                "namespace {} already exists; pass --replace to overwrite it",
                namespace.join(".")
            )));
        }
        drop_namespace(catalog, namespace).await.map_err(ext)?;
    }
    let loaded = match source.writer {
        Writer::Iceflight => {
            catalog
                .create_namespace(namespace, Default::default())
                .await
                .map_err(ext)?;
            write_with_iceflight(catalog, namespace, &source.parquet).await
        }
        Writer::Pyiceberg => write_with_pyiceberg(catalog_config, namespace, source),
    };
    if loaded.is_err()
        && catalog.namespace_exists(namespace).await.unwrap_or(false)
        && let Err(e) = drop_namespace(catalog, namespace).await
    {
        eprintln!("dropping the half-loaded namespace failed: {e}");
    }
    loaded
}

/// Each Parquet file into a new table through iceflight's writer, rows in the file's order (one
/// partition, so the generator's order is the table's).
async fn write_with_iceflight(
    catalog: &Arc<dyn Catalog>,
    namespace: &NamespaceIdent,
    dir: &Path,
) -> Result<Vec<(String, u64)>> {
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(1));
    let mut report = vec![];
    for (name, path) in tables_in(dir)? {
        let frame = ctx
            .read_parquet(
                path.to_string_lossy().as_ref(),
                ParquetReadOptions::default(),
            )
            .await?;
        let stream = frame.execute_stream().await?;
        let schema = stream.schema();
        let ident = TableIdent::new(namespace.clone(), name.clone());
        let rows = create_filled(
            catalog.as_ref(),
            &ident,
            &schema,
            &TableLayout::default(),
            stream,
        )
        .await?;
        report.push((name, rows));
    }
    Ok(report)
}

/// `tpcds.py pyiceberg` on the embedded catalog's sqlite file and warehouse.
fn write_with_pyiceberg(
    catalog_config: &CatalogConfig,
    namespace: &NamespaceIdent,
    source: &Source<'_>,
) -> Result<Vec<(String, u64)>> {
    let db = iceflight_catalog::sqlite_file(&catalog_config.uri);
    let warehouse = catalog_config
        .warehouse
        .as_deref()
        .and_then(|w| w.strip_prefix("file://"));
    let (Some(db), Some(warehouse)) = (db, warehouse) else {
        return Err(DataFusionError::Plan(format!(
            "--writer pyiceberg needs a sqlite catalog with a file:// warehouse; {} has uri {} \
             and warehouse {:?}",
            catalog_config.name, catalog_config.uri, catalog_config.warehouse
        )));
    };
    let out = Command::new(source.python)
        .arg(source.repo.join("bench/scripts/tpcds.py"))
        .arg("pyiceberg")
        .arg("--parquet")
        .arg(&source.parquet)
        .args(["--catalog-db", db, "--warehouse", warehouse])
        .args(["--namespace", &namespace.join(".")])
        .args(["--catalog-name", &catalog_config.name])
        .output()
        .map_err(|e| DataFusionError::Plan(format!("{}: {e}", source.python.display())))?;
    if !out.status.success() {
        return Err(DataFusionError::Execution(format!(
            "tpcds.py pyiceberg failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let counts: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&out.stdout).map_err(ext)?;
    Ok(counts
        .into_iter()
        .map(|(t, n)| (t, n.as_u64().unwrap_or(0)))
        .collect())
}

/// The scale factor of loaded TPC-DS data from `store_sales`' rows: whole numbers from 1 up,
/// two significant digits below (dsdgen's row counts are not exactly linear in the scale).
pub fn scale_of(store_sales_rows: f64) -> f64 {
    let ratio = store_sales_rows / STORE_SALES_SF1;
    if ratio >= 0.95 {
        ratio.round()
    } else {
        let digits = 10f64.powi(1 - ratio.log10().floor() as i32);
        (ratio * digits).round() / digits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_follows_store_sales_rows() {
        assert_eq!(scale_of(2_880_404.0), 1.0);
        assert_eq!(scale_of(28_800_991.0), 10.0);
        assert_eq!(scale_of(28_810.0), 0.01);
        assert_eq!(scale_of(288_000.0), 0.1);
    }
}
