//! The block cache's optional second tier: blocks on a local disk, bounded in bytes (foyer's
//! hybrid cache with a block engine on a directory), so a working set larger than memory still
//! reads locally. Off unless `[cache] disk` names a directory.
//!
//! ```text
//!   BlockCache miss ──► DiskTier::get (every block of the run on disk? ──► no remote request)
//!                  └──► remote fetch ──► DiskTier::put (written when inserted)
//! ```
//!
//! The tier lives in `iceflight-blocks/` under the configured directory; that subdirectory is
//! the tier's own and is emptied at start (entries are keyed by path and block number, so what
//! another configuration left, with another block size, must not be trusted). Nothing else in
//! the directory is touched. Invalidation moves to a new epoch, part of every key: what was
//! written before is never read again and ages out. A failing disk never fails a query: its
//! error is logged once and the read goes to the object store.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use foyer::{
    BlockEngineConfig, DeviceBuilder, FsDeviceBuilder, HybridCache, HybridCacheBuilder,
    HybridCachePolicy,
};

/// Memory of foyer's own front tier, bytes: small, the moka tier above is the memory cache.
const FRONT_MEMORY: usize = 8 << 20;

/// foyer's write unit on the device, bytes (a block-cache block must fit in it).
const DEVICE_BLOCK: usize = 16 << 20;

/// Why a [`DiskTier`] cannot open; one line naming the setting or the directory.
#[derive(Debug, thiserror::Error)]
pub enum DiskTierError {
    /// `cache.block_size` does not fit in foyer's 16 MiB device block.
    #[error("cache.block_size {0} is above the disk tier's 16 MiB limit")]
    BlockTooLarge(u64),
    /// `cache.disk_capacity` holds fewer than two device blocks.
    #[error("cache.disk_capacity must be at least 32MiB, got {0} bytes")]
    CapacityTooSmall(u64),
    /// The tier's directory cannot be emptied or created.
    #[error("cannot {action} the disk cache {}: {source}", path.display())]
    Directory {
        /// `empty` or `create`.
        action: &'static str,
        /// `<cache.disk>/iceflight-blocks`.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// foyer refused the device or the cache.
    #[error("disk cache {}: {source}", path.display())]
    Foyer {
        /// `<cache.disk>/iceflight-blocks`.
        path: PathBuf,
        /// foyer's reason.
        source: foyer::Error,
    },
}

/// Blocks on a local disk (module docs).
pub struct DiskTier {
    cache: HybridCache<String, Bytes>,
    capacity: u64,
    hits: AtomicU64,
    hit_bytes: AtomicU64,
    misses: AtomicU64,
    warned: AtomicBool,
    /// Part of every key; [`DiskTier::next_epoch`] gives up every entry at once.
    epoch: AtomicU64,
}

impl std::fmt::Debug for DiskTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskTier")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

/// A snapshot of a [`DiskTier`]'s counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskTierStats {
    /// The bound, bytes.
    pub capacity: u64,
    /// Blocks found on disk.
    pub hits: u64,
    /// Their bytes.
    pub hit_bytes: u64,
    /// Blocks looked up and not found.
    pub misses: u64,
}

fn key(epoch: u64, path: &str, block: u64) -> String {
    format!("{epoch}/{block}@{path}")
}

impl DiskTier {
    /// A tier of at most `capacity` bytes in `dir/iceflight-blocks` (created, and emptied if it
    /// holds anything), for blocks of at most `block_size` bytes.
    ///
    /// Errors: the directory cannot be made, `capacity` is below 2 × 16 MiB (foyer's device
    /// blocks), or `block_size` is above 16 MiB.
    pub async fn open(dir: &Path, capacity: u64, block_size: u64) -> Result<Self, DiskTierError> {
        if block_size > DEVICE_BLOCK as u64 {
            return Err(DiskTierError::BlockTooLarge(block_size));
        }
        if capacity < 2 * DEVICE_BLOCK as u64 {
            return Err(DiskTierError::CapacityTooSmall(capacity));
        }
        let dir = &dir.join("iceflight-blocks");
        let directory = |action: &'static str| {
            move |source: std::io::Error| DiskTierError::Directory {
                action,
                path: dir.clone(),
                source,
            }
        };
        let foyer = |source: foyer::Error| DiskTierError::Foyer {
            path: dir.clone(),
            source,
        };
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(directory("empty"))?;
        }
        std::fs::create_dir_all(dir).map_err(directory("create"))?;
        let capacity = capacity - capacity % DEVICE_BLOCK as u64;
        let device = FsDeviceBuilder::new(dir)
            .with_capacity(capacity as usize)
            .build()
            .map_err(foyer)?;
        let cache = HybridCacheBuilder::new()
            .with_name("iceflight-blocks")
            .with_policy(HybridCachePolicy::WriteOnInsertion)
            .memory(FRONT_MEMORY)
            .with_weighter(|k: &String, v: &Bytes| k.len() + v.len())
            .storage()
            .with_engine_config(BlockEngineConfig::new(device).with_block_size(DEVICE_BLOCK))
            .build()
            .await
            .map_err(foyer)?;
        Ok(Self {
            cache,
            capacity,
            hits: AtomicU64::new(0),
            hit_bytes: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            warned: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
        })
    }

    /// Block `block` of `path`, when on disk.
    pub async fn get(&self, path: &str, block: u64) -> Option<Bytes> {
        let key = key(self.epoch.load(Ordering::Acquire), path, block);
        match self.cache.get(&key).await {
            Ok(Some(entry)) => {
                let bytes = entry.value().clone();
                self.hits.fetch_add(1, Ordering::Relaxed);
                self.hit_bytes
                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                Some(bytes)
            }
            Ok(None) => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
            Err(e) => {
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "disk cache read failed; reading from the object store");
                }
                None
            }
        }
    }

    /// Keeps block `block` of `path` (written in the background).
    pub fn put(&self, path: &str, block: u64, bytes: Bytes) {
        self.cache
            .insert(key(self.epoch.load(Ordering::Acquire), path, block), bytes);
    }

    /// Gives up every entry: later keys carry a new epoch.
    pub fn next_epoch(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Counters now.
    pub fn stats(&self) -> DiskTierStats {
        DiskTierStats {
            capacity: self.capacity,
            hits: self.hits.load(Ordering::Relaxed),
            hit_bytes: self.hit_bytes.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }
}
