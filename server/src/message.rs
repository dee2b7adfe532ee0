//! One-line messages of engine errors for people: the CLI's `error: …` line and the message of a
//! Flight SQL status come from here, so both say the same thing.
//!
//! DataFusion's own `Display` is made for logs: a SQL error prints the parser's Debug form
//! (`ParserError("…")`), a context prints `caused by` on its own line (and says where inside the
//! engine it failed: `Optimizer rule 'simplify_expressions' failed`), an external error gets an
//! `External error:` prefix. Here DataFusion's contexts are left out, and what we add is a typed
//! error that prints itself: `invalid setting datafusion.execution.batch_size=abc: invalid digit
//! found in string`.

use datafusion::common::DataFusionError;
use iceflight_scan::model::data_file_error::DataFileError;

/// The message of `e`: its layers joined with `: `, the parser's text for SQL errors, external
/// errors (catalog, iceberg) as they print themselves, on one line without a backtrace.
pub fn message(e: &DataFusionError) -> String {
    one_line(&layers(e))
}

fn layers(e: &DataFusionError) -> String {
    match e {
        DataFusionError::Context(_, inner) => layers(inner),
        DataFusionError::Diagnostic(_, inner) => layers(inner),
        DataFusionError::Shared(inner) => layers(inner),
        DataFusionError::Collection(errors) => errors
            .first()
            .map(layers)
            .unwrap_or_else(|| e.strip_backtrace()),
        DataFusionError::SQL(parser, _) => parser.to_string(),
        DataFusionError::IoError(io) => io.to_string(),
        DataFusionError::External(inner) => match inner.downcast_ref::<DataFusionError>() {
            Some(df) => layers(df),
            None => match data_file_error(e) {
                Some(typed) => typed.to_string(),
                None => inner.to_string(),
            },
        },
        other => other.strip_backtrace(),
    }
}

/// The [`DataFileError`] somewhere in `e`'s chain of sources (a missing or corrupted data
/// file, `scan/src/model/data_file_error.rs`).
pub fn data_file_error(e: &DataFusionError) -> Option<&DataFileError> {
    let mut at: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = at {
        if let Some(typed) = err.downcast_ref::<DataFileError>() {
            return Some(typed);
        }
        at = err.source();
    }
    None
}

/// A session setting that was refused; its message names the key and the value.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting {key}={value}: {}", message(source))]
pub struct InvalidSetting {
    /// The setting's key (`datafusion.execution.batch_size`).
    pub key: String,
    /// The value given.
    pub value: String,
    /// Why it was refused.
    pub source: DataFusionError,
}

/// A limit of `[query]` a query ran into (`flight/execution.rs`).
#[derive(Debug, thiserror::Error)]
pub enum LimitExceeded {
    /// It ran longer than `query.timeout` (planning, execution and streaming to the client).
    #[error("query exceeded query.timeout of {}; it was stopped", humane(.0))]
    Timeout(std::time::Duration),
    /// Its result grew past `query.max_result_bytes` (bytes of the Arrow IPC messages sent).
    #[error("query result exceeded query.max_result_bytes of {0} bytes; it was stopped")]
    ResultSize(u64),
}

/// `d` as a person writes it: `30s`, `1.5s`, `250ms`.
fn humane(d: &std::time::Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else if d.as_secs() == 0 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// `text` with every run of whitespace (newlines included) made one space.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::parser::ParserError;

    use super::*;

    #[test]
    fn sql_errors_read_without_debug_wrapping() {
        let e = DataFusionError::SQL(
            Box::new(ParserError::ParserError(
                "Expected: an SQL statement, found: SELEC".into(),
            )),
            None,
        );
        assert_eq!(
            message(&e),
            "sql parser error: Expected: an SQL statement, found: SELEC"
        );
    }

    #[test]
    fn engine_contexts_are_left_out_and_ours_name_key_and_value() {
        let parse = "abc".parse::<usize>().unwrap_err();
        let e = DataFusionError::External(Box::new(InvalidSetting {
            key: "datafusion.execution.batch_size".into(),
            value: "abc".into(),
            source: DataFusionError::Context(
                "Error parsing 'abc' as usize".into(),
                Box::new(DataFusionError::External(Box::new(parse))),
            ),
        }));
        assert_eq!(
            message(&e),
            "invalid setting datafusion.execution.batch_size=abc: invalid digit found in string"
        );
        let e = DataFusionError::Context(
            "Optimizer rule 'simplify_expressions' failed".into(),
            Box::new(DataFusionError::Execution("Cannot cast string 'x'".into())),
        );
        assert_eq!(message(&e), "Execution error: Cannot cast string 'x'");
        let e = DataFusionError::Plan("two\nlines".into());
        assert_eq!(message(&e), "Error during planning: two lines");
    }
}
