//! [`IcebergScanExec`]: our leaf operator reading planned Iceberg `FileScanTask`s.
//!
//! ```text
//!   partition i ──► bounded wait for incomplete dynamic filters (first task only)
//!               ──► tasks[i], each when the stream reaches it:
//!                     domains = static ∧ dynamic (domain_cache.rs, per generation)
//!                     gate.rs: skip / manifest bounds / footer row groups / reader predicate
//!               ──► iceberg ArrowReader (field-id projection, positional deletes, partition
//!                   constants, NULL for missing columns) ──► equality deletes (null-safe)
//!               ──► output schema ──► limit
//! ```
//!
//! Tasks are planned by [`crate::IcebergTableProvider::scan`] and spread over the output
//! partitions by size. Each task is opened only when the stream reaches it, so dynamic filters
//! that complete later still prune later files.

use std::fmt;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::{DataFusionError, Result, Statistics, internal_err};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt, stream};
use iceberg::expr::{Bind, Predicate};
use iceberg::scan::FileScanTask;
use iceberg::spec::DataContentType;
use iceberg::table::Table;
use parquet::file::metadata::ParquetMetaData;

use crate::block_cache::store_prefix;
use crate::caches::ScanCaches;
use crate::columns::{ColumnResolver, ScanColumns};
use crate::domain::{Domains, normalize};
use crate::domain_cache::DomainCache;
use crate::equality_deletes::{self, DeleteKeys, DeleteKeysCache};
use crate::gate::{Gate, GateColumn};
use crate::io_scope::{ScanIo, Scoped};
use crate::prune::{BoundsByFile, FileBounds, may_match};
use crate::row_groups;
use crate::struct_evolution;
use datafusion::common::config::ConfigOptions;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::DynamicFilterPhysicalExpr;
use datafusion::physical_expr_common::physical_expr::is_dynamic_physical_expr;
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown,
};
use datafusion::physical_plan::metrics::Time;
use std::time::{Duration, Instant};

/// Reads Iceberg data files with iceberg's `ArrowReader`, one output partition per task group.
///
/// Output columns are `schema` (a projection of the table's current schema); `field_ids[i]` is the
/// iceberg field id of output column `i`.
#[derive(Debug, Clone)]
pub struct IcebergScanExec {
    table: Table,
    schema: SchemaRef,
    field_ids: Vec<i32>,
    /// Arrow types of every top-level field of the current schema, by field id (for delete keys).
    field_types: Arc<Vec<(i32, DataType)>>,
    file_groups: Arc<Vec<Vec<FileScanTask>>>,
    /// `file_groups` as planned, before static domains dropped files.
    unpruned_file_groups: Arc<Vec<Vec<FileScanTask>>>,
    /// The static predicate used for manifest and partition pruning (display only).
    predicate: Option<Arc<Predicate>>,
    /// Live data files in the snapshot before planning.
    snapshot_files: usize,
    limit: Option<usize>,
    batch_size: usize,
    statistics: Arc<Vec<Arc<Statistics>>>,
    total_statistics: Arc<Statistics>,
    delete_keys: Arc<DeleteKeysCache>,
    /// Dynamic filters pushed by joins, TopK and aggregates (kept so their producers compute
    /// them: `HashJoinExec` checks `is_used()`), in output-schema column indices.
    dynamic_filters: Vec<Arc<dyn PhysicalExpr>>,
    /// `dynamic_filters` as domains, cached per generation; shared by all partitions.
    dynamic_domains: Option<Arc<DomainCache>>,
    /// What the plan above proves about NULL in `dynamic_filters` (case c04).
    dynamic_nulls: DynamicNulls,
    /// Prune with `dynamic_filters` (`iceflight.scan.dynamic_filter_pruning`).
    dynamic_pruning: bool,
    /// `iceflight.scan.dynamic_filter_wait`.
    dynamic_filter_wait: Duration,
    /// Static filters pushed by the parent (answered `No`: still evaluated above).
    static_filters: Vec<Arc<dyn PhysicalExpr>>,
    /// `static_filters` as domains (SQL WHERE semantics: NULL never passes a comparison).
    static_domains: Arc<Domains>,
    /// Files dropped at planning because their manifest bounds fail `static_domains`.
    files_pruned_statistics: usize,
    /// Files `plan_files` returned (before `files_pruned_statistics`).
    manifest_planned_files: usize,
    /// The columns filters can constrain: output columns, then nested struct leaves.
    columns: Arc<ScanColumns>,
    /// Which domain parts reach which pruning layer.
    gate: Arc<Gate>,
    /// Manifest bounds of the constrainable columns, by data file path.
    file_bounds: Arc<BoundsByFile>,
    metrics: ExecutionPlanMetricsSet,
    cache: Arc<PlanProperties>,
}

/// Everything the provider decided while planning; input to [`IcebergScanExec::new`].
#[derive(Debug)]
pub struct PlannedScan {
    /// The table, at the snapshot that was planned.
    pub table: Table,
    /// Output schema.
    pub schema: SchemaRef,
    /// Iceberg field id per output column.
    pub field_ids: Vec<i32>,
    /// `(field id, Arrow type)` of every top-level column of the current schema.
    pub field_types: Vec<(i32, DataType)>,
    /// Tasks per output partition (at least one group, possibly empty).
    pub file_groups: Vec<Vec<FileScanTask>>,
    /// Static predicate handed to `plan_files`.
    pub predicate: Option<Predicate>,
    /// Live data files in the snapshot.
    pub snapshot_files: usize,
    /// Row limit per partition.
    pub limit: Option<usize>,
    /// Rows per output batch.
    pub batch_size: usize,
    /// Statistics per partition (same length as `file_groups`).
    pub statistics: Vec<Statistics>,
    /// Statistics of the whole scan.
    pub total_statistics: Statistics,
    /// Manifest bounds of the output columns, by data file path.
    pub file_bounds: BoundsByFile,
    /// `iceflight.scan.dynamic_filter_pruning`.
    pub dynamic_pruning: bool,
    /// `iceflight.scan.dynamic_filter_wait`.
    pub dynamic_filter_wait: Duration,
    /// `iceflight.scan.reader_predicate`.
    pub reader_predicate: bool,
    /// The columns filters can constrain (`columns.rs`).
    pub columns: ScanColumns,
    /// Per column of `columns`: names, types and layout for the gate.
    pub gate_columns: Vec<GateColumn>,
}

impl IcebergScanExec {
    /// Builds the operator from a planned scan.
    pub fn new(plan: PlannedScan) -> Self {
        let partitions = plan.file_groups.len().max(1);
        let cache = Arc::new(Self::compute_properties(
            Arc::clone(&plan.schema),
            partitions,
        ));
        let mut exec = Self {
            table: plan.table,
            schema: plan.schema,
            field_ids: plan.field_ids,
            field_types: Arc::new(plan.field_types),
            unpruned_file_groups: Arc::new(plan.file_groups.clone()),
            file_groups: Arc::new(plan.file_groups),
            predicate: plan.predicate.map(Arc::new),
            snapshot_files: plan.snapshot_files,
            limit: plan.limit,
            batch_size: plan.batch_size,
            statistics: Arc::new(plan.statistics.into_iter().map(Arc::new).collect()),
            total_statistics: Arc::new(plan.total_statistics),
            delete_keys: Arc::new(DeleteKeysCache::default()),
            dynamic_filters: vec![],
            dynamic_domains: None,
            dynamic_nulls: DynamicNulls::Unproven,
            dynamic_pruning: plan.dynamic_pruning,
            dynamic_filter_wait: plan.dynamic_filter_wait,
            static_filters: vec![],
            static_domains: Arc::new(Domains::all()),
            files_pruned_statistics: 0,
            manifest_planned_files: 0,
            gate: Arc::new(Gate::new(
                plan.gate_columns,
                DEFAULT_INLIST_CAP,
                plan.reader_predicate,
            )),
            file_bounds: Arc::new(plan.file_bounds),
            columns: Arc::new(plan.columns),
            metrics: ExecutionPlanMetricsSet::new(),
            cache,
        };
        exec.manifest_planned_files = exec.planned_files();
        exec
    }

    /// Drops the tasks whose files' manifest bounds fail the static domains (all of them when
    /// the domains are false): the scan is then empty and opens no file.
    fn prune_statically(&mut self) {
        let before = self.planned_files();
        let domains = Arc::clone(&self.static_domains);
        let bounds = Arc::clone(&self.file_bounds);
        let groups: Vec<Vec<FileScanTask>> = self
            .file_groups
            .iter()
            .map(|g| {
                g.iter()
                    .filter(|t| {
                        domains.columns.is_some()
                            && bounds
                                .get(&t.data_file_path)
                                .is_none_or(|b| may_match(&domains, b))
                    })
                    .cloned()
                    .collect()
            })
            .collect();
        self.file_groups = Arc::new(groups);
        let pruned = before - self.planned_files();
        // Statistics still count the dropped files; they are all `Inexact` (metrics_index.rs).
        self.files_pruned_statistics += pruned;
    }

    /// The latest dynamic domains (after execution: what the last task saw).
    fn latest_dynamic_domains(&self) -> Option<Arc<Domains>> {
        self.dynamic_domains.as_ref().and_then(|c| c.latest())
    }

    /// `name: layout → decision` for each column constrained by `domains`, at plan level.
    fn describe_gate(&self, domains: &Domains) -> String {
        let columns = self.gate.gate_columns();
        self.gate
            .decide(domains, None, &[], true)
            .iter()
            .map(|(i, use_)| {
                let c = &columns[*i];
                format!("{}: {} → {use_}", c.column.name, c.layout)
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn compute_properties(schema: SchemaRef, partitions: usize) -> PlanProperties {
        PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        )
    }

    /// The same scan without the dynamic-filter wait, or `None` when it has no wait to clear
    /// (see [`crate::DynamicFilterRule`]).
    pub fn without_dynamic_filter_wait(&self) -> Option<Arc<dyn ExecutionPlan>> {
        if self.dynamic_filter_wait.is_zero() || self.dynamic_filters.is_empty() {
            return None;
        }
        let mut new = self.clone();
        new.dynamic_filter_wait = Duration::ZERO;
        Some(Arc::new(new))
    }

    /// The same scan with `nulls` proven for its dynamic filters (by
    /// [`crate::DynamicFilterRule`]); `None` when it has none or nothing changes.
    pub fn with_dynamic_nulls(&self, nulls: DynamicNulls) -> Option<Arc<dyn ExecutionPlan>> {
        let cache = self.dynamic_domains.as_ref()?;
        if self.dynamic_nulls == nulls {
            return None;
        }
        let mut new = self.clone();
        new.dynamic_nulls = nulls;
        new.dynamic_domains = Some(Arc::new(DomainCache::new(
            new.dynamic_filters.clone(),
            Arc::clone(&new.columns) as Arc<dyn ColumnResolver>,
            cache.cap(),
            nulls != DynamicNulls::Rejected,
        )));
        if nulls == DynamicNulls::Unproven {
            new.dynamic_filter_wait = Duration::ZERO;
        }
        new.metrics = ExecutionPlanMetricsSet::new();
        Some(Arc::new(new))
    }

    /// The same scan using none of its pushed filters: static domains reset (the files they
    /// dropped restored) and dynamic filters unused; `None` when it has none. For scans whose
    /// rows NULL keys matter to beyond the filters' SQL semantics (under a null-aware anti join,
    /// where one NULL in `NOT IN`'s subquery empties the result; [`crate::DynamicFilterRule`]).
    /// The filters are still evaluated above: every pushed filter was answered `No`.
    pub fn without_pushed_filters(&self) -> Option<Arc<dyn ExecutionPlan>> {
        if self.static_filters.is_empty() && self.dynamic_filters.is_empty() {
            return None;
        }
        let mut new = self.clone();
        new.file_groups = Arc::clone(&self.unpruned_file_groups);
        new.static_filters.clear();
        new.static_domains = Arc::new(Domains::all());
        new.files_pruned_statistics = 0;
        new.dynamic_nulls = DynamicNulls::Unproven;
        new.dynamic_filter_wait = Duration::ZERO;
        new.metrics = ExecutionPlanMetricsSet::new();
        Some(Arc::new(new))
    }

    /// Tasks per output partition.
    pub fn file_groups(&self) -> &[Vec<FileScanTask>] {
        &self.file_groups
    }

    /// The identifier of the scanned table.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Distinct data files planned (a file split into byte ranges counts once).
    fn planned_files(&self) -> usize {
        let paths: std::collections::HashSet<&str> = self
            .file_groups
            .iter()
            .flatten()
            .map(|t| t.data_file_path.as_str())
            .collect();
        paths.len()
    }

    fn planned_tasks(&self) -> usize {
        self.file_groups.iter().map(Vec::len).sum()
    }
}

impl DisplayAs for IcebergScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let columns: Vec<&str> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "IcebergScanExec: table={}, files={}/{}, tasks={}, partitions={}, projection=[{}]",
                    self.table.identifier(),
                    self.planned_files(),
                    self.snapshot_files,
                    self.planned_tasks(),
                    self.file_groups.len(),
                    columns.join(", ")
                )?;
                if let Some(p) = &self.predicate {
                    write!(f, ", predicate=[{p}]")?;
                }
                if let Some(l) = self.limit {
                    write!(f, ", limit={l}")?;
                }
                if !self.static_filters.is_empty() {
                    write!(
                        f,
                        ", static_domains=[{}], gate=[{}]",
                        self.static_domains.describe(self.columns.as_ref()),
                        self.describe_gate(&self.static_domains)
                    )?;
                    if self.files_pruned_statistics > 0 {
                        write!(
                            f,
                            ", files_pruned_statistics={}",
                            self.files_pruned_statistics
                        )?;
                    }
                }
                if !self.dynamic_filters.is_empty() {
                    write!(f, ", dynamic_filters={}", self.dynamic_filters.len())?;
                    // Pruning off (or unproven) skips the wait as well: nothing uses the filters.
                    if !self.dynamic_pruning {
                        write!(f, " (pruning off)")?;
                    } else if self.dynamic_nulls == DynamicNulls::Unproven {
                        write!(f, " (not used: NULL handling not proven, case c04)")?;
                    } else {
                        write!(
                            f,
                            " (pruning on, wait {})",
                            crate::options::format_duration(self.dynamic_filter_wait)
                        )?;
                    }
                    if let Some(d) = self.latest_dynamic_domains() {
                        write!(
                            f,
                            ", dynamic_domains=[{}], dynamic_gate=[{}]",
                            d.describe(self.columns.as_ref()),
                            self.describe_gate(&d)
                        )?;
                    }
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "table={}", self.table.identifier())?;
                write!(f, "files={}", self.planned_files())
            }
        }
    }
}

impl ExecutionPlan for IcebergScanExec {
    fn name(&self) -> &'static str {
        "IcebergScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !children.is_empty() {
            return internal_err!("IcebergScanExec has no children");
        }
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let Some(tasks) = self.file_groups.get(partition).cloned().or_else(|| {
            // An empty scan still has one (empty) partition.
            (partition == 0 && self.file_groups.is_empty()).then(Vec::new)
        }) else {
            return internal_err!("IcebergScanExec: invalid partition {partition}");
        };
        let metrics = ScanMetrics::new(&self.metrics, partition);
        if partition == 0 {
            metrics.files_pruned_manifest.add(
                self.snapshot_files
                    .saturating_sub(self.manifest_planned_files),
            );
            metrics
                .files_pruned_statistics
                .add(self.files_pruned_statistics);
        }
        let dynamic = self
            .dynamic_domains
            .as_ref()
            .filter(|_| self.dynamic_pruning && self.dynamic_nulls != DynamicNulls::Unproven)
            .cloned();
        let opener = Arc::new(TaskOpener {
            table: self.table.clone(),
            schema: Arc::clone(&self.schema),
            field_ids: self.field_ids.clone(),
            field_types: Arc::clone(&self.field_types),
            batch_size: self.batch_size,
            delete_keys: Arc::clone(&self.delete_keys),
            dynamic,
            dynamic_filters: self.dynamic_filters.clone(),
            wait: self.dynamic_filter_wait,
            static_domains: Arc::clone(&self.static_domains),
            gate: Arc::clone(&self.gate),
            file_bounds: Arc::clone(&self.file_bounds),
            metrics: metrics.clone(),
            caches: ScanCaches::of(context.session_config()),
            store_prefix: store_prefix(self.table.file_io().config().props()),
        });
        let batches = stream::iter(tasks.into_iter().enumerate())
            .then(move |(i, task)| {
                let opener = Arc::clone(&opener);
                async move {
                    if i == 0 {
                        opener.wait_for_dynamic_filters().await;
                    }
                    opener.open(task).await
                }
            })
            .try_flatten();
        let batches = Scoped::new(batches.boxed(), metrics.io.clone());
        let limited = limit_stream(batches.boxed(), self.limit);
        let output_rows = metrics.output_rows.clone();
        let counted = limited.inspect_ok(move |b| output_rows.add(b.num_rows()));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            counted,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        Ok(match partition {
            None => Arc::clone(&self.total_statistics),
            Some(p) => self
                .statistics
                .get(p)
                .cloned()
                .unwrap_or_else(|| Arc::new(Statistics::new_unknown(&self.schema))),
        })
    }

    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        let mut new = self.clone();
        new.limit = limit;
        new.metrics = ExecutionPlanMetricsSet::new();
        Some(Arc::new(new))
    }

    fn fetch(&self) -> Option<usize> {
        self.limit
    }

    /// Keeps every dynamic filter offered (their producers only compute filters someone holds)
    /// and compacts the static ones into domains that prune files now (plan-time empty when
    /// nothing can match) and row groups when tasks open. Answers `No` to every filter: the
    /// operators above still evaluate them, so no row is filtered twice by us and the reader's
    /// row filter only ever narrows what they see.
    fn handle_child_pushdown_result(
        &self,
        _phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        let mut dynamic = vec![];
        let mut fixed = vec![];
        let answers = child_pushdown_result
            .parent_filters
            .into_iter()
            .map(|f| {
                if is_dynamic_physical_expr(&f.filter) {
                    dynamic.push(f.filter);
                } else {
                    fixed.push(f.filter);
                }
                PushedDown::No
            })
            .collect();
        let propagation = FilterPushdownPropagation::with_parent_pushdown_result(answers);
        let known: Vec<String> = self.static_filters.iter().map(|f| f.to_string()).collect();
        fixed.retain(|f| !known.contains(&f.to_string()));
        if dynamic.is_empty() && fixed.is_empty() {
            return Ok(propagation);
        }
        let cap = config
            .optimizer
            .hash_join_inlist_pushdown_max_distinct_values;
        let mut new = self.clone();
        new.gate = Arc::new(self.gate.with_cap(cap));
        if !fixed.is_empty() {
            let domains = fixed.iter().fold((*self.static_domains).clone(), |acc, f| {
                acc.and(normalize(f, self.columns.as_ref(), cap, false))
            });
            new.static_filters.extend(fixed);
            new.static_domains = Arc::new(domains);
            new.prune_statically();
        }
        if !dynamic.is_empty() {
            // New producers: what was proven about NULL no longer covers them.
            new.dynamic_nulls = DynamicNulls::Unproven;
            new.dynamic_filters.extend(dynamic);
            new.dynamic_domains = Some(Arc::new(DomainCache::new(
                new.dynamic_filters.clone(),
                Arc::clone(&new.columns) as Arc<dyn ColumnResolver>,
                cap,
                new.dynamic_nulls != DynamicNulls::Rejected,
            )));
        }
        new.metrics = ExecutionPlanMetricsSet::new();
        Ok(propagation.with_updated_node(Arc::new(new)))
    }
}

/// What the plan above a scan proves about NULL in its dynamic filters
/// ([`crate::DynamicFilterRule`]; case c04: a null-equal join's filter, e.g. `false` for an
/// all-NULL build side, would drop probe rows that join).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DynamicNulls {
    /// Nothing proven (a null-equal hash join is above, or the rule did not run): the dynamic
    /// filters prune nothing.
    Unproven,
    /// Producers may include TopK or min/max aggregates (SQL semantics, NULL handled in the
    /// expression): NULL passes every comparison and IN list of the dynamic domains.
    MayPass,
    /// Every producer is an inner hash join with `=` keys: a NULL key never joins, so NULL
    /// passes no dynamic domain.
    Rejected,
}

/// `hash_join_inlist_pushdown_max_distinct_values` default in DataFusion 54.1, used until the
/// session's value arrives with the first pushed filter.
const DEFAULT_INLIST_CAP: usize = 150;

/// Counters of one output partition, shown by `EXPLAIN ANALYZE`.
#[derive(Debug, Clone)]
struct ScanMetrics {
    output_rows: Count,
    files_pruned_manifest: Count,
    files_pruned_statistics: Count,
    files_pruned_dynamic: Count,
    row_groups_pruned: Count,
    dynamic_filter_wait_time: Time,
    predicate_build_time: Time,
    files_opened: Count,
    bytes_scanned: Count,
    footer_bytes_read: Count,
    equality_deleted_rows: Count,
    /// Block-cache traffic: `cache_hit_bytes`, `cache_miss_bytes`, `remote_requests`.
    io: ScanIo,
}

impl ScanMetrics {
    fn new(set: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        Self {
            output_rows: MetricBuilder::new(set).output_rows(partition),
            files_pruned_manifest: MetricBuilder::new(set)
                .counter("files_pruned_manifest", partition),
            files_pruned_statistics: MetricBuilder::new(set)
                .counter("files_pruned_statistics", partition),
            row_groups_pruned: MetricBuilder::new(set).counter("row_groups_pruned", partition),
            dynamic_filter_wait_time: MetricBuilder::new(set)
                .subset_time("dynamic_filter_wait_time", partition),
            predicate_build_time: MetricBuilder::new(set)
                .subset_time("predicate_build_time", partition),
            files_pruned_dynamic: MetricBuilder::new(set)
                .counter("files_pruned_dynamic", partition),
            files_opened: MetricBuilder::new(set).counter("files_opened", partition),
            bytes_scanned: MetricBuilder::new(set).counter("bytes_scanned", partition),
            footer_bytes_read: MetricBuilder::new(set).counter("footer_bytes_read", partition),
            equality_deleted_rows: MetricBuilder::new(set)
                .counter("equality_deleted_rows", partition),
            io: ScanIo {
                cache_hit_bytes: MetricBuilder::new(set).counter("cache_hit_bytes", partition),
                cache_miss_bytes: MetricBuilder::new(set).counter("cache_miss_bytes", partition),
                remote_requests: MetricBuilder::new(set).counter("remote_requests", partition),
            },
        }
    }
}

/// Opens one task at a time: the state shared by the tasks of one partition.
struct TaskOpener {
    table: Table,
    schema: SchemaRef,
    field_ids: Vec<i32>,
    field_types: Arc<Vec<(i32, DataType)>>,
    batch_size: usize,
    delete_keys: Arc<DeleteKeysCache>,
    /// Dynamic domains, `None` when pruning is off or there is no dynamic filter.
    dynamic: Option<Arc<DomainCache>>,
    /// The dynamic filters themselves (for the bounded wait).
    dynamic_filters: Vec<Arc<dyn PhysicalExpr>>,
    wait: Duration,
    static_domains: Arc<Domains>,
    gate: Arc<Gate>,
    file_bounds: Arc<BoundsByFile>,
    metrics: ScanMetrics,
    /// The engine's footer and block caches.
    caches: Arc<ScanCaches>,
    /// The table's store, before each path in those caches' keys.
    store_prefix: String,
}

/// What the gate made of one task.
enum Opened {
    /// Nothing in the task can pass.
    Skip,
    /// Byte-range pieces of the task to read, with the reader's predicate set.
    Read(Vec<FileScanTask>),
}

impl TaskOpener {
    /// Waits up to `wait` for the incomplete dynamic filters to complete (a join's build side
    /// finishing). Filters that only complete when this scan ends (TopK, aggregates) cost the
    /// full wait, hence a bound.
    async fn wait_for_dynamic_filters(&self) {
        if self.dynamic.is_none() || self.wait.is_zero() {
            return;
        }
        let waits: Vec<_> = self
            .dynamic_filters
            .iter()
            .filter(|f| f.is::<DynamicFilterPhysicalExpr>())
            .map(|f| {
                let f = Arc::clone(f);
                async move {
                    if let Some(d) = f.downcast_ref::<DynamicFilterPhysicalExpr>() {
                        d.wait_complete().await;
                    }
                }
            })
            .collect();
        if waits.is_empty() {
            return;
        }
        let _timer = self.metrics.dynamic_filter_wait_time.timer();
        let _ = tokio::time::timeout(self.wait, futures::future::join_all(waits)).await;
    }

    /// The static domains AND the dynamic ones at their current generation.
    fn domains(&self) -> Arc<Domains> {
        let Some(dynamic) = self.dynamic.as_ref().map(|c| c.current()) else {
            return Arc::clone(&self.static_domains);
        };
        match &self.static_domains.columns {
            Some(c) if c.is_empty() => dynamic,
            _ => Arc::new((*self.static_domains).clone().and((*dynamic).clone())),
        }
    }

    /// The key of `path` in the engine's caches.
    fn cache_key(&self, path: &str) -> String {
        format!("{}{path}", self.store_prefix)
    }

    /// The footer of `task`'s data file (cached), counting what reading it cost.
    async fn footer(&self, task: &FileScanTask) -> Result<Arc<ParquetMetaData>> {
        let footer = self
            .caches
            .footers
            .load(
                self.table.file_io(),
                &self.cache_key(&task.data_file_path),
                &task.data_file_path,
                task.file_size_in_bytes,
            )
            .await
            .map_err(external)?;
        self.metrics
            .footer_bytes_read
            .add(footer.bytes_read as usize);
        Ok(footer.metadata)
    }

    /// Applies the gate to `task`: skip it, or the pieces to read with their reader predicate.
    async fn gate(&self, task: FileScanTask) -> Result<Opened> {
        let started = Instant::now();
        let domains = self.domains();
        let no_bounds = FileBounds::new();
        let bounds = self.file_bounds.get(&task.data_file_path);
        if domains.columns.is_none() || bounds.is_some_and(|b| !may_match(&domains, b)) {
            // Static domains alone were applied at planning: what rules the file out now is a
            // dynamic filter.
            self.metrics.files_pruned_dynamic.add(1);
            self.metrics.predicate_build_time.add_elapsed(started);
            return Ok(Opened::Skip);
        }
        let unconstrained = domains.columns.as_ref().is_some_and(|c| c.is_empty());
        if unconstrained {
            return Ok(Opened::Read(vec![task]));
        }
        let mut pieces = None;
        let mut row_group_layouts = vec![];
        let mut row_groups_selected = false;
        // Row groups from the footer; not for files with deletes (positions span the file).
        if self.gate.wants_footer(&domains) && task.deletes.is_empty() {
            let metadata = self.footer(&task).await?;
            let selection =
                row_groups::select(&metadata, &task, &domains, self.gate.gate_columns());
            self.metrics.row_groups_pruned.add(selection.pruned());
            if selection.kept.is_empty() {
                self.metrics.predicate_build_time.add_elapsed(started);
                return Ok(Opened::Skip);
            }
            if selection.pruned() > 0 {
                pieces = Some(row_groups::split(&task, &metadata, &selection.kept));
            }
            row_group_layouts = selection.layouts;
            row_groups_selected = true;
        }
        let decisions = self.gate.decide(
            &domains,
            Some(bounds.unwrap_or(&no_bounds)),
            &row_group_layouts,
            row_groups_selected,
        );
        let predicate = match self.gate.reader_predicate(&domains, &decisions) {
            Some(p) => Some(
                p.bind(Arc::clone(&task.schema), task.case_sensitive)
                    .map_err(external)?,
            ),
            None => None,
        };
        let mut pieces = pieces.unwrap_or_else(|| vec![task]);
        for piece in &mut pieces {
            piece.predicate.clone_from(&predicate);
        }
        self.metrics.predicate_build_time.add_elapsed(started);
        Ok(Opened::Read(pieces))
    }

    async fn open(
        &self,
        task: FileScanTask,
    ) -> Result<futures::stream::BoxStream<'static, Result<RecordBatch>>> {
        if let Some(blocks) = &self.caches.blocks {
            // The manifest knows the size: the cache need not ask the object store.
            blocks.note_size(
                &self.cache_key(&task.data_file_path),
                task.file_size_in_bytes,
            );
        }
        let mut pieces = match self.gate(task).await? {
            Opened::Skip => return Ok(stream::empty().boxed()),
            Opened::Read(pieces) => pieces,
        };
        let mut task = pieces.remove(0);
        // Equality deletes are ours (null-safe); iceberg keeps the positional ones.
        let (equality, positional): (Vec<_>, Vec<_>) = std::mem::take(&mut task.deletes)
            .into_iter()
            .partition(|d| d.file_type == DataContentType::EqualityDeletes);
        task.deletes = positional;

        // Read the output columns, then any key column of an equality delete not among them.
        // With no output column (e.g. `count(*)`), read one column for the row count.
        let mut read_ids = self.field_ids.clone();
        let mut deletes = Vec::with_capacity(equality.len());
        for d in &equality {
            let ids = d.equality_ids.clone().unwrap_or_default();
            let mut types = Vec::with_capacity(ids.len());
            let mut positions = Vec::with_capacity(ids.len());
            for id in &ids {
                let Some((_, ty)) = self.field_types.iter().find(|(fid, _)| fid == id) else {
                    return Err(DataFusionError::NotImplemented(format!(
                        "equality delete on field id {id}, which is not a top-level column of the current schema"
                    )));
                };
                types.push(ty.clone());
                positions.push(match read_ids.iter().position(|r| r == id) {
                    Some(p) => p,
                    None => {
                        read_ids.push(*id);
                        read_ids.len() - 1
                    }
                });
            }
            let keys = self
                .delete_keys
                .get(self.table.file_io(), &d.file_path, &ids, &types)
                .await?;
            deletes.push((keys, positions));
        }
        if read_ids.is_empty()
            && let Some((id, _)) = self.field_types.first()
        {
            read_ids.push(*id);
        }
        task.project_field_ids = read_ids.clone();
        for piece in &mut pieces {
            piece.project_field_ids = read_ids.clone();
        }
        // A struct child added after the file was written: read the file's own shape of the
        // struct and let `to_output` add the child as NULL (struct_evolution.rs).
        let reads_struct = self
            .field_types
            .iter()
            .any(|(id, ty)| matches!(ty, DataType::Struct(_)) && read_ids.contains(id));
        if reads_struct {
            let present = struct_evolution::file_field_ids(&*self.footer(&task).await?);
            if let Some(schema) =
                struct_evolution::schema_for_file(&task.schema, &read_ids, &present)?
            {
                let schema = Arc::new(schema);
                task.schema = Arc::clone(&schema);
                for piece in &mut pieces {
                    piece.schema = Arc::clone(&schema);
                }
            }
        }

        self.metrics.files_opened.add(1);
        let mut builder = self
            .table
            .reader_builder()
            .with_batch_size(self.batch_size)
            .with_data_file_concurrency_limit(1);
        // With our footer in hand, iceberg's reader fetches exactly the footer's bytes.
        if let Some(tail_len) = self
            .caches
            .footers
            .tail_len(&self.cache_key(&task.data_file_path))
        {
            builder = builder.with_metadata_size_hint(tail_len);
        }
        let reader = builder.build();
        let all = std::iter::once(task).chain(pieces).map(Ok);
        let task_stream = Box::pin(stream::iter(all.collect::<Vec<_>>()));
        let result = reader.read(task_stream).map_err(external)?;
        let scan_metrics = result.metrics().clone();
        let bytes_scanned = self.metrics.bytes_scanned.clone();
        let deleted = self.metrics.equality_deleted_rows.clone();
        let schema = Arc::clone(&self.schema);
        let deletes: Arc<Vec<(Arc<DeleteKeys>, Vec<usize>)>> = Arc::new(deletes);
        let batches = result
            .stream()
            .map_err(external)
            .and_then(move |batch| {
                let schema = Arc::clone(&schema);
                let deletes = Arc::clone(&deletes);
                let deleted = deleted.clone();
                async move {
                    let before = batch.num_rows();
                    let batch = equality_deletes::apply(batch, &deletes)?;
                    deleted.add(before - batch.num_rows());
                    to_output(batch, &schema)
                }
            })
            .chain(stream::once(async move {
                bytes_scanned.add(scan_metrics.bytes_read() as usize);
                Ok(None)
            }))
            .try_filter_map(|b| async move { Ok(b) });
        Ok(batches.boxed())
    }
}

/// Keeps the first `schema.fields().len()` columns (extra ones were read for delete keys) under
/// the output schema, casting where the reader's Arrow type differs (e.g. a promoted type).
fn to_output(batch: RecordBatch, schema: &SchemaRef) -> Result<Option<RecordBatch>> {
    let columns = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, col)| struct_evolution::align(col, field.data_type()))
        .collect::<Result<Vec<ArrayRef>>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(Some(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        columns,
        &options,
    )?))
}

/// Stops after `limit` rows (slicing the last batch).
fn limit_stream(
    input: futures::stream::BoxStream<'static, Result<RecordBatch>>,
    limit: Option<usize>,
) -> futures::stream::BoxStream<'static, Result<RecordBatch>> {
    let Some(limit) = limit else { return input };
    stream::unfold((input, limit), |(mut input, remaining)| async move {
        if remaining == 0 {
            return None;
        }
        match input.next().await? {
            Ok(batch) => {
                let take = batch.num_rows().min(remaining);
                Some((Ok(batch.slice(0, take)), (input, remaining - take)))
            }
            Err(e) => Some((Err(e), (input, 0))),
        }
    })
    .boxed()
}

fn external(e: iceberg::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
