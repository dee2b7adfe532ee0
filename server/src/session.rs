//! Builds DataFusion sessions over the configured catalogs and runs SQL text.
//!
//! ```text
//!   Config ──► Engine::connect (catalogs, default schema) ──► Engine::session ──► SessionContext
//! ```
//!
//! SQL text is parsed, planned and run by the SQL front end (`sql/`).

use std::sync::Arc;

use datafusion::common::{DataFusionError, Result};
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::memory_pool::{FairSpillPool, TrackConsumersPool};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::prelude::{SessionConfig, SessionContext};
use iceflight_cache::block_cache::{BlockCache, BlockCacheConfig};
use iceflight_cache::disk_tier::{DiskTier, DiskTierError};
use iceflight_catalog::cached_storage::StorageCache;
use iceflight_catalog::{CatalogError, Catalogs, NO_DEFAULT_SCHEMA};
use iceflight_scan::read::caches::ScanCaches;
use iceflight_scan::read::footer::FooterCache;
use iceflight_scan::read::table_access::TableAccessLog;

use crate::config::{Config, ConfigError};
use crate::distributed::{Cluster, Role};
use iceflight_scan::distributed::codec::IcebergScanCodec;

/// Connected catalogs plus the settings every session starts from.
#[derive(Debug, Clone)]
pub struct Engine {
    config: Config,
    default_catalog: String,
    /// The configured default schema, else the default catalog's only namespace, else
    /// [`NO_DEFAULT_SCHEMA`].
    default_schema: String,
    catalogs: Catalogs,
    runtime: Arc<RuntimeEnv>,
    /// The block, footer and manifest-metrics caches of this engine (`[cache]`).
    caches: Arc<ScanCaches>,
    /// On a coordinator or worker: what every session adds for datafusion-distributed.
    cluster: Option<Cluster>,
    /// The queries run through Flight SQL (`system.runtime.queries`, `/metrics`).
    history: Arc<crate::query_history::QueryHistory>,
    /// The Flight SQL server's sessions, once it serves (`system.runtime.sessions`).
    sessions: LiveSessions,
}

pub use crate::system::LiveSessions;

/// Why an [`Engine`] could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A catalog failed to connect.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// `[cache] disk` cannot be opened.
    #[error("cache.disk: {0}")]
    DiskCache(#[from] DiskTierError),
}

impl Engine {
    /// Connects every catalog of `config`.
    pub async fn connect(config: Config) -> Result<Self, EngineError> {
        config.validate()?;
        let default_catalog = config.effective_default_catalog()?;
        let mut runtime = RuntimeEnvBuilder::new();
        // A fair spill pool: operators that can spill (sorts, aggregates, sort-merge joins)
        // share what the others leave evenly and spill beyond their share, so concurrent
        // queries each progress; the five largest consumers are named when one fails. Always
        // bounded (by default half the machine's memory): an oversized query fails with
        // ResourceExhausted rather than the OS ending the server.
        runtime = runtime.with_memory_pool(Arc::new(TrackConsumersPool::new(
            FairSpillPool::new(config.query.memory_limit_bytes()),
            std::num::NonZeroUsize::new(5).expect("5 > 0"),
        )));
        if let Some(dir) = &config.query.spill_dir {
            let dir = crate::config::absolute(dir);
            std::fs::create_dir_all(&dir).map_err(|e| {
                ConfigError::Invalid(format!("query.spill_dir {}: {e}", dir.display()))
            })?;
            runtime = runtime.with_temp_file_path(dir);
        }
        let runtime = runtime
            .build_arc()
            .map_err(|e| ConfigError::Invalid(format!("query runtime: {e}")))?;
        let blocks = match config.cache.enabled {
            false => None,
            true => {
                let block_size = config.cache.block_size_bytes();
                let mut blocks = BlockCache::new(BlockCacheConfig {
                    capacity: config.cache.memory_bytes(),
                    block_size,
                });
                if let Some(dir) = &config.cache.disk {
                    let disk = DiskTier::open(
                        &crate::config::absolute(dir),
                        config.cache.disk_capacity_bytes(),
                        block_size,
                    )
                    .await?;
                    blocks = blocks.with_disk(disk);
                }
                Some(Arc::new(blocks))
            }
        };
        let manifest_reads = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let caches = Arc::new(ScanCaches {
            blocks: blocks.clone(),
            local_files: config.cache.local_files,
            footers: FooterCache::new(config.cache.metadata_memory_bytes()),
            indexes: Default::default(),
            manifest_reads: Arc::clone(&manifest_reads),
            access: match &config.maintenance.table_access_file {
                Some(path) => {
                    let path = crate::config::absolute(path);
                    Arc::new(TableAccessLog::persisted(&path).map_err(|e| {
                        ConfigError::Invalid(format!(
                            "maintenance.table_access_file {}: {e}",
                            path.display()
                        ))
                    })?)
                }
                None => Default::default(),
            },
        });
        // Always given, so manifest reads are counted also without a block cache.
        let storage_cache = StorageCache {
            blocks,
            local_files: config.cache.local_files,
            manifest_reads: Arc::clone(&manifest_reads),
        };
        let catalogs =
            Catalogs::connect(&config.effective_catalogs(), Some(&storage_cache)).await?;
        let default_schema = match &config.default_schema {
            Some(schema) => schema.clone(),
            None => only_namespace(&catalogs, &default_catalog)
                .await
                .unwrap_or_else(|| NO_DEFAULT_SCHEMA.to_string()),
        };
        let cluster = match config.distributed.role {
            Role::Single => None,
            role => {
                let codec = IcebergScanCodec::new(Arc::new(catalogs.clone()), Arc::clone(&caches));
                Some(Cluster::new(role, &config.distributed, codec)?)
            }
        };
        Ok(Self {
            config,
            default_catalog,
            default_schema,
            catalogs,
            runtime,
            caches,
            cluster,
            history: Arc::default(),
            sessions: Arc::default(),
        })
    }

    /// Shows `sessions` (the Flight SQL server's) in `system.runtime.sessions`; the first
    /// server's stay when an engine serves twice.
    pub fn attach_sessions(&self, sessions: Arc<dyn crate::system::SessionDirectory>) {
        let _ = self.sessions.set(sessions);
    }

    /// The queries run through Flight SQL on this engine.
    pub fn history(&self) -> &Arc<crate::query_history::QueryHistory> {
        &self.history
    }

    /// The engine's caches (`system.runtime.cache` shows them).
    pub fn caches(&self) -> &Arc<ScanCaches> {
        &self.caches
    }

    /// The datafusion-distributed parts of a coordinator or worker (`None`: role `single`).
    pub fn cluster(&self) -> Option<&Cluster> {
        self.cluster.as_ref()
    }

    /// The runtime every query of this engine runs in (memory pool, disk manager).
    pub fn runtime(&self) -> Arc<RuntimeEnv> {
        Arc::clone(&self.runtime)
    }

    /// The catalog for unqualified names.
    pub fn default_catalog(&self) -> &str {
        &self.default_catalog
    }

    /// The schema for unqualified names: configured, or the default catalog's only namespace
    /// (`None` when neither: unqualified names then fail with the namespaces listed).
    pub fn default_schema(&self) -> Option<&str> {
        (self.default_schema != NO_DEFAULT_SCHEMA).then_some(self.default_schema.as_str())
    }

    /// The connected catalogs.
    pub fn catalogs(&self) -> &Catalogs {
        &self.catalogs
    }

    /// The configuration the engine was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A new session: default catalog and schema (overridable), the `[query]` settings, the
    /// `iceflight.*` options, then `settings` (`datafusion.*` / `iceflight.*` keys) in order.
    ///
    /// Errors: an unknown catalog, or an unknown or invalid setting.
    pub fn session(
        &self,
        catalog: Option<&str>,
        schema: Option<&str>,
        settings: &[(String, String)],
    ) -> Result<SessionContext> {
        self.build_session(catalog, schema, settings, None)
    }

    /// A session of a logged-in user of the Flight SQL server: as [`Self::session`], with
    /// `access` deciding what it may see and do (`access/`): the catalogs list only what the
    /// user may see, and every statement is checked (`sql::plan_statement`).
    ///
    /// Errors: as [`Self::session`].
    pub fn user_session(&self, access: Arc<crate::access::Access>) -> Result<SessionContext> {
        self.build_session(None, None, &[], Some(access))
    }

    fn build_session(
        &self,
        catalog: Option<&str>,
        schema: Option<&str>,
        settings: &[(String, String)],
        access: Option<Arc<crate::access::Access>>,
    ) -> Result<SessionContext> {
        let catalog = catalog.unwrap_or(&self.default_catalog);
        self.catalogs
            .get(catalog)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let schema = match (schema, catalog == self.default_catalog) {
            (Some(s), _) => s,
            (None, true) => &self.default_schema,
            (None, false) => NO_DEFAULT_SCHEMA,
        };
        let target_partitions = match self.config.query.target_partitions {
            0 => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            n => n,
        };
        let config = SessionConfig::new()
            .with_information_schema(true)
            .with_create_default_catalog_and_schema(false)
            .with_default_catalog_and_schema(catalog, schema)
            .with_target_partitions(target_partitions)
            .with_batch_size(self.config.query.batch_size.max(1));
        let mut config = config;
        // Hash joins hand build sides of up to 1024 distinct keys (DataFusion: 150; and within
        // `hash_join_inlist_pushdown_max_size`, 128 KiB per partition) to their probe-side
        // scans as IN lists. A single-partition (CollectLeft) join's list over one integer
        // column is tested as a bitmap by the scan's row filter (`scan/src/pushdown/integer_set.rs`;
        // TPC-H SF 1 q17 154 vs 210 ms, q21 229 vs 304 ms); a partitioned join's lists sit in a
        // CASE per partition and keep DataFusion's hash set. A session's SET still overrides
        // it. Workers of a distributed plan start from DataFusion's defaults (150).
        config
            .options_mut()
            .optimizer
            .hash_join_inlist_pushdown_max_distinct_values = INLIST_PUSHDOWN_MAX_DISTINCT_VALUES;
        let mut rules = engine_physical_optimizer_rules();
        let mut config = iceflight_scan::register(config, Arc::clone(&self.caches), &mut rules)
            .with_extension(Arc::clone(&self.history))
            .with_extension(Arc::new(crate::sql::procedures::MaintenanceLimits {
                min_retention: self.config.maintenance.min_retention,
                import_roots: self.config.maintenance.import_roots.clone(),
            }));
        if let Some(access) = &access {
            config = config.with_extension(Arc::clone(access));
        }
        if let Some(cluster) = &self.cluster {
            config = cluster.coordinator_config(config);
        } else {
            // Not on a coordinator: its stages go to workers, whose codec carries neither a
            // shared subtree nor our decimal and LIKE expressions, and whose stages split at the
            // repartitions of partitioned joins. Shared subplans last: it compares
            // subtrees as every other rule left them.
            // The join mode before DataFusion's `join_selection` (and after the filter
            // estimates `register` put there), which keeps a `CollectLeft` it is handed.
            let at = rules
                .iter()
                .position(|r| r.name() == "join_selection")
                .unwrap_or(0);
            rules.insert(
                at,
                Arc::new(iceflight_optimizer::join_partition_mode::JoinPartitionMode),
            );
            // Eager aggregation once the partial and final aggregates are placed, before the
            // dynamic filters are pushed (its new join gets one).
            let at = rules
                .iter()
                .position(|r| r.name() == "CombinePartialFinalAggregate")
                .map_or(rules.len(), |at| at + 1);
            rules.insert(
                at,
                Arc::new(iceflight_optimizer::eager_aggregation::EagerAggregation),
            );
            rules.push(Arc::new(
                iceflight_optimizer::decimal_arithmetic::DecimalArithmetic,
            ));
            rules.push(Arc::new(iceflight_optimizer::like_segments::LikeSegments));
            rules.push(Arc::new(
                iceflight_scan::exec::dictionary_group_by::DictionaryGroupBy,
            ));
            rules.push(Arc::new(
                iceflight_scan::exec::shared_subplan::SharedSubplans,
            ));
        }
        for (k, v) in settings {
            config.options_mut().set(k, v).map_err(|source| {
                DataFusionError::External(Box::new(crate::message::InvalidSetting {
                    key: k.clone(),
                    value: v.clone(),
                    source,
                }))
            })?;
        }
        let builder = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(Arc::clone(&self.runtime))
            .with_default_features()
            .with_physical_optimizer_rules(rules)
            .with_optimizer_rule(Arc::new(iceflight_optimizer::join_order::JoinOrder))
            .with_optimizer_rule(Arc::new(
                iceflight_optimizer::aggregate_reduction::AggregateReduction,
            ))
            .with_optimizer_rule(Arc::new(
                iceflight_optimizer::grouping_sets::GroupingSetsFromFinest,
            ));
        // Not on a coordinator, as the shared-subplan rule its barriers serve: every
        // reference of a CTE kept one plan, so that rule runs it once.
        let builder = match &self.cluster {
            Some(_) => builder,
            None => builder
                .with_analyzer_rule(Arc::new(iceflight_optimizer::shared_ctes::SharedCtes))
                .with_query_planner(Arc::new(
                    iceflight_optimizer::cte_reference::CteQueryPlanner,
                )),
        };
        let builder = with_engine_semantics(builder);
        let state = match &self.cluster {
            Some(cluster) => cluster.coordinator_session(builder),
            None => builder,
        }
        .build();
        let ctx = SessionContext::new_with_state(state);
        // Before the catalogs, which learn the session's table function names. A user's
        // session reads files only under `[query] file_roots` (`access/files.rs`).
        crate::sql::file_functions::register(&ctx);
        self.catalogs.register(
            &ctx,
            access.map(|a| a as Arc<dyn iceflight_catalog::provider::Visibility>),
        );
        if !self.catalogs.names().contains(&crate::system::CATALOG) {
            crate::system::register(
                &ctx,
                Arc::clone(&self.caches),
                self.catalogs.clone(),
                Arc::clone(&self.history),
                Arc::clone(&self.sessions),
            );
        }
        ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(
            crate::invalidate::InvalidateCache::new(
                self.catalogs.clone(),
                Arc::clone(&self.caches),
            ),
        ));
        Ok(ctx)
    }
}

/// The only namespace of catalog `name`, if it holds exactly one (`None` also when listing
/// fails: a catalog that is down must not stop the start).
async fn only_namespace(catalogs: &Catalogs, name: &str) -> Option<String> {
    let catalog = catalogs.get(name).ok()?;
    let mut namespaces = catalog.list_namespaces(None).await.ok()?;
    match namespaces.len() {
        1 => {
            let ns = namespaces.pop()?;
            // A parent with children (`a` of `a.b`) is not a place for tables of its own.
            let children = catalog.list_namespaces(Some(&ns)).await.ok()?;
            children.is_empty().then(|| ns.join("."))
        }
        _ => None,
    }
}

/// `builder` (with DataFusion's default features) with the engine's corrections of DataFusion's
/// semantics: floats compare, join and group as SQL says (`float_semantics.rs`, case c12; its
/// rule after every other optimizer rule, so add those first) and the function its plans call;
/// SQL type names read as the standard and the clients' dialects mean them (`sql/types.rs`).
/// For any DataFusion session of ours that plans or runs queries: Flight SQL and `iceflight
/// sql` sessions, workers, the bench's raw-Parquet engine, tests.
pub fn with_engine_semantics(builder: SessionStateBuilder) -> SessionStateBuilder {
    let mut builder = builder
        .with_optimizer_rule(Arc::new(crate::float_semantics::FloatSemantics))
        .with_type_planner(Arc::new(crate::sql::types::SqlTypes));
    builder
        .scalar_functions()
        .get_or_insert_with(Vec::new)
        .push(crate::float_semantics::canonical_float());
    builder
}

/// iceflight's default of `datafusion.optimizer.hash_join_inlist_pushdown_max_distinct_values`
/// (DataFusion's is 150): the largest build side, in distinct keys per partition, whose keys
/// reach the probe-side scan as an IN list rather than a hash-table lookup
/// (`bench/reports/issue32-progress-20261204.md`).
pub const INLIST_PUSHDOWN_MAX_DISTINCT_VALUES: usize = 1024;

/// A physical optimizer rule, as DataFusion's session builder takes them.
pub type PhysicalRule =
    Arc<dyn datafusion::physical_optimizer::PhysicalOptimizerRule + Send + Sync>;

/// DataFusion's physical optimizer rules, then the engine's corrections of them
/// ([`NullSafeJoinFilters`](iceflight_optimizer::join_filters::NullSafeJoinFilters)): the rules for any
/// DataFusion session of ours, whatever its tables (the bench's raw-Parquet engine, tests).
pub fn engine_physical_optimizer_rules() -> Vec<PhysicalRule> {
    let mut rules = datafusion::physical_optimizer::optimizer::PhysicalOptimizer::new().rules;
    // First, so that no rule trusts a constant of an outer join's null-extended side.
    rules.insert(
        0,
        Arc::new(iceflight_optimizer::outer_join_constants::OuterJoinConstants),
    );
    // While each final aggregate still sits on its partial one, before the repartition
    // between them hashes their group columns.
    let at = rules
        .iter()
        .position(|r| r.name() == "EnforceDistribution")
        .unwrap_or(0);
    rules.insert(
        at,
        Arc::new(iceflight_optimizer::constant_group_keys::ConstantGroupKeys),
    );
    rules.push(Arc::new(
        iceflight_optimizer::join_filters::NullSafeJoinFilters,
    ));
    rules
}
