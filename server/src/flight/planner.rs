//! Planning for the Flight SQL commands that carry SQL: statement queries and prepared
//! statements. A statement is planned once, in `GetFlightInfo`; its ticket names the plan.
//!
//! ```text
//!   GetFlightInfo(CommandStatementQuery)         ─► plan_sql ─► Planned ─► Session::add_planned
//!   GetFlightInfo(CommandPreparedStatementQuery) ─► bound_plan ─┘            │ handle (ticket)
//!   DoGet(TicketStatementQuery{handle})          ─► Session::planned ─► execution.rs
//! ```
//!
//! A query is planned and optimized here (the catalog is asked for each table once, the
//! optimizer runs once); `DoGet` only builds the physical plan and runs it. A state change (DDL,
//! `SET`) is planned here and run at execute: `DoGet` for a statement ticket, `GetFlightInfo`
//! for a prepared statement (ADBC executes a prepared statement with `GetFlightInfo` alone and
//! never fetches a result without columns).

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow_flight::{IpcMessage, SchemaAsIpc};
use datafusion::logical_expr::LogicalPlan;
use tonic::Status;

use super::results::{QueryLog, flight_schema};
use super::sessions::{Prepared, Session};
use super::status::to_status;

/// A statement planned by `GetFlightInfo`, waiting for `DoGet`.
#[derive(Debug, Clone)]
pub enum Planned {
    /// A query: its optimized logical plan, ready for physical planning.
    Query {
        /// SQL text (for the query log).
        sql: String,
        /// The optimized plan.
        plan: LogicalPlan,
    },
    /// DDL or `SET`: run at execute, returns no rows.
    StateChange {
        /// SQL text (for the query log).
        sql: String,
        /// The plan as the SQL planner made it (`SessionContext::execute_logical_plan` runs it).
        plan: LogicalPlan,
    },
}

impl Planned {
    /// The SQL text.
    pub fn sql(&self) -> &str {
        match self {
            Self::Query { sql, .. } | Self::StateChange { sql, .. } => sql,
        }
    }

    /// The result schema announced to the client: the plan's, in [`flight_schema`]'s types;
    /// no columns for a state change.
    pub fn schema(&self) -> SchemaRef {
        match self {
            Self::Query { plan, .. } => flight_schema(&Arc::new(plan.schema().as_arrow().clone())),
            Self::StateChange { .. } => Arc::new(Schema::empty()),
        }
    }
}

/// Plans SQL text into a [`Planned`] statement: a query is optimized now. A statement that
/// fails here still gets its per-query log line.
///
/// Errors: the planner's and optimizer's, as statuses ([`to_status`]).
pub async fn plan_sql(session: &Session, sql: &str) -> Result<Planned, Status> {
    let plan = logical_plan(session, sql).await?;
    finish(session, sql.to_string(), plan)
}

/// The logical plan of SQL text (placeholders unbound), not optimized.
/// Trino's time-travel clauses are rewritten first (`table_versions.rs`); `ALTER TABLE` is
/// planned by iceflight (`session::plan_statement`).
pub async fn logical_plan(session: &Session, sql: &str) -> Result<LogicalPlan, Status> {
    let plan = async {
        let text = crate::table_versions::rewrite(sql)?;
        let state = session.ctx.state();
        let statement =
            state.sql_to_statement(&text, &state.config().options().sql_parser.dialect)?;
        crate::session::plan_statement(&session.ctx, statement).await
    };
    plan.await.map_err(|e| failed(session, sql, to_status(e)))
}

/// A prepared statement with its bound parameters as a [`Planned`] statement.
///
/// Errors: parameters missing or of the wrong type; the optimizer's.
pub fn plan_prepared(session: &Session, prepared: &Prepared) -> Result<Planned, Status> {
    let plan = bound_plan(prepared).map_err(|s| failed(session, &prepared.sql, s))?;
    finish(session, prepared.sql.clone(), plan)
}

fn finish(session: &Session, sql: String, plan: LogicalPlan) -> Result<Planned, Status> {
    if is_state_change(&plan) {
        return Ok(Planned::StateChange { sql, plan });
    }
    match session.ctx.state().optimize(&plan) {
        Ok(plan) => Ok(Planned::Query { sql, plan }),
        Err(e) => Err(failed(session, &sql, to_status(e))),
    }
}

/// Logs a statement that failed before it ran and passes its status on.
fn failed(session: &Session, sql: &str, status: Status) -> Status {
    QueryLog::start(session.history(), &session.user, sql).fail(&status);
    status
}

/// Whether the plan changes state (DDL, `SET`, DML, `COPY`, iceflight's own `ALTER TABLE` and
/// `CREATE TABLE … WITH`) rather than returning rows.
pub fn is_state_change(plan: &LogicalPlan) -> bool {
    matches!(
        plan,
        LogicalPlan::Ddl(_)
            | LogicalPlan::Statement(_)
            | LogicalPlan::Dml(_)
            | LogicalPlan::Copy(_)
    ) || crate::session::is_own_statement(plan)
}

/// The prepared statement's plan with its parameters bound.
///
/// Errors: `InvalidArgument` when parameters are expected and none were bound, or a bound value
/// does not fit its placeholder.
pub fn bound_plan(p: &Prepared) -> Result<LogicalPlan, Status> {
    let expected = p.parameter_schema.fields().len();
    match &p.params {
        Some(params) => p
            .plan
            .clone()
            .with_param_values(params.clone())
            .map_err(to_status),
        None if expected == 0 => Ok(p.plan.clone()),
        None => Err(Status::invalid_argument(format!(
            "the prepared statement has {expected} parameter(s) and none were bound"
        ))),
    }
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

/// The parameter schema of a plan with placeholders: fields `$1..$n` in order, typed where the
/// planner inferred a type, else `Utf8`.
pub fn parameter_schema(plan: &LogicalPlan) -> Result<SchemaRef, Status> {
    let types = plan.get_parameter_types().map_err(to_status)?;
    let mut params: Vec<(usize, String, Option<DataType>)> = types
        .into_iter()
        .map(|(name, ty)| {
            let idx = name
                .trim_start_matches('$')
                .parse::<usize>()
                .unwrap_or(usize::MAX);
            (idx, name, ty)
        })
        .collect();
    params.sort();
    let fields: Vec<Field> = params
        .into_iter()
        .map(|(_, name, ty)| Field::new(name, ty.unwrap_or(DataType::Utf8), true))
        .collect();
    Ok(Arc::new(Schema::new(fields)))
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
