//! Session settings of the scan, under the `iceflight.` prefix (`SET iceflight.scan.batch_size = 4096`,
//! `iceflight sql --set iceflight.scan.batch_size=4096`).

use datafusion::common::config::{ConfigEntry, ConfigExtension, ExtensionOptions};
use datafusion::common::{DataFusionError, Result};

/// Settings read by `IcebergTableProvider::scan` (`provider.rs`) from the session's config extensions.
#[derive(Debug, Clone, PartialEq)]
pub struct IceflightOptions {
    /// `iceflight.scan.batch_size`: rows per batch decoded by the Parquet reader; 0 (default)
    /// uses `datafusion.execution.batch_size`.
    pub scan_batch_size: usize,
    /// `iceflight.scan.dynamic_filter_pruning` (default true): use the dynamic filters of joins,
    /// TopK and aggregates to skip data files; false compares the same build without it.
    pub dynamic_filter_pruning: bool,
    /// `iceflight.scan.dynamic_filter_wait` (like Trino's `iceberg.dynamic-filtering.wait-timeout`):
    /// how long each output partition waits for incomplete dynamic filters before opening its
    /// first file; never longer. Written `250ms`, `1s` or a number of milliseconds.
    pub dynamic_filter_wait: std::time::Duration,
    /// `iceflight.scan.reader_predicate` (default true): hand the domains of clustered columns
    /// to iceberg's reader as a predicate (row filter) for the files it reads; false keeps every
    /// predicate above the scan (file and row-group pruning still apply). The native path prunes
    /// pages instead (`page_index.rs`).
    pub reader_predicate: bool,
    /// `iceflight.scan.reader` (default `native`): which Parquet reader opens data files
    /// (`native_reader.rs`; `iceberg` reads every file with iceberg's `ArrowReader`, for A/B runs).
    pub reader: ScanReader,
    /// `iceflight.scan.dynamic_row_filter` (default true): evaluate live dynamic filters on the
    /// scan's rows while they pay (`row_filter.rs`).
    pub dynamic_row_filter: bool,
    /// `iceflight.scan.late_materialization` (default true): run the row filter's paying
    /// conjuncts inside the Parquet reader (native path), decoding the other columns only for
    /// the rows they keep.
    pub late_materialization: bool,
    /// `iceflight.scan.static_row_filter` (default true): evaluate the query's own filters
    /// (their conjuncts that cannot fail) on the scan's rows, most selective first, and inside
    /// the Parquet reader where they keep few (`row_filter.rs`).
    pub static_row_filter: bool,
    /// `iceflight.scan.dictionary_strings` (default true): string columns the row filter
    /// reads, stored dictionary-encoded, decode as dictionaries and stay so until the filter
    /// has run (`native_reader.rs`, `FilePlan::keep_dictionaries`).
    pub dictionary_strings: bool,
    /// `iceflight.optimizer.join_reorder` (default true): order inner-join graphs by estimated
    /// cardinality (`join_order.rs`); false keeps DataFusion's order (the query's FROM order).
    pub join_reorder: bool,
    /// `iceflight.optimizer.aggregate_reduction` (default true): restrict a grouped aggregate
    /// joined on its group key to the keys the join can match (`aggregate_reduction.rs`).
    pub aggregate_reduction: bool,
    /// `iceflight.optimizer.shared_subplans` (default true): an aggregate subtree that appears
    /// twice in a plan (a CTE, a repeated subquery) runs once for both (`shared_subplan.rs`).
    pub shared_subplans: bool,
    /// `iceflight.optimizer.filter_selectivity` (default true): estimate every filter's
    /// selectivity from column statistics where DataFusion assumes 20 %, before it picks join
    /// build sides (`filter_selectivity.rs`).
    pub filter_selectivity: bool,
    /// `iceflight.optimizer.decimal_arithmetic` (default true): decimal `+`, `−`, `×` compute
    /// on 64-bit values where a batch's values prove it exact (`decimal_arithmetic.rs`).
    pub decimal_arithmetic: bool,
    /// `iceflight.optimizer.collect_build_side` (default true): a hash join builds one hash
    /// table from its whole build side (DataFusion's `CollectLeft`) unless repartitioning both
    /// sides costs less by the model of `join_partition_mode.rs`; false leaves the choice to
    /// DataFusion's size thresholds.
    pub collect_build_side: bool,
    /// `iceflight.optimizer.like_segments` (default true): `LIKE` patterns with `%` between
    /// literal segments search for the segments instead of running a regular expression
    /// (`like_segments.rs`).
    pub like_segments: bool,
    /// `iceflight.optimizer.dictionary_group_by` (default true): a partial aggregate grouped
    /// by low-cardinality string columns of a scan groups by codes of their dictionary values
    /// (`dictionary_group_by.rs`).
    pub dictionary_group_by: bool,
}

/// The `iceflight.scan.*` settings one planned scan runs with (taken from the session at
/// planning, so a scan sent to a worker runs as it was planned).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScanSettings {
    /// `iceflight.scan.dynamic_filter_pruning`.
    pub dynamic_pruning: bool,
    /// `iceflight.scan.dynamic_filter_wait`.
    pub dynamic_filter_wait: std::time::Duration,
    /// `iceflight.scan.reader_predicate`.
    pub reader_predicate: bool,
    /// `iceflight.scan.reader`.
    pub reader: ScanReader,
    /// `iceflight.scan.dynamic_row_filter`.
    pub dynamic_row_filter: bool,
    /// `iceflight.scan.late_materialization`.
    pub late_materialization: bool,
    /// `iceflight.scan.static_row_filter`.
    pub static_row_filter: bool,
    /// `iceflight.scan.dictionary_strings`.
    pub dictionary_strings: bool,
}

impl ScanSettings {
    /// The scan settings of `options`.
    pub fn of(options: &IceflightOptions) -> Self {
        Self {
            dynamic_pruning: options.dynamic_filter_pruning,
            dynamic_filter_wait: options.dynamic_filter_wait,
            reader_predicate: options.reader_predicate,
            reader: options.reader,
            dynamic_row_filter: options.dynamic_row_filter,
            late_materialization: options.late_materialization,
            static_row_filter: options.static_row_filter,
            dictionary_strings: options.dictionary_strings,
        }
    }
}

/// Which reader opens data files (`iceflight.scan.reader`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScanReader {
    /// Ours on parquet's async reader; iceberg's for the files it does not cover.
    #[default]
    Native,
    /// iceberg's `ArrowReader` for every file.
    Iceberg,
}

impl ScanReader {
    /// The setting's value: `native` or `iceberg`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Iceberg => "iceberg",
        }
    }
}

impl Default for IceflightOptions {
    fn default() -> Self {
        Self {
            scan_batch_size: 0,
            dynamic_filter_pruning: true,
            dynamic_filter_wait: DEFAULT_DYNAMIC_FILTER_WAIT,
            reader_predicate: true,
            reader: ScanReader::Native,
            dynamic_row_filter: true,
            late_materialization: true,
            static_row_filter: true,
            dictionary_strings: true,
            join_reorder: true,
            aggregate_reduction: true,
            shared_subplans: true,
            filter_selectivity: true,
            decimal_arithmetic: true,
            collect_build_side: true,
            like_segments: true,
            dictionary_group_by: true,
        }
    }
}

/// Default of `iceflight.scan.dynamic_filter_wait`; chosen by measurement (`scan/README.md`).
pub const DEFAULT_DYNAMIC_FILTER_WAIT: std::time::Duration = std::time::Duration::from_millis(1000);

pub use iceflight_input::units::{format_duration, parse_duration};

/// Longest `iceflight.scan.dynamic_filter_wait` accepted.
pub const MAX_DYNAMIC_FILTER_WAIT: std::time::Duration = std::time::Duration::from_secs(3600);

impl IceflightOptions {
    /// The settings in `options` (a session's), or the defaults when it carries none.
    pub fn of(options: &datafusion::common::config::ConfigOptions) -> Self {
        options
            .extensions
            .get::<IceflightOptions>()
            .cloned()
            .unwrap_or_default()
    }

    const KEYS: [(&'static str, &'static str); 17] = [
        (
            "scan.batch_size",
            "Rows per batch decoded by the Parquet reader; 0 uses datafusion.execution.batch_size",
        ),
        (
            "scan.dynamic_filter_pruning",
            "Skip data files with the dynamic filters of joins, TopK and aggregates",
        ),
        (
            "scan.dynamic_filter_wait",
            "How long a partition waits for incomplete dynamic filters before its first file (e.g. 250ms, 1s, 5m; at most 1h)",
        ),
        (
            "scan.reader_predicate",
            "Hand domains of clustered columns to the Parquet reader as a row filter",
        ),
        (
            "scan.reader",
            "Parquet reader of data files: native (ours) or iceberg (iceberg's ArrowReader)",
        ),
        (
            "scan.dynamic_row_filter",
            "Evaluate live dynamic filters on the scan's rows while they drop enough to pay",
        ),
        (
            "scan.late_materialization",
            "Run paying row filters inside the Parquet reader, before the other columns decode",
        ),
        (
            "scan.static_row_filter",
            "Evaluate the query's own filters on the scan's rows, most selective first",
        ),
        (
            "scan.dictionary_strings",
            "Decode dictionary-encoded string columns the row filter reads as dictionaries until it has run",
        ),
        (
            "optimizer.join_reorder",
            "Order inner joins by estimated cardinality from Iceberg metadata (false: the query's order)",
        ),
        (
            "optimizer.aggregate_reduction",
            "Semi-join a grouped aggregate's input with the keys its inner join can match",
        ),
        (
            "optimizer.shared_subplans",
            "Run an aggregate subtree that appears twice in a plan (a CTE, a repeated subquery) once",
        ),
        (
            "optimizer.filter_selectivity",
            "Estimate filters from column statistics where DataFusion assumes 20 %, before it picks join build sides",
        ),
        (
            "optimizer.decimal_arithmetic",
            "Compute decimal +, -, * on 64-bit values where a batch's values prove the result exact",
        ),
        (
            "optimizer.collect_build_side",
            "Build one hash table from a join's whole build side unless repartitioning both sides costs less",
        ),
        (
            "optimizer.like_segments",
            "Match LIKE patterns with % between literal segments by searching the segments, not a regex",
        ),
        (
            "optimizer.dictionary_group_by",
            "Group by codes of the dictionary values of low-cardinality string columns, not by the strings",
        ),
    ];
}

impl ConfigExtension for IceflightOptions {
    const PREFIX: &'static str = "iceflight";
}

impl ExtensionOptions for IceflightOptions {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    fn cloned(&self) -> Box<dyn ExtensionOptions> {
        Box::new(self.clone())
    }

    fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let invalid = |expected: &str| {
            DataFusionError::Configuration(format!(
                "iceflight.{key} must be {expected}, got {value:?}"
            ))
        };
        let boolean = || {
            value
                .trim()
                .parse::<bool>()
                .map_err(|_| invalid("true or false"))
        };
        match key {
            "scan.batch_size" => {
                self.scan_batch_size = value
                    .trim()
                    .parse()
                    .map_err(|_| invalid("a non-negative integer"))?;
            }
            "scan.dynamic_filter_pruning" => self.dynamic_filter_pruning = boolean()?,
            "scan.dynamic_filter_wait" => {
                self.dynamic_filter_wait = parse_duration(value)
                    .filter(|d| *d <= MAX_DYNAMIC_FILTER_WAIT)
                    .ok_or_else(|| invalid("a duration such as 250ms, 1s or 5m, at most 1h"))?;
            }
            "scan.reader_predicate" => self.reader_predicate = boolean()?,
            "scan.reader" => {
                self.reader = match value.trim().to_ascii_lowercase().as_str() {
                    "native" => ScanReader::Native,
                    "iceberg" => ScanReader::Iceberg,
                    _ => return Err(invalid("native or iceberg")),
                }
            }
            "scan.dynamic_row_filter" => self.dynamic_row_filter = boolean()?,
            "scan.late_materialization" => self.late_materialization = boolean()?,
            "scan.static_row_filter" => self.static_row_filter = boolean()?,
            "scan.dictionary_strings" => self.dictionary_strings = boolean()?,
            "optimizer.join_reorder" => self.join_reorder = boolean()?,
            "optimizer.aggregate_reduction" => self.aggregate_reduction = boolean()?,
            "optimizer.shared_subplans" => self.shared_subplans = boolean()?,
            "optimizer.filter_selectivity" => self.filter_selectivity = boolean()?,
            "optimizer.decimal_arithmetic" => self.decimal_arithmetic = boolean()?,
            "optimizer.collect_build_side" => self.collect_build_side = boolean()?,
            "optimizer.like_segments" => self.like_segments = boolean()?,
            "optimizer.dictionary_group_by" => self.dictionary_group_by = boolean()?,
            _ => {
                return Err(DataFusionError::Configuration(format!(
                    "unknown setting iceflight.{key} (known: {})",
                    Self::KEYS.map(|(k, _)| format!("iceflight.{k}")).join(", ")
                )));
            }
        }
        Ok(())
    }

    fn entries(&self) -> Vec<ConfigEntry> {
        let values = [
            self.scan_batch_size.to_string(),
            self.dynamic_filter_pruning.to_string(),
            format_duration(self.dynamic_filter_wait),
            self.reader_predicate.to_string(),
            self.reader.as_str().to_string(),
            self.dynamic_row_filter.to_string(),
            self.late_materialization.to_string(),
            self.static_row_filter.to_string(),
            self.dictionary_strings.to_string(),
            self.join_reorder.to_string(),
            self.aggregate_reduction.to_string(),
            self.shared_subplans.to_string(),
            self.filter_selectivity.to_string(),
            self.decimal_arithmetic.to_string(),
            self.collect_build_side.to_string(),
            self.like_segments.to_string(),
            self.dictionary_group_by.to_string(),
        ];
        Self::KEYS
            .iter()
            .zip(values)
            .map(|((key, description), value)| ConfigEntry {
                key: format!("{}.{key}", Self::PREFIX),
                value: Some(value),
                description,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use datafusion::prelude::{SessionConfig, SessionContext};

    use super::*;

    /// Runs `SET statement` and returns the session's options afterwards.
    async fn set(ctx: &SessionContext, statement: &str) -> IceflightOptions {
        ctx.sql(statement).await.unwrap();
        ctx.state()
            .config_options()
            .extensions
            .get::<IceflightOptions>()
            .unwrap()
            .clone()
    }

    #[tokio::test]
    async fn set_through_sql() {
        let config = SessionConfig::new().with_option_extension(IceflightOptions::default());
        let ctx = SessionContext::new_with_config(config);
        let opts = set(&ctx, "SET iceflight.scan.batch_size = 1234").await;
        assert_eq!(opts.scan_batch_size, 1234);
        let opts = set(&ctx, "SET iceflight.scan.dynamic_filter_wait = '1.5s'").await;
        assert_eq!(opts.dynamic_filter_wait.as_millis(), 1500);
        let opts = set(&ctx, "SET iceflight.scan.dynamic_filter_wait = '1h'").await;
        assert_eq!(opts.dynamic_filter_wait.as_secs(), 3600);
        let opts = set(&ctx, "SET iceflight.scan.dynamic_filter_wait = '5m'").await;
        assert_eq!(opts.dynamic_filter_wait.as_secs(), 300);
        for bad in ["-1ms", "soon", "2h", "61m"] {
            let err = ctx
                .sql(&format!("SET iceflight.scan.dynamic_filter_wait = '{bad}'"))
                .await
                .unwrap_err();
            assert!(err.to_string().contains("must be a duration"), "{err}");
        }
        let err = ctx.sql("SET iceflight.scan.nope = 1").await.unwrap_err();
        assert!(
            err.to_string()
                .contains("unknown setting iceflight.scan.nope"),
            "{err}"
        );
    }
}
