//! The storage every catalog's `FileIO` reads through: iceberg-storage-opendal's resolving factory
//! (any scheme: `file`, `s3`, ...) under iceflight's block cache.
//!
//! ```text
//!   FileIO ──► CachingStorage ──► cacheable path? ── no ──► OpenDAL (as before)
//!                                   │ yes
//!                                   ├─ reader(path).read(range) ──► BlockCache::read (blocks)
//!                                   ├─ read(path)               ──► BlockCache::read_whole
//!                                   ├─ metadata(path)           ──► known size, else OpenDAL
//!                                   └─ write / writer / delete  ──► drop the path's entries
//! ```
//!
//! Cacheable: every path of a remote scheme (`s3://`, `gs://`, ...) except `version-hint.text`,
//! the one file of an Iceberg table that is rewritten in place; local files (`file://`, plain
//! paths) unless `[cache] local_files = false` (the OS page cache holds them too, yet reads from
//! cached blocks made TPC-H SF 1 on local files 17 % faster warm:
//! `bench/reports/block-cache-20261201.md`); never `memory://`.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use iceberg::Result;
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage, StorageConfig,
    StorageFactory,
};
use iceberg_storage_opendal::OpenDalResolvingStorageFactory;
use iceflight_cache::block_cache::{BlockCache, Source, store_prefix};
use serde::{Deserialize, Serialize};

/// The block cache of one engine, what it covers, and the engine's manifest-read counter.
#[derive(Debug, Clone, Default)]
pub struct StorageCache {
    /// The blocks (`None`: the engine caches no blocks; reads are still counted).
    pub blocks: Option<Arc<BlockCache>>,
    /// Cache `file://` and plain paths too (`[cache] local_files`).
    pub local_files: bool,
    /// Manifest and manifest-list files (`.avro`) read, by whole read or opened reader, cached
    /// or not: what a planner that re-reads manifests shows (`system.runtime.cache`, row
    /// `manifest`).
    pub manifest_reads: Arc<std::sync::atomic::AtomicU64>,
}

impl StorageCache {
    /// The block cache, if reads of `path` go through it (module docs).
    pub fn covering(&self, path: &str) -> Option<&Arc<BlockCache>> {
        self.blocks
            .as_ref()
            .filter(|_| iceflight_cache::block_cache::covers(path, self.local_files))
    }

    fn count(&self, path: &str) {
        if path.ends_with(".avro") {
            self.manifest_reads
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// A [`StorageFactory`] building [`CachingStorage`]s. Serializes as the OpenDAL factory alone: a
/// deserialized copy (another process) reads uncached.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CachingStorageFactory {
    inner: OpenDalResolvingStorageFactory,
    #[serde(skip)]
    cache: Option<StorageCache>,
}

impl CachingStorageFactory {
    /// OpenDAL storage under `cache` (uncached with `None`).
    pub fn new(cache: Option<StorageCache>) -> Self {
        Self {
            inner: OpenDalResolvingStorageFactory::new(),
            cache,
        }
    }
}

#[typetag::serde]
impl StorageFactory for CachingStorageFactory {
    fn build(&self, config: &StorageConfig) -> Result<Arc<dyn Storage>> {
        let inner = self.inner.build(config)?;
        Ok(match &self.cache {
            Some(cache) => Arc::new(CachingStorage {
                inner,
                cache: cache.clone(),
                prefix: Arc::from(store_prefix(config.props())),
            }),
            None => inner,
        })
    }
}

/// OpenDAL storage with reads through the block cache (module docs).
#[derive(Debug, Clone)]
pub struct CachingStorage {
    inner: Arc<dyn Storage>,
    cache: StorageCache,
    /// Which store its paths are on, before each path in the cache keys ([`store_prefix`] of
    /// the `FileIO` properties it was built with).
    prefix: Arc<str>,
}

impl CachingStorage {
    /// The cache key of `path` on this storage.
    fn key(&self, path: &str) -> String {
        format!("{}{path}", self.prefix)
    }

    /// Drops `path` and everything under it from the block cache (a write or delete).
    fn invalidate(&self, path: &str) {
        if let Some(blocks) = &self.cache.blocks {
            blocks.invalidate_prefix(&self.key(path));
        }
    }
}

impl Serialize for CachingStorage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_unit()
    }
}

impl<'de> Deserialize<'de> for CachingStorage {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> std::result::Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "a CachingStorage is not shipped; ship its CachingStorageFactory",
        ))
    }
}

#[typetag::serde]
#[async_trait]
impl Storage for CachingStorage {
    async fn exists(&self, path: &str) -> Result<bool> {
        self.inner.exists(path).await
    }

    async fn metadata(&self, path: &str) -> Result<FileMetadata> {
        let Some(blocks) = self.cache.covering(path) else {
            return self.inner.metadata(path).await;
        };
        if let Some(size) = blocks.known_size(&self.key(path)) {
            return Ok(FileMetadata { size });
        }
        let meta = self.inner.metadata(path).await?;
        blocks.note_size(&self.key(path), meta.size);
        Ok(meta)
    }

    async fn read(&self, path: &str) -> Result<Bytes> {
        self.cache.count(path);
        let Some(blocks) = self.cache.covering(path) else {
            return self.inner.read(path).await;
        };
        let inner = Arc::clone(&self.inner);
        let owned = path.to_string();
        blocks
            .read_whole(&Arc::from(self.key(path)), move || {
                async move { inner.read(&owned).await }.boxed()
            })
            .await
    }

    async fn reader(&self, path: &str) -> Result<Box<dyn FileRead>> {
        self.cache.count(path);
        let Some(blocks) = self.cache.covering(path) else {
            return self.inner.reader(path).await;
        };
        Ok(Box::new(CachingReader {
            path: Arc::from(self.key(path)),
            blocks: Arc::clone(blocks),
            source: Arc::new(LazyReader {
                storage: Arc::clone(&self.inner),
                path: path.to_string(),
                reader: tokio::sync::OnceCell::new(),
            }),
        }))
    }

    // Writes and deletes drop the path before and after: a read racing the write cannot put
    // the old bytes back for good.
    async fn write(&self, path: &str, bs: Bytes) -> Result<()> {
        self.invalidate(path);
        let written = self.inner.write(path, bs).await;
        self.invalidate(path);
        written
    }

    async fn writer(&self, path: &str) -> Result<Box<dyn FileWrite>> {
        let Some(blocks) = &self.cache.blocks else {
            return self.inner.writer(path).await;
        };
        blocks.invalidate_prefix(&self.key(path));
        Ok(Box::new(InvalidatingWriter {
            inner: self.inner.writer(path).await?,
            blocks: Arc::clone(blocks),
            key: self.key(path),
        }))
    }

    async fn delete(&self, path: &str) -> Result<()> {
        self.invalidate(path);
        let deleted = self.inner.delete(path).await;
        self.invalidate(path);
        deleted
    }

    async fn delete_prefix(&self, path: &str) -> Result<()> {
        self.invalidate(path);
        self.inner.delete_prefix(path).await
    }

    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> Result<()> {
        let Some(blocks) = self.cache.blocks.clone() else {
            return self.inner.delete_stream(paths).await;
        };
        let prefix = Arc::clone(&self.prefix);
        let paths = paths
            .inspect(move |p| blocks.invalidate_prefix(&format!("{prefix}{p}")))
            .boxed();
        self.inner.delete_stream(paths).await
    }

    fn new_input(&self, path: &str) -> Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

/// A writer that drops its path from the cache again when the file is complete.
struct InvalidatingWriter {
    inner: Box<dyn FileWrite>,
    blocks: Arc<BlockCache>,
    key: String,
}

#[async_trait]
impl FileWrite for InvalidatingWriter {
    async fn write(&mut self, bs: Bytes) -> Result<()> {
        self.inner.write(bs).await
    }

    async fn close(&mut self) -> Result<()> {
        let closed = self.inner.close().await;
        self.blocks.invalidate_prefix(&self.key);
        closed
    }
}

/// A file's reads through the block cache.
struct CachingReader {
    path: Arc<str>,
    blocks: Arc<BlockCache>,
    source: Arc<dyn Source>,
}

#[async_trait]
impl FileRead for CachingReader {
    async fn read(&self, range: Range<u64>) -> Result<Bytes> {
        self.blocks
            .read(&self.path, range, Arc::clone(&self.source))
            .await
    }
}

/// The OpenDAL reader of one file, opened on its first miss (a read served from cached blocks
/// opens nothing).
struct LazyReader {
    storage: Arc<dyn Storage>,
    path: String,
    reader: tokio::sync::OnceCell<Box<dyn FileRead>>,
}

impl Source for LazyReader {
    fn read_range(self: Arc<Self>, range: Range<u64>) -> BoxFuture<'static, Result<Bytes>> {
        async move {
            let reader = self
                .reader
                .get_or_try_init(|| self.storage.reader(&self.path))
                .await?;
            reader.read(range).await
        }
        .boxed()
    }

    fn size(self: Arc<Self>) -> BoxFuture<'static, Result<u64>> {
        async move { Ok(self.storage.metadata(&self.path).await?.size) }.boxed()
    }
}
