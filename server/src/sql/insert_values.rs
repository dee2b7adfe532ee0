//! An `INSERT` that gives a `NOT NULL` column NULL through its `VALUES` (or by leaving the
//! column out) is refused when it is planned, naming the column, the table and the row.
//! DataFusion builds such `VALUES` with the table's nullability and fails only when it builds
//! their rows, naming its own name for the value (`column1`). Rows from a query are checked by
//! name as they reach the table (`scan/src/write/not_null.rs`).

use datafusion::common::{Result, plan_err};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{Expr, LogicalPlan, Values, WriteOp};
use iceflight_scan::IcebergTableProvider;

/// Refuses `plan` (any statement; only an `INSERT` is looked at) as the module docs say.
///
/// Errors: `column {c} of table {t} is declared NOT NULL; row {n} of the VALUES gives it NULL`
/// (or `… the INSERT gives it no value`).
pub fn check(plan: &LogicalPlan) -> Result<()> {
    let LogicalPlan::Dml(dml) = plan else {
        return Ok(());
    };
    if !matches!(dml.op, WriteOp::Insert(_)) {
        return Ok(());
    }
    let table = dml.target.schema();
    let required = |name: &str| {
        table
            .field_with_name(name)
            .is_ok_and(|field| !field.is_nullable())
    };
    // Named as the table's own writer names it (`scan/src/write/not_null.rs`): namespace.table.
    let target = source_as_provider(&dml.target)
        .ok()
        .and_then(|p| {
            p.downcast_ref::<IcebergTableProvider>()
                .map(|t| t.table().identifier().to_string())
        })
        .unwrap_or_else(|| dml.table_name.to_string());
    let target = &target;
    match dml.input.as_ref() {
        LogicalPlan::Projection(projection) => {
            let values = match projection.input.as_ref() {
                LogicalPlan::Values(values) => Some(values),
                _ => None,
            };
            for (expr, field) in projection.expr.iter().zip(projection.schema.fields()) {
                let name = field.name();
                if !required(name) {
                    continue;
                }
                match stripped(expr) {
                    Expr::Literal(value, _) if value.is_null() => {
                        return plan_err!(
                            "column {name} of table {target} is declared NOT NULL; the INSERT gives it no value"
                        );
                    }
                    Expr::Column(column) => {
                        if let Some(values) = values
                            && let Ok(index) = values.schema.index_of_column(column)
                        {
                            null_row(values, index, name, target)?;
                        }
                    }
                    _ => {}
                }
            }
        }
        LogicalPlan::Values(values) => {
            for (index, field) in table.fields().iter().enumerate() {
                if !field.is_nullable() {
                    null_row(values, index, field.name(), target)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Errors when a row of `values` is NULL in column `index` (which fills NOT NULL `name`).
fn null_row(values: &Values, index: usize, name: &str, target: &str) -> Result<()> {
    for (row, exprs) in values.values.iter().enumerate() {
        if let Some(Expr::Literal(value, _)) = exprs.get(index).map(stripped)
            && value.is_null()
        {
            return plan_err!(
                "column {name} of table {target} is declared NOT NULL; row {} of the VALUES gives it NULL",
                row + 1
            );
        }
    }
    Ok(())
}

/// `expr` without the aliases and casts around it.
fn stripped(mut expr: &Expr) -> &Expr {
    loop {
        expr = match expr {
            Expr::Alias(alias) => &alias.expr,
            Expr::Cast(cast) => &cast.expr,
            Expr::TryCast(cast) => &cast.expr,
            other => return other,
        };
    }
}
