//! [`SharedCtes`]: an analyzer rule that keeps every reference of a CTE (or of any aggregate
//! subquery written twice) the same plan, so that it runs once, filtered by the union of what
//! its references keep.
//!
//! ```text
//!   WITH ss AS (SELECT ca_county, d_qoy, d_year, sum(..) FROM store_sales, date_dim, .. GROUP BY ..)
//!   SELECT .. FROM ss ss1, ss ss2, ss ss3
//!   WHERE ss1.d_qoy = 1 AND ss1.d_year = 2000 AND ss2.d_qoy = 2 AND ss2.d_year = 2000 AND ..
//!
//!   each reference SubqueryAlias(ssᵢ, <body>)
//!   ──► SubqueryAlias(ssᵢ, CteReference(Filter(d_qoy IN (1, 2, 3) AND d_year = 2000, <body>)))
//! ```
//!
//! **Why.** DataFusion inlines a CTE at each reference and pushes each reference's filters
//! into its own copy, so the copies differ and the shared-subplan rule
//! (`scan/src/exec/shared_subplan.rs`) cannot run them once. TPC-DS q31 reads `store_sales`
//! three times and `web_sales` three times, once per quarter; q04 reads each of its three
//! sales tables twice (DuckDB 1.5.5 materializes such a CTE and reads them once). Behind a
//! [`CteReference`] each reference keeps its own filters above the barrier and the body is
//! the same everywhere; the widened filter gives the body what every reference needs, so the
//! pushdown of the filters the references share is kept.
//!
//! **The widened filter.** For each reference, the conjuncts of the `WHERE` above it (reached
//! through inner joins only) that read one column of that reference alone. For a column every
//! reference restricts, the disjunction over the references of their conjuncts on it; the
//! conjunction of these over the columns. Each reference's rows pass its own conjuncts, hence
//! that disjunction: the widened filter only removes rows no reference reads. Its conjuncts on
//! one column each are what DataFusion's filter pushdown can take through the body's
//! aggregate (its group columns) into its scans; a disjunction of whole conjunctions would stop
//! at the aggregate whenever one reference also filters an aggregate value (q04's
//! `year_total > 0`). A reference under a `WHERE` this rule cannot see through (an outer join,
//! a projection) restricts nothing, so the columns it leaves free get no widened filter.
//!
//! **Which subtrees.** A `SubqueryAlias` whose input (below further aliases) is rooted in an
//! aggregate (through projections, filters and `UNION ALL`) and that appears at least twice,
//! equal node by node: the shared-subplan rule shares aggregates only (their output is small).
//! A derived table inside such a body appears once per reference of the body; it is left to
//! the body's barrier.
//! Plans with a recursive query are left alone, as by that rule. Switched by
//! `iceflight.optimizer.shared_ctes`, and off with `iceflight.optimizer.shared_subplans`. An analyzer rule because it must run before
//! DataFusion's filter pushdown, the optimizer's first passes.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, Result};
use datafusion::logical_expr::utils::{conjunction, disjunction, split_conjunction};
use datafusion::logical_expr::{Expr, Filter, JoinType, LogicalPlan, SubqueryAlias};
use datafusion::optimizer::AnalyzerRule;
use iceflight_options::IceflightOptions;

use crate::cte_reference::CteReference;

/// The rule (module docs); switched by `iceflight.optimizer.shared_ctes` (and off with
/// `iceflight.optimizer.shared_subplans`). Its sessions
/// must plan [`CteReference`] ([`CteQueryPlanner`](crate::cte_reference::CteQueryPlanner)).
#[derive(Debug, Default)]
pub struct SharedCtes;

impl AnalyzerRule for SharedCtes {
    fn name(&self) -> &str {
        "iceflight_shared_ctes"
    }

    fn analyze(&self, plan: LogicalPlan, config: &ConfigOptions) -> Result<LogicalPlan> {
        let options = IceflightOptions::of(config).optimizer;
        if !(options.shared_subplans && options.shared_ctes)
            || plan.exists(|n| Ok(matches!(n, LogicalPlan::RecursiveQuery(_))))?
        {
            return Ok(plan);
        }
        let groups = widened_groups(&plan)?;
        if groups.is_empty() {
            return Ok(plan);
        }
        plan.transform_down_with_subqueries(|node| {
            let LogicalPlan::SubqueryAlias(alias) = &node else {
                return Ok(Transformed::no(node));
            };
            let body = below_aliases(&alias.input);
            let Some(group) = groups.iter().find(|g| &g.body == body) else {
                return Ok(Transformed::no(node));
            };
            let body = body.clone();
            let filtered = match &group.filter {
                Some(filter) => {
                    LogicalPlan::Filter(Filter::try_new(filter.clone(), Arc::new(body))?)
                }
                None => body,
            };
            let reference = CteReference::plan(filtered);
            Ok(Transformed::yes(LogicalPlan::SubqueryAlias(
                SubqueryAlias::try_new(Arc::new(reference), alias.alias.clone())?,
            )))
        })
        .map(|t| t.data)
    }
}

/// One CTE body referenced at least twice and the widened filter of its references (`None`:
/// none restricts a column every other one restricts too).
struct Group {
    body: LogicalPlan,
    filter: Option<Expr>,
}

/// A reference: the address of its outermost `SubqueryAlias` node in the plan being analyzed
/// (addresses are stable while the plan is only read).
type Address = usize;

fn address(node: &LogicalPlan) -> Address {
    std::ptr::from_ref(node) as Address
}

/// The groups of equal aggregate-rooted bodies referenced at least twice, each with the
/// widened filter of its references (module docs).
fn widened_groups(plan: &LogicalPlan) -> Result<Vec<Group>> {
    // The references: outermost aliases only (`ss ss1` is `SubqueryAlias(ss1,
    // SubqueryAlias(ss, body))`).
    let mut inner: Vec<Address> = vec![];
    let mut bodies: Vec<(LogicalPlan, Vec<Address>)> = vec![];
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::SubqueryAlias(alias) = node
            && !inner.contains(&address(node))
        {
            let mut below = alias.input.as_ref();
            while let LogicalPlan::SubqueryAlias(a) = below {
                inner.push(address(below));
                below = a.input.as_ref();
            }
            // A body reading an outer query's columns stays where decorrelation can see
            // through it (it stops at an extension node with outer references below it,
            // found as here).
            if aggregate_rooted(below) && below.all_out_ref_exprs().is_empty() {
                match bodies.iter_mut().find(|(b, _)| b == below) {
                    Some((_, members)) => members.push(address(node)),
                    None => bodies.push((below.clone(), vec![address(node)])),
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    bodies.retain(|(_, members)| members.len() >= 2);
    // A body inside another group's body appears once per reference of that one (TPC-DS
    // q39's derived table `foo` inside CTE `inv`): the outer barrier covers it, and one of its
    // own would stop the outer widened filter.
    let nested: Vec<bool> = bodies
        .iter()
        .map(|(inner, _)| {
            for (outer, _) in &bodies {
                if outer != inner && contains_reference(outer, inner)? {
                    return Ok(true);
                }
            }
            Ok(false)
        })
        .collect::<Result<_>>()?;
    let mut nested = nested.into_iter();
    bodies.retain(|_| !nested.next().unwrap_or(false));
    if bodies.is_empty() {
        return Ok(vec![]);
    }
    // Each reference's single-column conjuncts, by column index.
    let mut restricted: HashMap<Address, Vec<(usize, Expr)>> = HashMap::new();
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::Filter(filter) = node {
            let mut reachable = vec![];
            through_inner_joins(&filter.input, &mut reachable);
            for conjunct in split_conjunction(&filter.predicate) {
                if let Some((reference, index)) = one_column_of_one(conjunct, &reachable) {
                    restricted
                        .entry(reference)
                        .or_default()
                        .push((index, conjunct.clone()));
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    bodies
        .into_iter()
        .map(|(body, members)| {
            let filter = widened_filter(&body, &members, &restricted)?;
            Ok(Group { body, filter })
        })
        .collect()
}

/// The conjunction over the body's columns of the disjunction, over the references, of each
/// reference's conjuncts on that column; columns some reference leaves free are skipped.
fn widened_filter(
    body: &LogicalPlan,
    members: &[Address],
    restricted: &HashMap<Address, Vec<(usize, Expr)>>,
) -> Result<Option<Expr>> {
    let schema = body.schema();
    let mut per_column = vec![];
    for index in 0..schema.fields().len() {
        let column = Expr::Column(Column::from(schema.qualified_field(index)));
        let mut alternatives: Vec<Expr> = vec![];
        let mut every_member = true;
        for member in members {
            let own: Vec<Expr> = restricted
                .get(member)
                .into_iter()
                .flatten()
                .filter(|(i, _)| *i == index)
                .map(|(_, e)| on_column(e, &column))
                .collect::<Result<_>>()?;
            match conjunction(own) {
                Some(own) => {
                    if !alternatives.contains(&own) {
                        alternatives.push(own);
                    }
                }
                None => {
                    every_member = false;
                    break;
                }
            }
        }
        if every_member && let Some(any) = disjunction(alternatives) {
            per_column.push(any);
        }
    }
    Ok(conjunction(per_column))
}

/// `conjunct` with its one column replaced by `column` (the body's column at its index).
fn on_column(conjunct: &Expr, column: &Expr) -> Result<Expr> {
    conjunct
        .clone()
        .transform(|e| match e {
            Expr::Column(_) => Ok(Transformed::yes(column.clone())),
            e => Ok(Transformed::no(e)),
        })
        .map(|t| t.data)
}

/// The reference (among `reachable`, outermost aliases) and column index `conjunct` reads, if
/// it reads one column of one of them only, deterministically and without a subquery.
fn one_column_of_one(conjunct: &Expr, reachable: &[&LogicalPlan]) -> Option<(Address, usize)> {
    let columns = conjunct.column_refs();
    let mut columns = columns.into_iter();
    let column = columns.next()?;
    if columns.next().is_some()
        || conjunct.is_volatile()
        || conjunct.contains_outer()
        || conjunct
            .exists(|e| {
                Ok(matches!(
                    e,
                    Expr::ScalarSubquery(_)
                        | Expr::Exists(_)
                        | Expr::InSubquery(_)
                        | Expr::SetComparison(_)
                ))
            })
            .unwrap_or(true)
    {
        return None;
    }
    let relation = column.relation.as_ref()?;
    let mut found = reachable
        .iter()
        .filter(|node| matches!(node, LogicalPlan::SubqueryAlias(a) if &a.alias == relation));
    let node = found.next()?;
    if found.next().is_some() {
        return None;
    }
    let index = node.schema().index_of_column(column).ok()?;
    Some((address(node), index))
}

/// The aliases reached from `plan` through inner joins only: a filter above them keeps, of
/// each, exactly the rows its conjuncts on that alias keep.
fn through_inner_joins<'a>(plan: &'a LogicalPlan, out: &mut Vec<&'a LogicalPlan>) {
    match plan {
        LogicalPlan::Join(join) if join.join_type == JoinType::Inner => {
            through_inner_joins(&join.left, out);
            through_inner_joins(&join.right, out);
        }
        LogicalPlan::SubqueryAlias(_) => out.push(plan),
        _ => {}
    }
}

/// Whether `outer` holds an alias over `body`, in its plan or its subqueries.
fn contains_reference(outer: &LogicalPlan, body: &LogicalPlan) -> Result<bool> {
    let mut found = false;
    outer.apply_with_subqueries(|node| {
        if let LogicalPlan::SubqueryAlias(alias) = node
            && below_aliases(&alias.input) == body
        {
            found = true;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(found)
}

/// `plan` below any aliases.
fn below_aliases(plan: &LogicalPlan) -> &LogicalPlan {
    match plan {
        LogicalPlan::SubqueryAlias(alias) => below_aliases(&alias.input),
        plan => plan,
    }
}

/// Whether `plan`'s rows come from an aggregate (through projections, filters, aliases and
/// unions of such): its output is what the shared-subplan rule shares.
fn aggregate_rooted(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Aggregate(_) | LogicalPlan::Distinct(_) => true,
        LogicalPlan::Projection(p) => aggregate_rooted(&p.input),
        LogicalPlan::Filter(f) => aggregate_rooted(&f.input),
        LogicalPlan::SubqueryAlias(a) => aggregate_rooted(&a.input),
        LogicalPlan::Union(u) => u.inputs.iter().all(|i| aggregate_rooted(i)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int32Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use arrow::util::pretty::pretty_format_batches;
    use datafusion::datasource::MemTable;
    use datafusion::execution::SessionStateBuilder;
    use datafusion::prelude::{SessionConfig, SessionContext};

    use super::SharedCtes;
    use crate::cte_reference::CteQueryPlanner;
    use crate::test_rows::sequence;

    /// 2 000 rows: group columns `g` (0..6, a tenth NULL) and `m` (0..4), values `v`.
    fn table() -> Arc<MemTable> {
        let mut next = sequence(0x9e37_79b9_7f4a_7c15);
        let (mut g, mut m, mut v) = (vec![], vec![], vec![]);
        for _ in 0..2_000 {
            g.push((next(10) != 0).then(|| next(6) as i32));
            m.push(next(4) as i32);
            v.push(next(100) as i32 - 20);
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("g", DataType::Int32, true),
            Field::new("m", DataType::Int32, false),
            Field::new("v", DataType::Int32, false),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(g)),
            Arc::new(Int32Array::from(m)),
            Arc::new(Int32Array::from(v)),
        ];
        let batch = RecordBatch::try_new(Arc::clone(&schema), columns).unwrap();
        let parts = vec![vec![batch.slice(0, 1_000)], vec![batch.slice(1_000, 1_000)]];
        Arc::new(MemTable::try_new(schema, parts).unwrap())
    }

    fn context(rule: bool) -> SessionContext {
        let mut builder = SessionStateBuilder::new()
            .with_config(SessionConfig::new().with_target_partitions(2))
            .with_default_features();
        if rule {
            builder = builder
                .with_analyzer_rule(Arc::new(SharedCtes))
                .with_query_planner(Arc::new(CteQueryPlanner));
        }
        let ctx = SessionContext::new_with_state(builder.build());
        ctx.register_table("t", table()).unwrap();
        ctx
    }

    async fn answer(ctx: &SessionContext, sql: &str) -> String {
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        pretty_format_batches(&batches).unwrap().to_string()
    }

    /// The optimized logical plan of `sql`, indented.
    async fn optimized(ctx: &SessionContext, sql: &str) -> String {
        let frame = ctx.sql(sql).await.unwrap();
        frame
            .into_optimized_plan()
            .unwrap()
            .display_indent()
            .to_string()
    }

    const CTE: &str = "WITH c AS (SELECT g, m, sum(v) AS s, count(*) AS n FROM t GROUP BY g, m)";

    /// q31's shape: three references, each restricted on both group columns. The body under
    /// every barrier carries one filter per column, the union of the references' values.
    #[tokio::test]
    async fn references_keep_one_body_under_the_widened_filter() {
        let sql = format!(
            "{CTE} SELECT a.m, a.s, b.s, x.s FROM c a, c b, c x \
             WHERE a.g = 1 AND a.m < 3 AND b.g = 2 AND b.m < 3 AND x.g = 4 AND x.m < 3 \
             AND a.s > 0 AND a.m = b.m AND b.m = x.m ORDER BY 1"
        );
        let with = context(true);
        let plan = optimized(&with, &sql).await;
        assert_eq!(plan.matches("CteReference").count(), 3, "{plan}");
        // One widened filter per reference, pushed below the aggregate.
        let widened = plan
            .matches(
                "Filter: (t.g = Int32(1) OR t.g = Int32(2) OR t.g = Int32(4)) AND t.m < Int32(3)",
            )
            .count();
        assert_eq!(widened, 3, "{plan}");
        let a = answer(&with, &sql).await;
        assert_eq!(a, answer(&context(false), &sql).await);
        assert!(a.lines().count() > 5, "{a}");
    }

    /// TPC-DS q39's shape: the CTE's body filters a derived table, which therefore appears
    /// once per reference; it gets no barrier of its own, so the references' widened filter
    /// reaches the aggregate's input.
    #[tokio::test]
    async fn a_derived_table_inside_the_body_gets_no_barrier_of_its_own() {
        let sql = "WITH c AS (SELECT g, m, s FROM (SELECT g, m, sum(v) AS s FROM t GROUP BY g, m) foo \
                   WHERE s > 0) \
                   SELECT a.g, a.s, b.s FROM c a, c b WHERE a.m = 1 AND b.m = 2 AND a.g = b.g \
                   ORDER BY 1";
        let with = context(true);
        let plan = optimized(&with, sql).await;
        assert_eq!(plan.matches("CteReference").count(), 2, "{plan}");
        let below_aggregate = plan
            .split("Aggregate:")
            .skip(1)
            .filter(|below| below.contains("t.m = Int32(1) OR t.m = Int32(2)"))
            .count();
        assert_eq!(below_aggregate, 2, "{plan}");
        let a = answer(&with, sql).await;
        assert_eq!(a, answer(&context(false), sql).await);
        assert!(a.lines().count() > 5, "{a}");
    }

    /// A quantified comparison with a subquery (`>= ALL`, here over the CTE itself) is not
    /// taken into the widened filter: it would carry the subquery, and a reference inside
    /// it, below every barrier again.
    #[tokio::test]
    async fn a_quantified_subquery_stays_with_its_reference() {
        let sql = "WITH c AS (SELECT g, sum(v) AS s FROM t GROUP BY g) \
                   SELECT a.g, a.s FROM c a, c b \
                   WHERE a.s >= ALL (SELECT z.s FROM c z WHERE z.s > 0) AND b.s > 10 \
                   AND a.g = b.g ORDER BY 1";
        let with = context(true);
        let a = answer(&with, sql).await;
        assert_eq!(a, answer(&context(false), sql).await);
        assert!(a.lines().count() > 3, "{a}");
    }

    /// Random queries over one CTE referenced two or three times (inner joins, a left join
    /// whose right side is filtered above it, a reference in a scalar subquery, conjuncts on
    /// one column, on two, on an aggregate value) answer as DataFusion does without the rule.
    #[tokio::test]
    async fn random_queries_answer_as_without_the_rule() {
        let (with, without) = (context(true), context(false));
        let mut next = sequence(7);
        let mut conjunct = |alias: &str| -> String {
            let k = next(6);
            match next(8) {
                0 => format!("{alias}.g = {k}"),
                1 => format!("{alias}.g IN ({k}, {})", next(6)),
                2 => format!("{alias}.g > {k}"),
                3 => format!("{alias}.m <> {}", k % 4),
                4 => format!("{alias}.s > {}", next(200)),
                5 => format!("{alias}.g IS NULL"),
                6 => format!("({alias}.g = {k} OR {alias}.m = {})", k % 4),
                _ => format!("{alias}.m = {}", k % 4),
            }
        };
        let mut checked = 0;
        for round in 0..48 {
            let shape = round % 4;
            let mut filters = vec![];
            for alias in ["a", "b", "x"] {
                for _ in 0..(round % 3) {
                    filters.push(conjunct(alias));
                }
            }
            let from = match shape {
                0 => "c a JOIN c b ON a.m = b.m JOIN c x ON b.m = x.m",
                1 => "c a LEFT JOIN c b ON a.m = b.m AND a.g = b.g JOIN c x ON a.m = x.m",
                2 => "c a, c b, c x",
                _ => "c a JOIN c b ON a.g = b.g, c x",
            };
            if shape == 3 {
                filters.push(
                    "a.s >= (SELECT avg(s) FROM c z WHERE z.m = 1) - 1000 AND x.m = a.m".into(),
                );
            }
            let filter = if filters.is_empty() {
                "true".to_string()
            } else {
                filters.join(" AND ")
            };
            let sql = format!(
                "{CTE} SELECT a.g, a.m, a.s, b.g, b.s, x.n FROM {from} WHERE {filter} \
                 ORDER BY 1, 2, 3, 4, 5, 6"
            );
            let a = answer(&with, &sql).await;
            assert_eq!(a, answer(&without, &sql).await, "{sql}");
            checked += usize::from(a.lines().count() > 4);
        }
        assert!(checked > 20, "only {checked} queries returned rows");
    }
}
