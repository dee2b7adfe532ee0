//! Planning `DELETE FROM t [WHERE condition]` on an Iceberg table.
//!
//! DataFusion plans `DELETE` as a DML node over `Filter(condition, TableScan t)`, optimizes
//! that input like a query, then hands the table only the conjuncts it finds left on `t`
//! (`extract_dml_filters` in DataFusion 54's physical planner). What the optimizer folded
//! away is lost: `WHERE false` or `WHERE NULL` becomes an empty relation and `WHERE id IN
//! (SELECT …)` a join, and both reach the table as no condition at all, which reads as "delete
//! every row". So the condition is taken here, from the plan as written, and given to the
//! table ([`IcebergTableProvider::for_delete`]), which runs only on it (`scan/src/write/delete.rs`).
//!
//! On a table whose `write.delete.mode` is `merge-on-read`, a `DELETE` with a condition is
//! planned as a change stream instead (`row_change.rs`: delete files, no data file rewritten);
//! one without a condition removes every data file as copy-on-write does.
//!
//! Refused, as one clear line each: a condition with a subquery or reading another table,
//! `LIMIT` / `ORDER BY`, aggregate or window functions in the condition, and a volatile
//! condition (`random()`: the statement evaluates it more than once per row).
//!
//! A condition with parameters (`$1`, `?`) is kept with its placeholders: a prepared statement
//! binds them in the plan and readies the bound plan again (`flight/binding.rs`); run unbound,
//! the statement fails when its condition is planned ("Placeholder '$1' was not provided a
//! value").

use std::sync::Arc;

use datafusion::catalog::default_table_source::{provider_as_source, source_as_provider};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, Result, not_impl_err, plan_err};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{DmlStatement, Expr, LogicalPlan, WriteOp};
use iceflight_scan::IcebergTableProvider;
use iceflight_scan::write::write_mode::{RowOperation, WriteMode};

/// `plan` with its `DELETE` on an Iceberg table (also under `EXPLAIN`) readied with the
/// condition as written (module docs); any other plan unchanged.
///
/// Errors: `NotImplemented` for a condition with a subquery, another table or a volatile
/// function, or for `LIMIT`; a plan error for aggregate or window functions.
pub fn plan_delete(plan: LogicalPlan) -> Result<LogicalPlan> {
    plan.transform_up(ready).map(|t| t.data)
}

/// `node` readied when it is a `DELETE` on an Iceberg table ([`plan_delete`]).
fn ready(node: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    let LogicalPlan::Dml(dml) = &node else {
        return Ok(Transformed::no(node));
    };
    if dml.op != WriteOp::Delete {
        return Ok(Transformed::no(node));
    }
    let provider = source_as_provider(&dml.target)?;
    let Some(iceberg) = provider.downcast_ref::<IcebergTableProvider>() else {
        return Ok(Transformed::no(node));
    };
    iceberg.planner().check_writable()?;
    let mut conditions = vec![];
    let mut scans = 0;
    let mut limited = false;
    let mut other = false;
    dml.input.apply_with_subqueries(|node| {
        match node {
            LogicalPlan::TableScan(scan) => {
                scans += 1;
                conditions.extend(scan.filters.iter().cloned());
            }
            LogicalPlan::Filter(filter) => conditions.push(filter.predicate.clone()),
            LogicalPlan::Projection(_) | LogicalPlan::SubqueryAlias(_) => {}
            LogicalPlan::Limit(_) | LogicalPlan::Sort(_) => limited = true,
            _ => other = true,
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    if limited {
        return not_impl_err!("DELETE with LIMIT or ORDER BY is not supported");
    }
    if scans != 1 || other {
        return not_impl_err!("DELETE with a subquery in its WHERE clause is not supported");
    }
    for condition in &conditions {
        // Refused at planning (an invalid argument, not a missing feature), so that a client
        // that prepares every statement shows it: ADBC's DB-API drops a prepare's
        // NotImplemented and fails later for another reason.
        if condition.exists(|e| {
            Ok(matches!(
                e,
                Expr::AggregateFunction(_) | Expr::WindowFunction(_)
            ))
        })? {
            return plan_err!(
                "aggregate and window functions are not allowed in the WHERE clause of DELETE"
            );
        }
        if condition.exists(|e| {
            Ok(matches!(
                e,
                Expr::Exists(_)
                    | Expr::InSubquery(_)
                    | Expr::ScalarSubquery(_)
                    | Expr::OuterReferenceColumn(..)
            ))
        })? {
            return not_impl_err!("DELETE with a subquery in its WHERE clause is not supported");
        }
        // Evaluated once per pass over the rows, it would choose different rows each time.
        if condition.is_volatile() {
            return not_impl_err!(
                "DELETE with a volatile condition (random(), …) is not supported"
            );
        }
    }
    // Floats compare in the condition as in a query's filter (case c12).
    let columns = DFSchema::try_from(provider.schema())?;
    let condition = conjunction(conditions)
        .map(|c| crate::float_semantics::delete_condition(unqualified(c)?, &columns))
        .transpose()?;
    let mode = WriteMode::of(iceberg.table().metadata(), RowOperation::Delete)?;
    // Without a condition every data file goes whole: no delete file is needed.
    if mode == WriteMode::MergeOnRead && iceberg.writes().is_some() && condition.is_some() {
        return super::row_change::plan_merge_on_read_delete(
            dml.table_name.clone(),
            iceberg,
            condition,
        )
        .map(Transformed::yes);
    }
    let target = provider_as_source(Arc::new(iceberg.clone().for_delete(condition)));
    Ok(Transformed::yes(LogicalPlan::Dml(DmlStatement::new(
        dml.table_name.clone(),
        target,
        dml.op.clone(),
        Arc::clone(&dml.input),
    ))))
}

/// `expr` with its columns named without their table (`t.a`, `alias.a` → `a`): the table's
/// own columns, as the provider sees them.
fn unqualified(expr: Expr) -> Result<Expr> {
    expr.transform(|e| match e {
        Expr::Column(c) if c.relation.is_some() => Ok(Transformed::yes(Expr::Column(
            Column::new_unqualified(c.name),
        ))),
        e => Ok(Transformed::no(e)),
    })
    .map(|t| t.data)
}
