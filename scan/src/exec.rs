//! [`IcebergScanExec`]: our leaf operator reading planned Iceberg `FileScanTask`s.
//!
//! ```text
//!   partition i ──► tasks[i] ──► (per task) iceberg ArrowReader ──► equality deletes (null-safe)
//!                                  field-id projection,               ──► output schema
//!                                  positional deletes,                ──► limit
//!                                  partition constants, NULL for missing columns
//! ```
//!
//! Tasks are planned by [`crate::IcebergTableProvider::scan`] and spread over the output
//! partitions by size. Each task is opened only when the stream reaches it, so work that later
//! issues add per task (dynamic filters) sees the newest state.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::compute::cast;
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
use iceberg::expr::Predicate;
use iceberg::scan::FileScanTask;
use iceberg::spec::DataContentType;
use iceberg::table::Table;

use crate::domain::{Domains, normalize};
use crate::equality_deletes::{self, DeleteKeys, DeleteKeysCache};
use crate::prune::{BoundsByFile, file_may_match};
use datafusion::common::config::ConfigOptions;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr_common::physical_expr::is_dynamic_physical_expr;
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown,
};

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
    /// The static predicate used for manifest and partition pruning (display only).
    predicate: Option<Arc<Predicate>>,
    /// Live data files in the snapshot before planning.
    snapshot_files: usize,
    limit: Option<usize>,
    batch_size: usize,
    statistics: Arc<Vec<Statistics>>,
    total_statistics: Statistics,
    delete_keys: Arc<DeleteKeysCache>,
    /// Dynamic filters pushed by joins, TopK and aggregates (kept so their producers compute
    /// them: `HashJoinExec` checks `is_used()`), in output-schema column indices.
    dynamic_filters: Vec<Arc<dyn PhysicalExpr>>,
    /// Prune files with `dynamic_filters` (`iceflight.scan.dynamic_filter_pruning`).
    dynamic_pruning: bool,
    /// Value-set cap of domains = `hash_join_inlist_pushdown_max_distinct_values`.
    inlist_cap: usize,
    /// Manifest bounds of the output columns, by data file path.
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
}

impl IcebergScanExec {
    /// Builds the operator from a planned scan.
    pub fn new(plan: PlannedScan) -> Self {
        let partitions = plan.file_groups.len().max(1);
        let cache = Arc::new(Self::compute_properties(
            Arc::clone(&plan.schema),
            partitions,
        ));
        Self {
            table: plan.table,
            schema: plan.schema,
            field_ids: plan.field_ids,
            field_types: Arc::new(plan.field_types),
            file_groups: Arc::new(plan.file_groups),
            predicate: plan.predicate.map(Arc::new),
            snapshot_files: plan.snapshot_files,
            limit: plan.limit,
            batch_size: plan.batch_size,
            statistics: Arc::new(plan.statistics),
            total_statistics: plan.total_statistics,
            delete_keys: Arc::new(DeleteKeysCache::default()),
            dynamic_filters: vec![],
            dynamic_pruning: plan.dynamic_pruning,
            inlist_cap: 150,
            file_bounds: Arc::new(plan.file_bounds),
            metrics: ExecutionPlanMetricsSet::new(),
            cache,
        }
    }

    fn compute_properties(schema: SchemaRef, partitions: usize) -> PlanProperties {
        PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        )
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
                if !self.dynamic_filters.is_empty() {
                    let pruning = if self.dynamic_pruning { "on" } else { "off" };
                    write!(
                        f,
                        ", dynamic_filters={} (file pruning {pruning})",
                        self.dynamic_filters.len()
                    )?;
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

    fn as_any(&self) -> &dyn Any {
        self
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
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let Some(tasks) = self.file_groups.get(partition).cloned().or_else(|| {
            // An empty scan still has one (empty) partition.
            (partition == 0 && self.file_groups.is_empty()).then(Vec::new)
        }) else {
            return internal_err!("IcebergScanExec: invalid partition {partition}");
        };
        let metrics = ScanMetrics::new(&self.metrics, partition);
        let opener = Arc::new(TaskOpener {
            table: self.table.clone(),
            schema: Arc::clone(&self.schema),
            field_ids: self.field_ids.clone(),
            field_types: Arc::clone(&self.field_types),
            batch_size: self.batch_size,
            delete_keys: Arc::clone(&self.delete_keys),
            dynamic_filters: if self.dynamic_pruning {
                self.dynamic_filters.clone()
            } else {
                vec![]
            },
            inlist_cap: self.inlist_cap,
            file_bounds: Arc::clone(&self.file_bounds),
            metrics: metrics.clone(),
        });
        let batches = stream::iter(tasks)
            .then(move |task| {
                let opener = Arc::clone(&opener);
                async move { opener.open(task).await }
            })
            .try_flatten();
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

    fn partition_statistics(&self, partition: Option<usize>) -> Result<Statistics> {
        Ok(match partition {
            None => self.total_statistics.clone(),
            Some(p) => self
                .statistics
                .get(p)
                .cloned()
                .unwrap_or_else(|| Statistics::new_unknown(&self.schema)),
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
    /// and answers `No` to all filters: the scan only skips files with them; the operators above
    /// still evaluate every filter.
    fn handle_child_pushdown_result(
        &self,
        _phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        let mut dynamic = vec![];
        let answers = child_pushdown_result
            .parent_filters
            .into_iter()
            .map(|f| {
                if is_dynamic_physical_expr(&f.filter) {
                    dynamic.push(f.filter);
                }
                PushedDown::No
            })
            .collect();
        let propagation = FilterPushdownPropagation::with_parent_pushdown_result(answers);
        if dynamic.is_empty() {
            return Ok(propagation);
        }
        let mut new = self.clone();
        new.dynamic_filters.extend(dynamic);
        new.inlist_cap = config
            .optimizer
            .hash_join_inlist_pushdown_max_distinct_values;
        new.metrics = ExecutionPlanMetricsSet::new();
        Ok(propagation.with_updated_node(Arc::new(new)))
    }
}

/// Counters of one output partition, shown by `EXPLAIN ANALYZE`.
#[derive(Debug, Clone)]
struct ScanMetrics {
    output_rows: Count,
    files_pruned_dynamic: Count,
    files_opened: Count,
    bytes_scanned: Count,
    equality_deleted_rows: Count,
}

impl ScanMetrics {
    fn new(set: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        Self {
            output_rows: MetricBuilder::new(set).output_rows(partition),
            files_pruned_dynamic: MetricBuilder::new(set)
                .counter("files_pruned_dynamic", partition),
            files_opened: MetricBuilder::new(set).counter("files_opened", partition),
            bytes_scanned: MetricBuilder::new(set).counter("bytes_scanned", partition),
            equality_deleted_rows: MetricBuilder::new(set)
                .counter("equality_deleted_rows", partition),
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
    dynamic_filters: Vec<Arc<dyn PhysicalExpr>>,
    inlist_cap: usize,
    file_bounds: Arc<BoundsByFile>,
    metrics: ScanMetrics,
}

impl TaskOpener {
    /// Whether the dynamic filters, at their current value, rule this task's file out. Their
    /// domains keep NULL (not proven null-safe, case c04), so a file with NULL keys stays.
    fn pruned_by_dynamic_filters(&self, task: &FileScanTask) -> bool {
        if self.dynamic_filters.is_empty() {
            return false;
        }
        let domains = self.dynamic_filters.iter().fold(Domains::all(), |acc, f| {
            acc.and(normalize(f, &self.schema, self.inlist_cap, true))
        });
        if domains.columns.is_none() {
            return true;
        }
        self.file_bounds
            .get(&task.data_file_path)
            .is_some_and(|bounds| !file_may_match(&domains, bounds))
    }

    async fn open(
        &self,
        mut task: FileScanTask,
    ) -> Result<futures::stream::BoxStream<'static, Result<RecordBatch>>> {
        if self.pruned_by_dynamic_filters(&task) {
            self.metrics.files_pruned_dynamic.add(1);
            return Ok(stream::empty().boxed());
        }
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
        if read_ids.is_empty() {
            if let Some((id, _)) = self.field_types.first() {
                read_ids.push(*id);
            }
        }
        task.project_field_ids = read_ids;

        self.metrics.files_opened.add(1);
        let reader = self
            .table
            .reader_builder()
            .with_batch_size(self.batch_size)
            .with_data_file_concurrency_limit(1)
            .build();
        let task_stream = Box::pin(stream::once(async move { Ok(task) }));
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
        .map(|(field, col)| {
            Ok(if col.data_type() == field.data_type() {
                Arc::clone(col)
            } else {
                cast(col, field.data_type())?
            })
        })
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
