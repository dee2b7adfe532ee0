//! A reference to a shared CTE: the logical node [`CteReference`] that
//! [`SharedCtes`](crate::shared_ctes::SharedCtes) puts over each reference of a CTE, its
//! physical form [`CteReferenceExec`], and the planner that maps one to the other.
//!
//! ```text
//!   SubqueryAlias(ss1)                      logical: filters of ss1 stop here
//!     CteReference                          ◄── DataFusion pushes no predicate below an
//!       Filter(widened filter of every        extension node it does not know
//!              reference of the CTE)
//!         <CTE body>
//!   ──► CteReferenceExec                    physical: passes its input's batches through;
//!         <CTE body's plan>                   takes no parent filter, no dynamic filter
//! ```
//!
//! Both nodes are barriers only: they keep every reference of one CTE the same plan, so the
//! shared-subplan rule (`scan/src/exec/shared_subplan.rs`) finds the copies equal and runs the
//! body once. Without them DataFusion pushes each reference's own filters (and, physically,
//! its joins' dynamic filters) into its copy, and the copies differ.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::common::{DFSchemaRef, Result, Statistics, internal_err};
use datafusion::execution::TaskContext;
use datafusion::execution::context::{QueryPlanner, SessionState};
use datafusion::logical_expr::{
    Expr, Extension, LogicalPlan, UserDefinedLogicalNode, UserDefinedLogicalNodeCore,
};
use datafusion::physical_plan::execution_plan::CardinalityEffect;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, SendableRecordBatchStream,
};
use datafusion::physical_planner::{DefaultPhysicalPlanner, ExtensionPlanner, PhysicalPlanner};

/// Logical barrier over one reference of a CTE (module docs). Output: its input's rows and
/// schema, unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub struct CteReference {
    input: LogicalPlan,
}

impl CteReference {
    /// The node over `input` (the reference's body, under its widened filter).
    pub fn new(input: LogicalPlan) -> Self {
        Self { input }
    }

    /// `input` wrapped as a logical plan node.
    pub fn plan(input: LogicalPlan) -> LogicalPlan {
        LogicalPlan::Extension(Extension {
            node: Arc::new(Self::new(input)),
        })
    }
}

impl UserDefinedLogicalNodeCore for CteReference {
    fn name(&self) -> &str {
        "CteReference"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.input]
    }

    fn schema(&self) -> &DFSchemaRef {
        self.input.schema()
    }

    fn expressions(&self) -> Vec<Expr> {
        vec![]
    }

    // `prevent_predicate_push_down_columns` keeps its default, every column: that is the
    // barrier. `necessary_children_exprs` keeps its default too (every column of the body),
    // so references that read different columns still read the same body.

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "CteReference")
    }

    fn with_exprs_and_inputs(&self, exprs: Vec<Expr>, inputs: Vec<LogicalPlan>) -> Result<Self> {
        if !exprs.is_empty() {
            return internal_err!("CteReference takes no expressions, got {}", exprs.len());
        }
        let [input] = <[LogicalPlan; 1]>::try_from(inputs).map_err(|v| {
            datafusion::common::internal_datafusion_err!(
                "CteReference takes one input, got {}",
                v.len()
            )
        })?;
        Ok(Self::new(input))
    }
}

/// Physical barrier over one reference of a CTE (module docs): `execute(p)` is its input's
/// partition `p`; properties and statistics are its input's. It takes no filter from its
/// parent (the default of [`ExecutionPlan::gather_filters_for_pushdown`]) and keeps no
/// projection pushed into it, so every reference's subtree stays equal.
#[derive(Debug)]
pub struct CteReferenceExec {
    input: Arc<dyn ExecutionPlan>,
    properties: Arc<PlanProperties>,
}

impl CteReferenceExec {
    /// The barrier over `input`.
    pub fn new(input: Arc<dyn ExecutionPlan>) -> Self {
        let properties = Arc::clone(input.properties());
        Self { input, properties }
    }

    /// The reference's body.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }
}

impl DisplayAs for CteReferenceExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default
            | DisplayFormatType::Verbose
            | DisplayFormatType::TreeRender => write!(f, "CteReferenceExec"),
        }
    }
}

impl ExecutionPlan for CteReferenceExec {
    fn name(&self) -> &str {
        "CteReferenceExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match <[Arc<dyn ExecutionPlan>; 1]>::try_from(children) {
            Ok([input]) => Ok(Arc::new(Self::new(input))),
            Err(v) => internal_err!("CteReferenceExec takes one child, got {}", v.len()),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        self.input.execute(partition, context)
    }

    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        self.input.partition_statistics(partition)
    }

    fn cardinality_effect(&self) -> CardinalityEffect {
        CardinalityEffect::Equal
    }
}

/// Plans [`CteReference`] as [`CteReferenceExec`]; every other node is left to the next
/// planner.
#[derive(Debug, Default)]
pub struct CteReferencePlanner;

#[async_trait]
impl ExtensionPlanner for CteReferencePlanner {
    async fn plan_extension(
        &self,
        _planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        _logical_inputs: &[&LogicalPlan],
        physical_inputs: &[Arc<dyn ExecutionPlan>],
        _session_state: &SessionState,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        if node.as_any().downcast_ref::<CteReference>().is_none() {
            return Ok(None);
        }
        match physical_inputs {
            [input] => Ok(Some(Arc::new(CteReferenceExec::new(Arc::clone(input))))),
            _ => internal_err!(
                "CteReference has one input, planned {}",
                physical_inputs.len()
            ),
        }
    }
}

/// DataFusion's physical planner with [`CteReferencePlanner`]: the query planner of a session
/// that registers [`SharedCtes`](crate::shared_ctes::SharedCtes).
#[derive(Debug, Default)]
pub struct CteQueryPlanner;

#[async_trait]
impl QueryPlanner for CteQueryPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &SessionState,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        DefaultPhysicalPlanner::with_extension_planners(vec![Arc::new(CteReferencePlanner)])
            .create_physical_plan(logical_plan, session_state)
            .await
    }
}
