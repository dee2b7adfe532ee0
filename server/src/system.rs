//! The `system` catalog: the engine's own state as tables, named after Trino's `system.runtime`.
//!
//! ```text
//!   system.runtime.cache ──► one row per cache of the engine, read when the query is planned
//!     cache            'block' (bytes of the lake's files) | 'disk' (the block cache's disk
//!                      tier, with `[cache] disk`) | 'footer' (decoded Parquet footers)
//!                      | 'table' (the catalogs' loaded tables: remote_requests = table loads
//!                      sent, hits = loads answered by the cached table, misses = new tables)
//!                      | 'manifest' (misses = manifest and manifest-list files read)
//!     entries, bytes, capacity_bytes                     size now (bytes weighed; NULL for disk)
//!     hits, misses, evictions                            since the engine started
//!     hit_bytes, miss_bytes, remote_requests, remote_bytes   the block cache's traffic (hit_bytes
//!                                                            for disk too; NULL for footers)
//!
//!   system.runtime.queries ──► one row per query run over Flight SQL: the running ones and the
//!     last 1000 finished (`query_history.rs`)
//!     query_id, state ('RUNNING' | 'FINISHED' | 'FAILED' | 'CANCELLED'), user, query (its SQL,
//!     at most 200 characters), created (start, UTC), duration_ms (so far when running), rows
//!     and bytes sent (their Arrow IPC messages), error (the gRPC code and message of a failed one)
//!
//!   (over Flight SQL, a user who is not an admin sees only their own queries and sessions,
//!   and only the scans of tables they hold a privilege on: `access/`)
//!
//!   system.runtime.sessions ──► one row per open Flight SQL session (none outside a server)
//!     session_id (not its token), user, catalog, schema (current), created (UTC), idle_ms,
//!     prepared_statements
//! ```
//!
//!   system.runtime.table_access ──► one row per executed scan of an Iceberg table, the last
//!     10 000 (`scan/src/read/table_access.rs`)
//!     ended (UTC), table, filters ('column shape [static|dynamic] share', '; '-separated),
//!     snapshot_files, snapshot_bytes, files_pruned, files_read, row_groups_pruned,
//!     row_groups_read, pages_pruned, pages_read, bytes_read
//!
//!   system.runtime.layout_advice ──► per table those scans read, the sort column that would
//!     let their filters skip the most bytes: table, sort_by, scans, scans_filtering,
//!     read_share_now, read_share_sorted (estimated), statement (the optimize that applies it)
//!
//! A configured catalog called `system` wins: the engine then registers none. The catalog and
//! its schema are read-only: no statement creates or drops a table or view in them.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray, TimestampMillisecondArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::catalog::{MemoryCatalogProvider, MemorySchemaProvider, Session};
use datafusion::common::Result;
use datafusion::datasource::TableType;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use iceflight_catalog::Catalogs;
use iceflight_scan::read::caches::ScanCaches;

use crate::access::Access;
use crate::query_history::{QueryHistory, QueryRecord};

/// The catalog's name.
pub const CATALOG: &str = "system";

/// One live session as `system.runtime.sessions` shows it.
#[derive(Debug, Clone)]
pub struct SessionRow {
    /// The session's id (its cookie's value).
    pub id: String,
    /// Who logged in.
    pub user: String,
    /// The session's current catalog and schema.
    pub catalog: String,
    /// See `catalog`.
    pub schema: String,
    /// When it was opened.
    pub created: std::time::SystemTime,
    /// Time since its last request.
    pub idle: std::time::Duration,
    /// Prepared statements it holds.
    pub prepared_statements: usize,
}

/// The live sessions of the Flight SQL server an engine serves, as the system tables read them
/// (`flight/sessions.rs` implements it; the engine holds it from when the server starts).
pub trait SessionDirectory: std::fmt::Debug + Send + Sync {
    /// The live sessions of `viewer` (`None`: everyone's), in no particular order.
    fn sessions(&self, viewer: Option<&str>) -> Vec<SessionRow>;
}

/// The session directory of an engine, set once the Flight SQL server serves.
pub type LiveSessions = Arc<std::sync::OnceLock<Arc<dyn SessionDirectory>>>;

/// Registers `system.runtime.cache` over `caches` and the table caches of `catalogs`,
/// `system.runtime.queries` over `history` and `system.runtime.sessions` over `sessions`, with
/// `ctx`.
pub fn register(
    ctx: &SessionContext,
    caches: Arc<ScanCaches>,
    catalogs: Catalogs,
    history: Arc<QueryHistory>,
    sessions: LiveSessions,
) {
    let runtime = MemorySchemaProvider::new();
    let access = Arc::clone(&caches.access);
    let names: Vec<String> = catalogs.names().iter().map(|n| n.to_string()).collect();
    // A fresh schema provider has no table of these names, so registering cannot fail.
    let cache = SystemTable(CacheTable { caches, catalogs });
    let _ = runtime.register_table("cache".into(), Arc::new(cache));
    let _ = runtime.register_table(
        "queries".into(),
        Arc::new(SystemTable(QueriesTable { history })),
    );
    let _ = runtime.register_table(
        "sessions".into(),
        Arc::new(SystemTable(SessionsTable { sessions })),
    );
    let _ = runtime.register_table(
        "table_access".into(),
        Arc::new(SystemTable(TableAccessTable {
            log: Arc::clone(&access),
            catalogs: names.clone(),
        })),
    );
    let _ = runtime.register_table(
        "layout_advice".into(),
        Arc::new(SystemTable(LayoutAdviceTable {
            log: access,
            catalogs: names,
        })),
    );
    let catalog = MemoryCatalogProvider::new();
    let _ = catalog.register_schema("runtime", Arc::new(ReadOnlySchema(runtime)));
    ctx.register_catalog(CATALOG, Arc::new(ReadOnlyCatalog(catalog)));
}

/// `system.runtime.cache` (module docs).
#[derive(Debug)]
struct CacheTable {
    caches: Arc<ScanCaches>,
    catalogs: Catalogs,
}

fn schema() -> SchemaRef {
    let n = |name: &str, nullable: bool| Field::new(name, DataType::UInt64, nullable);
    Arc::new(Schema::new(vec![
        Field::new("cache", DataType::Utf8, false),
        n("entries", true),
        n("bytes", true),
        n("capacity_bytes", true),
        n("hits", true),
        n("misses", false),
        n("evictions", true),
        n("hit_bytes", true),
        n("miss_bytes", true),
        n("remote_requests", true),
        n("remote_bytes", true),
    ]))
}

impl CacheTable {
    /// One row per cache, the counter columns in [`schema`]'s order (`None`: not counted).
    fn rows(&self) -> Vec<(&'static str, [Option<u64>; 10])> {
        let mut rows = vec![];
        if let Some(blocks) = &self.caches.blocks {
            let s = blocks.stats();
            rows.push((
                "block",
                [
                    s.entries,
                    s.bytes,
                    s.capacity,
                    s.hits,
                    s.misses,
                    s.evictions,
                    s.hit_bytes,
                    s.miss_bytes,
                    s.remote_requests,
                    s.remote_bytes,
                ]
                .map(Some),
            ));
            if let Some(d) = s.disk {
                let (capacity, hits, misses, hit_bytes) = (
                    Some(d.capacity),
                    Some(d.hits),
                    Some(d.misses),
                    Some(d.hit_bytes),
                );
                rows.push((
                    "disk",
                    [
                        None, None, capacity, hits, misses, None, hit_bytes, None, None, None,
                    ],
                ));
            }
        }
        let f = self.caches.footers.stats();
        let counted = [f.entries, f.bytes, f.capacity, f.hits, f.misses].map(Some);
        let mut footer = [None; 10];
        footer[..5].copy_from_slice(&counted);
        rows.push(("footer", footer));
        let [entries, requests, hits, misses] = self.catalogs.table_stats();
        let mut table = [None; 10];
        (table[0], table[3], table[4], table[8]) =
            (Some(entries), Some(hits), Some(misses), Some(requests));
        rows.push(("table", table));
        let mut manifest = [None; 10];
        manifest[4] = Some(
            self.caches
                .manifest_reads
                .load(std::sync::atomic::Ordering::Relaxed),
        );
        rows.push(("manifest", manifest));
        rows
    }

    fn cache_batch(&self) -> Result<RecordBatch> {
        let rows = self.rows();
        let mut arrays: Vec<ArrayRef> = vec![Arc::new(StringArray::from(
            rows.iter().map(|(name, _)| *name).collect::<Vec<_>>(),
        ))];
        arrays.extend((0..10).map(|c| {
            Arc::new(UInt64Array::from(
                rows.iter().map(|(_, v)| v[c]).collect::<Vec<_>>(),
            )) as ArrayRef
        }));
        Ok(RecordBatch::try_new(schema(), arrays)?)
    }
}

/// The type of the tables' instants: milliseconds, UTC.
fn utc() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// `times` as a column of [`utc`].
fn utc_millis(times: impl Iterator<Item = std::time::SystemTime>) -> TimestampMillisecondArray {
    TimestampMillisecondArray::from_iter_values(times.map(|t| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }))
    .with_timezone("UTC")
}

/// `system.runtime.queries` (module docs).
#[derive(Debug)]
struct QueriesTable {
    history: Arc<QueryHistory>,
}

fn queries_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("query_id", DataType::Utf8, false),
        Field::new("state", DataType::Utf8, false),
        Field::new("user", DataType::Utf8, false),
        Field::new("query", DataType::Utf8, false),
        Field::new("created", utc(), false),
        Field::new("duration_ms", DataType::UInt64, false),
        Field::new("rows", DataType::UInt64, false),
        Field::new("bytes", DataType::UInt64, false),
        Field::new("error", DataType::Utf8, true),
    ]))
}

impl Rows for QueriesTable {
    fn schema() -> SchemaRef {
        queries_schema()
    }

    fn batch(&self, viewer: Option<&Access>) -> Result<RecordBatch> {
        let mut records = self.history.records();
        if let Some(user) = only_user(viewer) {
            records.retain(|r| r.user == user);
        }
        let text = |f: &dyn Fn(&QueryRecord) -> String| -> ArrayRef {
            Arc::new(StringArray::from(records.iter().map(f).collect::<Vec<_>>()))
        };
        let number = |f: &dyn Fn(&QueryRecord) -> u64| -> ArrayRef {
            Arc::new(UInt64Array::from(records.iter().map(f).collect::<Vec<_>>()))
        };
        let created = utc_millis(records.iter().map(|r| r.created));
        let columns: Vec<ArrayRef> = vec![
            text(&|r| r.id.clone()),
            text(&|r| r.state.name().to_string()),
            text(&|r| r.user.clone()),
            text(&|r| r.query.clone()),
            Arc::new(created),
            number(&|r| r.duration.as_millis() as u64),
            number(&|r| r.rows),
            number(&|r| r.bytes),
            Arc::new(StringArray::from(
                records.iter().map(|r| r.error.clone()).collect::<Vec<_>>(),
            )),
        ];
        Ok(RecordBatch::try_new(queries_schema(), columns)?)
    }
}

/// `system.runtime.sessions` (module docs).
#[derive(Debug)]
struct SessionsTable {
    sessions: LiveSessions,
}

fn sessions_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("session_id", DataType::Utf8, false),
        Field::new("user", DataType::Utf8, false),
        Field::new("catalog", DataType::Utf8, false),
        Field::new("schema", DataType::Utf8, false),
        Field::new("created", utc(), false),
        Field::new("idle_ms", DataType::UInt64, false),
        Field::new("prepared_statements", DataType::UInt64, false),
    ]))
}

impl Rows for SessionsTable {
    fn schema() -> SchemaRef {
        sessions_schema()
    }

    fn batch(&self, viewer: Option<&Access>) -> Result<RecordBatch> {
        let mut sessions = self
            .sessions
            .get()
            .map(|s| s.sessions(only_user(viewer)))
            .unwrap_or_default();
        sessions.sort_by_key(|s| s.created);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(
                sessions.iter().map(|s| &s.id),
            )),
            Arc::new(StringArray::from_iter_values(
                sessions.iter().map(|s| &s.user),
            )),
            Arc::new(StringArray::from_iter_values(
                sessions.iter().map(|s| &s.catalog),
            )),
            Arc::new(StringArray::from_iter_values(
                sessions.iter().map(|s| &s.schema),
            )),
            Arc::new(utc_millis(sessions.iter().map(|s| s.created))),
            Arc::new(UInt64Array::from_iter_values(
                sessions.iter().map(|s| s.idle.as_millis() as u64),
            )),
            Arc::new(UInt64Array::from_iter_values(
                sessions.iter().map(|s| s.prepared_statements as u64),
            )),
        ];
        Ok(RecordBatch::try_new(sessions_schema(), columns)?)
    }
}

impl Rows for CacheTable {
    fn schema() -> SchemaRef {
        schema()
    }

    fn batch(&self, _viewer: Option<&Access>) -> Result<RecordBatch> {
        self.cache_batch()
    }
}

/// A table of the `system` catalog: its rows, made when a query reads it.
trait Rows: std::fmt::Debug + Send + Sync + 'static {
    fn schema() -> SchemaRef;
    /// The rows `viewer` may see (`None`, the operator's own session: every row). A user who
    /// is not an admin sees only their own queries and sessions, and only the scans of tables
    /// they may see.
    fn batch(&self, viewer: Option<&Access>) -> Result<RecordBatch>;
}

/// The user whose rows alone `viewer` sees (`None`: every user's).
fn only_user(viewer: Option<&Access>) -> Option<&str> {
    viewer.filter(|a| !a.is_admin()).map(Access::user)
}

/// A [`Rows`] as a DataFusion table (a view: nothing writes to it).
#[derive(Debug)]
struct SystemTable<T>(T);

#[async_trait]
impl<T: Rows> TableProvider for SystemTable<T> {
    fn schema(&self) -> SchemaRef {
        T::schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let viewer = Access::of(state.config());
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![self.0.batch(viewer.as_deref())?]],
            T::schema(),
            projection.cloned(),
        )?)
    }
}

/// `system.runtime.table_access` (module docs).
#[derive(Debug)]
struct TableAccessTable {
    log: Arc<iceflight_scan::read::table_access::TableAccessLog>,
    /// The engine's catalog names: a scan's table (`namespace.table`) is seen when the viewer
    /// may see it in one of them.
    catalogs: Vec<String>,
}

/// The scans of tables `viewer` may see (module docs of [`Rows::batch`]).
fn visible_scans(
    mut scans: Vec<iceflight_scan::read::table_access::ScanAccess>,
    viewer: Option<&Access>,
    catalogs: &[String],
) -> Vec<iceflight_scan::read::table_access::ScanAccess> {
    if let Some(viewer) = viewer.filter(|a| !a.is_admin()) {
        scans.retain(|s| {
            let (schema, table) = s.table.rsplit_once('.').unwrap_or(("", &s.table));
            catalogs
                .iter()
                .any(|c| viewer.table_visible(c, schema, table))
        });
    }
    scans
}

fn table_access_schema() -> SchemaRef {
    let n = |name: &str| Field::new(name, DataType::UInt64, false);
    Arc::new(Schema::new(vec![
        Field::new("ended", utc(), false),
        Field::new("table", DataType::Utf8, false),
        Field::new("filters", DataType::Utf8, false),
        n("snapshot_files"),
        n("snapshot_bytes"),
        n("files_pruned"),
        n("files_read"),
        n("row_groups_pruned"),
        n("row_groups_read"),
        n("pages_pruned"),
        n("pages_read"),
        n("bytes_read"),
    ]))
}

impl Rows for TableAccessTable {
    fn schema() -> SchemaRef {
        table_access_schema()
    }

    fn batch(&self, viewer: Option<&Access>) -> Result<RecordBatch> {
        use iceflight_scan::read::table_access::ScanAccess;
        let scans = visible_scans(self.log.recent(), viewer, &self.catalogs);
        let number = |f: &dyn Fn(&ScanAccess) -> u64| -> ArrayRef {
            Arc::new(UInt64Array::from(scans.iter().map(f).collect::<Vec<_>>()))
        };
        let filters = scans.iter().map(|s| {
            s.filters
                .iter()
                .map(|f| {
                    let origin = if f.dynamic { "dynamic" } else { "static" };
                    match f.share {
                        Some(share) => format!("{} {} {origin} {share:.3}", f.column, f.shape),
                        None => format!("{} {} {origin}", f.column, f.shape),
                    }
                })
                .collect::<Vec<_>>()
                .join("; ")
        });
        let columns: Vec<ArrayRef> = vec![
            Arc::new(utc_millis(scans.iter().map(|s| s.at))),
            Arc::new(StringArray::from(
                scans.iter().map(|s| s.table.clone()).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(filters.collect::<Vec<_>>())),
            number(&|s| s.snapshot_files),
            number(&|s| s.snapshot_bytes),
            number(&|s| s.files_pruned),
            number(&|s| s.files_read),
            number(&|s| s.row_groups_pruned),
            number(&|s| s.row_groups_read),
            number(&|s| s.pages_pruned),
            number(&|s| s.pages_read),
            number(&|s| s.bytes_read),
        ];
        Ok(RecordBatch::try_new(table_access_schema(), columns)?)
    }
}

/// `system.runtime.layout_advice` (module docs).
#[derive(Debug)]
struct LayoutAdviceTable {
    log: Arc<iceflight_scan::read::table_access::TableAccessLog>,
    /// As [`TableAccessTable::catalogs`].
    catalogs: Vec<String>,
}

fn layout_advice_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("table", DataType::Utf8, false),
        Field::new("sort_by", DataType::Utf8, false),
        Field::new("scans", DataType::UInt64, false),
        Field::new("scans_filtering", DataType::UInt64, false),
        Field::new("read_share_now", DataType::Float64, false),
        Field::new("read_share_sorted", DataType::Float64, false),
        Field::new("statement", DataType::Utf8, false),
    ]))
}

impl Rows for LayoutAdviceTable {
    fn schema() -> SchemaRef {
        layout_advice_schema()
    }

    fn batch(&self, viewer: Option<&Access>) -> Result<RecordBatch> {
        let scans = visible_scans(self.log.recent(), viewer, &self.catalogs);
        let advice = iceflight_scan::read::table_access::layout_advice(&scans);
        let text = |f: &dyn Fn(&iceflight_scan::read::table_access::LayoutAdvice) -> String| {
            Arc::new(StringArray::from(advice.iter().map(f).collect::<Vec<_>>())) as ArrayRef
        };
        let columns: Vec<ArrayRef> = vec![
            text(&|a| a.table.clone()),
            text(&|a| a.sort_by.clone()),
            Arc::new(UInt64Array::from(
                advice.iter().map(|a| a.scans).collect::<Vec<_>>(),
            )),
            Arc::new(UInt64Array::from(
                advice.iter().map(|a| a.scans_filtering).collect::<Vec<_>>(),
            )),
            Arc::new(datafusion::arrow::array::Float64Array::from(
                advice.iter().map(|a| a.read_share_now).collect::<Vec<_>>(),
            )),
            Arc::new(datafusion::arrow::array::Float64Array::from(
                advice
                    .iter()
                    .map(|a| a.read_share_sorted)
                    .collect::<Vec<_>>(),
            )),
            text(&|a| {
                format!(
                    "ALTER TABLE {} EXECUTE optimize(sort_by => '{}')",
                    a.table, a.sort_by
                )
            }),
        ];
        Ok(RecordBatch::try_new(layout_advice_schema(), columns)?)
    }
}

/// The `system` catalog as statements see it: its schemas are fixed.
#[derive(Debug)]
struct ReadOnlyCatalog(MemoryCatalogProvider);

impl CatalogProvider for ReadOnlyCatalog {
    fn schema_names(&self) -> Vec<String> {
        self.0.schema_names()
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        self.0.schema(name)
    }

    fn register_schema(
        &self,
        name: &str,
        _schema: Arc<dyn SchemaProvider>,
    ) -> Result<Option<Arc<dyn SchemaProvider>>> {
        datafusion::common::plan_err!(
            "catalog {CATALOG} is read-only: no schema {name} can be created in it"
        )
    }

    fn deregister_schema(
        &self,
        name: &str,
        _cascade: bool,
    ) -> Result<Option<Arc<dyn SchemaProvider>>> {
        datafusion::common::plan_err!(
            "catalog {CATALOG} is read-only: schema {name} cannot be dropped"
        )
    }
}

/// `system.runtime` as statements see it: its tables are fixed (no `CREATE TABLE`, `CREATE
/// VIEW` or `CREATE EXTERNAL TABLE` in it, no `DROP`).
#[derive(Debug)]
struct ReadOnlySchema(MemorySchemaProvider);

#[async_trait]
impl SchemaProvider for ReadOnlySchema {
    fn table_names(&self) -> Vec<String> {
        self.0.table_names()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        self.0.table(name).await
    }

    fn table_exist(&self, name: &str) -> bool {
        self.0.table_exist(name)
    }

    fn register_table(
        &self,
        name: String,
        _table: Arc<dyn TableProvider>,
    ) -> Result<Option<Arc<dyn TableProvider>>> {
        datafusion::common::plan_err!(
            "schema {CATALOG}.runtime is read-only: no table {name} can be created in it"
        )
    }

    fn deregister_table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        datafusion::common::plan_err!(
            "schema {CATALOG}.runtime is read-only: table {name} cannot be dropped"
        )
    }
}
