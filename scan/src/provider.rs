//! [`IcebergTableProvider`]: a DataFusion `TableProvider` over one Iceberg table.
//!
//! ```text
//!   scan(projection, filters, limit)
//!     filters ──► PredicateConverter ──► TableScan::plan_files (manifest + partition pruning)
//!     tasks   ──► current schema, field-id projection, partition spec, no reader predicate
//!             ──► spread over target_partitions by size ──► IcebergScanExec
//! ```
//!
//! The provider's schema is the table's **current** schema (case c06: a column added without a
//! write is visible and reads as NULL). Inside the scan each Arrow field carries its iceberg
//! field id in `PARQUET:field_id` metadata; what DataFusion sees has no field metadata
//! (`output.rs`, case c11).

use std::sync::Arc;

use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::{
    DataFusionError, Result, Statistics, internal_datafusion_err, internal_err, not_impl_err,
    plan_err,
};
use datafusion::datasource::sink::DataSinkExec;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{LexRequirement, PhysicalSortRequirement};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::prelude::SessionConfig;
use futures::TryStreamExt;
use iceberg::Catalog;
use iceberg::expr::Predicate;
use iceberg::scan::FileScanTask;
use iceberg::spec::{NullOrder, PartitionSpec, SortDirection, Transform};
use iceberg::table::Table;
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

use crate::caches::ScanCaches;
use crate::columns::ScanColumns;
use crate::commit::CommitCatalog;
use crate::delete::DeleteSink;
use crate::exec::{IcebergScanExec, PlannedScan};
use crate::gate::GateColumn;
use crate::layout::ColumnLayout;
use crate::metrics_index::FileMetricsIndex;
use crate::options::ScanSettings;
use crate::predicate::PredicateConverter;
use crate::prune::BoundsByFile;
use crate::sink::IcebergSink;

/// A DataFusion table backed by an iceberg [`Table`] (at its current snapshot, loaded by the
/// catalog when the query is planned).
#[derive(Debug, Clone)]
pub struct IcebergTableProvider {
    table: Table,
    /// The configured catalog the table was loaded from, named in plans sent to workers.
    catalog: Option<String>,
    /// The current schema, each field with its iceberg field id (`PARQUET:field_id`).
    schema: SchemaRef,
    /// `schema` without field metadata: [`TableProvider::schema`] (`output.rs`).
    plain: SchemaRef,
    /// Whole-snapshot statistics, when the manifests' metrics were given ([`Self::with_index`]).
    statistics: Option<Statistics>,
    /// The catalog `INSERT` and `DELETE` commit through ([`Self::with_writes`]); `None`:
    /// read-only.
    writes: Option<Arc<dyn CommitCatalog>>,
    /// The exact condition of the `DELETE` this provider was planned for
    /// ([`Self::for_delete`]; inner `None`: every row). `None`: the table refuses `DELETE`.
    delete_condition: Option<Option<Expr>>,
}

impl IcebergTableProvider {
    /// Wraps a loaded table. Errors if its current schema has no Arrow form.
    pub fn try_new(table: Table) -> Result<Self> {
        let schema = iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema())
            .map_err(external)?;
        Ok(Self {
            table,
            catalog: None,
            plain: Arc::new(crate::output::plain_schema(&schema)),
            schema: Arc::new(schema),
            statistics: None,
            writes: None,
            delete_condition: None,
        })
    }

    /// Lets `INSERT` append to the table and `DELETE` remove rows from it, committing through
    /// `catalog` (`sink.rs`, `delete.rs`). A table at
    /// another snapshot than its current one (time travel) is never given this.
    pub fn with_writes(mut self, catalog: Arc<dyn CommitCatalog>) -> Self {
        self.writes = Some(catalog);
        self
    }

    /// Readies the table for one `DELETE … WHERE condition` (`None`: no WHERE), given exactly
    /// as written. DataFusion hands [`TableProvider::delete_from`] only the conjuncts left on
    /// the table after optimization, and none at all for a condition the optimizer folded to
    /// FALSE or turned into a join (its physical planner's `extract_dml_filters`), which would
    /// read as "every row"; so `DELETE` runs only on the condition given here
    /// (`server/src/delete_statement.rs`).
    pub fn for_delete(mut self, condition: Option<Expr>) -> Self {
        self.delete_condition = Some(condition);
        self
    }

    /// Names the configured catalog the table was loaded from, so that its scans can be sent
    /// to workers, which load the table from their own configuration of that catalog
    /// (`codec.rs`).
    pub fn with_catalog(mut self, catalog: impl Into<String>) -> Self {
        self.catalog = Some(catalog.into());
        self
    }

    /// Attaches whole-snapshot statistics from the manifests' metrics (`index` of this table's
    /// current snapshot): rows, per-column sizes, null counts, bounds and distinct counts, for
    /// logical planning ([`TableProvider::statistics`], read by `join_order.rs`).
    ///
    /// Errors: a column of the schema without an iceberg field id.
    pub fn with_index(mut self, index: &FileMetricsIndex) -> Result<Self> {
        let ids = (0..self.schema.fields().len())
            .map(|i| self.field_id(i))
            .collect::<Result<Vec<_>>>()?;
        self.statistics = Some(index.table_statistics(&self.schema, &ids));
        Ok(self)
    }

    /// The iceberg table.
    pub fn table(&self) -> &Table {
        &self.table
    }

    fn field_id(&self, index: usize) -> Result<i32> {
        let field = self.schema.field(index);
        field
            .metadata()
            .get(PARQUET_FIELD_ID_META_KEY)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| {
                internal_datafusion_err!("column {} has no iceberg field id", field.name())
            })
    }

    /// Converter for filters on this table: columns by name in the current schema, bound by field
    /// id to the current snapshot's schema (what `TableScanBuilder::build` binds to).
    fn predicate_converter(&self) -> PredicateConverter<'_> {
        let current = self.table.metadata().current_schema();
        PredicateConverter::new(current, self.snapshot_schema(), &self.schema)
    }

    /// The schema the current snapshot was written with (else the current one): what
    /// `TableScanBuilder::build` binds a scan's filter to.
    fn snapshot_schema(&self) -> &iceberg::spec::SchemaRef {
        let metadata = self.table.metadata();
        metadata
            .current_snapshot()
            .and_then(|s| s.schema_id())
            .and_then(|id| metadata.schema_by_id(id))
            .unwrap_or(metadata.current_schema())
    }

    /// Whether every partition spec's source columns are in the schema iceberg binds the scan's
    /// filter to (the snapshot's). iceberg 0.10.1 projects the filter onto every spec while it
    /// plans and fails when a spec's source column was dropped since (case c10): then the scan
    /// is planned without the filter (no manifest or partition pruning), and the files are still
    /// pruned by their column bounds here and the rows filtered above.
    fn specs_bind_to_snapshot_schema(&self) -> bool {
        let schema = self.snapshot_schema();
        self.table.metadata().partition_specs_iter().all(|spec| {
            spec.fields()
                .iter()
                .all(|f| schema.field_by_id(f.source_id).is_some())
        })
    }

    /// The table's sort order as a requirement on the rows an `INSERT` writes (DataFusion sorts
    /// them before the sink, as Trino sorts on write); `None` when unsorted. Fields with a
    /// transform other than identity, or on a column not in `input`, end the requirement there.
    fn write_order(&self, input: &SchemaRef) -> Option<LexRequirement> {
        let metadata = self.table.metadata();
        let schema = metadata.current_schema();
        let mut requirements = vec![];
        for field in &metadata.default_sort_order().fields {
            let name = match (field.transform, schema.field_by_id(field.source_id)) {
                (Transform::Identity, Some(column)) => column.name.clone(),
                _ => break,
            };
            let Ok(index) = input.index_of(&name) else {
                break;
            };
            requirements.push(PhysicalSortRequirement::new(
                Arc::new(Column::new(&name, index)),
                Some(SortOptions {
                    descending: field.direction == SortDirection::Descending,
                    nulls_first: field.null_order == NullOrder::First,
                }),
            ));
        }
        LexRequirement::new(requirements)
    }

    /// The partition spec a planned task's `partition` tuple belongs to. iceberg 0.10.1's
    /// `plan_files` leaves `FileScanTask.partition_spec` unset, so identity-partition constants
    /// (case c05) are only filled when we can name the spec: the table has a single spec, or
    /// exactly one spec has the tuple's arity.
    fn spec_for(&self, task: &FileScanTask) -> Option<Arc<PartitionSpec>> {
        let partition = task.partition.as_ref()?;
        let arity = partition.fields().len();
        let mut candidates = self
            .table
            .metadata()
            .partition_specs_iter()
            .filter(|s| s.fields().len() == arity && !s.fields().is_empty());
        let first = candidates.next()?;
        candidates.next().is_none().then(|| Arc::clone(first))
    }
}

#[async_trait]
impl TableProvider for IcebergTableProvider {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.plain)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn statistics(&self) -> Option<Statistics> {
        self.statistics.clone()
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        let conv = self.predicate_converter();
        Ok(filters
            .iter()
            .map(|f| {
                if conv.convert(f).is_some() {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    /// `INSERT INTO`: appends (`sink.rs`), its rows sorted by the table's sort order. `INSERT
    /// OVERWRITE` is not supported.
    async fn insert_into(
        &self,
        _state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let ident = self.table.identifier();
        if insert_op != InsertOp::Append {
            return not_impl_err!(
                "{insert_op} of Iceberg table {ident} is not supported; INSERT INTO appends"
            );
        }
        let Some(catalog) = &self.writes else {
            return plan_err!(
                "table {ident} is read here at a snapshot other than its current one; \
                 rows are inserted into the table itself"
            );
        };
        let sink =
            IcebergSink::try_new(Arc::clone(catalog) as Arc<dyn Catalog>, self.table.clone())?;
        let order = self.write_order(&input.schema());
        Ok(Arc::new(DataSinkExec::new(input, Arc::new(sink), order)))
    }

    /// `DELETE FROM … [WHERE …]`: copy-on-write of the data files holding a deleted row
    /// (`delete.rs`), run when the plan executes; one row out, the rows deleted. The condition
    /// is the one given to [`Self::for_delete`]; DataFusion's `_filters` are not trusted.
    ///
    /// Errors: a table read at another snapshot (time travel) or not readied for a `DELETE`.
    async fn delete_from(
        &self,
        state: &dyn Session,
        _filters: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let ident = self.table.identifier();
        let Some(catalog) = &self.writes else {
            return plan_err!(
                "cannot delete from {ident} as of a past snapshot (FOR VERSION or TIMESTAMP \
                 AS OF): DELETE changes the table's current state"
            );
        };
        let Some(condition) = &self.delete_condition else {
            return internal_err!("DELETE on {ident} was not planned by the session (for_delete)");
        };
        let sink =
            DeleteSink::try_new(Arc::clone(catalog), self.clone(), condition.clone(), state)?;
        let nothing = Arc::new(EmptyExec::new(Arc::new(arrow::datatypes::Schema::empty())));
        Ok(Arc::new(DataSinkExec::new(nothing, Arc::new(sink), None)))
    }

    /// `UPDATE`: not supported: it would rewrite files as `DELETE` does (`delete.rs`) and add
    /// the updated rows; not built yet.
    async fn update(
        &self,
        _state: &dyn Session,
        _assignments: Vec<(String, Expr)>,
        _filters: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        not_impl_err!(
            "UPDATE on Iceberg table {} is not supported; DELETE and INSERT are",
            self.table.identifier()
        )
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let indices: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let config = state.config();
        let (inputs, index, tasks) = self.plan_tasks(config, &indices, filters, limit).await?;
        let target_partitions = config.target_partitions().max(1);
        let tasks = split_by_row_groups(tasks, &index, target_partitions);
        let file_groups = spread_by_size(tasks, target_partitions);
        Ok(Arc::new(IcebergScanExec::new(assemble(
            inputs,
            index,
            file_groups,
        ))))
    }
}

impl IcebergTableProvider {
    /// Plans a scan of the columns `indices` (of [`TableProvider::schema`]) under `filters`:
    /// the scan's inputs, the manifest metrics of the current snapshot and one
    /// [`FileScanTask`] per data file that may hold a row passing `filters` (none for a table
    /// without a snapshot). Shared by [`TableProvider::scan`] and `DELETE` (`delete.rs`).
    ///
    /// Errors: a column without a field id, or a failure reading the manifests.
    pub(crate) async fn plan_tasks(
        &self,
        config: &SessionConfig,
        indices: &[usize],
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<(ScanInputs, Arc<FileMetricsIndex>, Vec<FileScanTask>)> {
        let metadata = self.table.metadata();
        let schema = Arc::new(self.schema.project(indices)?);
        let field_ids = indices
            .iter()
            .map(|&i| self.field_id(i))
            .collect::<Result<Vec<_>>>()?;
        let field_types = (0..self.schema.fields().len())
            .map(|i| Ok((self.field_id(i)?, self.schema.field(i).data_type().clone())))
            .collect::<Result<Vec<(i32, DataType)>>>()?;
        let options = crate::IceflightOptions::of(config.options());
        let batch_size = match options.scan_batch_size {
            0 => config.batch_size(),
            n => n,
        };

        let mut predicate = None;
        let mut tasks = Vec::new();
        let caches = ScanCaches::of(config);
        let index = caches.indexes.load(&self.table).await.map_err(external)?;
        if let Some(snapshot) = metadata.current_snapshot() {
            predicate = self.predicate_converter().convert_all(filters);
            let mut builder = self
                .table
                .scan()
                .snapshot_id(snapshot.snapshot_id())
                .select_empty();
            if let Some(p) = &predicate
                && self.specs_bind_to_snapshot_schema()
            {
                builder = builder.with_filter(p.clone());
            }
            let scan = builder.build().map_err(external)?;
            tasks = scan
                .plan_files()
                .await
                .map_err(external)?
                .try_collect::<Vec<_>>()
                .await
                .map_err(external)?;
        }
        let current_schema = Arc::clone(metadata.current_schema());
        for task in &mut tasks {
            task.schema = Arc::clone(&current_schema);
            task.project_field_ids = field_ids.clone();
            task.predicate = None;
            task.partition_spec = self.spec_for(task);
        }
        let inputs = ScanInputs {
            table: self.table.clone(),
            catalog: self.catalog.clone(),
            schema,
            field_ids,
            field_types,
            predicate,
            limit,
            batch_size,
            settings: ScanSettings::of(&options),
        };
        Ok((inputs, index, tasks))
    }
}

/// What a scan is planned from beside its tasks: the table at the planned snapshot, the output
/// columns and the settings. [`assemble`] adds the tasks' statistics, bounds and layouts.
#[derive(Debug, Clone)]
pub struct ScanInputs {
    /// The table, at the snapshot that was planned.
    pub table: Table,
    /// The configured catalog the table was loaded from (`None`: it cannot be distributed).
    pub catalog: Option<String>,
    /// Output schema (a projection of the table's current schema).
    pub schema: SchemaRef,
    /// Iceberg field id per output column.
    pub field_ids: Vec<i32>,
    /// `(field id, Arrow type)` of every top-level column of the current schema.
    pub field_types: Vec<(i32, DataType)>,
    /// Static predicate handed to `plan_files`.
    pub predicate: Option<Predicate>,
    /// Row limit per partition.
    pub limit: Option<usize>,
    /// Rows per output batch.
    pub batch_size: usize,
    /// The `iceflight.scan.*` settings the scan runs with.
    pub settings: ScanSettings,
}

/// Builds a [`PlannedScan`] from `inputs` and its tasks grouped by output partition: per-group
/// statistics, manifest bounds of the constrainable columns per data file, and the columns'
/// layouts over the whole table (all from `index`, the manifest metrics of the planned
/// snapshot). Used by [`IcebergTableProvider::scan`], by a scan re-split for distributed tasks
/// and by a scan decoded on a worker, so all three prune alike.
pub fn assemble(
    inputs: ScanInputs,
    index: Arc<FileMetricsIndex>,
    file_groups: Vec<Vec<FileScanTask>>,
) -> PlannedScan {
    let ScanInputs {
        table,
        catalog,
        schema,
        field_ids,
        field_types,
        predicate,
        limit,
        batch_size,
        settings,
    } = inputs;
    let statistics: Vec<Statistics> = file_groups
        .iter()
        .map(|g| index.statistics(&g.iter().collect::<Vec<_>>(), &schema, &field_ids))
        .collect();
    let all: Vec<&FileScanTask> = file_groups.iter().flatten().collect();
    let total_statistics = index.statistics(&all, &schema, &field_ids);
    let file_groups = if file_groups.is_empty() {
        vec![vec![]]
    } else {
        file_groups
    };
    let statistics = if statistics.is_empty() {
        vec![total_statistics.clone()]
    } else {
        statistics
    };
    let current_schema = Arc::clone(table.metadata().current_schema());
    let columns = ScanColumns::new(&schema, &current_schema);
    let file_bounds: BoundsByFile = file_groups
        .iter()
        .flatten()
        .filter_map(|t| {
            let file = index.get(&t.data_file_path)?;
            let bounds = columns
                .columns()
                .iter()
                .map(|c| {
                    let mut b = FileMetricsIndex::bounds(file, c.field_id, &c.arrow_type);
                    if c.nested {
                        // A leaf's null count need not count NULL parents (case c01).
                        b.null_count = None;
                    }
                    b
                })
                .collect();
            Some((t.data_file_path.clone(), bounds))
        })
        .collect();
    // Layout of the whole table (every live data file), not just the planned ones: a
    // filter that planned one file says nothing about how the column is laid out.
    let layouts: Vec<ColumnLayout> = columns
        .columns()
        .iter()
        .map(|c| index.layout(c.field_id, &c.arrow_type))
        .collect();
    let gate_columns = GateColumn::for_scan(&columns, &layouts);
    PlannedScan {
        file_bounds,
        settings,
        gate_columns,
        columns,
        snapshot_files: index.len(),
        index,
        table,
        catalog,
        schema,
        field_ids,
        field_types,
        file_groups,
        predicate,
        limit,
        batch_size,
        statistics,
        total_statistics,
    }
}

/// Splits tasks into byte ranges at row-group boundaries (the manifest's `split_offsets`) when
/// there are fewer tasks than `partitions`, so that one large file is read by several
/// partitions. A task gets pieces in proportion to its share of the bytes, at most one per row
/// group it covers. A task may already be a range of whole row groups (a scan re-split for
/// distributed tasks splits its pieces further). iceberg's reader keeps the row groups whose
/// midpoint lies in `[start, start+length)`, so ranges that start and end on row-group starts
/// cover each row group exactly once.
pub fn split_by_row_groups(
    tasks: Vec<FileScanTask>,
    index: &FileMetricsIndex,
    partitions: usize,
) -> Vec<FileScanTask> {
    if tasks.is_empty() || tasks.len() >= partitions {
        return tasks;
    }
    let total: u64 = tasks.iter().map(|t| t.length.max(1)).sum();
    let mut out = Vec::with_capacity(partitions);
    for task in tasks {
        let offsets: Vec<u64> = index
            .get(&task.data_file_path)
            .and_then(|f| f.split_offsets())
            .map(|o| o.iter().map(|&x| x as u64).collect())
            .unwrap_or_default();
        // Only for the standard layout (row groups back to back after the 4-byte magic), where
        // the reader's computed row-group positions equal the manifest's split offsets.
        let standard = offsets.first() == Some(&4) && offsets.windows(2).all(|w| w[0] < w[1]);
        let end = task.start + task.length;
        // The task must be a run of whole row groups: it starts at the file's start or a
        // row-group start and ends at the file's end or a row-group start.
        let aligned = (task.start == 0 || offsets.contains(&task.start))
            && (end == task.file_size_in_bytes || offsets.contains(&end));
        // The row groups the task covers, by their starts.
        let starts: Vec<u64> = offsets
            .iter()
            .copied()
            .filter(|&o| o >= task.start && o < end)
            .collect();
        let share = (partitions as u64 * task.length.max(1)).div_ceil(total) as usize;
        let pieces = share.min(starts.len());
        if !standard || !aligned || pieces < 2 {
            out.push(task);
            continue;
        }
        // Row groups [a, b) per piece, as evenly as the row-group count allows.
        for i in 0..pieces {
            let a = i * starts.len() / pieces;
            let b = (i + 1) * starts.len() / pieces;
            let start = if a == 0 { task.start } else { starts[a] };
            let stop = if b == starts.len() { end } else { starts[b] };
            let mut piece = task.clone();
            piece.start = start;
            piece.length = stop - start;
            piece.record_count = None;
            out.push(piece);
        }
    }
    out
}

/// Spreads tasks over at most `partitions` groups, largest first onto the lightest group, so that
/// a table of several files is never read by a single partition. Empty input → no group.
pub fn spread_by_size(mut tasks: Vec<FileScanTask>, partitions: usize) -> Vec<Vec<FileScanTask>> {
    let n = partitions.min(tasks.len());
    if n == 0 {
        return vec![];
    }
    tasks.sort_by(|a, b| {
        b.length
            .cmp(&a.length)
            .then_with(|| a.data_file_path.cmp(&b.data_file_path))
    });
    let mut groups: Vec<(u64, Vec<FileScanTask>)> = (0..n).map(|_| (0, Vec::new())).collect();
    for task in tasks {
        let (size, group) = groups
            .iter_mut()
            .min_by_key(|(size, _)| *size)
            .expect("n > 0 groups");
        *size += task.length.max(1);
        group.push(task);
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

fn external(e: iceberg::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
