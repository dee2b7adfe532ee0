//! `read_parquet('path')`, `read_csv('path')`, `read_json('path')`: files on the server's own
//! disk as a table (DuckDB's names), so that a user's own data comes in with
//! `CREATE TABLE t AS SELECT * FROM read_parquet('/data/events/')`.
//!
//! ```text
//!   'path' (a file, or a directory: its files of that format, at any depth)
//!     ──► schema: from the first file (Parquet footer; CSV with a header row and JSON lines:
//!         inferred from their first 1000 records), read synchronously (a table function
//!         plans without awaiting)
//!     ──► DataFusion's ListingTable over every file (local object store)
//! ```
//!
//! The CLI's `sql` (the operator's own machine) reads any path; a Flight SQL session only paths
//! under `[query] file_roots` (`access/files.rs`), since a client could otherwise read any file
//! the server process can.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::datasource::file_format::FileFormat;
use datafusion::datasource::file_format::csv::CsvFormat;
use datafusion::datasource::file_format::json::JsonFormat;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::logical_expr::Expr;
use datafusion::prelude::SessionContext;

use crate::access::Access;

/// Records read to infer a CSV or JSON schema.
const INFER_RECORDS: usize = 1000;

/// A file format `read_<format>` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Parquet (`.parquet`).
    Parquet,
    /// CSV with a header row (`.csv`).
    Csv,
    /// Newline-delimited JSON (`.json`).
    Json,
}

impl FileKind {
    fn extension(self) -> &'static str {
        match self {
            Self::Parquet => ".parquet",
            Self::Csv => ".csv",
            Self::Json => ".json",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Parquet => "read_parquet",
            Self::Csv => "read_csv",
            Self::Json => "read_json",
        }
    }
}

/// Registers `read_parquet`, `read_csv` and `read_json` in `ctx` (module docs).
pub fn register(ctx: &SessionContext) {
    for kind in [FileKind::Parquet, FileKind::Csv, FileKind::Json] {
        ctx.register_udtf(kind.name(), Arc::new(ReadFiles(kind)));
    }
}

/// The table function of one [`FileKind`].
#[derive(Debug)]
struct ReadFiles(FileKind);

impl TableFunctionImpl for ReadFiles {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let kind = self.0;
        let path = match args.exprs() {
            [Expr::Literal(ScalarValue::Utf8(Some(p)), _)] => p.clone(),
            _ => return plan_err!("{} takes one path, a string", kind.name()),
        };
        // A logged-in user's session: only under the file roots, links followed, before any
        // file is opened (the schema is read here).
        let local = match Access::of(args.session().config()) {
            Some(access) => access.files().resolve(&path, kind.name())?,
            None => PathBuf::from(path.strip_prefix("file://").unwrap_or(&path)),
        };
        let Some(first) = first_file(&local, kind)? else {
            return plan_err!(
                "{}('{path}'): no {} file there",
                kind.name(),
                kind.extension()
            );
        };
        let schema = infer(&first, kind).map_err(|e| {
            datafusion::common::DataFusionError::Plan(format!(
                "{}('{path}'): {} is not a readable {} file: {e}",
                kind.name(),
                first.display(),
                kind.extension()
            ))
        })?;
        let mut location = local.display().to_string();
        if local.is_dir() && !location.ends_with('/') {
            location.push('/');
        }
        let url = ListingTableUrl::parse(&location)?;
        let format: Arc<dyn FileFormat> = match kind {
            FileKind::Parquet => Arc::new(ParquetFormat::default()),
            FileKind::Csv => Arc::new(CsvFormat::default().with_has_header(true)),
            FileKind::Json => Arc::new(JsonFormat::default()),
        };
        let options = ListingOptions::new(format)
            .with_file_extension(kind.extension())
            .with_collect_stat(false);
        let config = ListingTableConfig::new(url)
            .with_listing_options(options)
            .with_schema(schema);
        Ok(Arc::new(ListingTable::try_new(config)?))
    }
}

/// `path` itself when it is a file, else the first (by name) file under it with the kind's
/// extension. Errors: `path` does not exist.
fn first_file(path: &Path, kind: FileKind) -> Result<Option<PathBuf>> {
    if path.is_file() {
        return Ok(Some(path.to_path_buf()));
    }
    if !path.is_dir() {
        return plan_err!(
            "{}('{}'): no such file or directory",
            kind.name(),
            path.display()
        );
    }
    let mut found = vec![];
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(kind.extension()) {
                found.push(p);
            }
        }
    }
    found.sort();
    Ok(found.into_iter().next())
}

/// The Arrow schema of one file.
fn infer(path: &Path, kind: FileKind) -> std::result::Result<SchemaRef, String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    match kind {
        FileKind::Parquet => {
            let builder =
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
                    .map_err(|e| e.to_string())?;
            Ok(Arc::clone(builder.schema()))
        }
        FileKind::Csv => {
            let (schema, _) = arrow::csv::reader::Format::default()
                .with_header(true)
                .infer_schema(file, Some(INFER_RECORDS))
                .map_err(|e| e.to_string())?;
            Ok(Arc::new(schema))
        }
        FileKind::Json => {
            let (schema, _) = arrow::json::reader::infer_json_schema_from_seekable(
                BufReader::new(file),
                Some(INFER_RECORDS),
            )
            .map_err(|e| e.to_string())?;
            Ok(Arc::new(schema))
        }
    }
}
