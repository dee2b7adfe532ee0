//! One-line messages of engine errors for people: the CLI's `error: …` line and the message of a
//! Flight SQL status come from here, so both say the same thing.
//!
//! DataFusion's own `Display` is made for logs: a SQL error prints the parser's Debug form
//! (`ParserError("…")`), a context prints `caused by` on its own line, an external error gets an
//! `External error:` prefix. Here each layer reads as a clause of one line:
//! `invalid setting datafusion.execution.batch_size=abc: Error parsing 'abc' as usize: invalid
//! digit found in string`.

use datafusion::common::DataFusionError;

/// The message of `e`: its layers joined with `: `, the parser's text for SQL errors, external
/// errors (catalog, iceberg) as they print themselves, on one line without a backtrace.
pub fn message(e: &DataFusionError) -> String {
    one_line(&layers(e))
}

fn layers(e: &DataFusionError) -> String {
    match e {
        DataFusionError::Context(context, inner) => format!("{context}: {}", layers(inner)),
        DataFusionError::Diagnostic(_, inner) => layers(inner),
        DataFusionError::Shared(inner) => layers(inner),
        DataFusionError::Collection(errors) => errors
            .first()
            .map(layers)
            .unwrap_or_else(|| e.strip_backtrace()),
        DataFusionError::SQL(parser, _) => parser.to_string(),
        DataFusionError::External(inner) => match inner.downcast_ref::<DataFusionError>() {
            Some(df) => layers(df),
            None => inner.to_string(),
        },
        other => other.strip_backtrace(),
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
    fn contexts_become_clauses_of_one_line() {
        let parse = "abc".parse::<usize>().unwrap_err();
        let e = DataFusionError::Context(
            "invalid setting datafusion.execution.batch_size=abc".into(),
            Box::new(DataFusionError::Context(
                "Error parsing 'abc' as usize".into(),
                Box::new(DataFusionError::External(Box::new(parse))),
            )),
        );
        assert_eq!(
            message(&e),
            "invalid setting datafusion.execution.batch_size=abc: Error parsing 'abc' as usize: \
             invalid digit found in string"
        );
        let e = DataFusionError::Plan("two\nlines".into());
        assert_eq!(message(&e), "Error during planning: two lines");
    }
}
