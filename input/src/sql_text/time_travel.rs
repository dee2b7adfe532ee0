//! Trino's time-travel clauses in SQL text, rewritten into versioned table names before
//! DataFusion parses the text (its parser knows no `FOR VERSION AS OF`).
//!
//! ```text
//!   FROM tpch.orders FOR VERSION AS OF 8954597067493422955   ─► FROM tpch."orders@8954597067493422955"
//!   FROM orders FOR VERSION AS OF 'audit-branch'             ─► FROM "orders@audit-branch"
//!   FROM orders FOR TIMESTAMP AS OF TIMESTAMP '2026-12-01 10:00:00 UTC'
//!                                                            ─► FROM "orders@ts:1796119200000"
//! ```
//!
//! The text is split with sqlparser's tokenizer, so strings, quoted names and comments are
//! never taken for a clause; only the clause and the table name before it change, everything
//! else is copied byte for byte. The caller names the versioned tables (the server: as
//! `catalog/src/table_ref.rs` reads them).
//!
//! **Values.** `FOR VERSION AS OF` takes a snapshot id (a number) or a branch or tag name (a
//! string), as in Trino. `FOR TIMESTAMP AS OF` takes a literal: `TIMESTAMP '…'`, `DATE '…'`
//! or a string, with a UTC offset (`+01:00`), `Z` or `UTC`; a timestamp without zone is taken
//! as UTC (Trino takes the session's zone; iceflight's sessions are UTC). Expressions
//! (`current_timestamp - INTERVAL …`) and zone names are refused with a clear error.

use chrono::{DateTime, NaiveDate, NaiveDateTime};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan};

use super::tokens::{Offsets, significant_tokens};

/// A table version a clause names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Version {
    /// `FOR VERSION AS OF <number>`: a snapshot id.
    Snapshot(i64),
    /// `FOR VERSION AS OF '<name>'`: a branch or tag.
    Ref(String),
    /// `FOR TIMESTAMP AS OF …`: milliseconds since the Unix epoch, UTC.
    Timestamp(i64),
}

/// `Err` with a formatted message (this crate has no DataFusion; the server makes it a plan
/// error).
macro_rules! err {
    ($($t:tt)*) => { Err(format!($($t)*)) };
}

/// `sql` with every `<table> FOR VERSION|TIMESTAMP AS OF <value>` replaced by the versioned
/// table name (module docs); `sql` unchanged when it has none or does not tokenize (the parser
/// then reports the syntax error).
///
/// Errors: a clause after something that is not a table name, or a value that is not a
/// literal of the accepted forms.
pub fn rewrite(sql: &str, name: &dyn Fn(&str, &Version) -> String) -> Result<String, String> {
    let Some(tokens) = significant_tokens(sql) else {
        return Ok(sql.to_string());
    };
    let tokens: Vec<&TokenWithSpan> = tokens.iter().collect();
    let offsets = Offsets::new(sql);
    let mut out = String::with_capacity(sql.len());
    let mut copied = 0; // bytes of `sql` already in `out`
    let mut i = 0;
    while i < tokens.len() {
        let Some(kind) = clause_at(&tokens, i) else {
            i += 1;
            continue;
        };
        let Some(Token::Word(table)) = i.checked_sub(1).map(|p| &tokens[p].token) else {
            return err!("FOR {kind} AS OF must follow a table name");
        };
        if !follows_table_keyword(&tokens, i - 1) {
            // `FROM orders o FOR VERSION AS OF 1`: the word before the clause is an alias.
            return err!(
                "FOR {kind} AS OF must follow the table name directly, before any alias \
                 (FROM orders FOR {kind} AS OF … o)"
            );
        }
        let (version, used) = match kind {
            Keyword::VERSION => version_value(&tokens[i + 4..])?,
            _ => timestamp_value(&tokens[i + 4..])?,
        };
        let start = offsets.at(tokens[i - 1].span.start);
        let end = offsets.at(tokens[i + 3 + used].span.end);
        // The name is quoted in its new form: an unquoted one is lowercased first, as
        // DataFusion normalizes unquoted identifiers.
        let base = match table.quote_style {
            None => table.value.to_lowercase(),
            Some(_) => table.value.clone(),
        };
        let name = name(&base, &version).replace('"', "\"\"");
        out.push_str(&sql[copied..start]);
        out.push('"');
        out.push_str(&name);
        out.push('"');
        copied = end;
        i += 4 + used;
    }
    out.push_str(&sql[copied..]);
    Ok(out)
}

/// Whether the (possibly dotted) name ending at token `last` directly follows `FROM`, `JOIN`,
/// `INTO`, `TABLE` or a comma: a table name, not an alias.
fn follows_table_keyword(tokens: &[&TokenWithSpan], last: usize) -> bool {
    let mut at = last;
    while at >= 2
        && matches!(tokens[at - 1].token, Token::Period)
        && matches!(tokens[at - 2].token, Token::Word(_))
    {
        at -= 2;
    }
    let Some(before) = at.checked_sub(1).map(|b| &tokens[b].token) else {
        return false;
    };
    match before {
        Token::Comma => true,
        Token::Word(w) if w.quote_style.is_none() => matches!(
            w.keyword,
            Keyword::FROM | Keyword::JOIN | Keyword::INTO | Keyword::TABLE
        ),
        _ => false,
    }
}

/// `VERSION` or `TIMESTAMP` when the tokens at `i` are `FOR VERSION|TIMESTAMP AS OF`.
fn clause_at(tokens: &[&TokenWithSpan], i: usize) -> Option<Keyword> {
    let word = |j: usize| match tokens.get(j).map(|t| &t.token) {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    };
    let kind = word(i + 1)?;
    (word(i) == Some(Keyword::FOR)
        && matches!(kind, Keyword::VERSION | Keyword::TIMESTAMP)
        && word(i + 2) == Some(Keyword::AS)
        && word(i + 3) == Some(Keyword::OF))
    .then_some(kind)
}

/// The value of `FOR VERSION AS OF` and how many tokens it took.
fn version_value(rest: &[&TokenWithSpan]) -> Result<(Version, usize), String> {
    match rest.first().map(|t| &t.token) {
        Some(Token::Number(n, _)) => match n.parse::<i64>() {
            Ok(id) => Ok((Version::Snapshot(id), 1)),
            Err(_) => err!("FOR VERSION AS OF {n}: a snapshot id is a 64-bit integer"),
        },
        Some(Token::SingleQuotedString(name)) if !name.is_empty() => {
            Ok((Version::Ref(name.clone()), 1))
        }
        _ => err!(
            "FOR VERSION AS OF takes a snapshot id or a quoted branch or tag name \
             (FOR VERSION AS OF 8954597067493422955, FOR VERSION AS OF 'main')"
        ),
    }
}

/// The value of `FOR TIMESTAMP AS OF` (milliseconds since the epoch) and how many tokens it
/// took.
fn timestamp_value(rest: &[&TokenWithSpan]) -> Result<(Version, usize), String> {
    let (text, used, date_only) = match (rest.first().map(|t| &t.token), rest.get(1)) {
        (Some(Token::Word(w)), Some(next)) if w.quote_style.is_none() => {
            match (&w.keyword, &next.token) {
                (Keyword::TIMESTAMP, Token::SingleQuotedString(s)) => (s, 2, false),
                (Keyword::DATE, Token::SingleQuotedString(s)) => (s, 2, true),
                _ => return timestamp_expected(),
            }
        }
        (Some(Token::SingleQuotedString(s)), _) => (s, 1, false),
        _ => return timestamp_expected(),
    };
    match parse_instant(text, date_only) {
        Some(ms) => Ok((Version::Timestamp(ms), used)),
        None => err!(
            "FOR TIMESTAMP AS OF '{text}': not a timestamp iceflight reads \
             (YYYY-MM-DD[ HH:MM:SS[.fff]] with UTC, Z or an offset such as +01:00; no zone names)"
        ),
    }
}

fn timestamp_expected<T>() -> Result<T, String> {
    err!(
        "FOR TIMESTAMP AS OF takes a timestamp literal \
         (FOR TIMESTAMP AS OF TIMESTAMP '2026-12-01 10:00:00 UTC'); expressions are not supported"
    )
}

/// `text` as milliseconds since the epoch (module docs: values).
fn parse_instant(text: &str, date_only: bool) -> Option<i64> {
    let text = text.trim();
    let text = text
        .strip_suffix(" UTC")
        .or_else(|| text.strip_suffix("UTC"))
        .unwrap_or(text)
        .trim_end();
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Some(date.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis());
    }
    if date_only {
        return None;
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.timestamp_millis());
    }
    for format in ["%Y-%m-%d %H:%M:%S%.f%:z", "%Y-%m-%d %H:%M:%S%.f %:z"] {
        if let Ok(t) = DateTime::parse_from_str(text, format) {
            return Some(t.timestamp_millis());
        }
    }
    for format in [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, format) {
            return Some(t.and_utc().timestamp_millis());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As the server names versioned tables (`catalog/src/table_ref.rs`).
    fn named(base: &str, v: &Version) -> String {
        match v {
            Version::Snapshot(id) => format!("{base}@{id}"),
            Version::Ref(n) if n.parse::<i64>().is_ok() => format!("{base}@ref:{n}"),
            Version::Ref(n) => format!("{base}@{n}"),
            Version::Timestamp(ms) => format!("{base}@ts:{ms}"),
        }
    }

    fn rewrite(sql: &str) -> Result<String, String> {
        super::rewrite(sql, &named)
    }

    /// Both clauses become versioned names; the rest of the text is copied unchanged.
    #[test]
    fn clauses_become_names() {
        assert_eq!(
            rewrite(
                "SELECT * FROM tpch.Orders FOR VERSION AS OF 42 o WHERE x = 'FOR VERSION AS OF 1'"
            )
            .unwrap(),
            "SELECT * FROM tpch.\"orders@42\" o WHERE x = 'FOR VERSION AS OF 1'"
        );
        assert_eq!(
            rewrite("select 1 from \"Orders\"\n  for version as of 'audit' join t for version as of '7' on true")
                .unwrap(),
            "select 1 from \"Orders@audit\" join \"t@ref:7\" on true"
        );
        assert_eq!(
            rewrite("SELECT * FROM t FOR TIMESTAMP AS OF TIMESTAMP '2026-12-01 10:00:00 UTC'")
                .unwrap(),
            "SELECT * FROM \"t@ts:1796119200000\""
        );
        assert_eq!(
            rewrite("SELECT * FROM t FOR TIMESTAMP AS OF '2026-12-01T11:00:00+01:00'").unwrap(),
            "SELECT * FROM \"t@ts:1796119200000\""
        );
        assert_eq!(
            rewrite("SELECT * FROM t FOR TIMESTAMP AS OF DATE '2026-12-01'").unwrap(),
            "SELECT * FROM \"t@ts:1796083200000\""
        );
        let plain = "SELECT 'é' -- FOR VERSION AS OF 3\nFROM t";
        assert_eq!(rewrite(plain).unwrap(), plain);
    }

    /// Values iceflight cannot read are refused with the form it takes.
    #[test]
    fn bad_values_are_refused() {
        let err = |sql: &str| rewrite(sql).unwrap_err();
        assert!(err("SELECT * FROM t FOR TIMESTAMP AS OF now()").contains("timestamp literal"));
        assert!(
            err("SELECT * FROM t FOR TIMESTAMP AS OF TIMESTAMP '2026-12-01 Europe/Vienna'")
                .contains("no zone names")
        );
        assert!(err("SELECT * FROM t FOR VERSION AS OF x").contains("snapshot id"));
        assert!(err("SELECT 1 FOR VERSION AS OF 3").contains("must follow a table name"));
        assert!(err("SELECT * FROM orders o FOR VERSION AS OF 3").contains("before any alias"));
        assert!(err("SELECT * FROM orders AS o FOR VERSION AS OF 3").contains("before any alias"));
    }
}
