//! Parquet footers of data files, read through the table's `FileIO` and cached by path.
//!
//! ```text
//!   (path, size) ──► cache hit? ──► Arc<ParquetMetaData>
//!                        │ miss
//!                        ▼
//!                  FileIO reader ──► ParquetMetaDataReader (64 KiB prefetch, no page index)
//! ```
//!
//! Iceberg data files are immutable, so a footer never goes stale; the cache is bounded by
//! [`FOOTER_CACHE_ENTRIES`] and emptied when full. The footer feeds our own row-group selection
//! (`row_groups.rs`); iceberg's reader still reads it again when it opens the file.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use iceberg::io::{FileIO, FileRead};
use parquet::arrow::async_reader::MetadataFetch;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

/// Footers kept at most (one entry per data file; a TPC-H SF 1 footer is ~10 KiB).
pub const FOOTER_CACHE_ENTRIES: usize = 16_384;

/// Bytes read from the end of the file at once (the footer and its length in one request).
const PREFETCH: usize = 64 * 1024;

type Cache = Mutex<HashMap<String, Arc<ParquetMetaData>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The footer of the Parquet file at `path` (`size` bytes, from the manifest) and the bytes read
/// to get it (0 on a cache hit). Errors when the file cannot be read or its footer does not
/// parse.
pub async fn load(
    file_io: &FileIO,
    path: &str,
    size: u64,
) -> iceberg::Result<(Arc<ParquetMetaData>, u64)> {
    if let Some(hit) = cache().lock().expect("footer cache").get(path) {
        return Ok((Arc::clone(hit), 0));
    }
    let reader = file_io.new_input(path)?.reader().await?;
    let mut fetch = Fetch {
        reader,
        bytes_read: 0,
    };
    let metadata = ParquetMetaDataReader::new()
        .with_prefetch_hint(Some(PREFETCH))
        .load_and_finish(&mut fetch, size)
        .await
        .map_err(|e| {
            iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                format!("reading the Parquet footer of {path}"),
            )
            .with_source(e)
        })?;
    let metadata = Arc::new(metadata);
    let mut cache = cache().lock().expect("footer cache");
    if cache.len() >= FOOTER_CACHE_ENTRIES {
        cache.clear();
    }
    cache.insert(path.to_string(), Arc::clone(&metadata));
    Ok((metadata, fetch.bytes_read))
}

/// Empties the footer cache (benchmarks measure cold footer reads with it).
pub fn clear_cache() {
    cache().lock().expect("footer cache").clear();
}

/// Adapts iceberg's `FileRead` to parquet's `MetadataFetch`, counting the bytes fetched.
struct Fetch {
    reader: Box<dyn FileRead>,
    bytes_read: u64,
}

impl MetadataFetch for &mut Fetch {
    fn fetch(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            let bytes = self
                .reader
                .read(range)
                .await
                .map_err(|e| ParquetError::External(Box::new(e)))?;
            self.bytes_read += bytes.len() as u64;
            Ok(bytes)
        }
        .boxed()
    }
}
