//! The scan's counters, per output partition, shown by `EXPLAIN ANALYZE` and read by the bench.
//!
//! Deterministic for a given plan and cache state (no timing except the two `_time` metrics):
//! tests assert on them (`server/tests/pushdown.rs`, `server/tests/native_reader.rs`).

use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, Time};

use std::sync::Arc;

use iceflight_cache::io_scope::{IoCounters, ScanIo};

/// Counters of one output partition.
#[derive(Debug, Clone)]
pub struct ScanMetrics {
    /// Rows out of the scan.
    pub output_rows: Count,
    /// Live data files the manifests ruled out.
    pub files_pruned_manifest: Count,
    /// Files the static domains ruled out from their manifest bounds.
    pub files_pruned_statistics: Count,
    /// Files a dynamic filter ruled out when their task was reached.
    pub files_pruned_dynamic: Count,
    /// On a worker: dynamic filters this scan could not use because their producer runs in
    /// another stage (`IcebergScanExec::relink_dynamic_filters`), counted once per task.
    pub dynamic_filters_unlinked: Count,
    /// Row groups ruled out from footer statistics (static and dynamic domains).
    pub row_groups_pruned: Count,
    /// Row groups the footer statistics left to read, the other half of `row_groups_pruned`:
    /// counted by the native reader when it reaches one (after the re-check against a dynamic
    /// filter that tightened; a `LIMIT` that stops early leaves the rest uncounted), by the
    /// iceberg path when its footer selection runs.
    pub row_groups_matched: Count,
    /// Pages ruled out from the page index (summed over constrained columns).
    pub pages_pruned: Count,
    /// Pages of constrained columns the page index kept (with `pages_pruned`: every page
    /// examined).
    pub pages_matched: Count,
    /// Time spent waiting for incomplete dynamic filters.
    pub dynamic_filter_wait_time: Time,
    /// Time spent deciding what to read (domains, gate, statistics).
    pub predicate_build_time: Time,
    /// Tasks opened for reading.
    pub files_opened: Count,
    /// Files read by iceberg's reader instead of the native path (`native_reader::Fallback`).
    pub files_fallback: Count,
    /// Footers read and parsed by this scan (a cached footer is not parsed again).
    pub metadata_parses: Count,
    /// Rows the Parquet reader decoded (before equality deletes and dynamic row filters).
    pub rows_decoded: Count,
    /// Rows dropped by live dynamic filters evaluated on the scan's batches.
    pub dynamic_rows_dropped: Count,
    /// Rows the dynamic row filters were evaluated on.
    pub dynamic_rows_evaluated: Count,
    /// Rows dropped by the query's own (static) conjuncts evaluated in the scan
    /// (`row_filter.rs`; the filter above the scan still sees every row kept).
    pub static_rows_dropped: Count,
    /// Rows the static conjuncts were evaluated on (each conjunct counts its rows).
    pub static_rows_evaluated: Count,
    /// Rows whose filter columns the Parquet reader decoded to evaluate the row filter inside
    /// it (late materialization); the other columns decode only the rows kept, which
    /// `rows_decoded` counts.
    pub late_filter_rows: Count,
    /// Files whose string columns read by the row filter were decoded as dictionaries (kept
    /// encoded until the filter ran; `native_reader.rs`, `FilePlan::keep_dictionaries`).
    pub dictionary_files: Count,
    /// Data bytes fetched by the readers.
    pub bytes_scanned: Count,
    /// Footer bytes fetched.
    pub footer_bytes_read: Count,
    /// Rows removed by equality deletes.
    pub equality_deleted_rows: Count,
    /// Rows removed by positional deletes (native path).
    pub positional_deleted_rows: Count,
    /// Block-cache traffic: `cache_hit_bytes`, `cache_miss_bytes`, `remote_requests`.
    pub io: ScanIo,
}

impl ScanMetrics {
    /// The counters of `partition`, registered in `set`.
    pub fn new(set: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let counter = |name: &'static str| MetricBuilder::new(set).counter(name, partition);
        Self {
            output_rows: MetricBuilder::new(set).output_rows(partition),
            files_pruned_manifest: counter("files_pruned_manifest"),
            files_pruned_statistics: counter("files_pruned_statistics"),
            files_pruned_dynamic: counter("files_pruned_dynamic"),
            dynamic_filters_unlinked: counter("dynamic_filters_unlinked"),
            row_groups_pruned: counter("row_groups_pruned"),
            row_groups_matched: counter("row_groups_matched"),
            pages_pruned: counter("pages_pruned"),
            pages_matched: counter("pages_matched"),
            dynamic_filter_wait_time: MetricBuilder::new(set)
                .subset_time("dynamic_filter_wait_time", partition),
            predicate_build_time: MetricBuilder::new(set)
                .subset_time("predicate_build_time", partition),
            files_opened: counter("files_opened"),
            files_fallback: counter("files_fallback"),
            metadata_parses: counter("metadata_parses"),
            rows_decoded: counter("rows_decoded"),
            dynamic_rows_dropped: counter("dynamic_rows_dropped"),
            dynamic_rows_evaluated: counter("dynamic_rows_evaluated"),
            static_rows_dropped: counter("static_rows_dropped"),
            static_rows_evaluated: counter("static_rows_evaluated"),
            late_filter_rows: counter("late_filter_rows"),
            dictionary_files: counter("dictionary_files"),
            bytes_scanned: counter("bytes_scanned"),
            footer_bytes_read: counter("footer_bytes_read"),
            equality_deleted_rows: counter("equality_deleted_rows"),
            positional_deleted_rows: counter("positional_deleted_rows"),
            io: Arc::new(BlockCacheCounts {
                cache_hit_bytes: counter("cache_hit_bytes"),
                cache_miss_bytes: counter("cache_miss_bytes"),
                remote_requests: counter("remote_requests"),
            }),
        }
    }
}

/// The block cache's traffic for one partition, as `EXPLAIN ANALYZE` counters.
#[derive(Debug)]
struct BlockCacheCounts {
    /// Requested bytes served from the block cache.
    cache_hit_bytes: Count,
    /// Requested bytes not in the block cache (fetched, or awaited from another reader).
    cache_miss_bytes: Count,
    /// Requests this scan sent to the object store through the cache.
    remote_requests: Count,
}

impl IoCounters for BlockCacheCounts {
    fn cache_hit(&self, bytes: usize) {
        self.cache_hit_bytes.add(bytes);
    }

    fn cache_miss(&self, bytes: usize) {
        self.cache_miss_bytes.add(bytes);
    }

    fn remote_request(&self) {
        self.remote_requests.add(1);
    }
}
