//! [`AggregateReduction`]: a logical optimizer rule that restricts a grouped aggregate joined on
//! its group key to the keys the join can match, before it aggregates (TPC-H q17's decorrelated
//! `avg(l_quantity)` per `l_partkey`).
//!
//! ```text
//!   Inner join cluster (join_order.rs):  … ⋈ L ⋈ Agg(group by g, input I) … on L.k = Agg.g
//!   ──► Agg(group by g, I ⋉ π_k(L) on I.g = k)        L: the smallest leaf joined to g,
//!                                          estimated ≤ REDUCTION_RATIO × distinct g in I
//!                                          (a filtered dimension, not every key again)
//! ```
//!
//! Why it keeps every answer: the cluster is a conjunction of inner equi-joins without
//! null-equal keys, so every row it outputs has `Agg.g = L.k` for a row of `L`. A group whose
//! key is not among `L`'s keys (or is NULL) joins nothing; each group that stays keeps all its
//! input rows, so its aggregates are unchanged. The semi join (`LeftSemi`, nulls never equal)
//! drops whole groups only. `L` is read a second time, so it must give the same rows again: only
//! row-preserving nodes (no `LIMIT`, sort or scan `fetch`, window, `DISTINCT ON`, extension) and
//! no volatile expression; it is aliased so its columns cannot clash with `I`'s.
//!
//! Not applied when the aggregate has grouping sets, when `g` is not a plain group column, when
//! the aggregate occurs more than once in the cluster's plan (a copy inside another leaf is not
//! restricted by this join), or when `L.k` is a column two leaves share. DataFusion's dynamic filters often reach the
//! same aggregate input at run time, but only when the aggregate is on the probe side of its
//! join; the rule makes the reduction independent of the build side chosen.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, NullEquality, Result};
use datafusion::logical_expr::{
    Expr, Join, JoinConstraint, JoinType, LogicalPlan, LogicalPlanBuilder,
};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use crate::join_order::{Cluster, is_cluster_join, ndv, rows};
use iceflight_options::IceflightOptions;

/// The keys' leaf must be estimated at most this share of the group key's distinct values in
/// the aggregate's input (else its rows): a key set that holds most keys (TPC-H q15's every
/// supplier) costs a semi join and removes little.
pub const REDUCTION_RATIO: f64 = 0.1;

/// Alias prefix of the key relations this rule inserts (also how it recognises its own work).
pub const KEYS_ALIAS: &str = "__iceflight_keys";

/// The rule (module docs); switched by `iceflight.optimizer.aggregate_reduction`.
#[derive(Debug, Default)]
pub struct AggregateReduction;

impl OptimizerRule for AggregateReduction {
    fn name(&self) -> &str {
        "iceflight_aggregate_reduction"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        if !IceflightOptions::of(&config.options())
            .optimizer
            .aggregate_reduction
        {
            return Ok(Transformed::no(plan));
        }
        let mut next_alias = 0;
        plan.transform_down(|node| {
            if !is_cluster_join(&node) {
                return Ok(Transformed::no(node));
            }
            let reduced = reduce_cluster(node, &mut next_alias)?;
            // The cluster's inner joins are handled; its leaves are visited below.
            Ok(reduced)
        })
    }
}

/// Reduces every aggregate leaf of the cluster rooted at `root` that qualifies.
fn reduce_cluster(root: LogicalPlan, next_alias: &mut usize) -> Result<Transformed<LogicalPlan>> {
    let mut cluster = Cluster::default();
    cluster.flatten(&root);
    let mut plan = root;
    let mut changed = false;
    for (i, leaf) in cluster.leaves.iter().enumerate() {
        // The leaf is replaced where it occurs: only where it occurs once in the whole cluster
        // (a copy inside another leaf is not restricted by this join).
        if occurrences(&plan, leaf) != 1 || has_our_keys(leaf) {
            continue;
        }
        // The smallest other leaf joined to one of this leaf's group columns.
        let mut best: Option<(f64, Column, &LogicalPlan, Column)> = None;
        for (l, r) in &cluster.on {
            for (mine, theirs) in [(l, r), (r, l)] {
                let (Expr::Column(mine), Expr::Column(theirs)) = (mine, theirs) else {
                    continue;
                };
                if !leaf.schema().has_column(mine) {
                    continue;
                }
                let Some(j) = cluster.leaf_of(theirs) else {
                    continue;
                };
                if j == i || !deterministic(&cluster.leaves[j]) {
                    continue;
                }
                let Some(group) = group_column(leaf, mine) else {
                    continue;
                };
                let keys_rows = rows(&cluster.leaves[j]);
                if best.as_ref().is_none_or(|b| keys_rows < b.0) {
                    best = Some((keys_rows, group, &cluster.leaves[j], theirs.clone()));
                }
            }
        }
        let Some((keys_rows, group, keys, key)) = best else {
            continue;
        };
        let Some(input) = aggregate_input(leaf) else {
            continue;
        };
        let groups = ndv(input, &group).unwrap_or_else(|| rows(input));
        if keys_rows > REDUCTION_RATIO * groups {
            continue;
        }
        let alias = format!("{KEYS_ALIAS}_{next_alias}");
        *next_alias += 1;
        let keys = LogicalPlanBuilder::from(keys.clone())
            .project(vec![Expr::Column(key.clone())])?
            .alias(alias.as_str())?
            .build()?;
        let key = Column::new(Some(alias.as_str()), key.name());
        let Some(reduced) = insert_semi_join(leaf, &group, keys, key)? else {
            continue;
        };
        let target = leaf.clone();
        plan = plan
            .transform_down(|node| {
                if node == target {
                    Ok(Transformed::new(
                        reduced.clone(),
                        true,
                        TreeNodeRecursion::Jump,
                    ))
                } else {
                    Ok(Transformed::no(node))
                }
            })?
            .data;
        changed = true;
    }
    Ok(if changed {
        Transformed::yes(plan)
    } else {
        Transformed::no(plan)
    })
}

/// Whether a key relation of ours is already in `plan` (the rule ran on it).
fn has_our_keys(plan: &LogicalPlan) -> bool {
    plan.exists(|p| {
        Ok(matches!(p, LogicalPlan::SubqueryAlias(a) if a.alias.table().starts_with(KEYS_ALIAS)))
    })
    .unwrap_or(true)
}

/// How many times `target` occurs in `plan`.
fn occurrences(plan: &LogicalPlan, target: &LogicalPlan) -> usize {
    let mut n = 0;
    let _ = plan.apply(|p| {
        if p == target {
            n += 1;
            return Ok(TreeNodeRecursion::Jump);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    n
}

/// Reading the plan twice gives the same rows: only nodes whose output is a function of their
/// input's rows (no row limit of any kind: `LIMIT`, a sort or scan `fetch`, windows, `DISTINCT
/// ON`, extensions), and no volatile expression.
fn deterministic(plan: &LogicalPlan) -> bool {
    !plan
        .exists(|p| {
            let safe = match p {
                LogicalPlan::TableScan(s) => s.fetch.is_none(),
                LogicalPlan::Sort(s) => s.fetch.is_none(),
                LogicalPlan::Filter(_)
                | LogicalPlan::Projection(_)
                | LogicalPlan::SubqueryAlias(_)
                | LogicalPlan::Join(_)
                | LogicalPlan::Aggregate(_)
                | LogicalPlan::Union(_)
                | LogicalPlan::Values(_)
                | LogicalPlan::EmptyRelation(_) => true,
                _ => false,
            };
            Ok(!safe || p.expressions().iter().any(|e| e.is_volatile()))
        })
        .unwrap_or(true)
}

/// The group column of the aggregate under `plan` that output column `c` passes through
/// unchanged (aliases, projections of plain columns, filters), as a column of the aggregate's
/// input.
fn group_column(plan: &LogicalPlan, c: &Column) -> Option<Column> {
    let index = plan.schema().index_of_column(c).ok()?;
    match plan {
        LogicalPlan::SubqueryAlias(a) => {
            let (q, f) = a.input.schema().qualified_field(index);
            group_column(&a.input, &Column::new(q.cloned(), f.name()))
        }
        LogicalPlan::Projection(p) => match p.expr.get(index)?.clone().unalias() {
            Expr::Column(inner) => group_column(&p.input, &inner),
            _ => None,
        },
        LogicalPlan::Filter(f) => group_column(&f.input, c),
        LogicalPlan::Aggregate(a) => {
            if a.group_expr
                .iter()
                .any(|g| matches!(g, Expr::GroupingSet(_)))
            {
                return None;
            }
            match a.group_expr.get(index)? {
                Expr::Column(g) => Some(g.clone()),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The input of the aggregate under `plan` (through the nodes [`group_column`] passes).
fn aggregate_input(plan: &LogicalPlan) -> Option<&LogicalPlan> {
    match plan {
        LogicalPlan::SubqueryAlias(a) => aggregate_input(&a.input),
        LogicalPlan::Projection(p) => aggregate_input(&p.input),
        LogicalPlan::Filter(f) => aggregate_input(&f.input),
        LogicalPlan::Aggregate(a) => Some(&a.input),
        _ => None,
    }
}

/// `plan` with its aggregate's input semi-joined to `keys` on `group = key`.
fn insert_semi_join(
    plan: &LogicalPlan,
    group: &Column,
    keys: LogicalPlan,
    key: Column,
) -> Result<Option<LogicalPlan>> {
    let rebuilt = |input: LogicalPlan| -> Result<Option<LogicalPlan>> {
        insert_semi_join(&input, group, keys.clone(), key.clone())?
            .map(|new| plan.with_new_exprs(plan.expressions(), vec![new]))
            .transpose()
    };
    match plan {
        LogicalPlan::SubqueryAlias(a) => rebuilt(a.input.as_ref().clone()),
        LogicalPlan::Projection(p) => rebuilt(p.input.as_ref().clone()),
        LogicalPlan::Filter(f) => rebuilt(f.input.as_ref().clone()),
        LogicalPlan::Aggregate(a) => {
            let semi = Join::try_new(
                Arc::clone(&a.input),
                Arc::new(keys),
                vec![(Expr::Column(group.clone()), Expr::Column(key))],
                None,
                JoinType::LeftSemi,
                JoinConstraint::On,
                NullEquality::NullEqualsNothing,
                false,
            )?;
            let input = LogicalPlan::Join(semi);
            Ok(Some(plan.with_new_exprs(plan.expressions(), vec![input])?))
        }
        _ => Ok(None),
    }
}
