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

use std::pin::Pin;
use std::task::{Context, Poll};

use datafusion::physical_plan::metrics::Count;
use futures::Stream;

/// The counters of one scan partition, shown by `EXPLAIN ANALYZE`.
#[derive(Debug, Clone, Default)]
pub struct ScanIo {
    /// Requested bytes served from the block cache.
    pub cache_hit_bytes: Count,
    /// Requested bytes not in the block cache (fetched, or awaited from another reader).
    pub cache_miss_bytes: Count,
    /// Requests this scan sent to the object store through the cache.
    pub remote_requests: Count,
}

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
