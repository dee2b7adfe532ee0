//! Builds DataFusion sessions over the configured catalogs and runs SQL text.
//!
//! ```text
//!   Config ──► Engine::connect (catalogs) ──► Engine::session ──► SessionContext
//!   SQL text ──► DFParser (one or more statements) ──► plan ──► execute ──► batches
//! ```

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::DFParser;
use iceflight_catalog::{CatalogError, Catalogs};
use iceflight_scan::IceflightOptions;

use crate::config::{Config, ConfigError};

/// Connected catalogs plus the settings every session starts from.
#[derive(Debug, Clone)]
pub struct Engine {
    config: Config,
    default_catalog: String,
    catalogs: Catalogs,
    runtime: Arc<RuntimeEnv>,
}

/// Why an [`Engine`] could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A catalog failed to connect.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

impl Engine {
    /// Connects every catalog of `config`.
    pub async fn connect(config: Config) -> Result<Self, EngineError> {
        config.validate()?;
        let default_catalog = config.effective_default_catalog()?;
        let mut runtime = RuntimeEnvBuilder::new();
        if let Some(limit) = &config.query.memory_limit {
            let bytes = iceflight_catalog::load::parse_size(limit)?;
            runtime = runtime.with_memory_limit(bytes, 1.0);
        }
        let runtime = runtime
            .build_arc()
            .map_err(|e| ConfigError::Invalid(format!("query runtime: {e}")))?;
        let catalogs = Catalogs::connect(&config.effective_catalogs()).await?;
        Ok(Self {
            config,
            default_catalog,
            catalogs,
            runtime,
        })
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
        let catalog = catalog.unwrap_or(&self.default_catalog);
        self.catalogs
            .get(catalog)
            .map_err(|e| DataFusionError::Plan(e.to_string()))?;
        let schema = schema.unwrap_or(&self.config.default_schema);
        let target_partitions = match self.config.query.target_partitions {
            0 => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            n => n,
        };
        let mut config = SessionConfig::new()
            .with_information_schema(true)
            .with_create_default_catalog_and_schema(false)
            .with_default_catalog_and_schema(catalog, schema)
            .with_target_partitions(target_partitions)
            .with_batch_size(self.config.query.batch_size.max(1))
            .with_option_extension(IceflightOptions::default());
        for (k, v) in settings {
            config.options_mut().set(k, v)?;
        }
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(Arc::clone(&self.runtime))
            .with_default_features()
            .with_physical_optimizer_rules(physical_optimizer_rules())
            .build();
        let ctx = SessionContext::new_with_state(state);
        self.catalogs.register(&ctx);
        ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(
            crate::invalidate::InvalidateCache::new(self.catalogs.clone()),
        ));
        Ok(ctx)
    }
}

/// The result of one statement.
#[derive(Debug)]
pub struct StatementResult {
    /// Output schema (empty for DDL).
    pub schema: SchemaRef,
    /// Output rows.
    pub batches: Vec<RecordBatch>,
}

/// Parses `sql` (one or more `;`-separated statements) and runs each in order, stopping at the
/// first error.
pub async fn run_sql(ctx: &SessionContext, sql: &str) -> Result<Vec<StatementResult>> {
    let statements = DFParser::parse_sql(sql)?;
    if statements.is_empty() {
        return Err(DataFusionError::Plan("no SQL statement given".into()));
    }
    let mut out = Vec::with_capacity(statements.len());
    for statement in statements {
        let plan = ctx.state().statement_to_plan(statement).await?;
        let df = ctx.execute_logical_plan(plan).await?;
        let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
        let batches = df.collect().await?;
        out.push(StatementResult { schema, batches });
    }
    Ok(out)
}

/// DataFusion's physical optimizer rules, then iceflight's [`DynamicFilterRule`] (it needs
/// the dynamic filters in place, which the last filter-pushdown pass puts there).
fn physical_optimizer_rules()
-> Vec<Arc<dyn datafusion::physical_optimizer::PhysicalOptimizerRule + Send + Sync>> {
    let mut rules = datafusion::physical_optimizer::optimizer::PhysicalOptimizer::new().rules;
    rules.push(Arc::new(iceflight_scan::DynamicFilterRule));
    rules
}
