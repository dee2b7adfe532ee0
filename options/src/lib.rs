//! Session settings of iceflight, under the `iceflight.` prefix (`SET iceflight.scan.batch_size = 4096`,
//! `iceflight sql --set iceflight.scan.batch_size=4096`): `iceflight.scan.*` read by the scan when
//! it plans (`scan/src/plan/planner.rs`), `iceflight.optimizer.*` read by the optimizer rules
//! (`optimizer/src/`, `scan/src/exec/`) and `iceflight.query.*` read by the Flight SQL service
//! when a query starts (`server/src/flight/execution.rs`).
//!
//! Each setting is declared once, with its type, default and description, in DataFusion's
//! `config_namespace!` ([`ScanOptions`], [`OptimizerOptions`]); `SET`, `SHOW ALL` and
//! `information_schema.df_settings` go through DataFusion's `ConfigField` visitor over them.
//! The one part written by hand is [`IceflightOptions`]' `ExtensionOptions`: DataFusion's
//! `extensions_options!` lists keys without their `iceflight.` prefix and names a mistyped key
//! by its struct, while a user should see `unknown setting iceflight.scan.nope` and the known keys.

use std::fmt;
use std::time::Duration;

use datafusion::common::config::{
    ConfigEntry, ConfigExtension, ConfigField, ExtensionOptions, Visit,
};
use datafusion::common::{DataFusionError, Result, config_namespace};

pub use iceflight_input::units::{format_duration, parse_duration};

/// Default of `iceflight.scan.dynamic_filter_wait`; chosen by measurement (`scan/README.md`).
pub const DEFAULT_DYNAMIC_FILTER_WAIT: Duration = Duration::from_millis(1000);

/// Longest `iceflight.scan.dynamic_filter_wait` accepted.
pub const MAX_DYNAMIC_FILTER_WAIT: Duration = Duration::from_secs(3600);

config_namespace! {
    /// `iceflight.scan.*`: how a scan reads (`scan/src/`).
    pub struct ScanOptions {
        /// Rows per batch decoded by the Parquet reader; 0 uses datafusion.execution.batch_size
        pub batch_size: usize, default = 0
        /// Skip data files with the dynamic filters of joins, TopK and aggregates
        pub dynamic_filter_pruning: bool, default = true
        /// How long a partition waits for incomplete dynamic filters before its first file (e.g. 250ms, 1s, 5m; at most 1h)
        pub dynamic_filter_wait: FilterWait, default = FilterWait(DEFAULT_DYNAMIC_FILTER_WAIT)
        /// Hand domains of clustered columns to the Parquet reader as a row filter
        pub reader_predicate: bool, default = true
        /// Parquet reader of data files: native (ours) or iceberg (iceberg's ArrowReader)
        pub reader: ScanReader, default = ScanReader::Native
        /// Evaluate live dynamic filters on the scan's rows while they drop enough to pay
        pub dynamic_row_filter: bool, default = true
        /// Run paying row filters inside the Parquet reader, before the other columns decode
        pub late_materialization: bool, default = true
        /// Evaluate the query's own filters on the scan's rows, most selective first
        pub static_row_filter: bool, default = true
        /// Decode dictionary-encoded string columns the row filter reads as dictionaries until it has run
        pub dictionary_strings: bool, default = true
        /// Cut a row group into row ranges where a file has too few row groups to give every partition an equal share of its bytes
        pub cut_row_groups: bool, default = true
    }
}

config_namespace! {
    /// `iceflight.optimizer.*`: iceflight's optimizer rules, each on by default.
    pub struct OptimizerOptions {
        /// Order inner joins by estimated cardinality from Iceberg metadata (false: the query's order)
        pub join_reorder: bool, default = true
        /// Semi-join a grouped aggregate's input with the keys its inner join can match
        pub aggregate_reduction: bool, default = true
        /// Compute ROLLUP, CUBE and GROUPING SETS from one aggregate at their finest grouping
        pub grouping_sets_from_finest: bool, default = true
        /// Aggregate a join's probe side by its join keys and own group columns before the join, when the build side only adds group columns
        pub eager_aggregation: bool, default = true
        /// Leave out of a GROUP BY the columns a filter or join made one known constant, and put the value back
        pub constant_group_keys: bool, default = true
        /// Run an aggregate subtree that appears twice in a plan (a CTE, a repeated subquery) once
        pub shared_subplans: bool, default = true
        /// Keep every reference of a CTE one plan, under the union of the references' filters, so shared_subplans runs it once
        pub shared_ctes: bool, default = true
        /// Estimate filters from column statistics where DataFusion assumes 20 %, before it picks join build sides
        pub filter_selectivity: bool, default = true
        /// Compute decimal +, -, * on 64-bit values where a batch's values prove the result exact
        pub decimal_arithmetic: bool, default = true
        /// Build one hash table from a join's whole build side unless repartitioning both sides costs less
        pub collect_build_side: bool, default = true
        /// Match LIKE patterns with % between literal segments by searching the segments, not a regex
        pub like_segments: bool, default = true
        /// Group by codes of the dictionary values of low-cardinality string columns, not by the strings
        pub dictionary_group_by: bool, default = true
    }
}

config_namespace! {
    /// `iceflight.query.*`: limits of the session's queries, within the server's.
    pub struct QueryOptions {
        /// Longest a query of this session runs (e.g. 30s, 5m; none: the server's query.timeout alone, which also bounds this)
        pub timeout: QueryTimeout, default = QueryTimeout(None)
    }
}

/// All of iceflight's session settings: `iceflight.scan.*`, `iceflight.optimizer.*` and
/// `iceflight.query.*`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IceflightOptions {
    /// `iceflight.scan.*`.
    pub scan: ScanOptions,
    /// `iceflight.optimizer.*`.
    pub optimizer: OptimizerOptions,
    /// `iceflight.query.*`.
    pub query: QueryOptions,
}

/// `iceflight.query.timeout`: a duration (`30s`, `5m`, a number of milliseconds) or `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryTimeout(pub Option<Duration>);

impl fmt::Display for QueryTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("none"),
            Some(d) => f.write_str(&format_duration(d)),
        }
    }
}

impl ConfigField for QueryTimeout {
    fn visit<V: Visit>(&self, v: &mut V, key: &str, description: &'static str) {
        v.some(key, self, description)
    }

    fn set(&mut self, _: &str, value: &str) -> Result<()> {
        self.0 = match value.trim().to_ascii_lowercase().as_str() {
            "none" => None,
            text => Some(
                parse_duration(text)
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| expected("a duration such as 30s or 5m, or none"))?,
            ),
        };
        Ok(())
    }
}

/// `iceflight.scan.dynamic_filter_wait`: a duration written `250ms`, `1s`, `5m` or a number of
/// milliseconds, at most [`MAX_DYNAMIC_FILTER_WAIT`] (like Trino's
/// `iceberg.dynamic-filtering.wait-timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterWait(pub Duration);

impl fmt::Display for FilterWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

impl ConfigField for FilterWait {
    fn visit<V: Visit>(&self, v: &mut V, key: &str, description: &'static str) {
        v.some(key, self, description)
    }

    fn set(&mut self, _: &str, value: &str) -> Result<()> {
        self.0 = parse_duration(value)
            .filter(|d| *d <= MAX_DYNAMIC_FILTER_WAIT)
            .ok_or_else(|| expected("a duration such as 250ms, 1s or 5m, at most 1h"))?;
        Ok(())
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

impl fmt::Display for ScanReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ConfigField for ScanReader {
    fn visit<V: Visit>(&self, v: &mut V, key: &str, description: &'static str) {
        v.some(key, self, description)
    }

    fn set(&mut self, _: &str, value: &str) -> Result<()> {
        *self = match value.trim().to_ascii_lowercase().as_str() {
            "native" => Self::Native,
            "iceberg" => Self::Iceberg,
            _ => return Err(expected("native or iceberg")),
        };
        Ok(())
    }
}

/// The error of a value that does not parse: `ExtensionOptions::set` of [`IceflightOptions`]
/// puts the key and the value around it.
fn expected(what: &str) -> DataFusionError {
    DataFusionError::Configuration(what.to_string())
}

/// The `iceflight.scan.*` settings one planned scan runs with (taken from the session at
/// planning, so a scan sent to a worker runs as it was planned).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScanSettings {
    /// `iceflight.scan.dynamic_filter_pruning`.
    pub dynamic_pruning: bool,
    /// `iceflight.scan.dynamic_filter_wait`.
    pub dynamic_filter_wait: Duration,
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
    /// `iceflight.scan.cut_row_groups`.
    pub cut_row_groups: bool,
}

impl ScanSettings {
    /// The scan settings of `options`.
    pub fn of(options: &IceflightOptions) -> Self {
        let scan = &options.scan;
        Self {
            dynamic_pruning: scan.dynamic_filter_pruning,
            dynamic_filter_wait: scan.dynamic_filter_wait.0,
            reader_predicate: scan.reader_predicate,
            reader: scan.reader,
            dynamic_row_filter: scan.dynamic_row_filter,
            late_materialization: scan.late_materialization,
            static_row_filter: scan.static_row_filter,
            dictionary_strings: scan.dictionary_strings,
            cut_row_groups: scan.cut_row_groups,
        }
    }
}

impl IceflightOptions {
    /// The settings in `options` (a session's), or the defaults when it carries none.
    pub fn of(options: &datafusion::common::config::ConfigOptions) -> Self {
        options
            .extensions
            .get::<IceflightOptions>()
            .cloned()
            .unwrap_or_default()
    }
}

impl ConfigField for IceflightOptions {
    fn visit<V: Visit>(&self, v: &mut V, key: &str, _description: &'static str) {
        self.scan.visit(v, &format!("{key}.scan"), "");
        self.optimizer.visit(v, &format!("{key}.optimizer"), "");
        self.query.visit(v, &format!("{key}.query"), "");
    }

    fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key.split_once('.') {
            Some(("scan", rest)) => self.scan.set(rest, value),
            Some(("optimizer", rest)) => self.optimizer.set(rest, value),
            Some(("query", rest)) => self.query.set(rest, value),
            _ => Err(expected("a setting under scan., optimizer. or query.")),
        }
    }
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

    /// Sets `key` (without the `iceflight.` prefix). Errors: an unknown key names every known
    /// one; a value that does not parse names the key, what it must be, and the value.
    fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let full = format!("{}.{key}", Self::PREFIX);
        let entries = self.entries();
        if !entries.iter().any(|e| e.key == full) {
            let known: Vec<&str> = entries.iter().map(|e| e.key.as_str()).collect();
            return Err(DataFusionError::Configuration(format!(
                "unknown setting {full} (known: {})",
                known.join(", ")
            )));
        }
        // Values are read trimmed, and booleans only as `true` or `false` (DataFusion's would
        // take any case). Our own types say what they expect; DataFusion's bool and usize not.
        let current = entries
            .iter()
            .find(|e| e.key == full)
            .and_then(|e| e.value.clone())
            .unwrap_or_default();
        let boolean = current.parse::<bool>().is_ok();
        let trimmed = value.trim();
        let parsed = if boolean && trimmed.parse::<bool>().is_err() {
            Err(expected("true or false"))
        } else {
            ConfigField::set(self, key, trimmed)
        };
        parsed.map_err(|error| {
            let what = if boolean {
                "true or false".to_string()
            } else if current.parse::<u64>().is_ok() {
                "a non-negative integer".to_string()
            } else {
                match error {
                    DataFusionError::Configuration(what) => what,
                    other => other.to_string(),
                }
            };
            DataFusionError::Configuration(format!("{full} must be {what}, got {value:?}"))
        })
    }

    fn entries(&self) -> Vec<ConfigEntry> {
        struct Entries(Vec<ConfigEntry>);
        impl Visit for Entries {
            fn some<V: fmt::Display>(&mut self, key: &str, value: V, description: &'static str) {
                self.0.push(ConfigEntry {
                    key: key.to_string(),
                    value: Some(value.to_string()),
                    description,
                })
            }

            fn none(&mut self, key: &str, description: &'static str) {
                self.0.push(ConfigEntry {
                    key: key.to_string(),
                    value: None,
                    description,
                })
            }
        }
        let mut entries = Entries(Vec::new());
        self.visit(&mut entries, Self::PREFIX, "");
        entries.0
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
        assert_eq!(opts.scan.batch_size, 1234);
        let opts = set(&ctx, "SET iceflight.scan.dynamic_filter_wait = '1.5s'").await;
        assert_eq!(opts.scan.dynamic_filter_wait.0.as_millis(), 1500);
        let opts = set(&ctx, "SET iceflight.scan.dynamic_filter_wait = '1h'").await;
        assert_eq!(opts.scan.dynamic_filter_wait.0.as_secs(), 3600);
        let opts = set(&ctx, "SET iceflight.scan.dynamic_filter_wait = '5m'").await;
        assert_eq!(opts.scan.dynamic_filter_wait.0.as_secs(), 300);
        for bad in ["-1ms", "soon", "2h", "61m"] {
            let err = ctx
                .sql(&format!("SET iceflight.scan.dynamic_filter_wait = '{bad}'"))
                .await
                .unwrap_err();
            assert!(err.to_string().contains("must be a duration"), "{err}");
        }
        // Values are read trimmed; booleans only in lower case, as before the settings were
        // declared with DataFusion's machinery (whose booleans take any case).
        let opts = set(&ctx, "SET iceflight.scan.batch_size = ' 4096'").await;
        assert_eq!(opts.scan.batch_size, 4096);
        let opts = set(&ctx, "SET iceflight.scan.dynamic_row_filter = ' false'").await;
        assert!(!opts.scan.dynamic_row_filter);
        let err = ctx
            .sql("SET iceflight.scan.dynamic_row_filter = 'TRUE'")
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("iceflight.scan.dynamic_row_filter must be true or false, got \"TRUE\""),
            "{err}"
        );
        let err = ctx
            .sql("SET iceflight.scan.batch_size = 'many'")
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("iceflight.scan.batch_size must be a non-negative integer"),
            "{err}"
        );
        let entries = IceflightOptions::default().entries();
        assert_eq!(entries.len(), 23);
        assert!(entries.iter().all(|e| e.key.starts_with("iceflight.")));
        let err = ctx.sql("SET iceflight.scan.nope = 1").await.unwrap_err();
        assert!(
            err.to_string()
                .contains("unknown setting iceflight.scan.nope"),
            "{err}"
        );
    }
}
