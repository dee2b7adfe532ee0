//! Planning for the Flight SQL commands that carry SQL: statement queries and prepared
//! statements. A statement is planned once, in `GetFlightInfo`; its ticket names the plan.
//!
//! ```text
//!   GetFlightInfo(CommandStatementQuery)         ─► plan_sql ─► Planned ─► Session::add_planned
//!   GetFlightInfo(CommandPreparedStatementQuery) ─► plan_prepared ┘          │ handle (ticket)
//!   DoGet(TicketStatementQuery{handle})          ─► Session::planned ─► execution.rs
//! ```
//!
//! A query is planned and optimized here (the catalog is asked for each table once, the
//! optimizer runs once); `DoGet` only builds the physical plan and runs it. A state change (DDL,
//! `SET`) is planned here and run at execute: `DoGet` for a statement ticket, `GetFlightInfo`
//! for a prepared statement (ADBC executes a prepared statement with `GetFlightInfo` alone and
//! never fetches a result without columns).

use arrow::datatypes::SchemaRef;
use arrow_flight::{IpcMessage, SchemaAsIpc};
use datafusion::logical_expr::LogicalPlan;
use tonic::Status;

use super::binding::{self, BoundRows};
use super::results::QueryLog;
use super::sessions::{Planned, Prepared, Session};
use super::status::to_status;

/// Plans SQL text into a [`Planned`] statement: a query is optimized now. A statement that
/// fails here still gets its per-query log line.
///
/// Errors: the planner's and optimizer's, as statuses ([`to_status`]).
pub async fn plan_sql(session: &Session, sql: &str) -> Result<Planned, Status> {
    let plan = logical_plan(session, sql).await?;
    finish(session, sql.to_string(), plan)
}

/// The logical plan of SQL text (placeholders unbound), not optimized.
/// Trino's `ALTER TABLE … EXECUTE` and time-travel clauses are rewritten first
/// (`sql::rewrite`); `ALTER TABLE` is planned by iceflight (`sql::plan_statement`).
pub async fn logical_plan(session: &Session, sql: &str) -> Result<LogicalPlan, Status> {
    let plan = async {
        let state = session.ctx.state();
        let dialect = state.config().options().sql_parser.dialect.to_string();
        let text = crate::sql::rewrite(sql, &dialect)?;
        let statement =
            state.sql_to_statement(&text, &state.config().options().sql_parser.dialect)?;
        crate::sql::plan_statement(&session.ctx, statement).await
    };
    plan.await.map_err(|e| failed(session, sql, to_status(e)))
}

/// A prepared statement with the parameter rows bound to this execution (`binding.rs`) as a
/// [`Planned`] statement. The text is planned again for each execution, so that it reads the
/// tables as they are now, as Trino and DuckDB do (a plan kept from the prepare would read the
/// snapshots current then: a `SELECT` run again would miss the rows written since); the
/// placeholders keep the types announced at the prepare.
///
/// Errors: parameters missing or of the wrong shape; planning's (a table dropped since) and
/// the optimizer's.
pub async fn plan_prepared(
    session: &Session,
    prepared: &Prepared,
    rows: Option<&BoundRows>,
) -> Result<Planned, Status> {
    let fresh = logical_plan(session, &number_placeholders(&prepared.sql)).await?;
    let plan = binding::bind(&fresh, &prepared.placeholders, rows)
        .map_err(|s| failed(session, &prepared.sql, s))?;
    finish(session, prepared.sql.clone(), plan)
}

fn finish(session: &Session, sql: String, plan: LogicalPlan) -> Result<Planned, Status> {
    if crate::sql::is_state_change(&plan) {
        return Ok(Planned::StateChange { sql, plan });
    }
    match session.ctx.state().optimize(&plan) {
        Ok(plan) => Ok(Planned::Query { sql, plan }),
        Err(e) => Err(failed(session, &sql, to_status(e))),
    }
}

/// Logs a statement that failed before it ran and passes its status on.
pub(crate) fn failed(session: &Session, sql: &str, status: Status) -> Status {
    QueryLog::start(session.history(), &session.user, sql).fail(&status);
    status
}

/// Rewrites `?` placeholders (outside quotes and comments) to `$1, $2, ...`, the form DataFusion
/// plans. Text that already uses `$n` is returned unchanged.
pub fn number_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == '\n' {
                        break;
                    }
                }
            }
            '?' => {
                n += 1;
                out.push_str(&format!("${n}"));
            }
            _ => out.push(c),
        }
    }
    out
}

/// A schema as the IPC message Flight SQL carries in prepared-statement results.
pub fn schema_bytes(schema: &SchemaRef) -> Result<bytes::Bytes, Status> {
    let options = arrow::ipc::writer::IpcWriteOptions::default();
    let IpcMessage(bytes) = SchemaAsIpc::new(schema.as_ref(), &options)
        .try_into()
        .map_err(|e: arrow::error::ArrowError| Status::internal(e.to_string()))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::number_placeholders;

    #[test]
    fn numbers_question_marks_outside_quotes() {
        assert_eq!(
            number_placeholders("SELECT ? , '?' , \"a?\" FROM t WHERE a = ? -- ?\nAND b = ?"),
            "SELECT $1 , '?' , \"a?\" FROM t WHERE a = $2 -- ?\nAND b = $3"
        );
        assert_eq!(number_placeholders("SELECT $1"), "SELECT $1");
    }
}
