//! SQL text rewritten before DataFusion parses it, where its parser does not know a form
//! users of Trino and DuckDB send: Trino's time-travel clauses, `ALTER TABLE … EXECUTE` and
//! `SET PROPERTIES`, an unquoted `INSERT INTO local.…`; and refused when its expressions would
//! nest too deep for the recursion after the parser (`depth.rs`). Each works on sqlparser's tokens
//! (`tokens.rs`), so strings, quoted names and comments are never rewritten, and copies the rest
//! of the text byte for byte. The text is any client's: every outcome is a string or an error
//! line, never a panic (fuzz target `sql_rewrites`).
//!
//! ```text
//!   SQL text ──► depth (refused past 2 000) ──► insert_target ──► alter_execute
//!            ──► time_travel ──► DataFusion's parser
//! ```

pub mod alter_execute;
pub mod depth;
pub mod insert_target;
pub mod time_travel;
pub mod tokens;

/// `sql` with every rewrite of this folder applied in order (module docs); `dialect` is the
/// session's SQL dialect (DataFusion's name, for the depth estimate), `name` names a versioned
/// table (`time_travel::rewrite`).
///
/// Errors: a time-travel clause iceflight cannot read; expressions past
/// [`depth::MAX_EXPRESSION_DEPTH`] (one line each).
pub fn rewrite(
    sql: &str,
    dialect: &str,
    name: &dyn Fn(&str, &time_travel::Version) -> String,
) -> Result<String, String> {
    depth::check_expression_depth(sql, dialect)?;
    let sql = insert_target::rewrite(sql);
    time_travel::rewrite(&alter_execute::rewrite(&sql), name)
}
