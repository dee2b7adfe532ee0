//! One expression rewrite applied to the operators that evaluate expressions row by row:
//! projections, filters and aggregate arguments. Shared by `decimal_arithmetic.rs` and
//! `like_segments.rs`.

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;
use datafusion::common::Result;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};

/// An expression rewrite: the expression and the schema it is evaluated on.
pub(crate) type ExprRewrite =
    dyn Fn(Arc<dyn PhysicalExpr>, &Schema) -> Result<Transformed<Arc<dyn PhysicalExpr>>>;

/// `plan` with `rewrite_expr` applied to every node [`rewrite_node`] rewrites, bottom-up: the
/// body of the expression rules (`decimal_arithmetic.rs`, `like_segments.rs`).
pub(crate) fn rewrite_plan(
    plan: Arc<dyn ExecutionPlan>,
    rewrite_expr: &ExprRewrite,
) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| rewrite_node(node, rewrite_expr))
        .map(|t| t.data)
}

/// The node with `rewrite_expr` applied to the expressions of the operators that hold decimal
/// arithmetic and `LIKE` in TPC-H and SSB: projections, filters, aggregate arguments.
pub(crate) fn rewrite_node(
    node: Arc<dyn ExecutionPlan>,
    rewrite_expr: &ExprRewrite,
) -> Result<Transformed<Arc<dyn ExecutionPlan>>> {
    if let Some(projection) = node.downcast_ref::<ProjectionExec>() {
        let schema = projection.input().schema();
        let mut changed = false;
        let exprs = projection
            .expr()
            .iter()
            .map(|p| {
                let e = rewrite_expr(Arc::clone(&p.expr), &schema)?;
                changed |= e.transformed;
                Ok(ProjectionExpr {
                    expr: e.data,
                    alias: p.alias.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if !changed {
            return Ok(Transformed::no(node));
        }
        let new = ProjectionExec::try_new(exprs, Arc::clone(projection.input()))?;
        return Ok(Transformed::yes(Arc::new(new)));
    }
    if let Some(filter) = node.downcast_ref::<FilterExec>() {
        let e = rewrite_expr(Arc::clone(filter.predicate()), &filter.input().schema())?;
        if !e.transformed {
            return Ok(Transformed::no(node));
        }
        let new = FilterExecBuilder::from(filter)
            .with_predicate(e.data)
            .build()?;
        return Ok(Transformed::yes(Arc::new(new)));
    }
    if let Some(aggregate) = node.downcast_ref::<AggregateExec>() {
        let schema = aggregate.input_schema();
        let mut changed = false;
        let mut aggr_exprs = Vec::with_capacity(aggregate.aggr_expr().len());
        for a in aggregate.aggr_expr() {
            // `with_new_expressions` drops an aggregate's reversal (DataFusion reverses one of
            // two aggregates that want opposite orders): ordered aggregates are left as they are.
            if !a.order_bys().is_empty() || a.is_reversed() {
                aggr_exprs.push(Arc::clone(a));
                continue;
            }
            let mut args = Vec::new();
            let mut arg_changed = false;
            for arg in a.expressions() {
                let e = rewrite_expr(arg, &schema)?;
                arg_changed |= e.transformed;
                args.push(e.data);
            }
            let order_by = a.order_bys().iter().map(|s| Arc::clone(&s.expr)).collect();
            match arg_changed.then(|| a.with_new_expressions(args, order_by)) {
                Some(Some(new)) => {
                    changed = true;
                    aggr_exprs.push(Arc::new(new));
                }
                _ => aggr_exprs.push(Arc::clone(a)),
            }
        }
        if !changed {
            return Ok(Transformed::no(node));
        }
        return Ok(Transformed::yes(Arc::new(
            aggregate.with_new_aggr_exprs(aggr_exprs),
        )));
    }
    Ok(Transformed::no(node))
}
