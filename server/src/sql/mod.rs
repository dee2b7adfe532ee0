//! The SQL front end: what iceflight does with SQL text before DataFusion runs a plan.
//!
//! ```text
//!   SQL text ──► input/src/sql_text/ (FOR VERSION / TIMESTAMP AS OF ──► table@snapshot,
//!                ALTER TABLE … EXECUTE ──► CALL, INSERT INTO local.…)
//!            ──► statement.rs: parse, plan (DataFusion's planner, or ours for ddl.rs), run
//!                  DELETE ──► delete.rs (the condition as written, checked)
//!                  UPDATE, MERGE, merge-on-read DELETE ──► row_change.rs (a change stream)
//!                  a query naming _row_id, _pos, … ──► metadata_columns.rs
//!                  ALTER TABLE … EXECUTE, CALL ──► procedures.rs (optimize, expire_snapshots, …)
//!            type names (CAST, CREATE TABLE) ──► types.rs (FLOAT, DATETIME, … as SQL means them)
//! ```
//!
//! Used by the Flight SQL service (`flight/planner.rs`, `flight/execution.rs`), the CLI and the
//! tests; imports no module of the server but `float_semantics` (a `DELETE`'s condition),
//! `access` (what a logged-in user may do), `query_control` and `invalidate`.

pub mod ddl;
pub mod delete;
pub mod file_functions;
pub mod insert_values;
pub mod metadata_columns;
pub mod procedures;
pub mod row_change;
pub mod statement;
pub mod types;

pub use ddl::{is_own_statement, run_own_statement};
pub use statement::{
    execute_statement, is_state_change, parse_statements, plan_statement, rewrite,
};
