//! Query control from SQL: `CALL system.runtime.kill_query(query_id => '…', message => '…')`
//! (Trino's procedure), by the query's owner or an admin (`[server] admins`).
//!
//! ```text
//!   Execution::stream ──► QueryHistory::register_kill(id, sender)   (QUEUED, then RUNNING)
//!   kill_query(id) ──► owner or admin? ──► sender.send(reason)
//!       the query's task: waiting for its slots ──► fails at once
//!                         running ──► its stream ends with the error, its slots freed
//!   ──► the victim's client: `Cancelled` "query <id> was killed by <user>[: message]"
//! ```
//!
//! Errors carried typed to the edge (`flight/status.rs`): an unknown or finished query →
//! `NotFound`; another user's query killed by a non-admin → `PermissionDenied`.

use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::streaming::StreamingTable;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{DataFusionError, Result, plan_err};
use datafusion::datasource::{TableType, provider_as_source, source_as_provider};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::{LogicalPlan, LogicalPlanBuilder};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::prelude::SessionContext;

use crate::access::Access;
use crate::query_history::QueryHistory;
pub use crate::query_history::{Caller, QueryControlError, QueryKilled};

/// The plan of `CALL system.runtime.kill_query(query_id [, message])`: when executed, kills
/// the query (module docs) and answers one row `(query_id, state)` = `KILLED`.
///
/// Errors: arguments that are not one or two strings (`InvalidArgument`); at execution, those
/// of the module docs.
pub fn plan_kill(ctx: &SessionContext, args: Vec<(Option<String>, String)>) -> Result<LogicalPlan> {
    let mut id = None;
    let mut message = None;
    for (i, (name, value)) in args.into_iter().enumerate() {
        match (name.as_deref(), i) {
            (Some("query_id"), _) | (None, 0) => id = Some(value),
            (Some("message"), _) | (None, 1) => message = Some(value),
            (Some(other), _) => {
                return plan_err!(
                    "procedure system.runtime.kill_query has no argument {other}; it takes \
                     query_id, message"
                );
            }
            (None, _) => {
                return plan_err!("system.runtime.kill_query takes query_id and a message");
            }
        }
    }
    let Some(id) = id else {
        return plan_err!("system.runtime.kill_query needs query_id");
    };
    let state = ctx.state();
    let config = state.config();
    let Some(history) = config.get_extension::<QueryHistory>() else {
        return plan_err!("this session has no query list to kill from");
    };
    // The operator's own session (no access checks) may kill any query.
    let caller = match Access::of(config) {
        Some(access) => Caller {
            user: access.user().to_string(),
            admin: access.is_admin(),
        },
        None => Caller {
            user: "anonymous".to_string(),
            admin: true,
        },
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("query_id", DataType::Utf8, false),
        Field::new("state", DataType::Utf8, false),
    ]));
    let kill = Kill {
        schema: Arc::clone(&schema),
        history,
        caller,
        id,
        message,
    };
    let table = KillTable(StreamingTable::try_new(schema, vec![Arc::new(kill)])?);
    LogicalPlanBuilder::scan(
        "system.runtime.kill_query",
        provider_as_source(Arc::new(table)),
        None,
    )?
    .build()
}

/// Whether `plan` is a `kill_query` ([`plan_kill`]): it runs without a query slot. Known by
/// the table its scan reads, which only [`plan_kill`] makes, never by a name a user's table
/// could also have.
pub fn is_kill(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply(|node| {
        if let LogicalPlan::TableScan(scan) = node
            && source_as_provider(&scan.source)
                .is_ok_and(|p| p.downcast_ref::<KillTable>().is_some())
        {
            found = true;
        }
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    });
    found
}

/// The table a `kill_query` plan scans: one row, the kill done when it is read.
#[derive(Debug)]
struct KillTable(StreamingTable);

#[async_trait::async_trait]
impl TableProvider for KillTable {
    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }

    fn table_type(&self) -> TableType {
        self.0.table_type()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.0.scan(state, projection, filters, limit).await
    }
}

/// The one partition of a `kill_query` plan: kills when executed.
#[derive(Debug)]
struct Kill {
    schema: SchemaRef,
    history: Arc<QueryHistory>,
    caller: Caller,
    id: String,
    message: Option<String>,
}

impl PartitionStream for Kill {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _context: Arc<TaskContext>) -> SendableRecordBatchStream {
        let killed = self
            .history
            .kill(&self.id, &self.caller, self.message.clone())
            .map_err(|e| DataFusionError::External(Box::new(e)))
            .and_then(|()| {
                Ok(RecordBatch::try_new(
                    Arc::clone(&self.schema),
                    vec![
                        Arc::new(StringArray::from(vec![self.id.clone()])),
                        Arc::new(StringArray::from(vec!["KILLED"])),
                    ],
                )?)
            });
        Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            futures::stream::once(async move { killed }),
        ))
    }
}
