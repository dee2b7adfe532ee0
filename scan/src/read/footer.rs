//! Parquet footers of data files, read through the table's `FileIO` and cached by key (the
//! path after its store's prefix: [`iceflight_cache::block_cache::store_prefix`]).
//!
//! ```text
//!   (path, size) ──► FooterCache hit? ──► Arc<ParquetMetaData>
//!                        │ miss
//!                        ▼
//!                  FileIO reader ──► ParquetMetaDataReader (64 KiB prefetch, page index if any)
//!                                    + the footer's length, iceberg's reader's size hint
//! ```
//!
//! Iceberg data files are immutable, so a footer never goes stale. The cache is one per engine
//! ([`crate::read::caches::ScanCaches`]), bounded by the decoded footers' `memory_size()` in bytes
//! (least recently and least often used evicted first). The footer feeds our row-group and page
//! selection (`row_groups.rs`, `page_index.rs`) and the native reader (`native_reader.rs`), which
//! so parse a file's metadata once per engine; iceberg's reader (the fallback) reads it again
//! when it opens the file, from the block cache.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use iceberg::io::{FileIO, FileRead};
use parquet::arrow::async_reader::MetadataFetch;
use parquet::errors::ParquetError;
use parquet::file::metadata::{
    FooterTail, PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader,
};

/// Default bound of a [`FooterCache`]: 256 MiB of decoded footers (a TPC-H SF 1 footer
/// decodes to ~20 KiB).
pub const DEFAULT_FOOTER_CACHE_BYTES: u64 = 256 << 20;

/// Bytes read from the end of the file at once (the footer and its length in one request).
const PREFETCH: usize = 64 * 1024;

/// Footer length (4 bytes) and magic (4 bytes) at the very end of a Parquet file.
const FOOTER_SIZE: usize = 8;

/// A data file's footer as read once.
#[derive(Debug, Clone)]
pub struct Footer {
    /// The decoded footer, with the page index when the file has one.
    pub metadata: Arc<ParquetMetaData>,
    /// Bytes read to get it: 0 when it came from the cache.
    pub bytes_read: u64,
    /// Whether this load read and parsed it (a cache miss).
    pub parsed: bool,
}

/// Decoded footers by path, with the footer's length (module docs).
#[derive(Debug)]
pub struct FooterCache {
    entries: moka::sync::Cache<String, (Arc<ParquetMetaData>, usize)>,
    capacity: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl Default for FooterCache {
    fn default() -> Self {
        Self::new(DEFAULT_FOOTER_CACHE_BYTES)
    }
}

/// A snapshot of a [`FooterCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FooterCacheStats {
    /// Footers held.
    pub entries: u64,
    /// Their decoded size, bytes.
    pub bytes: u64,
    /// The bound, bytes.
    pub capacity: u64,
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that read and decoded the footer.
    pub misses: u64,
}

impl FooterCache {
    /// An empty cache holding at most `capacity` bytes of decoded footers.
    pub fn new(capacity: u64) -> Self {
        Self {
            entries: moka::sync::Cache::builder()
                .max_capacity(capacity)
                .weigher(|k: &String, v: &(Arc<ParquetMetaData>, usize)| {
                    u32::try_from(v.0.memory_size() + k.len()).unwrap_or(u32::MAX)
                })
                .build(),
            capacity,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The footer of the Parquet file at `path` (`size` bytes, from the manifest), cached under
    /// `key`. Errors when the file cannot be read or its footer does not parse.
    pub async fn load(
        &self,
        file_io: &FileIO,
        key: &str,
        path: &str,
        size: u64,
    ) -> iceberg::Result<Footer> {
        if let Some((metadata, _)) = self.entries.get(key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(Footer {
                metadata,
                bytes_read: 0,
                parsed: false,
            });
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let reader = file_io.new_input(path)?.reader().await?;
        let mut fetch = Fetch {
            reader,
            size,
            bytes_read: 0,
            tail_len: None,
        };
        let metadata = ParquetMetaDataReader::new()
            .with_prefetch_hint(Some(PREFETCH))
            .with_page_index_policy(PageIndexPolicy::Optional)
            .load_and_finish(&mut fetch, size)
            .await
            .map_err(
                |e| match crate::model::data_file_error::classify_parquet(path, &e) {
                    Some(typed) => {
                        iceberg::Error::new(iceberg::ErrorKind::DataInvalid, typed.to_string())
                            .with_source(typed)
                    }
                    None => iceberg::Error::new(
                        iceberg::ErrorKind::DataInvalid,
                        format!("reading the Parquet footer of {path}"),
                    )
                    .with_source(e),
                },
            )?;
        let metadata = Arc::new(metadata);
        let tail_len = fetch.tail_len.unwrap_or(PREFETCH);
        self.entries
            .insert(key.to_string(), (Arc::clone(&metadata), tail_len));
        Ok(Footer {
            metadata,
            bytes_read: fetch.bytes_read,
            parsed: true,
        })
    }

    /// The footer size (metadata length + 8: length and magic) of the file cached under `key`,
    /// when its footer is cached. Handed to iceberg's reader as its metadata size hint, so it
    /// fetches exactly the footer instead of its default 512 KiB tail (most of a small file).
    pub fn tail_len(&self, key: &str) -> Option<usize> {
        self.entries.get(key).map(|(_, tail_len)| tail_len)
    }

    /// Drops every footer; returns how many there were.
    pub fn clear(&self) -> u64 {
        let n = self.entries.entry_count();
        self.entries.invalidate_all();
        self.entries.run_pending_tasks();
        n
    }

    /// Size and counters now.
    pub fn stats(&self) -> FooterCacheStats {
        self.entries.run_pending_tasks();
        FooterCacheStats {
            entries: self.entries.entry_count(),
            bytes: self.entries.weighted_size(),
            capacity: self.capacity,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }
}

/// Adapts iceberg's `FileRead` to parquet's `MetadataFetch`, counting the bytes fetched and
/// decoding the footer length from the file's last 8 bytes.
struct Fetch {
    reader: Box<dyn FileRead>,
    size: u64,
    bytes_read: u64,
    tail_len: Option<usize>,
}

impl MetadataFetch for &mut Fetch {
    fn fetch(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            let bytes = self
                .reader
                .read(range.clone())
                .await
                .map_err(|e| ParquetError::External(Box::new(e)))?;
            self.bytes_read += bytes.len() as u64;
            if range.end == self.size && bytes.len() >= FOOTER_SIZE {
                let last: &[u8; FOOTER_SIZE] = bytes[bytes.len() - FOOTER_SIZE..]
                    .try_into()
                    .expect("8 bytes");
                if let Ok(tail) = FooterTail::try_new(last) {
                    self.tail_len = Some(tail.metadata_length() + FOOTER_SIZE);
                }
            }
            Ok(bytes)
        }
        .boxed()
    }
}
