//! Shared subplans: an identical subtree referenced twice in one plan (a CTE, a repeated
//! subquery) runs once and feeds every consumer.
//!
//! ```text
//!   plan (after every other physical rule)
//!     ──► candidates: AggregateExec subtrees whose leaves are all Iceberg scans (hash joins,
//!         filters, projections, unions and repartitioning between them)
//!     ──► groups of subtrees equal node by node (`same_plan`: each operator's verbose
//!         display, schema and children, the numbers DataFusion gives common subexpressions
//!         aside; a scan by table, snapshot, files, columns, static
//!         filters and limit — its dynamic filters aside), largest first
//!     ──► every member replaced by a SharedSubplanExec over one copy, whose scans keep only
//!         the dynamic filters of the copy's own joins (one from a join above came from one
//!         consumer and would drop rows another consumer needs)
//!   execute(p) by any consumer ──► the first starts partition p of the copy in a task of its
//!   own and keeps its batches (reserved in the memory pool); every consumer of p streams
//!   them; the batches are freed when the last consumer has taken them
//! ```
//!
//! TPC-H q15 computes its `revenue` CTE twice (once for the join, once for `max` in the
//! scalar subquery); DataFusion 54.1 plans it twice. TPC-DS q47 and q57 join their CTE `v1`
//! (a star join of the sales table with three dimensions, then an aggregate) with itself
//! twice: three copies of the whole join. DuckDB materializes a CTE referenced twice. Only aggregates are shared: their output is small beside their input, so keeping it
//! costs little memory, and the subtree's work (a scan and a hash aggregation) is saved whole.
//! Plans with a recursive query are left alone (its recursive term runs once per iteration).
//! Memory: each partition's batches are reserved in the session's memory pool; a pool too
//! small fails the query with DataFusion's resources-exhausted error, as any operator that
//! cannot spill (`SET iceflight.optimizer.shared_subplans = false` computes each copy again).

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DataFusionError, Result, exec_datafusion_err, internal_err};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{Partitioning, PhysicalExpr};
use datafusion::physical_expr_common::physical_expr::is_volatile;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::execution_plan::EmissionType;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::union::{InterleaveExec, UnionExec};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties,
    SendableRecordBatchStream,
};
use futures::future::{BoxFuture, FutureExt, Shared};
use futures::{StreamExt, TryStreamExt, stream};

use crate::exec::scan_exec::IcebergScanExec;
use iceflight_options::IceflightOptions;

/// Physical optimizer rule: identical aggregate subtrees run once (module docs).
#[derive(Debug, Default)]
pub struct SharedSubplans;

impl PhysicalOptimizerRule for SharedSubplans {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !IceflightOptions::of(config).optimizer.shared_subplans || has_recursive_query(&plan) {
            return Ok(plan);
        }
        // Candidates in pre-order (an enclosing subtree before the ones inside it).
        let mut candidates: Vec<Arc<dyn ExecutionPlan>> = vec![];
        plan.apply(|node| {
            if node.downcast_ref::<AggregateExec>().is_some() && reads_only_iceberg(node) {
                candidates.push(Arc::clone(node));
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        // Groups of equal candidates, by the first member; a subtree inside a shared one is
        // not shared again.
        let mut groups: Vec<Vec<Arc<dyn ExecutionPlan>>> = vec![];
        let mut taken: Vec<Arc<dyn ExecutionPlan>> = vec![];
        for (i, c) in candidates.iter().enumerate() {
            if taken
                .iter()
                .any(|t| Arc::ptr_eq(t, c) || contains(t, c) || contains(c, t))
            {
                continue;
            }
            let equal: Vec<_> = candidates[i + 1..]
                .iter()
                .filter(|o| {
                    !Arc::ptr_eq(o, c)
                        && !contains(c, o)
                        && !contains(o, c)
                        && !taken
                            .iter()
                            .any(|t| Arc::ptr_eq(t, o) || contains(t, o) || contains(o, t))
                        && same_plan(c, o)
                })
                .cloned()
                .collect();
            if equal.is_empty() {
                continue;
            }
            let mut group = vec![Arc::clone(c)];
            group.extend(equal);
            taken.extend(group.iter().cloned());
            groups.push(group);
        }
        if groups.is_empty() {
            return Ok(plan);
        }
        let mut replacements: Vec<(Arc<dyn ExecutionPlan>, Arc<dyn ExecutionPlan>)> = vec![];
        for group in groups {
            let copy = without_outside_dynamic_filters(Arc::clone(&group[0]))?;
            let state = Arc::new(SharedState::new(
                group.len(),
                copy.output_partitioning().partition_count(),
            ));
            for member in group {
                let node = SharedSubplanExec::new(Arc::clone(&copy), Arc::clone(&state));
                replacements.push((member, Arc::new(node)));
            }
        }
        plan.transform_down(|node| {
            match replacements.iter().find(|(old, _)| Arc::ptr_eq(old, &node)) {
                Some((_, new)) => Ok(Transformed::new(
                    Arc::clone(new),
                    true,
                    TreeNodeRecursion::Jump,
                )),
                None => Ok(Transformed::no(node)),
            }
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "iceflight_shared_subplans"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Whether `plan` holds a recursive query, whose recursive term runs again for every
/// iteration: a shared partition is computed once and taken by its consumers once.
fn has_recursive_query(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.name() == "RecursiveQueryExec" || plan.children().iter().any(|c| has_recursive_query(c))
}

/// Whether every leaf under `plan` is an Iceberg scan.
fn reads_only_iceberg(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let mut only = true;
    let mut any = false;
    let _ = plan.apply(|node| {
        if node.children().is_empty() {
            if node.downcast_ref::<IcebergScanExec>().is_some() {
                any = true;
            } else {
                only = false;
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    only && any
}

/// Whether `inner` is a node of `outer`'s subtree (other than `outer` itself).
fn contains(outer: &Arc<dyn ExecutionPlan>, inner: &Arc<dyn ExecutionPlan>) -> bool {
    outer
        .children()
        .iter()
        .any(|c| Arc::ptr_eq(c, inner) || contains(c, inner))
}

/// Whether `a` and `b` compute the same rows in the same partitions (module docs).
fn same_plan(a: &Arc<dyn ExecutionPlan>, b: &Arc<dyn ExecutionPlan>) -> bool {
    match (
        a.downcast_ref::<IcebergScanExec>(),
        b.downcast_ref::<IcebergScanExec>(),
    ) {
        (Some(x), Some(y)) => {
            let same = x.reads_same_as(y);
            if !same {
                tracing::trace!("shared subplan: scans differ");
            }
            return same;
        }
        (None, None) => {}
        _ => return false,
    }
    let (ca, cb) = (a.children(), b.children());
    // Each operator's expressions compared as expressions (a display shows a string literal
    // unquoted and every scalar subquery as `scalar_subquery(<pending>)`); operators whose
    // expressions are not known here, and volatile expressions, are never shared.
    let same_expressions = match (expressions(a), expressions(b)) {
        (Some(x), Some(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(&y)
                    .all(|(p, q)| numbers_aside(p).as_ref() == numbers_aside(q).as_ref())
                && !x.iter().any(is_volatile)
        }
        _ => false,
    };
    if !same_expressions {
        tracing::trace!(node = a.name(), "shared subplan: expressions differ");
        return false;
    }
    // A hash join's shape beyond its expressions, which its display shows only in part: the
    // side each filter column reads, NULL equality, the output projection.
    if let (Some(x), Some(y)) = (
        a.downcast_ref::<HashJoinExec>(),
        b.downcast_ref::<HashJoinExec>(),
    ) {
        let shape = |j: &HashJoinExec| {
            (
                *j.join_type(),
                *j.partition_mode(),
                j.null_equality(),
                j.null_aware,
                j.projection.clone(),
                j.filter().map(|f| f.column_indices().to_vec()),
            )
        };
        if shape(x) != shape(y) {
            tracing::trace!("shared subplan: join shapes differ");
            return false;
        }
    }
    // `Partitioning`'s `==` never holds for `UnknownPartitioning`: compare what it shows.
    let partitioning = |p: &Arc<dyn ExecutionPlan>| p.output_partitioning().to_string();
    let node = a.name() == b.name()
        && same_schema(a, b)
        && partitioning(a) == partitioning(b)
        && without_numbers(&Verbose(a.as_ref()).to_string())
            == without_numbers(&Verbose(b.as_ref()).to_string())
        && ca.len() == cb.len();
    if !node && a.name() == b.name() {
        tracing::trace!(
            node = a.name(),
            schema = same_schema(a, b),
            partitioning = partitioning(a) == partitioning(b),
            "shared subplan: nodes differ"
        );
    }
    node && ca.iter().zip(cb).all(|(x, y)| same_plan(x, y))
}

/// Prefix of the aliases DataFusion's common-subexpression elimination makes,
/// `__common_expr_<n>`, numbered across the whole plan: two copies of one CTE name the same
/// expression with different numbers (TPC-DS q39, q75). A physical expression reads its
/// columns by index, so the number is only a name, and the comparisons leave it aside.
const COMMON_EXPR: &str = "__common_expr_";

/// `text` with the number after each [`COMMON_EXPR`] removed.
fn without_numbers(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(COMMON_EXPR) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(COMMON_EXPR) {
        let after = at + COMMON_EXPR.len();
        out.push_str(&rest[..after]);
        rest = rest[after..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// `expr` with its columns' [`COMMON_EXPR`] numbers removed.
fn numbers_aside(expr: &Arc<dyn PhysicalExpr>) -> Arc<dyn PhysicalExpr> {
    Arc::clone(expr)
        .transform(|e| {
            let renamed = e
                .downcast_ref::<Column>()
                .filter(|c| c.name().contains(COMMON_EXPR))
                .map(|c| Column::new(&without_numbers(c.name()), c.index()));
            Ok(match renamed {
                Some(c) => Transformed::yes(Arc::new(c) as Arc<dyn PhysicalExpr>),
                None => Transformed::no(e),
            })
        })
        .map(|t| t.data)
        .unwrap_or_else(|_| Arc::clone(expr))
}

/// Whether `a` and `b` output the same fields, their names' [`COMMON_EXPR`] numbers aside.
fn same_schema(a: &Arc<dyn ExecutionPlan>, b: &Arc<dyn ExecutionPlan>) -> bool {
    let (x, y) = (a.schema(), b.schema());
    x.metadata() == y.metadata()
        && x.fields().len() == y.fields().len()
        && x.fields().iter().zip(y.fields()).all(|(f, g)| {
            without_numbers(f.name()) == without_numbers(g.name())
                && f.data_type() == g.data_type()
                && f.is_nullable() == g.is_nullable()
                && f.metadata() == g.metadata()
        })
}

/// The expressions of an operator the rule may share (aggregates, hash joins, filters,
/// projections, repartitioning, coalescing, unions); `None` for any other.
fn expressions(plan: &Arc<dyn ExecutionPlan>) -> Option<Vec<Arc<dyn PhysicalExpr>>> {
    if let Some(j) = plan.downcast_ref::<HashJoinExec>() {
        // Join type, mode, projection and the filter's column indices are in the display.
        let mut out: Vec<Arc<dyn PhysicalExpr>> = j
            .on()
            .iter()
            .flat_map(|(l, r)| [Arc::clone(l), Arc::clone(r)])
            .collect();
        out.extend(j.filter().map(|f| Arc::clone(f.expression())));
        return Some(out);
    }
    if let Some(a) = plan.downcast_ref::<AggregateExec>() {
        let mut out: Vec<Arc<dyn PhysicalExpr>> = a
            .group_expr()
            .expr()
            .iter()
            .map(|(e, _)| Arc::clone(e))
            .collect();
        for f in a.aggr_expr() {
            out.extend(f.expressions());
        }
        out.extend(a.filter_expr().iter().flatten().cloned());
        return Some(out);
    }
    if let Some(f) = plan.downcast_ref::<FilterExec>() {
        return Some(vec![Arc::clone(f.predicate())]);
    }
    if let Some(p) = plan.downcast_ref::<ProjectionExec>() {
        return Some(p.expr().iter().map(|e| Arc::clone(&e.expr)).collect());
    }
    if let Some(r) = plan.downcast_ref::<RepartitionExec>() {
        return Some(match r.partitioning() {
            Partitioning::Hash(exprs, _) => exprs.clone(),
            _ => vec![],
        });
    }
    if plan.downcast_ref::<CoalescePartitionsExec>().is_some()
        || plan.downcast_ref::<UnionExec>().is_some()
        || plan.downcast_ref::<InterleaveExec>().is_some()
        || plan.downcast_ref::<IcebergScanExec>().is_some()
    {
        return Some(vec![]);
    }
    None
}

/// One operator's verbose display line.
struct Verbose<'a>(&'a dyn ExecutionPlan);

impl fmt::Display for Verbose<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt_as(DisplayFormatType::Verbose, f)
    }
}

/// `plan` with every Iceberg scan's dynamic filters dropped except those a hash join inside
/// `plan` produces (identified by expression id): the copy's joins run for every consumer.
fn without_outside_dynamic_filters(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    let mut inside: HashSet<u64> = HashSet::new();
    plan.apply(|node| {
        if let Some(id) = node
            .downcast_ref::<HashJoinExec>()
            .and_then(|j| j.dynamic_filter_expr())
            .and_then(|f| f.expression_id())
        {
            inside.insert(id);
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    plan.transform_up(|node| match node.downcast_ref::<IcebergScanExec>() {
        Some(scan) if scan.has_dynamic_filters() => {
            let kept = scan.retaining_dynamic_filters(|f| {
                f.expression_id().is_some_and(|id| inside.contains(&id))
            });
            Ok(match kept {
                Some(kept) => Transformed::yes(Arc::new(kept) as Arc<dyn ExecutionPlan>),
                None => Transformed::no(node),
            })
        }
        _ => Ok(Transformed::no(node)),
    })
    .map(|t| t.data)
}

/// One partition's batches and their memory reservation (freed with them).
#[derive(Debug)]
struct Kept {
    batches: Vec<RecordBatch>,
    _reservation: MemoryReservation,
}

type Computed = Shared<BoxFuture<'static, std::result::Result<Arc<Kept>, Arc<DataFusionError>>>>;

/// What the consumers of one shared subtree share: per output partition, its computation
/// and how many consumers have taken it.
#[derive(Debug)]
struct SharedState {
    consumers: usize,
    partitions: Mutex<Vec<Partition>>,
}

#[derive(Default)]
enum Partition {
    #[default]
    NotStarted,
    Started {
        computed: Computed,
        taken: usize,
    },
    Done,
}

impl fmt::Debug for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotStarted => write!(f, "NotStarted"),
            Self::Started { taken, .. } => write!(f, "Started({taken} taken)"),
            Self::Done => write!(f, "Done"),
        }
    }
}

impl SharedState {
    fn new(consumers: usize, partitions: usize) -> Self {
        Self {
            consumers,
            partitions: Mutex::new((0..partitions).map(|_| Partition::NotStarted).collect()),
        }
    }
}

/// One consumer's view of a shared subtree: partition `p` is partition `p` of the subtree,
/// computed once for all consumers (module docs).
#[derive(Debug)]
pub struct SharedSubplanExec {
    input: Arc<dyn ExecutionPlan>,
    state: Arc<SharedState>,
    metrics: ExecutionPlanMetricsSet,
    cache: Arc<PlanProperties>,
}

impl SharedSubplanExec {
    fn new(input: Arc<dyn ExecutionPlan>, state: Arc<SharedState>) -> Self {
        let p = input.properties();
        let cache = Arc::new(PlanProperties::new(
            p.eq_properties.clone(),
            p.partitioning.clone(),
            EmissionType::Final,
            p.boundedness,
        ));
        Self {
            input,
            state,
            metrics: ExecutionPlanMetricsSet::new(),
            cache,
        }
    }

    /// How many operators of the plan read this subtree.
    pub fn consumers(&self) -> usize {
        self.state.consumers
    }

    /// The computation of `partition`, started by the first consumer to ask.
    fn computation(&self, partition: usize, context: &Arc<TaskContext>) -> Result<Computed> {
        let mut partitions = self.state.partitions.lock().expect("shared subplan state");
        let Some(slot) = partitions.get_mut(partition) else {
            return internal_err!("SharedSubplanExec: invalid partition {partition}");
        };
        let (computed, taken) = match std::mem::take(slot) {
            Partition::NotStarted => (self.start(partition, context)?, 0),
            Partition::Started { computed, taken } => (computed, taken),
            Partition::Done => {
                return internal_err!(
                    "SharedSubplanExec: partition {partition} executed by more than its {} consumers",
                    self.state.consumers
                );
            }
        };
        // The last consumer takes the computation away: its batches are freed with the
        // consumers' streams.
        *slot = if taken + 1 >= self.state.consumers {
            Partition::Done
        } else {
            Partition::Started {
                computed: computed.clone(),
                taken: taken + 1,
            }
        };
        Ok(computed)
    }

    /// Partition `partition` of the subtree, collected in a task of its own (so it advances
    /// whichever consumer polls), its batches reserved in the memory pool.
    fn start(&self, partition: usize, context: &Arc<TaskContext>) -> Result<Computed> {
        let input = self.input.execute(partition, Arc::clone(context))?;
        let reservation = MemoryConsumer::new(format!("SharedSubplanExec[{partition}]"))
            .register(context.memory_pool());
        let task = SpawnedTask::spawn(async move {
            let batches: Vec<RecordBatch> = input
                .and_then(|b| {
                    let grown = reservation.try_grow(b.get_array_memory_size());
                    futures::future::ready(grown.map(|()| b))
                })
                .try_collect()
                .await?;
            Ok::<_, DataFusionError>(Kept {
                batches,
                _reservation: reservation,
            })
        });
        Ok(async move {
            match task.join().await {
                Ok(Ok(kept)) => Ok(Arc::new(kept)),
                Ok(Err(e)) => Err(Arc::new(e)),
                Err(e) => Err(Arc::new(exec_datafusion_err!(
                    "SharedSubplanExec: partition {partition} failed: {e}"
                ))),
            }
        }
        .boxed()
        .shared())
    }
}

impl DisplayAs for SharedSubplanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(f, "SharedSubplanExec: consumers={}", self.state.consumers)
            }
            DisplayFormatType::TreeRender => write!(f, "consumers={}", self.state.consumers),
        }
    }
}

impl ExecutionPlan for SharedSubplanExec {
    fn name(&self) -> &'static str {
        "SharedSubplanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return internal_err!("SharedSubplanExec has one child");
        }
        let input = children.remove(0);
        if Arc::ptr_eq(&input, &self.input) {
            return Ok(self);
        }
        // A new child is no longer the subtree the other consumers share: compute it alone.
        let partitions = input.output_partitioning().partition_count();
        Ok(Arc::new(Self::new(
            input,
            Arc::new(SharedState::new(1, partitions)),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let computed = self.computation(partition, &context)?;
        let output_rows = MetricBuilder::new(&self.metrics).output_rows(partition);
        let batches = stream::once(computed)
            .map(move |r| match r {
                Ok(kept) => {
                    let batches = kept.batches.clone();
                    output_rows.add(batches.iter().map(|b| b.num_rows()).sum());
                    stream::iter(batches.into_iter().map(Ok)).boxed()
                }
                Err(e) => {
                    stream::once(futures::future::ready(Err(DataFusionError::Shared(e)))).boxed()
                }
            })
            .flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema(),
            batches,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::without_numbers;

    /// Only the number after each `__common_expr_` goes; other digits stay.
    #[test]
    fn common_expression_numbers_are_left_aside() {
        assert_eq!(
            without_numbers("CAST(x@0 AS Float64) as __common_expr_12, y@1 as y2"),
            "CAST(x@0 AS Float64) as __common_expr_, y@1 as y2"
        );
        assert_eq!(
            without_numbers("sum(__common_expr_1@0), avg(__common_expr_3@0)"),
            without_numbers("sum(__common_expr_2@0), avg(__common_expr_4@0)")
        );
        assert_ne!(
            without_numbers("__common_expr_1@0"),
            without_numbers("__common_expr_1@1")
        );
        assert_eq!(without_numbers("no alias 7"), "no alias 7");
    }
}
