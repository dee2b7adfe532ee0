//! [`IcebergScanExec`]: our leaf operator reading planned Iceberg `FileScanTask`s.
//!
//! ```text
//!   partition i ──► bounded wait for incomplete dynamic filters (first task only)
//!               ──► tasks[i], each when the stream reaches it (read/opener.rs):
//!                     domains = static ∧ dynamic (pushdown/domain_cache.rs, per generation)
//!                     bounds, footer row groups, pages, deletes ──► native reader
//!                     (read/access_plan.rs, read/native_reader.rs; iceberg's ArrowReader for
//!                     what the native reader does not cover)
//!               ──► equality deletes (null-safe) ──► output
//!               ──► live row filter (pushdown/row_filter.rs)
//!               ──► limit
//! ```
//!
//! Tasks are planned by `ScanPlanner` (`plan/planner.rs`, for `IcebergTableProvider::scan`) and
//! spread over the output partitions by size (`plan/planned.rs`). Each task is opened only when
//! the stream reaches it, so dynamic filters that complete later still prune later files.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, new_null_array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::stats::Precision;
use datafusion::common::{Result, Statistics, internal_err};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_expr_common::physical_expr::{is_dynamic_physical_expr, is_volatile};
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

use crate::model::columns::{ColumnResolver, ScanColumns};
use crate::model::literal::{identity_partition_value, literal_scalar};
use crate::plan::metrics_index::FileMetricsIndex;
use crate::plan::planned::{PlannedScan, ScanInputs};
use crate::pushdown::domain::{Domains, normalize};
use crate::pushdown::domain_cache::DomainCache;
use crate::pushdown::gate::Gate;
use crate::pushdown::prune::{BoundsByFile, may_match};
use crate::pushdown::row_filter::{FilterKind, RowFilterCounters, ScanRowFilter};
use crate::read::caches::ScanCaches;
use crate::read::deletes::equality_deletes::DeleteKeysCache;
use crate::read::deletes::positional_deletes::PositionalDeletes;
use crate::read::metrics::ScanMetrics;
use crate::read::opener::TaskOpener;
use crate::read::table_access::{AccessRecorder, LazyRecorder, TableAccessLog, layout_advice};
use iceflight_cache::block_cache::store_prefix;
use iceflight_cache::io_scope::Scoped;
use iceflight_options::ScanSettings;

/// Reads the planned tasks of one Iceberg table scan, one output partition per task group: with
/// our native Parquet reader (`read/native_reader.rs`, the default), with iceberg's `ArrowReader`
/// for the files it does not cover or when `iceflight.scan.reader = iceberg`.
///
/// Output columns are `schema` (a projection of the table's current schema); `field_ids[i]` is the
/// iceberg field id of output column `i`.
#[derive(Debug, Clone)]
pub struct IcebergScanExec {
    table: Table,
    /// The configured catalog the table was loaded from (`codec.rs` names it to workers).
    catalog: Option<String>,
    /// Manifest metrics of the planned snapshot (statistics and splits of re-planned groups).
    index: Arc<FileMetricsIndex>,
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
    /// The `iceflight.scan.*` settings of the session that planned the scan; the dynamic
    /// filter wait is cleared where nothing is worth waiting for.
    settings: ScanSettings,
    /// Dynamic filters pushed by joins, TopK and aggregates (kept so their producers compute
    /// them: `HashJoinExec` checks `is_used()`), in output-schema column indices.
    dynamic_filters: Vec<Arc<dyn PhysicalExpr>>,
    /// `dynamic_filters` as domains, cached per generation; shared by all partitions.
    dynamic_domains: Option<Arc<DomainCache>>,
    /// What the plan above proves about NULL in `dynamic_filters` (case c04).
    dynamic_nulls: DynamicNulls,
    /// Static filters pushed by the parent (answered `No`: still evaluated above).
    static_filters: Vec<Arc<dyn PhysicalExpr>>,
    /// `static_filters` as domains (SQL WHERE semantics: NULL never passes a comparison).
    static_domains: Arc<Domains>,
    /// Files dropped at planning because their manifest bounds fail `static_domains`.
    files_pruned_statistics: usize,
    /// Files `plan_files` returned (before `files_pruned_statistics`).
    manifest_planned_files: usize,
    /// `hash_join_inlist_pushdown_max_distinct_values` of the session that pushed filters.
    inlist_cap: usize,
    /// Dynamic filters a worker dropped because their producer runs in another stage
    /// ([`Self::relink_dynamic_filters`]).
    remote_dynamic_filters: usize,
    /// The columns filters can constrain: output columns, then nested struct leaves.
    columns: Arc<ScanColumns>,
    /// Which domain parts reach which pruning layer.
    gate: Arc<Gate>,
    /// Manifest bounds of the constrainable columns, by data file path.
    file_bounds: Arc<BoundsByFile>,
    /// Output positions of string columns that leave the scan as `Dictionary(Int32, Utf8)`
    /// ([`Self::with_dictionary_columns`]); empty: every column has its table type.
    dictionary_columns: Arc<Vec<usize>>,
    metrics: ExecutionPlanMetricsSet,
    /// Records the scan in the engine's workload log once executed (`table_access.rs`); fresh
    /// for each built scan.
    recorder: LazyRecorder,
    /// The engine's workload log, for the layout advice `EXPLAIN VERBOSE` shows.
    access: Option<Arc<TableAccessLog>>,
    cache: Arc<PlanProperties>,
}

impl IcebergScanExec {
    /// Builds the operator from a planned scan (the same as
    /// `IcebergScanExecBuilder::new(plan).build()`).
    pub fn new(plan: PlannedScan) -> Self {
        IcebergScanExecBuilder::new(plan).build()
    }

    /// A builder starting from this scan: every scan derived from another goes through
    /// [`IcebergScanExecBuilder::build`].
    pub fn builder(&self) -> IcebergScanExecBuilder {
        IcebergScanExecBuilder { scan: self.clone() }
    }

    /// The scan declared for another process ([`ScanDescription`]).
    pub fn description(&self) -> ScanDescription {
        ScanDescription {
            inputs: ScanInputs {
                table: self.table.clone(),
                catalog: self.catalog.clone(),
                schema: Arc::clone(&self.schema),
                field_ids: self.field_ids.clone(),
                field_types: self.field_types.to_vec(),
                predicate: self.predicate.as_deref().cloned(),
                limit: self.limit,
                batch_size: self.batch_size,
                settings: self.settings,
            },
            file_groups: self.file_groups.to_vec(),
            pushed: PushedFilters {
                fixed: self.static_filters.clone(),
                dynamic: self.dynamic_filters.clone(),
                inlist_cap: self.inlist_cap,
                nulls: self.dynamic_nulls,
            },
            files_pruned_manifest: self.files_pruned_manifest(),
            files_pruned_statistics: self.files_pruned_statistics,
        }
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

    fn compute_properties(schema: SchemaRef, partitions: usize) -> PlanProperties {
        PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        )
    }

    /// The same scan without the dynamic-filter wait, or `None` when it has no wait to clear
    /// (see `DynamicFilterRule`, `exec/dynamic_filter_rule.rs`).
    pub fn without_dynamic_filter_wait(&self) -> Option<Arc<dyn ExecutionPlan>> {
        if self.settings.dynamic_filter_wait.is_zero() || self.dynamic_filters.is_empty() {
            return None;
        }
        Some(Arc::new(
            self.builder()
                .with_dynamic_filter_wait(Duration::ZERO)
                .build(),
        ))
    }

    /// The same scan with `nulls` proven for its dynamic filters (by `DynamicFilterRule`);
    /// `None` when it has none or nothing changes.
    pub fn with_dynamic_nulls(&self, nulls: DynamicNulls) -> Option<Arc<dyn ExecutionPlan>> {
        self.dynamic_domains.as_ref()?;
        if self.dynamic_nulls == nulls {
            return None;
        }
        Some(Arc::new(self.builder().with_dynamic_nulls(nulls).build()))
    }

    /// The same scan with the `Utf8` columns at output positions `columns` output as
    /// `Dictionary(Int32, Utf8)`: read from the Parquet dictionary pages where every page of a
    /// column chunk is dictionary-encoded (`FilePlan::keep_dictionaries`), else cast; their
    /// statistics keep no bounds. `None` when a position is out of range, not a `Utf8` column,
    /// or read by the scan's own filters (which compare the table's types), or when the scan
    /// has dynamic filters.
    pub fn with_dictionary_columns(&self, columns: &[usize]) -> Option<Self> {
        if !self.dynamic_filters.is_empty() || columns.is_empty() {
            return None;
        }
        let fields = self.schema.fields();
        let filtered: Vec<usize> = self
            .static_filters
            .iter()
            .flat_map(datafusion::physical_expr::utils::collect_columns)
            .map(|c| c.index())
            .collect();
        if columns.iter().any(|&c| {
            fields
                .get(c)
                .is_none_or(|f| f.data_type() != &DataType::Utf8)
                || filtered.contains(&c)
        }) {
            return None;
        }
        Some(self.builder().with_dictionary_columns(columns).build())
    }

    /// The output schema with field ids: `schema`, with [`Self::dictionary_columns`] as
    /// dictionaries.
    fn output_schema(&self) -> SchemaRef {
        if self.dictionary_columns.is_empty() {
            return Arc::clone(&self.schema);
        }
        let fields: Vec<Field> = self
            .schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let f = f.as_ref().clone();
                if self.dictionary_columns.contains(&i) {
                    f.with_data_type(crate::read::native_reader::string_dictionary())
                } else {
                    f
                }
            })
            .collect();
        Arc::new(Schema::new_with_metadata(
            fields,
            self.schema.metadata().clone(),
        ))
    }

    /// Whether it holds dynamic filters.
    pub(crate) fn has_dynamic_filters(&self) -> bool {
        !self.dynamic_filters.is_empty()
    }

    /// The same scan with only the dynamic filters `keep` accepts (a scan shared by several
    /// consumers keeps those of joins inside the shared subtree: `shared_subplan.rs`). What
    /// the plan above proved about NULL in the filters holds for any subset of them. `None`
    /// when every filter is kept.
    pub(crate) fn retaining_dynamic_filters(
        &self,
        keep: impl Fn(&Arc<dyn PhysicalExpr>) -> bool,
    ) -> Option<Self> {
        let kept: Vec<Arc<dyn PhysicalExpr>> = self
            .dynamic_filters
            .iter()
            .filter(|f| keep(f))
            .cloned()
            .collect();
        if kept.len() == self.dynamic_filters.len() {
            return None;
        }
        let builder = self.builder().without_dynamic_filters();
        if kept.is_empty() {
            return Some(builder.build());
        }
        // The NULL proof first, so the filters' domains are built once, with it.
        Some(
            builder
                .with_dynamic_nulls(self.dynamic_nulls)
                .with_linked_dynamic_filters(kept, 0)
                .with_dynamic_filter_wait(self.settings.dynamic_filter_wait)
                .build(),
        )
    }

    /// Whether `other` reads the same rows into the same partitions: the same table at the
    /// same metadata file, snapshot and schema, the same tasks, columns, static filters, limit
    /// and settings (dynamic filters and the wait for them aside).
    pub(crate) fn reads_same_as(&self, other: &Self) -> bool {
        let metadata = |s: &Self| {
            (
                s.table.identifier().clone(),
                s.table.metadata_location().map(str::to_string),
                s.table.metadata().current_snapshot_id(),
                s.table.metadata().current_schema_id(),
            )
        };
        let tasks = |s: &Self| -> Vec<Vec<(String, u64, u64)>> {
            s.file_groups
                .iter()
                .map(|g| {
                    g.iter()
                        .map(|t| (t.data_file_path.clone(), t.start, t.length))
                        .collect()
                })
                .collect()
        };
        metadata(self) == metadata(other)
            && self.catalog == other.catalog
            && self.schema == other.schema
            && self.dictionary_columns == other.dictionary_columns
            && self.field_ids == other.field_ids
            && self.limit == other.limit
            && self.batch_size == other.batch_size
            && ScanSettings {
                dynamic_filter_wait: Duration::ZERO,
                ..self.settings
            } == ScanSettings {
                dynamic_filter_wait: Duration::ZERO,
                ..other.settings
            }
            && self.static_filters.len() == other.static_filters.len()
            && self
                .static_filters
                .iter()
                .zip(&other.static_filters)
                .all(|(a, b)| a.as_ref() == b.as_ref())
            && tasks(self) == tasks(other)
    }

    /// The same scan using none of its pushed filters: static domains reset (the files they
    /// dropped restored) and dynamic filters unused; `None` when it has none. For scans whose
    /// rows NULL keys matter to beyond the filters' SQL semantics (under a null-aware anti join,
    /// where one NULL in `NOT IN`'s subquery empties the result; `DynamicFilterRule`).
    /// The filters are still evaluated above: every pushed filter was answered `No`.
    pub fn without_pushed_filters(&self) -> Option<Arc<dyn ExecutionPlan>> {
        if self.static_filters.is_empty() && self.dynamic_filters.is_empty() {
            return None;
        }
        Some(Arc::new(self.builder().without_pushed_filters().build()))
    }

    /// Files `plan_files` left out of this scan (reported by partition 0).
    pub(crate) fn files_pruned_manifest(&self) -> usize {
        self.snapshot_files
            .saturating_sub(self.manifest_planned_files)
    }

    /// This scan divided among `tasks` distributed tasks (datafusion-distributed's scale-up of
    /// a leaf): one scan per task, each with as many output partitions as this one (the
    /// library requires equal partition counts), the tasks split at row groups so that every
    /// partition of every task has work where the files allow, largest first onto the
    /// lightest group; group `g` goes to task `g % tasks`. The scan-wide counters (files pruned
    /// by manifests and statistics) stay with the first task's scan, so they add up once.
    pub fn split_for_tasks(&self, tasks: usize) -> Vec<IcebergScanExec> {
        let tasks = tasks.max(1);
        let partitions = self.file_groups.len().max(1);
        let slots = partitions * tasks;
        let all: Vec<FileScanTask> = self.file_groups.iter().flatten().cloned().collect();
        let pieces = crate::plan::planned::split_by_row_groups(
            all,
            &self.index,
            slots,
            self.settings.cut_row_groups,
        );
        let mut groups = crate::plan::planned::spread_by_size(pieces, slots);
        groups.resize_with(slots, Vec::new);
        let mut per_task: Vec<Vec<Vec<FileScanTask>>> = vec![Vec::new(); tasks];
        for (g, group) in groups.into_iter().enumerate() {
            per_task[g % tasks].push(group);
        }
        per_task
            .into_iter()
            .enumerate()
            .map(|(i, groups)| self.builder().with_file_groups(groups, i == 0).build())
            .collect()
    }

    /// On a worker: this scan's dynamic filters attached to their producers in the same
    /// decoded plan, `producers` by expression id (what datafusion-proto's deduplicating
    /// converter does; datafusion-distributed 3.0 decodes without it, so every copy of a filter
    /// would otherwise stand alone and never update). A filter whose producer runs in another
    /// stage is dropped: nothing would ever complete it here, and waiting for it would only
    /// delay the scan (the `dynamic_filters_unlinked` counter of EXPLAIN ANALYZE). `None` when
    /// the scan has no dynamic filter.
    pub fn relink_dynamic_filters(
        &self,
        producers: &std::collections::HashMap<u64, Arc<dyn PhysicalExpr>>,
    ) -> Result<Option<Self>> {
        if self.dynamic_filters.is_empty() {
            return Ok(None);
        }
        let mut linked = vec![];
        let mut remote = 0;
        for filter in &self.dynamic_filters {
            let producer = filter.expression_id().and_then(|id| producers.get(&id));
            match producer {
                Some(p) => {
                    let children = filter.children().into_iter().cloned().collect();
                    linked.push(Arc::clone(p).with_new_children(children)?);
                }
                None => remote += 1,
            }
        }
        Ok(Some(
            self.builder()
                .with_linked_dynamic_filters(linked, remote)
                .build(),
        ))
    }

    /// Bytes of the data files' ranges this scan reads before any pruning at execution (what
    /// a distributed plan sizes its tasks by).
    pub fn planned_bytes(&self) -> u64 {
        self.file_groups.iter().flatten().map(|t| t.length).sum()
    }

    /// Tasks per output partition.
    pub fn file_groups(&self) -> &[Vec<FileScanTask>] {
        &self.file_groups
    }

    /// The scanned table, at the snapshot that was planned.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Whether `predicate` (over this scan's output columns) is true for every row the scan
    /// returns: each column it reads is identity-partitioned in every planned file's spec (so
    /// constant within the file, [`identity_partition_value`]; the Iceberg spec makes the
    /// partition value every row's value, and a file that stored other values would break the
    /// table's own partitioning) and the predicate is true, not NULL, on each file's values.
    /// `false` when unsure: a column some file's spec does not partition by identity, a value
    /// that does not convert, a volatile function, no column read, no file planned.
    pub fn proves(&self, predicate: &Arc<dyn PhysicalExpr>) -> bool {
        let columns = collect_columns(predicate);
        let tasks = self.planned_tasks_flat();
        // A volatile predicate (`random()`) is not one value per file.
        if columns.is_empty()
            || tasks.is_empty()
            || !self.dictionary_columns.is_empty()
            || is_volatile(predicate)
        {
            return false;
        }
        // The probe row holds NULL in the columns the predicate does not read, so every
        // field may be NULL there.
        let schema = Arc::new(Schema::new(
            self.output_schema()
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        let proven_on = |task: &FileScanTask| -> Option<bool> {
            let mut arrays: Vec<ArrayRef> = schema
                .fields()
                .iter()
                .map(|f| new_null_array(f.data_type(), 1))
                .collect();
            for c in &columns {
                let field = schema.fields().get(c.index())?;
                let id = *self.field_ids.get(c.index())?;
                arrays[c.index()] = match identity_partition_value(task, id)? {
                    Some(lit) => literal_scalar(&lit, field.data_type())?
                        .to_array_of_size(1)
                        .ok()?,
                    None => new_null_array(field.data_type(), 1),
                };
            }
            let batch = RecordBatch::try_new(Arc::clone(&schema), arrays).ok()?;
            let value = predicate.evaluate(&batch).ok()?.into_array(1).ok()?;
            let value = value.as_boolean_opt()?;
            Some(value.len() == 1 && value.is_valid(0) && value.value(0))
        };
        tasks.into_iter().all(|t| proven_on(t) == Some(true))
    }

    /// Every planned task, across partitions.
    fn planned_tasks_flat(&self) -> Vec<&FileScanTask> {
        self.file_groups.iter().flatten().collect()
    }

    /// This scan with a filter above it that [`Self::proves`] removed: it returns every row of
    /// its files, so what the manifests know exactly is exact again
    /// ([`FileMetricsIndex::exact_statistics`]). Unchanged under a limit.
    pub fn with_proven_filter(&self) -> Self {
        let mut scan = self.clone();
        if self.limit.is_none() {
            let tasks = self.planned_tasks_flat();
            scan.total_statistics = Arc::new(self.index.exact_statistics(
                self.total_statistics.as_ref().clone(),
                &tasks,
                &self.schema,
                &self.field_ids,
            ));
        }
        scan.metrics = ExecutionPlanMetricsSet::new();
        scan.recorder = LazyRecorder::default();
        scan
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

/// What a scan is, declared for another process that must run the same scan
/// (`distributed/codec.rs`): what it was planned from, its tasks, the filters the plan above
/// pushed into it and the scan-wide counters measured where it was planned. Made by
/// [`IcebergScanExec::description`]; the codec never reads the node's fields.
#[derive(Debug, Clone)]
pub struct ScanDescription {
    /// The table at the planned snapshot, output columns, static predicate, limit, settings.
    pub inputs: ScanInputs,
    /// Tasks per output partition, after static pruning.
    pub file_groups: Vec<Vec<FileScanTask>>,
    /// The filters pushed into the scan.
    pub pushed: PushedFilters,
    /// Live data files `plan_files` left out.
    pub files_pruned_manifest: usize,
    /// Files the static domains dropped at planning.
    pub files_pruned_statistics: usize,
}

/// The filters a scan holds from the plan above it (`handle_child_pushdown_result`).
#[derive(Debug, Clone)]
pub struct PushedFilters {
    /// Static filters (still evaluated above the scan).
    pub fixed: Vec<Arc<dyn PhysicalExpr>>,
    /// Dynamic filters of joins, TopK and aggregates.
    pub dynamic: Vec<Arc<dyn PhysicalExpr>>,
    /// `hash_join_inlist_pushdown_max_distinct_values` of the session that pushed them.
    pub inlist_cap: usize,
    /// What the plan above proves about NULL in `dynamic`.
    pub nulls: DynamicNulls,
}

/// Builds an [`IcebergScanExec`]: from a planned scan ([`Self::new`]) or from another scan
/// ([`IcebergScanExec::builder`]), changed by the `with_*` methods and finished by
/// [`Self::build`], the one path every scan takes (fresh metrics; plan properties from the
/// output schema and the partition count). In the style of DataFusion's `FilterExecBuilder`.
#[derive(Debug, Clone)]
pub struct IcebergScanExecBuilder {
    scan: IcebergScanExec,
}

impl IcebergScanExecBuilder {
    /// A scan of `plan`, without pushed filters.
    pub fn new(plan: PlannedScan) -> Self {
        let partitions = plan.file_groups.len().max(1);
        // DataFusion sees the columns without their field ids (`model/output.rs`, case c11).
        let plain = Arc::new(crate::model::output::plain_schema(&plan.schema));
        let cache = Arc::new(IcebergScanExec::compute_properties(plain, partitions));
        let index = plan.index;
        let mut scan = IcebergScanExec {
            table: plan.table,
            catalog: plan.catalog,
            index: Arc::clone(&index),
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
            positional: Arc::new(PositionalDeletes::new(Arc::clone(&index))),
            settings: plan.settings,
            dynamic_filters: vec![],
            dynamic_domains: None,
            dynamic_nulls: DynamicNulls::Unproven,
            static_filters: vec![],
            static_domains: Arc::new(Domains::all()),
            files_pruned_statistics: 0,
            manifest_planned_files: 0,
            inlist_cap: DEFAULT_INLIST_CAP,
            remote_dynamic_filters: 0,
            gate: Arc::new(Gate::new(
                plan.gate_columns,
                DEFAULT_INLIST_CAP,
                plan.settings.reader_predicate,
            )),
            file_bounds: Arc::new(plan.file_bounds),
            columns: Arc::new(plan.columns),
            dictionary_columns: Arc::new(vec![]),
            metrics: ExecutionPlanMetricsSet::new(),
            recorder: LazyRecorder::default(),
            access: None,
            cache,
        };
        scan.manifest_planned_files = scan.planned_files();
        Self { scan }
    }

    /// The engine's workload log: `EXPLAIN VERBOSE` then shows the table's layout advice
    /// (`read/table_access.rs`) when the recorded scans would read less in another order.
    pub fn with_access_log(mut self, log: Arc<TableAccessLog>) -> Self {
        self.scan.access = Some(log);
        self
    }

    /// Rows per partition at most (`None`: all). The statistics then bound the rows only
    /// loosely (inexact).
    pub fn with_limit(mut self, limit: Option<usize>) -> Self {
        self.scan.limit = limit;
        if limit.is_some() {
            let scan = &mut self.scan;
            scan.total_statistics = Arc::new(scan.total_statistics.as_ref().clone().to_inexact());
        }
        self
    }

    /// How long the first task of each partition waits for incomplete dynamic filters.
    pub fn with_dynamic_filter_wait(mut self, wait: Duration) -> Self {
        self.scan.settings.dynamic_filter_wait = wait;
        self
    }

    /// What the plan above proves about NULL in the dynamic filters (an unproven one also
    /// clears the wait: the filters are not used).
    pub fn with_dynamic_nulls(mut self, nulls: DynamicNulls) -> Self {
        let scan = &mut self.scan;
        scan.dynamic_nulls = nulls;
        if let Some(cache) = &scan.dynamic_domains {
            scan.dynamic_domains = Some(Arc::new(DomainCache::new(
                scan.dynamic_filters.clone(),
                Arc::clone(&scan.columns) as Arc<dyn ColumnResolver>,
                cache.cap(),
                nulls != DynamicNulls::Rejected,
            )));
        }
        if nulls == DynamicNulls::Unproven {
            scan.settings.dynamic_filter_wait = Duration::ZERO;
        }
        self
    }

    /// `fixed` (static) and `dynamic` filters added to those the scan holds: static ones
    /// compacted into domains that drop files now, dynamic ones kept (with a new NULL proof
    /// pending: `DynamicFilterRule`). `cap` bounds value sets
    /// (`hash_join_inlist_pushdown_max_distinct_values`).
    pub fn with_pushed_filters(
        mut self,
        fixed: Vec<Arc<dyn PhysicalExpr>>,
        dynamic: Vec<Arc<dyn PhysicalExpr>>,
        cap: usize,
    ) -> Self {
        let scan = &mut self.scan;
        scan.gate = Arc::new(scan.gate.with_cap(cap));
        scan.inlist_cap = cap;
        if !fixed.is_empty() {
            let domains = fixed.iter().fold((*scan.static_domains).clone(), |acc, f| {
                acc.and(normalize(f, scan.columns.as_ref(), cap, false))
            });
            scan.static_filters.extend(fixed);
            scan.static_domains = Arc::new(domains);
            scan.prune_statically();
        }
        if !dynamic.is_empty() {
            // New producers: what was proven about NULL no longer covers them.
            scan.dynamic_nulls = DynamicNulls::Unproven;
            scan.dynamic_filters.extend(dynamic);
            scan.dynamic_domains = Some(Arc::new(DomainCache::new(
                scan.dynamic_filters.clone(),
                Arc::clone(&scan.columns) as Arc<dyn ColumnResolver>,
                cap,
                scan.dynamic_nulls != DynamicNulls::Rejected,
            )));
        }
        self
    }

    /// None of the pushed filters: static domains reset (the files they dropped restored) and
    /// dynamic filters unused.
    pub fn without_pushed_filters(mut self) -> Self {
        let scan = &mut self.scan;
        scan.file_groups = Arc::clone(&scan.unpruned_file_groups);
        scan.static_filters.clear();
        scan.static_domains = Arc::new(Domains::all());
        scan.files_pruned_statistics = 0;
        scan.dynamic_nulls = DynamicNulls::Unproven;
        scan.settings.dynamic_filter_wait = Duration::ZERO;
        self
    }

    /// No dynamic filters at all.
    pub fn without_dynamic_filters(mut self) -> Self {
        let scan = &mut self.scan;
        scan.dynamic_filters.clear();
        scan.dynamic_domains = None;
        scan.dynamic_nulls = DynamicNulls::Unproven;
        scan.remote_dynamic_filters = 0;
        scan.settings.dynamic_filter_wait = Duration::ZERO;
        self
    }

    /// The dynamic filters replaced by `linked` (relinked to their producers on a worker);
    /// `remote` more were dropped because their producer runs in another stage.
    pub(crate) fn with_linked_dynamic_filters(
        mut self,
        linked: Vec<Arc<dyn PhysicalExpr>>,
        remote: usize,
    ) -> Self {
        let scan = &mut self.scan;
        scan.remote_dynamic_filters += remote;
        scan.dynamic_filters = linked;
        scan.dynamic_domains = (!scan.dynamic_filters.is_empty()).then(|| {
            Arc::new(DomainCache::new(
                scan.dynamic_filters.clone(),
                Arc::clone(&scan.columns) as Arc<dyn ColumnResolver>,
                scan.inlist_cap,
                scan.dynamic_nulls != DynamicNulls::Rejected,
            ))
        });
        if scan.dynamic_filters.is_empty() {
            scan.settings.dynamic_filter_wait = Duration::ZERO;
        }
        self
    }

    /// Tasks per output partition replaced by `groups` (a distributed task's share), with
    /// their statistics; `counters`: whether this scan reports the scan-wide counters (files
    /// pruned by manifests and statistics), which only one share of a split scan does.
    pub(crate) fn with_file_groups(
        mut self,
        groups: Vec<Vec<FileScanTask>>,
        counters: bool,
    ) -> Self {
        let scan = &mut self.scan;
        let refs: Vec<Vec<&FileScanTask>> = groups.iter().map(|g| g.iter().collect()).collect();
        scan.statistics = Arc::new(
            refs.iter()
                .map(|g| Arc::new(scan.index.statistics(g, &scan.schema, &scan.field_ids)))
                .collect(),
        );
        let all: Vec<&FileScanTask> = refs.iter().flatten().copied().collect();
        scan.total_statistics =
            Arc::new(scan.index.statistics(&all, &scan.schema, &scan.field_ids));
        scan.unpruned_file_groups = Arc::new(groups.clone());
        scan.file_groups = Arc::new(groups);
        if !counters {
            scan.files_pruned_statistics = 0;
            scan.manifest_planned_files = scan.snapshot_files;
        }
        self
    }

    /// The scan-wide counters a coordinator measured, for a scan decoded on a worker (its
    /// tasks already pruned by them).
    pub(crate) fn with_pruned_counts(
        mut self,
        files_pruned_manifest: usize,
        files_pruned_statistics: usize,
    ) -> Self {
        let scan = &mut self.scan;
        scan.files_pruned_statistics = files_pruned_statistics;
        scan.manifest_planned_files = scan.snapshot_files.saturating_sub(files_pruned_manifest);
        self
    }

    /// The `Utf8` columns at output positions `columns` output as `Dictionary(Int32, Utf8)`
    /// too (checked by [`IcebergScanExec::with_dictionary_columns`]); their statistics keep no
    /// bounds: those are `Utf8` values, and nothing may compare them with the dictionary type
    /// (interval analysis above a filter would refuse the mismatch).
    pub(crate) fn with_dictionary_columns(mut self, columns: &[usize]) -> Self {
        let scan = &mut self.scan;
        let mut all: Vec<usize> = scan.dictionary_columns.to_vec();
        all.extend_from_slice(columns);
        all.sort_unstable();
        all.dedup();
        let unbounded = |stats: &Statistics| {
            let mut stats = stats.clone();
            for &c in &all {
                if let Some(cs) = stats.column_statistics.get_mut(c) {
                    cs.min_value = Precision::Absent;
                    cs.max_value = Precision::Absent;
                }
            }
            Arc::new(stats)
        };
        scan.statistics = Arc::new(scan.statistics.iter().map(|s| unbounded(s)).collect());
        scan.total_statistics = unbounded(&scan.total_statistics);
        scan.dictionary_columns = Arc::new(all);
        self
    }

    /// The scan: fresh metrics, plan properties from its output schema (without field ids,
    /// `model/output.rs`, case c11) and its partition count.
    pub fn build(self) -> IcebergScanExec {
        let mut scan = self.scan;
        let plain = Arc::new(crate::model::output::plain_schema(&scan.output_schema()));
        let partitions = scan.file_groups.len().max(1);
        scan.cache = Arc::new(IcebergScanExec::compute_properties(plain, partitions));
        scan.metrics = ExecutionPlanMetricsSet::new();
        scan.recorder = LazyRecorder::default();
        scan
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
                if !self.dictionary_columns.is_empty() {
                    let names: Vec<&str> = self
                        .dictionary_columns
                        .iter()
                        .filter_map(|&i| columns.get(i).copied())
                        .collect();
                    write!(f, ", dictionaries=[{}]", names.join(", "))?;
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
                    if !self.settings.dynamic_pruning {
                        write!(f, " (pruning off)")?;
                    } else if self.dynamic_nulls == DynamicNulls::Unproven {
                        write!(f, " (not used: NULL handling not proven, case c04)")?;
                    } else {
                        write!(
                            f,
                            " (pruning on, wait {})",
                            iceflight_options::format_duration(self.settings.dynamic_filter_wait)
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
                if t == DisplayFormatType::Verbose
                    && let Some(log) = &self.access
                {
                    let table = self.table.identifier().to_string();
                    let advice = layout_advice(&log.recent());
                    if let Some(a) = advice.iter().find(|a| a.table == table) {
                        write!(
                            f,
                            ", layout_advice=[sort by {}: the {} recorded scans would read {:.2} \
                             of their bytes instead of {:.2}; ALTER TABLE {table} EXECUTE \
                             optimize(sort_by => '{}')]",
                            a.sort_by, a.scans, a.read_share_sorted, a.read_share_now, a.sort_by
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
        let tasks = self.within_limit(partition, tasks);
        let metrics = ScanMetrics::new(&self.metrics, partition);
        let recorder = Arc::clone(self.recorder.get_or_init(|| {
            Arc::new(AccessRecorder {
                log: Arc::clone(&ScanCaches::of(context.session_config()).access),
                table: self.table.identifier().to_string(),
                index: Arc::clone(&self.index),
                columns: Arc::clone(&self.columns),
                static_domains: Arc::clone(&self.static_domains),
                dynamic: self.dynamic_domains.clone(),
                metrics: self.metrics.clone(),
                snapshot_files: self.snapshot_files as u64,
                executed: Default::default(),
            })
        }));
        recorder.executed();
        let mut row_filters = vec![];
        if self.settings.static_row_filter && !self.static_filters.is_empty() {
            // One filter: DataFusion pushes a WHERE's conjuncts one by one, and two bounds of
            // one column (`d >= a`, `d < b`) must meet to be measured as the range they are.
            row_filters.push((
                FilterKind::Static,
                datafusion::physical_expr::conjunction(self.static_filters.iter().cloned()),
            ));
        }
        if self.settings.dynamic_row_filter
            && self.settings.dynamic_pruning
            && self.dynamic_nulls != DynamicNulls::Unproven
        {
            row_filters.extend(
                self.dynamic_filters
                    .iter()
                    .map(|f| (FilterKind::Dynamic, Arc::clone(f))),
            );
        }
        let row_filter = ScanRowFilter::new(
            row_filters,
            Arc::clone(&self.schema),
            RowFilterCounters {
                dynamic_dropped: metrics.dynamic_rows_dropped.clone(),
                dynamic_evaluated: metrics.dynamic_rows_evaluated.clone(),
                static_dropped: metrics.static_rows_dropped.clone(),
                static_evaluated: metrics.static_rows_evaluated.clone(),
                late_rows: metrics.late_filter_rows.clone(),
            },
        )
        .map(Arc::new);
        if partition == 0 {
            metrics
                .files_pruned_manifest
                .add(self.files_pruned_manifest());
            metrics
                .files_pruned_statistics
                .add(self.files_pruned_statistics);
            metrics
                .dynamic_filters_unlinked
                .add(self.remote_dynamic_filters);
        }
        let dynamic = self
            .dynamic_domains
            .as_ref()
            .filter(|_| {
                self.settings.dynamic_pruning && self.dynamic_nulls != DynamicNulls::Unproven
            })
            .cloned();
        let opener = Arc::new(TaskOpener {
            table: self.table.clone(),
            index: Arc::clone(&self.index),
            schema: Arc::clone(&self.schema),
            field_ids: self.field_ids.clone(),
            field_types: Arc::clone(&self.field_types),
            batch_size: self.batch_size,
            delete_keys: Arc::clone(&self.delete_keys),
            dynamic,
            dynamic_filters: self.dynamic_filters.clone(),
            wait: self.settings.dynamic_filter_wait,
            static_domains: Arc::clone(&self.static_domains),
            gate: Arc::clone(&self.gate),
            file_bounds: Arc::clone(&self.file_bounds),
            metrics: metrics.clone(),
            caches: ScanCaches::of(context.session_config()),
            store_prefix: store_prefix(self.table.file_io().config().props()),
            reader: self.settings.reader,
            positional: Arc::clone(&self.positional),
            row_filter,
            late_materialization: self.settings.late_materialization,
            dictionary_strings: self.settings.dictionary_strings,
            output_schema: self.output_schema(),
            dictionary_columns: Arc::clone(&self.dictionary_columns),
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
        let plain = self.schema();
        // The stream keeps the recorder: the scan is recorded when the last of them ends.
        let counted = limited.inspect_ok(move |b| {
            let _ = &recorder;
            output_rows.add(b.num_rows())
        });
        let output = {
            let plain = Arc::clone(&plain);
            counted.and_then(move |b| {
                futures::future::ready(crate::model::output::plain_batch(b, &plain))
            })
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(plain, output)))
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
        Some(Arc::new(self.builder().with_limit(limit).build()))
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
        let new = self
            .builder()
            .with_pushed_filters(fixed, dynamic, cap)
            .build();
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

impl IcebergScanExec {
    /// The tasks of `partition` that a `LIMIT` still needs: when every row of the scan's files
    /// is returned (no filter of any kind, no delete file) each task's rows are known from the
    /// manifests, and once the tasks of the partitions before it, and its own before a task,
    /// hold `limit` rows, the rest are not opened (any `limit` rows answer a `LIMIT` without
    /// `ORDER BY`; each partition also stops at `limit` rows of its own). A task whose rows are
    /// unknown (a byte range of a file) ends the counting: it and the rest are kept.
    fn within_limit(&self, partition: usize, mut tasks: Vec<FileScanTask>) -> Vec<FileScanTask> {
        let Some(limit) = self.limit else {
            return tasks;
        };
        if self.predicate.is_some()
            || !self.static_filters.is_empty()
            || !self.dynamic_filters.is_empty()
            || self.remote_dynamic_filters > 0
        {
            return tasks;
        }
        let rows = |task: &FileScanTask| -> Option<u64> {
            if !task.deletes.is_empty() {
                return None;
            }
            let file = self.index.get(&task.data_file_path)?;
            let whole = task.start == 0 && task.length >= file.file_size_in_bytes();
            task.record_count
                .or_else(|| whole.then(|| file.record_count()))
        };
        let mut seen: u64 = 0;
        for earlier in self.file_groups.iter().take(partition) {
            for task in earlier {
                if seen >= limit as u64 {
                    return vec![];
                }
                match rows(task) {
                    Some(n) => seen += n,
                    None => return tasks,
                }
            }
        }
        if seen >= limit as u64 {
            return vec![];
        }
        let mut keep = 0;
        for task in &tasks {
            keep += 1;
            match rows(task) {
                Some(n) => seen += n,
                None => return tasks,
            }
            if seen >= limit as u64 {
                break;
            }
        }
        tasks.truncate(keep);
        tasks
    }
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
