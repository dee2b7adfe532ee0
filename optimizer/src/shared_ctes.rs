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
//! Plans with a recursive query are left alone, as by that rule. Switched with that rule by
//! `iceflight.optimizer.shared_subplans`. An analyzer rule because it must run before
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

/// The rule (module docs); switched by `iceflight.optimizer.shared_subplans`. Its sessions
/// must plan [`CteReference`] ([`CteQueryPlanner`](crate::cte_reference::CteQueryPlanner)).
#[derive(Debug, Default)]
pub struct SharedCtes;

impl AnalyzerRule for SharedCtes {
    fn name(&self) -> &str {
        "iceflight_shared_ctes"
    }

    fn analyze(&self, plan: LogicalPlan, config: &ConfigOptions) -> Result<LogicalPlan> {
        if !IceflightOptions::of(config).optimizer.shared_subplans
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
            if aggregate_rooted(below) {
                match bodies.iter_mut().find(|(b, _)| b == below) {
                    Some((_, members)) => members.push(address(node)),
                    None => bodies.push((below.clone(), vec![address(node)])),
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    bodies.retain(|(_, members)| members.len() >= 2);
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
                    Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_)
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
