//! [`IcebergTableProvider`]: a DataFusion `TableProvider` over one Iceberg table.
//!
//! ```text
//!   scan(projection, filters, limit)
//!     ──► ScanPlanner::plan_tasks (plan/planner.rs: manifest + partition pruning)
//!     ──► split by row groups, spread over target_partitions by size (plan/planned.rs)
//!     ──► assemble ──► IcebergScanExec (exec/scan_exec.rs)
//! ```
//!
//! The provider's schema is the table's **current** schema (case c06: a column added without a
//! write is visible and reads as NULL). Inside the scan each Arrow field carries its iceberg
//! field id in `PARQUET:field_id` metadata; what DataFusion sees has no field metadata
//! (`output.rs`, case c11).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::compute::SortOptions;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::{Result, Statistics, internal_err, not_impl_err, plan_err};
use datafusion::datasource::sink::DataSinkExec;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{LexRequirement, PhysicalSortRequirement};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use iceberg::Catalog;
use iceberg::spec::{NullOrder, SortDirection, Transform};
use iceberg::table::Table;

use iceflight_iceberg::commit::CommitCatalog;

use crate::exec::scan_exec::IcebergScanExecBuilder;
use crate::model::literal::literal_scalar;
use crate::plan::metrics_index::FileMetricsIndex;
use crate::plan::planned::{assemble, split_by_row_groups, spread_by_size};
use crate::plan::planner::ScanPlanner;
use crate::read::caches::ScanCaches;
use crate::write::delete::DeleteSink;
use crate::write::sink::IcebergSink;

/// A DataFusion table backed by an iceberg [`Table`] (at its current snapshot, loaded by the
/// catalog when the query is planned).
#[derive(Debug, Clone)]
pub struct IcebergTableProvider {
    /// The table, its schema and the catalog it came from; plans its scans.
    planner: ScanPlanner,
    /// Whole-snapshot statistics, when the manifests' metrics were given ([`Self::with_index`]).
    statistics: Option<Statistics>,
    /// The catalog `INSERT` and `DELETE` commit through ([`Self::with_writes`]); `None`:
    /// read-only.
    writes: Option<Arc<dyn CommitCatalog>>,
    /// The exact condition of the `DELETE` this provider was planned for
    /// ([`Self::for_delete`]; inner `None`: every row). `None`: the table refuses `DELETE`.
    delete_condition: Option<Option<Expr>>,
    /// Each top-level column's `write-default` (Iceberg v3), as a literal of its type: what an
    /// `INSERT` that leaves the column out writes.
    write_defaults: Arc<HashMap<String, Expr>>,
}

impl IcebergTableProvider {
    /// Wraps a loaded table. Errors if its current schema has no Arrow form.
    pub fn try_new(table: Table) -> Result<Self> {
        let planner = ScanPlanner::try_new(table)?;
        let write_defaults = Arc::new(write_defaults(&planner));
        Ok(Self {
            planner,
            statistics: None,
            writes: None,
            delete_condition: None,
            write_defaults,
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
    /// (`server/src/sql/delete.rs`).
    pub fn for_delete(mut self, condition: Option<Expr>) -> Self {
        self.delete_condition = Some(condition);
        self
    }

    /// Names the configured catalog the table was loaded from, so that its scans can be sent
    /// to workers, which load the table from their own configuration of that catalog
    /// (`codec.rs`).
    pub fn with_catalog(mut self, catalog: impl Into<String>) -> Self {
        self.planner = self.planner.with_catalog(catalog);
        self
    }

    /// Attaches whole-snapshot statistics from the manifests' metrics (`index` of this table's
    /// current snapshot): rows, per-column sizes, null counts, bounds and distinct counts, for
    /// logical planning ([`TableProvider::statistics`], read by `join_order.rs`).
    ///
    /// Errors: a column of the schema without an iceberg field id.
    pub fn with_index(mut self, index: &FileMetricsIndex) -> Result<Self> {
        let schema = self.planner.schema();
        let ids = (0..schema.fields().len())
            .map(|i| self.planner.field_id(i))
            .collect::<Result<Vec<_>>>()?;
        self.statistics = Some(index.table_statistics(schema, &ids));
        Ok(self)
    }

    /// A read-only view of the table with the metadata columns `_file` and `_pos` after its
    /// own (`model/metadata_columns.rs`): what `UPDATE` and `MERGE` scan to name the rows they
    /// change (`row_change_target.rs`).
    pub fn with_row_positions(&self) -> Self {
        self.read_only(self.planner.clone().with_row_positions())
    }

    /// A read-only view of the table with all four metadata columns after its own: `_file`,
    /// `_pos`, `_row_id`, `_last_updated_sequence_number` (`model/metadata_columns.rs`), what a
    /// query that names one of them reads.
    pub fn with_metadata_columns(&self) -> Self {
        self.read_only(self.planner.clone().with_metadata_columns())
    }

    /// A read-only provider of `planner` (this table with other columns): no statistics (their
    /// columns would not match), no writes.
    fn read_only(&self, planner: ScanPlanner) -> Self {
        Self {
            planner,
            statistics: None,
            writes: None,
            delete_condition: None,
            write_defaults: Arc::clone(&self.write_defaults),
        }
    }

    /// The same provider over `table`, the same table at another snapshot (metadata columns,
    /// catalog and writes kept; statistics dropped).
    ///
    /// Errors: a schema without an Arrow form.
    pub fn at(&self, table: Table) -> Result<Self> {
        let planner = self.planner.at(table)?;
        let write_defaults = Arc::new(write_defaults(&planner));
        Ok(Self {
            planner,
            statistics: None,
            writes: self.writes.clone(),
            delete_condition: None,
            write_defaults,
        })
    }

    /// Whether statements can write the table: it is read at its current snapshot and
    /// iceflight can write every column's type (`ScanPlanner::check_writable`).
    pub fn is_writable(&self) -> bool {
        self.writes.is_some() && self.planner.check_writable().is_ok()
    }

    /// The catalog writes commit through; `None` for a table read at a past snapshot.
    pub fn writes(&self) -> Option<&Arc<dyn CommitCatalog>> {
        self.writes.as_ref()
    }

    /// `ALTER TABLE … EXECUTE optimize` on this table (`write/optimize.rs`): compaction under
    /// `filters` (identity-partition columns only) of files under `threshold` bytes or with
    /// deletes, or of every file in the order `sort_by`.
    ///
    /// Errors: the table is read at a past snapshot; those of `write::optimize::optimize`.
    pub async fn optimize(
        &self,
        filters: &[Expr],
        threshold: u64,
        sort_by: Option<&crate::write::optimize::SortBy>,
        context: &Arc<datafusion::execution::TaskContext>,
    ) -> Result<crate::write::optimize::OptimizeReport> {
        let Some(catalog) = &self.writes else {
            return plan_err!(
                "optimize changes the table's current state; {} is read at a past snapshot",
                self.table().identifier()
            );
        };
        let order = self.write_order(self.planner.plain_schema());
        crate::write::optimize::optimize(
            catalog,
            &self.planner,
            order,
            filters,
            threshold,
            sort_by,
            context,
        )
        .await
    }

    /// The planner of the table's scans (its snapshot, schema and catalog).
    pub fn planner(&self) -> &ScanPlanner {
        &self.planner
    }

    /// The iceberg table.
    pub fn table(&self) -> &Table {
        self.planner.table()
    }

    /// The table's sort order as a requirement on the rows an `INSERT` writes (DataFusion sorts
    /// them before the sink, as Trino sorts on write); `None` when unsorted. Fields with a
    /// transform other than identity, or on a column not in `input`, end the requirement there.
    fn write_order(&self, input: &SchemaRef) -> Option<LexRequirement> {
        let metadata = self.table().metadata();
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
}

#[async_trait]
impl TableProvider for IcebergTableProvider {
    fn schema(&self) -> SchemaRef {
        Arc::clone(self.planner.plain_schema())
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn statistics(&self) -> Option<Statistics> {
        self.statistics.clone()
    }

    /// The column's Iceberg `write-default`: DataFusion fills it into an `INSERT` that leaves
    /// the column out (else NULL).
    fn get_column_default(&self, column: &str) -> Option<&Expr> {
        self.write_defaults.get(column)
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        let conv = self.planner.predicate_converter();
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
    /// OVERWRITE`: replaces the partitions it writes (`overwrite.rs`).
    async fn insert_into(
        &self,
        _state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let ident = self.table().identifier();
        if insert_op == InsertOp::Replace {
            return not_impl_err!(
                "{insert_op} of Iceberg table {ident} is not supported; INSERT INTO appends \
                 and INSERT OVERWRITE replaces the partitions it writes"
            );
        }
        let Some(catalog) = &self.writes else {
            return plan_err!(
                "table {ident} is read here at a snapshot other than its current one; \
                 rows are inserted into the table itself"
            );
        };
        self.planner.check_writable()?;
        let order = self.write_order(&input.schema());
        if insert_op == InsertOp::Overwrite {
            let sink = IcebergSink::overwriting(Arc::clone(catalog), self.table().clone())?;
            return Ok(Arc::new(DataSinkExec::new(input, Arc::new(sink), order)));
        }
        let sink = IcebergSink::try_new(
            Arc::clone(catalog) as Arc<dyn Catalog>,
            self.table().clone(),
        )?;
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
        let ident = self.table().identifier();
        let Some(catalog) = &self.writes else {
            return plan_err!(
                "cannot delete from {ident} as of a past snapshot (FOR VERSION or TIMESTAMP \
                 AS OF): DELETE changes the table's current state"
            );
        };
        let Some(condition) = &self.delete_condition else {
            return internal_err!("DELETE on {ident} was not planned by the session (for_delete)");
        };
        self.planner.check_writable()?;
        let sink = DeleteSink::try_new(
            Arc::clone(catalog),
            self.planner.clone(),
            condition.clone(),
            state,
        )?;
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
            self.table().identifier()
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
            None => (0..self.planner.schema().fields().len()).collect(),
        };
        let config = state.config();
        let caches = ScanCaches::of(config);
        let (inputs, index, tasks) = self
            .planner
            .plan_tasks(config, &indices, filters, limit, &caches.indexes)
            .await?;
        let target_partitions = config.target_partitions().max(1);
        let tasks = split_by_row_groups(
            tasks,
            &index,
            target_partitions,
            inputs.settings.cut_row_groups,
        );
        let file_groups = spread_by_size(tasks, target_partitions);
        let planned = assemble(inputs, index, file_groups);
        Ok(Arc::new(
            IcebergScanExecBuilder::new(planned)
                .with_access_log(Arc::clone(&caches.access))
                .build(),
        ))
    }
}

/// The `write-default` of each top-level column of `planner`'s current schema that has one
/// (table spec, "Default values"), as a literal of the column's Arrow type; a default with no
/// Arrow form here is left out (the column is then written NULL, as before v3).
fn write_defaults(planner: &ScanPlanner) -> HashMap<String, Expr> {
    let schema = planner.table().metadata().current_schema();
    planner
        .plain_schema()
        .fields()
        .iter()
        .filter_map(|field| {
            let default = schema.field_by_name(field.name())?.write_default.as_ref()?;
            let value = literal_scalar(default, field.data_type())?;
            Some((field.name().clone(), Expr::Literal(value, None)))
        })
        .collect()
}
