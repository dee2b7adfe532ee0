//! Table metadata and listings of one catalog, cached for all sessions.
//!
//! ```text
//!   load_table ── cached and younger than metadata_cache_ttl? ── yes ──► cached table
//!                  │ no
//!                  ▼
//!                catalog.load_table ── same metadata location as the cached one? ── keep it
//!                  (one request)          │ no: the loaded table replaces it
//!   list_namespaces / list_tables / namespace_exists ── younger than listing_cache_ttl? ── cached
//!   any write through this catalog (create, drop, rename, commit) ──► everything dropped
//! ```
//!
//! `metadata_cache_ttl` defaults to 0 s: every query asks the catalog for the table, so a commit
//! by another engine is seen by the next query. Even then the cached `Table` is kept while its
//! metadata location is unchanged, and with it iceberg's manifest cache, so a repeated query
//! reads no manifest again. Listings default to 5 s. `invalidate` (the SQL
//! function `iceflight_invalidate_cache`) drops everything at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use iceberg::table::Table;
use iceberg::{
    Catalog, Namespace, NamespaceIdent, Result, TableCommit, TableCreation, TableIdent,
    TableRequirement, TableUpdate,
};
use iceflight_iceberg::commit::CommitCatalog;

/// Default `metadata_cache_ttl`: tables are loaded on every lookup.
pub const DEFAULT_METADATA_TTL: Duration = Duration::ZERO;

/// Default `listing_cache_ttl`.
pub const DEFAULT_LISTING_TTL: Duration = Duration::from_secs(5);

type Entries<K, V> = Mutex<HashMap<K, (Instant, V)>>;

/// A [`Catalog`] that caches table loads and listings (module docs).
#[derive(Debug)]
pub struct CachingCatalog {
    inner: Arc<dyn CommitCatalog>,
    metadata_ttl: Duration,
    listing_ttl: Duration,
    tables: Entries<TableIdent, Table>,
    namespaces: Entries<Option<NamespaceIdent>, Vec<NamespaceIdent>>,
    table_lists: Entries<NamespaceIdent, Vec<TableIdent>>,
    exists: Entries<NamespaceIdent, bool>,
    /// Bumped by every invalidation: a read that started before one stores nothing.
    generation: std::sync::atomic::AtomicU64,
    counters: TableCacheStats,
}

/// What the table cache of a catalog did since it started (`system.runtime.cache`, row
/// `table`). Counts of `load_table` calls, by outcome.
#[derive(Debug, Default)]
pub struct TableCacheStats {
    /// Requests sent to the catalog.
    pub requests: std::sync::atomic::AtomicU64,
    /// Calls answered with the cached `Table`: younger than the TTL, or loaded again with an
    /// unchanged metadata location.
    pub hits: std::sync::atomic::AtomicU64,
    /// Calls answered with a newly built `Table` (first load, or the metadata changed).
    pub misses: std::sync::atomic::AtomicU64,
}

fn bump(c: &std::sync::atomic::AtomicU64) {
    c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

fn fresh<K: std::hash::Hash + Eq, V: Clone>(
    entries: &Entries<K, V>,
    key: &K,
    ttl: Duration,
) -> Option<V> {
    let map = entries.lock().expect("catalog cache");
    let (at, v) = map.get(key)?;
    (at.elapsed() < ttl).then(|| v.clone())
}

/// Stores `v` unless the cache was invalidated since `generation` was read (a write raced the
/// read that produced `v`).
fn store<K: std::hash::Hash + Eq, V>(
    entries: &Entries<K, V>,
    key: K,
    v: V,
    generation: u64,
    now: &std::sync::atomic::AtomicU64,
) {
    let mut map = entries.lock().expect("catalog cache");
    if now.load(std::sync::atomic::Ordering::SeqCst) == generation {
        map.insert(key, (Instant::now(), v));
    }
}

impl CachingCatalog {
    /// Caches `inner` with the given lifetimes (zero disables that cache).
    pub fn new(
        inner: Arc<dyn CommitCatalog>,
        metadata_ttl: Duration,
        listing_ttl: Duration,
    ) -> Self {
        Self {
            inner,
            metadata_ttl,
            listing_ttl,
            tables: Mutex::default(),
            namespaces: Mutex::default(),
            table_lists: Mutex::default(),
            exists: Mutex::default(),
            generation: std::sync::atomic::AtomicU64::new(0),
            counters: TableCacheStats::default(),
        }
    }

    /// `(cached tables, requests, hits, misses)` of the table cache ([`TableCacheStats`]).
    pub fn table_stats(&self) -> [u64; 4] {
        let get = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let entries = self.tables.lock().expect("catalog cache").len() as u64;
        [
            entries,
            get(&self.counters.requests),
            get(&self.counters.hits),
            get(&self.counters.misses),
        ]
    }

    /// Drops every cached table and listing; returns how many entries there were.
    pub fn invalidate(&self) -> usize {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut n = 0;
        n += std::mem::take(&mut *self.tables.lock().expect("catalog cache")).len();
        n += std::mem::take(&mut *self.namespaces.lock().expect("catalog cache")).len();
        n += std::mem::take(&mut *self.table_lists.lock().expect("catalog cache")).len();
        n += std::mem::take(&mut *self.exists.lock().expect("catalog cache")).len();
        n
    }

    fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Passes a write's result through after dropping the caches (the write changed what they
    /// hold).
    fn written<T>(&self, result: Result<T>) -> Result<T> {
        self.invalidate();
        result
    }
}

#[async_trait]
impl Catalog for CachingCatalog {
    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> Result<Vec<NamespaceIdent>> {
        let key = parent.cloned();
        if let Some(hit) = fresh(&self.namespaces, &key, self.listing_ttl) {
            return Ok(hit);
        }
        let generation = self.generation();
        let v = self.inner.list_namespaces(parent).await?;
        store(
            &self.namespaces,
            key,
            v.clone(),
            generation,
            &self.generation,
        );
        Ok(v)
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<Namespace> {
        self.written(self.inner.create_namespace(namespace, properties).await)
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> Result<Namespace> {
        self.inner.get_namespace(namespace).await
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> Result<bool> {
        if let Some(hit) = fresh(&self.exists, namespace, self.listing_ttl) {
            return Ok(hit);
        }
        let generation = self.generation();
        let v = self.inner.namespace_exists(namespace).await?;
        store(
            &self.exists,
            namespace.clone(),
            v,
            generation,
            &self.generation,
        );
        Ok(v)
    }

    async fn update_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<()> {
        self.written(self.inner.update_namespace(namespace, properties).await)
    }

    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> Result<()> {
        self.written(self.inner.drop_namespace(namespace).await)
    }

    async fn list_tables(&self, namespace: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        if let Some(hit) = fresh(&self.table_lists, namespace, self.listing_ttl) {
            return Ok(hit);
        }
        let generation = self.generation();
        let v = self.inner.list_tables(namespace).await?;
        store(
            &self.table_lists,
            namespace.clone(),
            v.clone(),
            generation,
            &self.generation,
        );
        Ok(v)
    }

    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        creation: TableCreation,
    ) -> Result<Table> {
        self.written(self.inner.create_table(namespace, creation).await)
    }

    async fn load_table(&self, table: &TableIdent) -> Result<Table> {
        if let Some(hit) = fresh(&self.tables, table, self.metadata_ttl) {
            bump(&self.counters.hits);
            return Ok(hit);
        }
        let generation = self.generation();
        bump(&self.counters.requests);
        let loaded = self.inner.load_table(table).await?;
        // Unchanged metadata location and storage settings (newly vended credentials replace
        // it, so listings and storage start from the fresh ones): keep the cached table and what
        // hangs off it (iceberg's manifest cache), at any TTL.
        let cached = fresh(&self.tables, table, Duration::MAX).filter(|t| {
            t.metadata_location() == loaded.metadata_location()
                && t.file_io().config().props() == loaded.file_io().config().props()
        });
        bump(match cached {
            Some(_) => &self.counters.hits,
            None => &self.counters.misses,
        });
        let table_now = cached.unwrap_or(loaded);
        store(
            &self.tables,
            table.clone(),
            table_now.clone(),
            generation,
            &self.generation,
        );
        Ok(table_now)
    }

    async fn drop_table(&self, table: &TableIdent) -> Result<()> {
        self.written(self.inner.drop_table(table).await)
    }

    async fn purge_table(&self, table: &TableIdent) -> Result<()> {
        self.written(self.inner.purge_table(table).await)
    }

    async fn table_exists(&self, table: &TableIdent) -> Result<bool> {
        self.inner.table_exists(table).await
    }

    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> Result<()> {
        self.written(self.inner.rename_table(src, dest).await)
    }

    async fn register_table(&self, table: &TableIdent, metadata_location: String) -> Result<Table> {
        self.written(self.inner.register_table(table, metadata_location).await)
    }

    async fn update_table(&self, commit: TableCommit) -> Result<Table> {
        self.written(self.inner.update_table(commit).await)
    }
}

#[async_trait]
impl CommitCatalog for CachingCatalog {
    async fn commit_updates(
        &self,
        table: &TableIdent,
        requirements: Vec<TableRequirement>,
        updates: Vec<TableUpdate>,
    ) -> Result<()> {
        self.written(
            self.inner
                .commit_updates(table, requirements, updates)
                .await,
        )
    }
}
