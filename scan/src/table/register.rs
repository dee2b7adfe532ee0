//! Registering the scan in a session being built.

use std::sync::Arc;

use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::prelude::SessionConfig;
use iceflight_optimizer::filter_selectivity::FilterSelectivity;

use crate::exec::dynamic_filter_rule::DynamicFilterRule;
use crate::exec::proven_filter_rule::ProvenFilterRule;
use crate::exec::scan_exec::IcebergScanExec;
use crate::read::caches::ScanCaches;
use iceflight_options::IceflightOptions;

/// Registers the scan in a session being built: its settings (`iceflight.*`,
/// [`IceflightOptions`]) and the engine's `caches` in `config`, and its physical optimizer
/// rules in `rules`: [`FilterSelectivity`] (over Iceberg scans, whose column statistics come from manifests) before DataFusion's
/// `join_selection` (which picks build sides from the estimates it sets), [`ProvenFilterRule`]
/// before `aggregate_statistics` (which answers from the exact statistics it restores), and
/// [`DynamicFilterRule`] last (it needs the dynamic filters DataFusion's last filter-pushdown
/// pass puts in place). Returns the config.
pub fn register(
    config: SessionConfig,
    caches: Arc<ScanCaches>,
    rules: &mut Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>>,
) -> SessionConfig {
    let at = rules
        .iter()
        .position(|r| r.name() == "join_selection")
        .unwrap_or(0);
    rules.insert(
        at,
        Arc::new(FilterSelectivity::over(|plan| {
            plan.downcast_ref::<IcebergScanExec>().is_some()
        })),
    );
    let at = rules
        .iter()
        .position(|r| r.name() == "aggregate_statistics")
        .unwrap_or(0);
    rules.insert(at, Arc::new(ProvenFilterRule));
    rules.push(Arc::new(DynamicFilterRule));
    config
        .with_option_extension(IceflightOptions::default())
        .with_extension(caches)
}
