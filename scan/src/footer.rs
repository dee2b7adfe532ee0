//! Parquet footers of data files, read through the table's `FileIO` and cached by path.
//!
//! ```text
//!   (path, size) ──► cache hit? ──► Arc<ParquetMetaData>
//!                        │ miss
//!                        ▼
//!                  FileIO reader ──► ParquetMetaDataReader (64 KiB prefetch, no page index)
//!                                    + the footer's length, iceberg's reader's size hint
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
use parquet::file::metadata::{FooterTail, ParquetMetaData, ParquetMetaDataReader};

/// Footers kept at most (one entry per data file; a TPC-H SF 1 footer is ~10 KiB).
pub const FOOTER_CACHE_ENTRIES: usize = 16_384;

/// Bytes read from the end of the file at once (the footer and its length in one request).
const PREFETCH: usize = 64 * 1024;

/// Footer length (4 bytes) and magic (4 bytes) at the very end of a Parquet file.
const FOOTER_SIZE: usize = 8;

/// A data file's footer as read once.
#[derive(Debug, Clone)]
pub struct Footer {
    /// The decoded footer (no page index).
    pub metadata: Arc<ParquetMetaData>,
    /// Bytes read to get it: 0 when it came from the cache.
    pub bytes_read: u64,
}

type Cache = Mutex<HashMap<String, (Arc<ParquetMetaData>, usize)>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The footer of the Parquet file at `path` (`size` bytes, from the manifest). Errors when the
/// file cannot be read or its footer does not parse.
pub async fn load(file_io: &FileIO, path: &str, size: u64) -> iceberg::Result<Footer> {
    if let Some((metadata, _)) = cache().lock().expect("footer cache").get(path) {
        return Ok(Footer {
            metadata: Arc::clone(metadata),
            bytes_read: 0,
        });
    }
    let reader = file_io.new_input(path)?.reader().await?;
    let mut fetch = Fetch {
        reader,
        size,
        bytes_read: 0,
        tail_len: None,
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
    let tail_len = fetch.tail_len.unwrap_or(PREFETCH);
    let mut cache = cache().lock().expect("footer cache");
    if cache.len() >= FOOTER_CACHE_ENTRIES {
        cache.clear();
    }
    cache.insert(path.to_string(), (Arc::clone(&metadata), tail_len));
    Ok(Footer {
        metadata,
        bytes_read: fetch.bytes_read,
    })
}

/// The footer size (metadata length + 8: length and magic) of `path`, when its footer is cached.
/// Handed to iceberg's reader as its metadata size hint, so it fetches exactly the footer instead
/// of its default 512 KiB tail (most of a small file).
pub fn cached_tail_len(path: &str) -> Option<usize> {
    cache()
        .lock()
        .expect("footer cache")
        .get(path)
        .map(|(_, tail_len)| *tail_len)
}

/// Empties the footer cache (benchmarks measure cold footer reads with it).
pub fn clear_cache() {
    cache().lock().expect("footer cache").clear();
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
