//! Per-scan I/O counters: which scan a block-cache read belongs to.
//!
//! ```text
//!   IcebergScanExec partition stream ──► Scoped::poll_next sets SCAN_IO for the poll
//!        └─► footer / iceberg reader / delete loads ──► BlockCache::read ──► record(..)
//! ```
//!
//! iceberg's `ArrowReader` reads inside the stream's poll (it spawns nothing), so a task-local
//! set around each poll attributes every read to the scan partition that made it. Fetches the
//! cache spawns take the counters along ([`current`]).

use std::fmt::Debug;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;

/// Where the block cache counts one scan partition's traffic (the scan implements it with the
/// metrics `EXPLAIN ANALYZE` shows: `scan/src/read/metrics.rs`).
pub trait IoCounters: Debug + Send + Sync {
    /// `bytes` requested and served from the block cache.
    fn cache_hit(&self, bytes: usize);
    /// `bytes` requested and not in the block cache (fetched, or awaited from another reader).
    fn cache_miss(&self, bytes: usize);
    /// One request sent to the object store through the cache.
    fn remote_request(&self);
}

/// The counters of one scan partition.
pub type ScanIo = Arc<dyn IoCounters>;

tokio::task_local! {
    static SCAN_IO: ScanIo;
}

/// Runs `f` on the counters of the scan being polled, if any.
pub fn record(f: impl FnOnce(&ScanIo)) {
    let _ = SCAN_IO.try_with(f);
}

/// The counters of the scan being polled, if any (for work that finishes outside the poll).
pub fn current() -> Option<ScanIo> {
    SCAN_IO.try_with(|s| s.clone()).ok()
}

/// `inner`, with [`record`] reaching `io` while it is polled.
/// Runs `f` with `io` as the current scan's counters (a task spawned for a scan, e.g. a
/// prefetch, counts what it reads there); without `io`, unattributed.
pub async fn within<F: std::future::Future>(io: Option<ScanIo>, f: F) -> F::Output {
    match io {
        Some(io) => SCAN_IO.scope(io, f).await,
        None => f.await,
    }
}

pub struct Scoped<S> {
    inner: S,
    io: ScanIo,
}

impl<S> Scoped<S> {
    /// Wraps `inner`.
    pub fn new(inner: S, io: ScanIo) -> Self {
        Self { inner, io }
    }
}

impl<S: Stream + Unpin> Stream for Scoped<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let io = self.io.clone();
        SCAN_IO.sync_scope(io, || Pin::new(&mut self.inner).poll_next(cx))
    }
}
