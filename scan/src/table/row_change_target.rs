//! The target of `UPDATE`, `MERGE INTO` and merge-on-read `DELETE` as DataFusion plans it: a
//! table whose columns are the change stream's (`write/row_change.rs`) and whose `INSERT`
//! applies the changes. The session plans the statement as `INSERT INTO <this> <change
//! stream>` (`server/src/sql/row_change.rs`), so prepared statements, `EXPLAIN` and
//! the count of changed rows work as for `INSERT`.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::{Result, not_impl_err, plan_err};
use datafusion::datasource::sink::DataSinkExec;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use datafusion::catalog::default_table_source::{provider_as_source, source_as_provider};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::LogicalPlan;

use crate::plan::planner::ScanPlanner;
use crate::table::provider::IcebergTableProvider;
use crate::write::row_change::{ReplanFn, Rerun, RowChangeSink, change_schema};
use crate::write::write_mode::RowOperation;

/// One statement's row changes to one table (module docs).
#[derive(Debug, Clone)]
pub struct RowChangeTarget {
    table: IcebergTableProvider,
    operation: RowOperation,
    schema: SchemaRef,
    /// The change stream as planned, to plan again on a newer snapshot after a conflict.
    input: Option<LogicalPlan>,
}

impl RowChangeTarget {
    /// The target of `operation` on `table` (the provider the change stream scans, at the same
    /// snapshot).
    ///
    /// Errors: a table read at a past snapshot (time travel), which cannot change.
    pub fn try_new(table: IcebergTableProvider, operation: RowOperation) -> Result<Self> {
        if table.writes().is_none() {
            return plan_err!(
                "cannot {} {} as of a past snapshot (FOR VERSION or TIMESTAMP AS OF): the \
                 statement changes the table's current state",
                operation.keyword(),
                table.table().identifier()
            );
        }
        table.planner().check_writable()?;
        let schema = change_schema(table.planner().plain_schema());
        Ok(Self {
            table,
            operation,
            schema,
            input: None,
        })
    }

    /// Keeps `input`, the change stream's logical plan, so that a statement another writer
    /// raced is run again on the new snapshot (`write/row_change.rs`, "Concurrency"): every
    /// scan of this table in it is then read at that snapshot.
    pub fn with_input(mut self, input: LogicalPlan) -> Self {
        self.input = Some(input);
        self
    }

    /// The statement this target applies.
    pub fn operation(&self) -> RowOperation {
        self.operation
    }

    /// The table the statement changes.
    pub fn table(&self) -> &IcebergTableProvider {
        &self.table
    }
}

#[async_trait]
impl TableProvider for RowChangeTarget {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![
            TableProviderFilterPushDown::Unsupported;
            filters.len()
        ])
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        _projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        not_impl_err!(
            "the change stream of a {} is not a table to read",
            self.operation.keyword()
        )
    }

    /// Applies the change stream `input` (module docs); one row out, the rows changed.
    async fn insert_into(
        &self,
        state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        _insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(catalog) = self.table.writes() else {
            return plan_err!("{} is read-only here", self.table.table().identifier());
        };
        let mut sink = RowChangeSink::try_new(
            Arc::clone(catalog),
            self.table.planner().clone(),
            self.operation,
        )?;
        if let (Some(plan), Some(state)) =
            (&self.input, state.as_any().downcast_ref::<SessionState>())
        {
            let plan = plan.clone();
            let ident = self.table.table().identifier().clone();
            let planned = self.table.table().metadata().current_snapshot_id();
            let replan: ReplanFn = Arc::new(move |planner: &ScanPlanner| {
                at_snapshot(plan.clone(), &ident, planned, planner)
            });
            sink = sink.with_rerun(Rerun::new(state.clone(), replan));
        }
        Ok(Arc::new(DataSinkExec::new(input, Arc::new(sink), None)))
    }
}

/// `plan` with every scan of table `ident` at the snapshot the statement was planned on
/// (`planned`) reading the snapshot `planner` holds instead (the scans keep their metadata
/// columns and catalog); a scan of another snapshot of it (`FOR VERSION AS OF`) stays.
fn at_snapshot(
    plan: LogicalPlan,
    ident: &iceberg::TableIdent,
    planned: Option<i64>,
    planner: &ScanPlanner,
) -> Result<LogicalPlan> {
    plan.transform_up(|node| {
        let LogicalPlan::TableScan(scan) = &node else {
            return Ok(Transformed::no(node));
        };
        let provider = source_as_provider(&scan.source)?;
        let Some(iceberg) = provider.downcast_ref::<IcebergTableProvider>() else {
            return Ok(Transformed::no(node));
        };
        if iceberg.table().identifier() != ident
            || iceberg.table().metadata().current_snapshot_id() != planned
        {
            return Ok(Transformed::no(node));
        }
        let moved = iceberg.at(planner.table().clone())?;
        let mut scan = scan.clone();
        scan.source = provider_as_source(Arc::new(moved));
        Ok(Transformed::yes(LogicalPlan::TableScan(scan)))
    })
    .map(|t| t.data)
}
