//! `INSERT INTO local.s.t` in SQL text, made parseable: sqlparser reads an unquoted `LOCAL`
//! right after `INSERT INTO` or `INSERT OVERWRITE` as Hive's `INSERT … LOCAL DIRECTORY` and
//! fails on the dot after it, though `local` is the embedded catalog's name
//! (`catalog_config::DEFAULT_CATALOG_NAME`). That word is quoted when a dot follows it:
//!
//! ```text
//!   INSERT INTO local.tpch.t VALUES (1)   ─► INSERT INTO "local".tpch.t VALUES (1)
//! ```
//!
//! The text is split with sqlparser's tokenizer (`tokens.rs`); everything else is
//! copied byte for byte. Other statements (`SELECT … FROM local.s.t`, `UPDATE`, `MERGE INTO`,
//! `INSERT OVERWRITE TABLE`) parse as they are.

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::Token;

use super::tokens::{Offsets, significant_tokens};

/// `sql` with the `local` of `INSERT INTO|OVERWRITE local.…` quoted (module docs); unchanged
/// when there is none or the text does not tokenize (the parser then reports the error).
pub fn rewrite(sql: &str) -> String {
    let Some(tokens) = significant_tokens(sql) else {
        return sql.to_string();
    };
    let keyword = |i: usize| match tokens.get(i).map(|t| &t.token) {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    };
    let offsets = Offsets::new(sql);
    let mut out = String::with_capacity(sql.len() + 2);
    let mut copied = 0;
    for i in 2..tokens.len() {
        let catalog = keyword(i) == Some(Keyword::LOCAL)
            && matches!(keyword(i - 1), Some(Keyword::INTO | Keyword::OVERWRITE))
            && keyword(i - 2) == Some(Keyword::INSERT)
            && matches!(tokens.get(i + 1).map(|t| &t.token), Some(Token::Period));
        if !catalog {
            continue;
        }
        let (start, end) = (
            offsets.at(tokens[i].span.start),
            offsets.at(tokens[i].span.end),
        );
        out.push_str(&sql[copied..start]);
        // Unquoted, the name is lowercased as DataFusion normalizes identifiers.
        out.push('"');
        out.push_str(&sql[start..end].to_lowercase());
        out.push('"');
        copied = end;
    }
    out.push_str(&sql[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn the_catalog_after_insert_into_or_overwrite_is_quoted() {
        assert_eq!(
            rewrite("INSERT INTO local.tpch.t VALUES (1)"),
            r#"INSERT INTO "local".tpch.t VALUES (1)"#
        );
        assert_eq!(
            rewrite("insert overwrite LOCAL . s.t select 1; INSERT INTO Local.s.t VALUES (2)"),
            r#"insert overwrite "local" . s.t select 1; INSERT INTO "local".s.t VALUES (2)"#
        );
    }

    #[test]
    fn everything_else_is_left_as_it_is() {
        for sql in [
            "SELECT * FROM local.s.t",
            "INSERT INTO t SELECT 'INSERT INTO local.x' AS local",
            r#"INSERT INTO "local".s.t VALUES (1)"#,
            "INSERT OVERWRITE TABLE local.s.t VALUES (1)",
            "INSERT OVERWRITE LOCAL DIRECTORY '/tmp/x' SELECT 1",
            "-- INSERT INTO local.s.t\nSELECT 1",
        ] {
            assert_eq!(rewrite(sql), sql);
        }
    }
}
