//! The byte cache every read of an immutable lake file passes: fixed, aligned blocks of a file
//! (or a whole small object) kept in memory, bounded by their weighed size.
//!
//! ```text
//!   read(path, range) ──► blocks first..=last of `block_size` bytes
//!        │   each block: cached? ──► hit
//!        │               being fetched by another reader? ──► wait for that fetch
//!        │               else claimed by this reader
//!        ▼
//!   runs of consecutive claimed blocks ──► one remote request per run (spawned, so a cancelled
//!   query does not strand the readers waiting on it) ──► blocks inserted, then un-claimed
//!        ▼
//!   the requested bytes, cut from the blocks
//! ```
//!
//! Iceberg data, delete and manifest files and `*.metadata.json` are written once under unique
//! names (Iceberg table spec, "File System Operations": files are immutable once written), so a
//! block never goes stale: entries leave only by eviction or an explicit [`BlockCache::clear`] /
//! [`BlockCache::invalidate_prefix`] (writes through `catalog/src/cached_storage.rs`).
//!
//! Memory is bounded by [`BlockCacheConfig::capacity`] bytes, weighed as block length plus path
//! and bookkeeping. The bound is moka's: its TinyLFU admission keeps a block only if it is used
//! more often than the one it would evict, so one large scan passing through once does not flush
//! the hot set. The cache lives outside DataFusion's memory pool (`[query] memory-limit`).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

use crate::disk_tier::{DiskTier, DiskTierStats};
use crate::io_scope;

/// Default block size: 1 MiB (`[cache] block-size`; see `bench/reports/` for the measurement).
pub const DEFAULT_BLOCK_SIZE: u64 = 1 << 20;

/// The block number of a whole object read at once (`Storage::read`: manifests, metadata files).
const WHOLE: u64 = u64::MAX;

/// Bytes weighed per entry on top of its data (key, moka's node, `Bytes` header).
const ENTRY_OVERHEAD: usize = 96;

/// Whether the engine's block cache holds reads of `path`: never `version-hint.text` (rewritten
/// in place by Hadoop-style catalogs) nor `memory://`; local paths (`file://` or plain) when
/// `local_files` (`[cache] local_files`); every object store.
pub fn covers(path: &str, local_files: bool) -> bool {
    if path.ends_with("version-hint.text") {
        return false;
    }
    match path.split_once("://") {
        Some(("file", _)) | None => local_files,
        Some(("memory", _)) => false,
        Some(_) => true,
    }
}

/// What goes before a path in the cache keys of storage configured with `props` (a `FileIO`'s
/// properties): the properties that say which store a path is on (endpoint, region, project,
/// account), empty when there are none. Two catalogs on different stores with the same bucket
/// and key so never share entries. Credentials are not part of it: a refreshed token reads the
/// same objects. Computed once per storage or scan; a key is the prefix followed by the path.
pub fn store_prefix(props: &HashMap<String, String>) -> String {
    let mut identity: Vec<(&String, &String)> = props
        .iter()
        .filter(|(k, _)| {
            ["endpoint", "region", "project", "account"]
                .iter()
                .any(|w| k.contains(w))
        })
        .collect();
    if identity.is_empty() {
        return String::new();
    }
    identity.sort();
    let mut prefix: String = identity.iter().map(|(k, v)| format!("{k}={v};")).collect();
    prefix.push('|');
    prefix
}

/// Sizing of a [`BlockCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockCacheConfig {
    /// Upper bound of the weighed size, in bytes.
    pub capacity: u64,
    /// Block size in bytes (> 0); reads are cut into aligned blocks of this size.
    pub block_size: u64,
}

/// One cached block: `(path, block number)`, [`WHOLE`] for whole objects.
type BlockKey = (Arc<str>, u64);

/// What a fetch gives its readers: its blocks in key order, or the error, shared.
type FetchResult = Result<Arc<Vec<Bytes>>, Arc<iceberg::Error>>;

/// A fetch in flight, shared by every reader waiting for one of its blocks.
type Fetch = Shared<BoxFuture<'static, FetchResult>>;

/// Process-wide counters of one cache, as `system.runtime.cache` shows them.
#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    hit_bytes: AtomicU64,
    miss_bytes: AtomicU64,
    remote_requests: AtomicU64,
    remote_bytes: AtomicU64,
    evictions: AtomicU64,
}

/// A snapshot of a [`BlockCache`]'s size and counters (since it was built).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockCacheStats {
    /// Blocks and whole objects held.
    pub entries: u64,
    /// Their weighed size in bytes (never above `capacity` once pending evictions ran).
    pub bytes: u64,
    /// The bound, bytes.
    pub capacity: u64,
    /// Blocks found cached.
    pub hits: u64,
    /// Blocks not cached (fetched, or awaited from another reader's fetch).
    pub misses: u64,
    /// Requested bytes served from cached blocks.
    pub hit_bytes: u64,
    /// Requested bytes of blocks that were not cached.
    pub miss_bytes: u64,
    /// Requests sent to the storage below (ranged reads, whole reads, size lookups).
    pub remote_requests: u64,
    /// Bytes those requests returned.
    pub remote_bytes: u64,
    /// Entries evicted to stay under the bound.
    pub evictions: u64,
    /// The disk tier's counters, when there is one.
    pub disk: Option<DiskTierStats>,
}

/// The block cache (module docs). Cheap to share: one per engine, behind an `Arc`.
pub struct BlockCache {
    config: BlockCacheConfig,
    blocks: moka::sync::Cache<BlockKey, Bytes>,
    /// File sizes, learnt from the storage once per file (files are immutable).
    sizes: moka::sync::Cache<Arc<str>, u64>,
    in_flight: Mutex<HashMap<BlockKey, (Fetch, usize)>>,
    counters: Arc<Counters>,
    /// Blocks on a local disk, below the memory (`disk_tier.rs`).
    disk: Option<Arc<DiskTier>>,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("config", &self.config)
            .field("entries", &self.blocks.entry_count())
            .finish()
    }
}

/// What one read of a file range needs from the storage below (the futures outlive the call,
/// so they own an `Arc` of the source).
pub trait Source: Send + Sync + 'static {
    /// Bytes `range` of the file.
    fn read_range(self: Arc<Self>, range: Range<u64>)
    -> BoxFuture<'static, iceberg::Result<Bytes>>;
    /// The file's size in bytes.
    fn size(self: Arc<Self>) -> BoxFuture<'static, iceberg::Result<u64>>;
}

impl BlockCache {
    /// An empty cache. `config.block_size` of 0 is taken as [`DEFAULT_BLOCK_SIZE`].
    pub fn new(config: BlockCacheConfig) -> Self {
        let config = BlockCacheConfig {
            block_size: if config.block_size == 0 {
                DEFAULT_BLOCK_SIZE
            } else {
                config.block_size
            },
            ..config
        };
        let counters = Arc::new(Counters::default());
        let evictions = Arc::clone(&counters);
        let blocks = moka::sync::Cache::builder()
            .max_capacity(config.capacity)
            .weigher(|k: &BlockKey, v: &Bytes| {
                u32::try_from(v.len() + k.0.len() + ENTRY_OVERHEAD).unwrap_or(u32::MAX)
            })
            .support_invalidation_closures()
            .eviction_listener(move |_, _, cause| {
                if cause == moka::notification::RemovalCause::Size {
                    evictions.evictions.fetch_add(1, Ordering::Relaxed);
                }
            })
            .build();
        let sizes = moka::sync::Cache::builder()
            .max_capacity(1 << 20)
            .support_invalidation_closures()
            .build();
        Self {
            config,
            blocks,
            sizes,
            in_flight: Mutex::default(),
            counters,
            disk: None,
        }
    }

    /// The same cache over `disk` as its second tier: a block missing from memory is looked
    /// up there before the storage is asked, and every fetched block is written there too.
    pub fn with_disk(mut self, disk: DiskTier) -> Self {
        self.disk = Some(Arc::new(disk));
        self
    }

    /// Size and counters now (runs moka's pending maintenance first, so `bytes` is current).
    pub fn stats(&self) -> BlockCacheStats {
        self.blocks.run_pending_tasks();
        let c = &self.counters;
        BlockCacheStats {
            entries: self.blocks.entry_count(),
            bytes: self.blocks.weighted_size(),
            capacity: self.config.capacity,
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            hit_bytes: c.hit_bytes.load(Ordering::Relaxed),
            miss_bytes: c.miss_bytes.load(Ordering::Relaxed),
            remote_requests: c.remote_requests.load(Ordering::Relaxed),
            remote_bytes: c.remote_bytes.load(Ordering::Relaxed),
            evictions: c.evictions.load(Ordering::Relaxed),
            disk: self.disk.as_ref().map(|d| d.stats()),
        }
    }

    /// Drops every entry (the disk tier's by moving it to a new epoch); returns how many there
    /// were in memory. Counters keep counting.
    pub fn clear(&self) -> u64 {
        let n = self.blocks.entry_count();
        self.clear_disk();
        self.blocks.invalidate_all();
        self.sizes.invalidate_all();
        self.blocks.run_pending_tasks();
        n
    }

    /// Drops the entries of every path starting with `prefix` (a written or deleted file, or a
    /// deleted directory).
    pub fn invalidate_prefix(&self, prefix: &str) {
        // The disk tier cannot be searched by prefix: every entry it holds is given up at once
        // (a new epoch in its keys). Writes are rare next to reads and Iceberg writes new,
        // unique paths, so this only costs the disk tier's contents after a write.
        self.clear_disk();
        let p: Arc<str> = Arc::from(prefix);
        let q = Arc::clone(&p);
        // Only errors when invalidation closures are off; they are on (`new`).
        let _ = self
            .blocks
            .invalidate_entries_if(move |k, _| k.0.starts_with(&*p));
        let _ = self
            .sizes
            .invalidate_entries_if(move |k, _| k.starts_with(&*q));
    }

    fn clear_disk(&self) {
        if let Some(disk) = &self.disk {
            disk.next_epoch();
        }
    }

    /// The size of `path` if known, else asks `source` once (a remote request).
    async fn size_of(&self, path: &Arc<str>, source: &Arc<dyn Source>) -> iceberg::Result<u64> {
        if let Some(size) = self.sizes.get(path) {
            return Ok(size);
        }
        self.remote_request_untracked(0);
        let size = Arc::clone(source).size().await?;
        self.sizes.insert(Arc::clone(path), size);
        Ok(size)
    }

    /// The size of `path`, when known.
    pub fn known_size(&self, path: &str) -> Option<u64> {
        self.sizes.get(path)
    }

    /// Records that `path` has `size` bytes (from a manifest), saving the size lookup.
    pub fn note_size(&self, path: &str, size: u64) {
        let path: Arc<str> = Arc::from(path);
        if !self.sizes.contains_key(&path) {
            self.sizes.insert(path, size);
        }
    }

    fn hit(&self, blocks: u64, bytes: u64) {
        self.counters.hits.fetch_add(blocks, Ordering::Relaxed);
        self.counters.hit_bytes.fetch_add(bytes, Ordering::Relaxed);
        io_scope::record(|s| s.cache_hit(bytes as usize));
    }

    fn miss(&self, blocks: u64, bytes: u64) {
        self.counters.misses.fetch_add(blocks, Ordering::Relaxed);
        self.counters.miss_bytes.fetch_add(bytes, Ordering::Relaxed);
        io_scope::record(|s| s.cache_miss(bytes as usize));
    }

    /// Bytes `range` of the file at `path`, from cached blocks where present and from `source`
    /// for the rest (module docs). Errors are the source's; a failed fetch caches nothing.
    pub async fn read(
        self: &Arc<Self>,
        path: &Arc<str>,
        range: Range<u64>,
        source: Arc<dyn Source>,
    ) -> iceberg::Result<Bytes> {
        if range.start >= range.end {
            return Ok(Bytes::new());
        }
        let b = self.config.block_size;
        let (first, last) = (range.start / b, (range.end - 1) / b);
        let overlap = |block: u64| {
            let (s, e) = (block * b, (block + 1) * b);
            range.end.min(e) - range.start.max(s)
        };
        // Cached blocks, blocks another reader is fetching, and blocks this reader claims.
        let mut found: Vec<Option<Bytes>> = Vec::with_capacity((last - first + 1) as usize);
        let mut waits: Vec<(usize, Fetch, usize)> = vec![];
        let mut claimed: Vec<u64> = vec![];
        {
            let mut in_flight = self.in_flight.lock().expect("block cache lock");
            for block in first..=last {
                let key = (Arc::clone(path), block);
                if let Some(bytes) = self.blocks.get(&key) {
                    found.push(Some(bytes));
                } else if let Some((fetch, at)) = in_flight.get(&key) {
                    waits.push(((block - first) as usize, fetch.clone(), *at));
                    found.push(None);
                } else {
                    claimed.push(block);
                    found.push(None);
                }
            }
            // Claimed under the same lock, so no other reader claims these blocks too.
            for run in runs(&claimed) {
                let keys = run.clone().map(|b| (Arc::clone(path), b)).collect();
                let cache = Arc::clone(self);
                let (file, source, range) = (Arc::clone(path), Arc::clone(&source), run.clone());
                let scope = io_scope::current();
                let load = async move { cache.fetch_run(&file, range, source, scope).await };
                let fetch = self.start_fetch(&mut in_flight, keys, load.boxed());
                for (at, block) in run.enumerate() {
                    waits.push(((block - first) as usize, fetch.clone(), at));
                }
            }
        }
        let (mut hit_blocks, mut hit_bytes, mut miss_blocks, mut miss_bytes) = (0, 0, 0, 0);
        for (i, f) in found.iter().enumerate() {
            let bytes = overlap(first + i as u64);
            if f.is_some() {
                hit_blocks += 1;
                hit_bytes += bytes;
            } else {
                miss_blocks += 1;
                miss_bytes += bytes;
            }
        }
        if hit_blocks > 0 {
            self.hit(hit_blocks, hit_bytes);
        }
        if miss_blocks > 0 {
            self.miss(miss_blocks, miss_bytes);
        }
        for (i, fetch, at) in waits {
            let blocks = fetch.await.map_err(|e| {
                iceberg::Error::new(e.kind(), format!("reading {path}: {}", e.message()))
                    .with_source(e)
            })?;
            found[i] = blocks.get(at).cloned();
        }
        let mut out = BytesMut::with_capacity((range.end - range.start) as usize);
        for (i, block) in found.into_iter().enumerate() {
            let start = (first + i as u64) * b;
            let block = block.unwrap_or_default();
            let from = (range.start.max(start) - start) as usize;
            let to = ((range.end.min(start + b) - start) as usize).min(block.len());
            if from > to {
                return Err(iceberg::Error::new(
                    iceberg::ErrorKind::DataInvalid,
                    format!("{path}: bytes {range:?} are beyond the end of the file"),
                ));
            }
            if i == 0 && to - from == (range.end - range.start) as usize {
                // The whole range lies in one block: no copy.
                return Ok(block.slice(from..to));
            }
            out.extend_from_slice(&block[from..to]);
        }
        if out.len() as u64 != range.end - range.start {
            return Err(iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                format!("{path}: bytes {range:?} reach beyond the end of the file"),
            ));
        }
        Ok(out.freeze())
    }

    /// The whole object at `path` (a manifest, a metadata file), cached as one entry.
    pub async fn read_whole(
        self: &Arc<Self>,
        path: &Arc<str>,
        read: impl FnOnce() -> BoxFuture<'static, iceberg::Result<Bytes>>,
    ) -> iceberg::Result<Bytes> {
        let key = (Arc::clone(path), WHOLE);
        let fetch = {
            let mut in_flight = self.in_flight.lock().expect("block cache lock");
            if let Some(bytes) = self.blocks.get(&key) {
                drop(in_flight);
                self.hit(1, bytes.len() as u64);
                return Ok(bytes);
            }
            match in_flight.get(&key) {
                Some((fetch, _)) => fetch.clone(),
                None => {
                    let cache = Arc::clone(self);
                    let scope = io_scope::current();
                    let read = read();
                    let load = async move {
                        if let Some(scope) = &scope {
                            scope.remote_request();
                        }
                        let bytes = read.await?;
                        cache.remote_request_untracked(bytes.len() as u64);
                        Ok(vec![bytes])
                    };
                    self.start_fetch(&mut in_flight, vec![key], load.boxed())
                }
            }
        };
        let bytes = fetch
            .await
            .map_err(|e| {
                iceberg::Error::new(e.kind(), format!("reading {path}: {}", e.message()))
                    .with_source(e)
            })?
            .first()
            .cloned()
            .unwrap_or_default();
        self.miss(1, bytes.len() as u64);
        Ok(bytes)
    }

    /// A process-wide count of a request whose scope counter was recorded by its starter.
    fn remote_request_untracked(&self, bytes: u64) {
        self.counters
            .remote_requests
            .fetch_add(1, Ordering::Relaxed);
        self.counters
            .remote_bytes
            .fetch_add(bytes, Ordering::Relaxed);
    }

    /// Claims `keys` in `in_flight` and starts fetching them: from the disk tier when it has
    /// all of them, else by `load` (one request to the storage), whose blocks go to the disk
    /// tier too. The blocks are put in memory before they are un-claimed ([`Claim`]).
    fn start_fetch(
        self: &Arc<Self>,
        in_flight: &mut HashMap<BlockKey, (Fetch, usize)>,
        keys: Vec<BlockKey>,
        load: BoxFuture<'static, iceberg::Result<Vec<Bytes>>>,
    ) -> Fetch {
        let cache = Arc::clone(self);
        let claimed = keys.clone();
        let task = spawn(async move {
            let claim = Claim {
                cache: Arc::clone(&cache),
                keys: claimed,
            };
            let result = match cache.read_disk(&claim.keys).await {
                Some(blocks) => Ok(blocks),
                None => {
                    let loaded = load.await;
                    if let (Ok(blocks), Some(disk)) = (&loaded, &cache.disk) {
                        for ((path, block), bytes) in claim.keys.iter().zip(blocks) {
                            disk.put(path, *block, bytes.clone());
                        }
                    }
                    loaded
                }
            };
            if let Ok(blocks) = &result {
                for (key, bytes) in claim.keys.iter().zip(blocks) {
                    cache.blocks.insert(key.clone(), bytes.clone());
                }
            }
            result.map(Arc::new).map_err(Arc::new)
        });
        let fetch = join(task).boxed().shared();
        for (at, key) in keys.into_iter().enumerate() {
            in_flight.insert(key, (fetch.clone(), at));
        }
        fetch
    }

    /// Every block of `keys` from the disk tier, or `None` when one is missing there.
    async fn read_disk(&self, keys: &[BlockKey]) -> Option<Vec<Bytes>> {
        let disk = self.disk.as_ref()?;
        let mut blocks = Vec::with_capacity(keys.len());
        for (path, block) in keys {
            blocks.push(disk.get(path, *block).await?);
        }
        Some(blocks)
    }

    /// One request to the storage for `run` (consecutive blocks of `path`), cut into blocks.
    async fn fetch_run(
        &self,
        path: &Arc<str>,
        run: Range<u64>,
        source: Arc<dyn Source>,
        scope: Option<io_scope::ScanIo>,
    ) -> iceberg::Result<Vec<Bytes>> {
        let b = self.config.block_size;
        let size = self.size_of(path, &source).await?;
        let bytes = (run.start * b).min(size)..(run.end * b).min(size);
        if bytes.is_empty() {
            return Err(iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                format!(
                    "{path}: block {} is beyond the end of the file ({size} bytes)",
                    run.start
                ),
            ));
        }
        if let Some(scope) = &scope {
            scope.remote_request();
        }
        let data = source.read_range(bytes.clone()).await?;
        if data.len() as u64 != bytes.end - bytes.start {
            return Err(iceberg::Error::new(
                iceberg::ErrorKind::Unexpected,
                format!(
                    "{path}: asked for bytes {bytes:?}, the storage returned {}",
                    data.len()
                ),
            ));
        }
        self.remote_request_untracked(data.len() as u64);
        // A block of a longer run is copied out: a slice would keep the whole run's buffer
        // alive for as long as any of its blocks is cached, beyond what the weigher counts.
        let single = run.end - run.start == 1;
        Ok(run
            .map(|block| {
                let s = (block * b - bytes.start) as usize;
                let e = (((block + 1) * b).min(bytes.end) - bytes.start) as usize;
                let piece = data.slice(s.min(data.len())..e.min(data.len()));
                if single {
                    piece
                } else {
                    Bytes::copy_from_slice(&piece)
                }
            })
            .collect())
    }
}

/// The blocks a fetch claimed, un-claimed when the fetch ends however it ends (done, failed,
/// panicked or cancelled), so no later reader waits on a dead fetch. A fetch that succeeded has
/// put its blocks in the cache by then.
struct Claim {
    cache: Arc<BlockCache>,
    keys: Vec<BlockKey>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut in_flight = match self.cache.in_flight.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        for key in &self.keys {
            in_flight.remove(key);
        }
    }
}

/// Runs `fetch` on the current tokio runtime; without one (never the case inside a query) the
/// fetch fails instead of panicking with the lock held.
fn spawn(
    fetch: impl std::future::Future<Output = FetchResult> + Send + 'static,
) -> Option<tokio::task::JoinHandle<FetchResult>> {
    tokio::runtime::Handle::try_current()
        .ok()
        .map(|rt| rt.spawn(fetch))
}

/// The spawned fetch's result; a panicked or cancelled task, or no runtime, becomes an error.
async fn join(task: Option<tokio::task::JoinHandle<FetchResult>>) -> FetchResult {
    let fail = |why: String| {
        Err(Arc::new(iceberg::Error::new(
            iceberg::ErrorKind::Unexpected,
            format!("block fetch failed: {why}"),
        )))
    };
    match task {
        None => fail("no tokio runtime".into()),
        Some(task) => match task.await {
            Ok(r) => r,
            Err(e) => fail(e.to_string()),
        },
    }
}

/// `blocks` (ascending) as runs of consecutive numbers.
fn runs(blocks: &[u64]) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = vec![];
    for &b in blocks {
        match out.last_mut() {
            Some(r) if r.end == b => r.end = b + 1,
            _ => out.push(b..b + 1),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of `len` bytes (byte i = i % 251) counting the requests it serves.
    struct TestFile {
        len: u64,
        requests: Arc<AtomicU64>,
    }

    impl Source for TestFile {
        fn read_range(
            self: Arc<Self>,
            range: Range<u64>,
        ) -> BoxFuture<'static, iceberg::Result<Bytes>> {
            self.requests.fetch_add(1, Ordering::SeqCst);
            let data: Vec<u8> = range.map(|i| (i % 251) as u8).collect();
            async move {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                Ok(Bytes::from(data))
            }
            .boxed()
        }
        fn size(self: Arc<Self>) -> BoxFuture<'static, iceberg::Result<u64>> {
            let len = self.len;
            async move { Ok(len) }.boxed()
        }
    }

    /// A [`TestFile`] of `len` bytes and its request counter.
    fn test_file(len: u64) -> (Arc<dyn Source>, Arc<AtomicU64>) {
        let requests = Arc::new(AtomicU64::new(0));
        let file = TestFile {
            len,
            requests: Arc::clone(&requests),
        };
        (Arc::new(file), requests)
    }

    fn expected(range: Range<u64>) -> Bytes {
        Bytes::from(range.map(|i| (i % 251) as u8).collect::<Vec<_>>())
    }

    fn cache(capacity: u64, block_size: u64) -> Arc<BlockCache> {
        Arc::new(BlockCache::new(BlockCacheConfig {
            capacity,
            block_size,
        }))
    }

    #[tokio::test]
    async fn blocks_evicted_from_memory_are_read_from_the_disk_tier() {
        let dir = tempfile::tempdir().unwrap();
        let disk = DiskTier::open(&dir.path().join("blocks"), 64 << 20, 1000)
            .await
            .unwrap();
        let (file, requests) = test_file(20_000);
        let capacity = 3 * (1000 + ENTRY_OVERHEAD as u64 + 20);
        let c = Arc::new(
            BlockCache::new(BlockCacheConfig {
                capacity,
                block_size: 1000,
            })
            .with_disk(disk),
        );
        let path: Arc<str> = Arc::from("s3://b/f.parquet");
        for round in 0..2 {
            for start in (0..20_000).step_by(1000) {
                let got = c
                    .read(&path, start..start + 1000, Arc::clone(&file))
                    .await
                    .unwrap();
                assert_eq!(got, expected(start..start + 1000), "round {round}");
            }
        }
        let stats = c.stats();
        assert!(stats.evictions > 0, "{stats:?}");
        assert_eq!(
            requests.load(Ordering::SeqCst),
            20,
            "the second round read nothing remote"
        );
        // Every block of the second round came from memory or, once evicted, from disk.
        let disk = stats.disk.unwrap();
        assert_eq!(stats.hits + disk.hits, 20, "{stats:?}");
        assert!(disk.hits > 0, "{stats:?}");
    }

    /// A source whose first read panics (a bug below the cache) and whose later reads work.
    struct PanicsOnce {
        panicked: AtomicU64,
    }

    impl Source for PanicsOnce {
        fn read_range(
            self: Arc<Self>,
            range: Range<u64>,
        ) -> BoxFuture<'static, iceberg::Result<Bytes>> {
            let first = self.panicked.fetch_add(1, Ordering::SeqCst) == 0;
            async move {
                assert!(!first, "the storage below panicked");
                Ok(expected(range))
            }
            .boxed()
        }
        fn size(self: Arc<Self>) -> BoxFuture<'static, iceberg::Result<u64>> {
            async move { Ok(10_000) }.boxed()
        }
    }

    #[tokio::test]
    async fn a_panicked_fetch_fails_its_readers_and_the_next_read_fetches_again() {
        let c = cache(1 << 20, 1000);
        let path: Arc<str> = Arc::from("s3://b/f.parquet");
        let file: Arc<dyn Source> = Arc::new(PanicsOnce {
            panicked: AtomicU64::new(0),
        });
        assert!(c.read(&path, 0..1500, Arc::clone(&file)).await.is_err());
        let got = c.read(&path, 0..1500, file).await.unwrap();
        assert_eq!(got, expected(0..1500));
    }

    #[tokio::test]
    async fn reads_beyond_the_end_of_the_file_fail() {
        let (file, _) = test_file(10_000);
        let c = cache(1 << 20, 1000);
        let path: Arc<str> = Arc::from("s3://b/f.parquet");
        for range in [9500..10_500, 10_000..10_600, 12_000..12_001] {
            assert!(
                c.read(&path, range.clone(), Arc::clone(&file))
                    .await
                    .is_err(),
                "{range:?}"
            );
        }
        // The valid part of the last block is still served right.
        let got = c.read(&path, 9500..10_000, file).await.unwrap();
        assert_eq!(got, expected(9500..10_000));
    }

    #[test]
    fn store_identity_is_part_of_the_key_and_credentials_are_not() {
        let props = |endpoint: &str, key: &str| -> HashMap<String, String> {
            [("s3.endpoint", endpoint), ("s3.access-key-id", key)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_ne!(
            store_prefix(&props("http://a:9000", "k")),
            store_prefix(&props("http://b:9000", "k"))
        );
        assert_eq!(
            store_prefix(&props("http://a:9000", "k1")),
            store_prefix(&props("http://a:9000", "k2"))
        );
        assert_eq!(store_prefix(&HashMap::new()), "");
    }

    #[test]
    fn runs_of_consecutive_blocks() {
        assert_eq!(runs(&[1, 2, 3, 5, 7, 8]), vec![1..4, 5..6, 7..9]);
        assert_eq!(runs(&[]), Vec::<Range<u64>>::new());
    }

    #[tokio::test]
    async fn reads_are_exact_and_a_second_read_is_served_from_blocks() {
        let (file, requests) = test_file(10_000);
        let c = cache(1 << 20, 1000);
        let path: Arc<str> = Arc::from("s3://b/f.parquet");
        for range in [0..1, 999..1001, 2500..7300, 9000..10_000, 0..10_000] {
            let got = c
                .read(&path, range.clone(), Arc::clone(&file))
                .await
                .unwrap();
            assert_eq!(got, expected(range.clone()), "{range:?}");
        }
        // Blocks 0, 1 (first two reads: 0 is cached after the first), 2..=7, 9, then 8.
        let stats = c.stats();
        assert_eq!(requests.load(Ordering::SeqCst), 5);
        assert_eq!(
            stats.remote_requests,
            5 + 1,
            "five ranged reads and one size lookup"
        );
        assert_eq!(stats.remote_bytes, 10_000, "every block fetched once");
        assert_eq!(stats.entries, 10);
    }

    #[tokio::test]
    async fn concurrent_misses_of_one_block_are_fetched_once() {
        let (file, requests) = test_file(4000);
        let c = cache(1 << 20, 1000);
        let path: Arc<str> = Arc::from("s3://b/f.parquet");
        let reads = (0..8).map(|i| {
            let (c, path, file) = (Arc::clone(&c), Arc::clone(&path), Arc::clone(&file));
            async move { c.read(&path, 100 * i..3500, file).await }
        });
        for (i, got) in futures::future::join_all(reads)
            .await
            .into_iter()
            .enumerate()
        {
            assert_eq!(got.unwrap(), expected(100 * i as u64..3500));
        }
        assert_eq!(requests.load(Ordering::SeqCst), 1);
        assert_eq!(c.stats().remote_bytes, 4000);
    }

    #[tokio::test]
    async fn the_weighed_size_stays_under_the_bound() {
        let (file, _) = test_file(100_000);
        let capacity = 10 * (1000 + ENTRY_OVERHEAD as u64 + 20);
        let c = cache(capacity, 1000);
        let path: Arc<str> = Arc::from("s3://b/f.parquet");
        for start in (0..100_000).step_by(1000) {
            let got = c
                .read(&path, start..start + 1000, Arc::clone(&file))
                .await
                .unwrap();
            assert_eq!(got, expected(start..start + 1000));
            let stats = c.stats();
            assert!(stats.bytes <= capacity, "{stats:?}");
        }
        assert!(c.stats().evictions > 0 || c.stats().entries <= 10);
    }
}
