//! Trino's `ALTER TABLE t EXECUTE name(arg => value, …) [WHERE …]` and `ALTER TABLE t SET
//! PROPERTIES k = v, …` in SQL text, rewritten into what DataFusion's parser reads: a `CALL` of
//! [`EXECUTE`] (the server plans it: `server/src/sql/procedures.rs`) and `SET TBLPROPERTIES`.
//!
//! ```text
//!   ALTER TABLE t EXECUTE optimize(file_size_threshold => '128MB') WHERE part = 'a'
//!     ──► CALL iceflight.execute(t, 'optimize', 'part = ''a''', file_size_threshold => '128MB')
//! ```

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan};

use super::tokens::{Offsets, significant_tokens};

/// The name `ALTER TABLE … EXECUTE` is rewritten to call.
pub const EXECUTE: &str = "iceflight.execute";

/// `sql` with every `ALTER TABLE <name> EXECUTE <procedure>[(<args>)] [WHERE <condition>]`
/// statement replaced by the call of [`EXECUTE`] (module docs), and Trino's
/// `ALTER TABLE <name> SET PROPERTIES k = v, …` by `SET TBLPROPERTIES (k = v, …)`; everything else is
/// copied byte for byte. `sql` unchanged when it does not tokenize (the parser reports it).
pub fn rewrite(sql: &str) -> String {
    let Some(tokens) = significant_tokens(sql) else {
        return sql.to_string();
    };
    let tokens: Vec<&TokenWithSpan> = tokens.iter().collect();
    let offsets = Offsets::new(sql);
    let mut out = String::with_capacity(sql.len());
    let mut copied = 0;
    // Statement by statement.
    for statement in tokens.split(|t| t.token == Token::SemiColon) {
        if statement.is_empty() {
            continue;
        }
        let text = |range: std::ops::Range<usize>| -> &str {
            if range.is_empty() {
                return "";
            }
            let from = offsets.at(statement[range.start].span.start);
            let to = offsets.at(statement[range.end - 1].span.end);
            &sql[from..to]
        };
        let replacement = if let Some(parts) = execute_parts(statement) {
            let name = text(parts.name.clone());
            let condition = text(parts.condition.clone()).replace('\'', "''");
            let args = text(parts.args.clone());
            format!(
                "CALL {EXECUTE}({name}, '{}', '{condition}'{}{args})",
                parts.procedure,
                if args.is_empty() { "" } else { ", " }
            )
        } else if let Some((name, properties)) = set_properties_parts(statement) {
            format!(
                "ALTER TABLE {} SET TBLPROPERTIES ({})",
                text(name),
                text(properties)
            )
        } else {
            continue;
        };
        let start = offsets.at(statement[0].span.start);
        let end = offsets.at(statement[statement.len() - 1].span.end);
        out.push_str(&sql[copied..start]);
        out.push_str(&replacement);
        copied = end;
    }
    out.push_str(&sql[copied..]);
    out
}

/// The token range of the table name of `ALTER TABLE <name> …` (words joined by periods).
fn altered_table(statement: &[&TokenWithSpan]) -> Option<std::ops::Range<usize>> {
    let keyword = |i: usize| match statement.get(i).map(|t| &t.token) {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    };
    if keyword(0) != Some(Keyword::ALTER) || keyword(1) != Some(Keyword::TABLE) {
        return None;
    }
    let mut at = 2;
    while matches!(statement.get(at).map(|t| &t.token), Some(Token::Word(_)))
        && matches!(statement.get(at + 1).map(|t| &t.token), Some(Token::Period))
    {
        at += 2;
    }
    if !matches!(statement.get(at).map(|t| &t.token), Some(Token::Word(_))) {
        return None;
    }
    Some(2..at + 1)
}

/// Trino's `ALTER TABLE <name> SET PROPERTIES k = v, …`: the token ranges of the name and of
/// the properties.
fn set_properties_parts(
    statement: &[&TokenWithSpan],
) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let name = altered_table(statement)?;
    let word = |i: usize| match statement.get(i).map(|t| &t.token) {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
        _ => None,
    };
    if word(name.end).as_deref() != Some("SET")
        || word(name.end + 1).as_deref() != Some("PROPERTIES")
        || name.end + 2 >= statement.len()
    {
        return None;
    }
    Some((name.clone(), name.end + 2..statement.len()))
}

/// Where the parts of one `ALTER TABLE … EXECUTE` statement are, as token ranges.
struct ExecuteParts {
    name: std::ops::Range<usize>,
    procedure: String,
    args: std::ops::Range<usize>,
    condition: std::ops::Range<usize>,
}

/// The parts of `statement` when it is `ALTER TABLE <name> EXECUTE <procedure> [(…)] [WHERE …]`.
fn execute_parts(statement: &[&TokenWithSpan]) -> Option<ExecuteParts> {
    let keyword = |i: usize| match statement.get(i).map(|t| &t.token) {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    };
    let name = altered_table(statement)?;
    let at = name.end - 1;
    if keyword(at + 1) != Some(Keyword::EXECUTE) {
        return None;
    }
    let Some(Token::Word(procedure)) = statement.get(at + 2).map(|t| &t.token) else {
        return None;
    };
    let procedure = procedure.value.to_lowercase();
    let mut next = at + 3;
    let mut args = next..next;
    if statement.get(next).map(|t| &t.token) == Some(&Token::LParen) {
        let mut depth = 0;
        let mut close = None;
        for (i, t) in statement.iter().enumerate().skip(next) {
            match t.token {
                Token::LParen => depth += 1,
                Token::RParen => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let close = close?;
        args = next + 1..close;
        next = close + 1;
    }
    let condition = match keyword(next) {
        Some(Keyword::WHERE) => next + 1..statement.len(),
        _ if next == statement.len() => next..next,
        _ => return None,
    };
    Some(ExecuteParts {
        name,
        procedure,
        args,
        condition,
    })
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    /// `ALTER TABLE … EXECUTE` becomes the call; other statements stay as they are.
    #[test]
    fn execute_becomes_a_call() {
        assert_eq!(
            rewrite("ALTER TABLE tpch.orders EXECUTE optimize(file_size_threshold => '1MB')"),
            "CALL iceflight.execute(tpch.orders, 'optimize', '', file_size_threshold => '1MB')"
        );
        assert_eq!(
            rewrite("alter table o execute optimize where part = 'a' ; SELECT 1"),
            "CALL iceflight.execute(o, 'optimize', 'part = ''a''') ; SELECT 1"
        );
        assert_eq!(
            rewrite("ALTER TABLE \"o@x\" EXECUTE expire_snapshots"),
            "CALL iceflight.execute(\"o@x\", 'expire_snapshots', '')"
        );
        assert_eq!(
            rewrite(
                "ALTER TABLE s.o SET PROPERTIES format_version = 3, \"write.delete.mode\" = 'merge-on-read'"
            ),
            "ALTER TABLE s.o SET TBLPROPERTIES (format_version = 3, \"write.delete.mode\" = 'merge-on-read')"
        );
        for same in [
            "ALTER TABLE o SET PROPERTIES",
            "ALTER TABLE o ADD COLUMN c INT",
            "SELECT 'ALTER TABLE o EXECUTE optimize'",
            "ALTER TABLE o EXECUTE optimize(",
        ] {
            assert_eq!(rewrite(same), same);
        }
    }
}
