//! Session settings of the scan, under the `iceflight.` prefix (`SET iceflight.scan.batch_size = 4096`,
//! `iceflight sql --set iceflight.scan.batch_size=4096`).

use datafusion::common::config::{ConfigEntry, ConfigExtension, ExtensionOptions};
use datafusion::common::{DataFusionError, Result};

/// Settings read by [`crate::IcebergTableProvider::scan`] from the session's config extensions.
#[derive(Debug, Clone, PartialEq)]
pub struct IceflightOptions {
    /// `iceflight.scan.batch_size`: rows per batch decoded by the Parquet reader; 0 (default)
    /// uses `datafusion.execution.batch_size`.
    pub scan_batch_size: usize,
    /// `iceflight.scan.dynamic_filter_pruning` (default true): use the dynamic filters of joins,
    /// TopK and aggregates to skip data files; false compares the same build without it.
    pub dynamic_filter_pruning: bool,
}

impl Default for IceflightOptions {
    fn default() -> Self {
        Self {
            scan_batch_size: 0,
            dynamic_filter_pruning: true,
        }
    }
}

impl IceflightOptions {
    const KEYS: [(&'static str, &'static str); 2] = [
        (
            "scan.batch_size",
            "Rows per batch decoded by the Parquet reader; 0 uses datafusion.execution.batch_size",
        ),
        (
            "scan.dynamic_filter_pruning",
            "Skip data files with the dynamic filters of joins, TopK and aggregates",
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
        match key {
            "scan.batch_size" => {
                self.scan_batch_size = value.trim().parse().map_err(|_| {
                    DataFusionError::Configuration(format!(
                        "iceflight.scan.batch_size must be a non-negative integer, got {value:?}"
                    ))
                })?;
                Ok(())
            }
            "scan.dynamic_filter_pruning" => {
                self.dynamic_filter_pruning = value.trim().parse().map_err(|_| {
                    DataFusionError::Configuration(format!(
                        "iceflight.scan.dynamic_filter_pruning must be true or false, got {value:?}"
                    ))
                })?;
                Ok(())
            }
            _ => Err(DataFusionError::Configuration(format!(
                "unknown setting iceflight.{key} (known: {})",
                Self::KEYS.map(|(k, _)| format!("iceflight.{k}")).join(", ")
            ))),
        }
    }

    fn entries(&self) -> Vec<ConfigEntry> {
        let values = [
            self.scan_batch_size.to_string(),
            self.dynamic_filter_pruning.to_string(),
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

    #[tokio::test]
    async fn set_through_sql() {
        let config = SessionConfig::new().with_option_extension(IceflightOptions::default());
        let ctx = SessionContext::new_with_config(config);
        ctx.sql("SET iceflight.scan.batch_size = 1234")
            .await
            .unwrap();
        let state = ctx.state();
        let opts = state
            .config_options()
            .extensions
            .get::<IceflightOptions>()
            .unwrap();
        assert_eq!(opts.scan_batch_size, 1234);
        let err = ctx.sql("SET iceflight.scan.nope = 1").await.unwrap_err();
        assert!(
            err.to_string()
                .contains("unknown setting iceflight.scan.nope"),
            "{err}"
        );
    }
}
