//! The caches of one engine, handed to its scans through the session configuration.
//!
//! ```text
//!   Engine ──► ScanCaches { blocks, footers, indexes } ──► SessionConfig extension
//!                 │                                          ├─► IcebergTableProvider::scan (indexes)
//!                 └─► catalogs' storage (blocks)             └─► IcebergScanExec::execute (footers)
//! ```
//!
//! Nothing is process-wide: two engines in one process (tests, the bench) share no cache. A
//! session built without an engine's extension gets fresh, private caches per call.

use std::sync::Arc;

use datafusion::prelude::SessionConfig;

use crate::plan::metrics_index::IndexCache;
use crate::read::footer::FooterCache;
use iceflight_cache::block_cache::BlockCache;

/// The caches of one engine (module docs).
#[derive(Debug, Default)]
pub struct ScanCaches {
    /// Blocks of remote files, when the engine caches them (the same cache the catalogs'
    /// storage reads through).
    pub blocks: Option<Arc<BlockCache>>,
    /// Whether `blocks` also holds local files (`[cache] local_files`).
    pub local_files: bool,
    /// Decoded Parquet footers.
    pub footers: FooterCache,
    /// Manifest metrics per snapshot.
    pub indexes: IndexCache,
    /// Manifest and manifest-list files the catalogs' storage read (counted there).
    pub manifest_reads: Arc<std::sync::atomic::AtomicU64>,
    /// The workload record (`read/table_access.rs`).
    pub access: Arc<crate::read::table_access::TableAccessLog>,
}

impl ScanCaches {
    /// The caches registered in `config` (`SessionConfig::with_extension`), or fresh ones.
    pub fn of(config: &SessionConfig) -> Arc<ScanCaches> {
        config
            .get_extension::<ScanCaches>()
            .unwrap_or_else(|| Arc::new(ScanCaches::default()))
    }

    /// Whether reads of `path` go through `blocks` (so a prefetch is kept for the read).
    pub fn holds(&self, path: &str) -> bool {
        self.blocks.is_some() && iceflight_cache::block_cache::covers(path, self.local_files)
    }

    /// Drops every entry of every cache; returns how many there were.
    pub fn clear(&self) -> u64 {
        self.blocks.as_ref().map_or(0, |b| b.clear()) + self.footers.clear() + self.indexes.clear()
    }
}
