//! [`IcebergScanExec`]: our leaf operator reading planned Iceberg `FileScanTask`s.
//!
//! ```text
//!   partition i ──► bounded wait for incomplete dynamic filters (first task only)
//!               ──► tasks[i], each when the stream reaches it (opener.rs):
//!                     domains = static ∧ dynamic (domain_cache.rs, per generation)
//!                     bounds, footer row groups, pages, deletes ──► native reader
//!                     (native_reader.rs; iceberg's ArrowReader for what it does not cover)
//!               ──► equality deletes (null-safe) ──► output ──► live row filter (row_filter.rs)
//!               ──► limit
//! ```
//!
//! Tasks are planned by [`crate::IcebergTableProvider::scan`] and spread over the output
//! partitions by size. Each task is opened only when the stream reaches it, so dynamic filters
//! that complete later still prune later files.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::{Result, Statistics, internal_err};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_expr_common::physical_expr::is_dynamic_physical_expr;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown,
};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt, stream};
use iceberg::expr::Predicate;
use iceberg::scan::FileScanTask;
use iceberg::table::Table;

use crate::block_cache::store_prefix;
use crate::caches::ScanCaches;
use crate::columns::{ColumnResolver, ScanColumns};
use crate::domain::{Domains, normalize};
use crate::domain_cache::DomainCache;
use crate::equality_deletes::DeleteKeysCache;
use crate::gate::{Gate, GateColumn};
use crate::io_scope::Scoped;
use crate::metrics::ScanMetrics;
use crate::opener::TaskOpener;
use crate::options::ScanReader;
use crate::positional_deletes::PositionalDeletes;
use crate::prune::{BoundsByFile, may_match};
use crate::row_filter::DynamicRowFilter;

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
    /// Positional delete files, each read once per scan.
    positional: Arc<PositionalDeletes>,
    /// `iceflight.scan.reader`.
    reader: ScanReader,
    /// `iceflight.scan.dynamic_row_filter`.
    dynamic_row_filter: bool,
    /// `iceflight.scan.late_materialization`.
    late_materialization: bool,
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
    /// `iceflight.scan.reader`.
    pub reader: ScanReader,
    /// `iceflight.scan.dynamic_row_filter`.
    pub dynamic_row_filter: bool,
    /// `iceflight.scan.late_materialization`.
    pub late_materialization: bool,
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
            positional: Arc::new(PositionalDeletes::default()),
            reader: plan.reader,
            dynamic_row_filter: plan.dynamic_row_filter,
            late_materialization: plan.late_materialization,
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
        let row_filter = (self.dynamic_row_filter
            && self.dynamic_pruning
            && self.dynamic_nulls != DynamicNulls::Unproven)
            .then(|| {
                DynamicRowFilter::new(
                    self.dynamic_filters.clone(),
                    metrics.dynamic_rows_dropped.clone(),
                    metrics.dynamic_rows_evaluated.clone(),
                )
            })
            .flatten()
            .map(Arc::new);
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
            reader: self.reader,
            positional: Arc::clone(&self.positional),
            row_filter,
            late_materialization: self.late_materialization,
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
        // Both pushdown phases offer the static filters again: keep each once.
        fixed.retain(|f| {
            !self
                .static_filters
                .iter()
                .any(|known| known.as_ref() == f.as_ref())
        });
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
