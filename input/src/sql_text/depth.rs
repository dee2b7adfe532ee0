//! How deep the expressions of a statement can nest, estimated from its tokens before anything
//! recursive sees it. sqlparser reads `a OR b OR c …` (and `a = b = c`, `x IS NULL IS NULL`,
//! `v::int::int`) without recursing, into a left-deep tree as deep as the chain is long;
//! cloning, planning and dropping that tree recurse once per level (10 000 `OR`s overflowed an
//! 8 MiB stack in DataFusion's planner), so a statement whose estimate passes
//! [`MAX_EXPRESSION_DEPTH`] is refused in one line, as DuckDB refuses one past its
//! `max_expression_depth`.
//!
//! ```text
//!   the statement's tokens (in the session's SQL dialect), per parenthesis group:
//!     part  = operators since the last separator (a comma, or a clause keyword: SELECT, FROM,
//!             WHERE, ON, …) + every closed group in it (its deepest part + 1)
//!   estimate = the largest part anywhere; `;` starts a statement afresh
//! ```
//!
//! The estimate never undercounts: every operator-like token counts (comparisons, `IS`, `::`,
//! `[`, `CASE` … `END`, not only `AND`/`OR`), and a group's depth is added to the part around it
//! wherever it stands. It overcounts a part that holds several short chains side by side.

use sqlparser::dialect::{Dialect, GenericDialect, dialect_from_str};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::Token;

use super::tokens::significant_tokens_in;

/// The largest estimate a statement may have: about 2 000 operators in one chain or nest
/// (1 000 `col = value OR …` terms; DuckDB's `max_expression_depth` is 1 000 levels).
pub const MAX_EXPRESSION_DEPTH: usize = 2000;

/// One open parenthesis group of the walk.
#[derive(Default)]
struct Group {
    /// The part being read: operators and closed groups since the last separator.
    part: usize,
    /// The largest part of this group closed so far.
    deepest: usize,
}

/// The estimate of `sql`'s deepest expression (module docs), its tokens read in `dialect`;
/// 0 when the text does not tokenize (the parser, on the same tokens, then reports it).
pub fn expression_depth(sql: &str, dialect: &dyn Dialect) -> usize {
    let Some(tokens) = significant_tokens_in(sql, dialect) else {
        return 0;
    };
    let mut groups = vec![Group::default()];
    let mut deepest = 0;
    for token in tokens.iter().map(|t| &t.token) {
        match token {
            Token::LParen => groups.push(Group::default()),
            Token::RParen if groups.len() > 1 => {
                if let Some(inner) = groups.pop()
                    && let Some(outer) = groups.last_mut()
                {
                    outer.part += inner.part.max(inner.deepest) + 1;
                }
            }
            Token::SemiColon => groups = vec![Group::default()],
            Token::Comma => separate(&mut groups),
            Token::Word(w) if w.quote_style.is_none() && separates(w.keyword) => {
                separate(&mut groups)
            }
            t if is_operator(t) => {
                if let Some(group) = groups.last_mut() {
                    group.part += 1;
                }
            }
            _ => {}
        }
        if let Some(group) = groups.last() {
            deepest = deepest.max(group.part);
        }
    }
    deepest
}

/// Refuses `sql` when its estimate passes [`MAX_EXPRESSION_DEPTH`]; `dialect` names the
/// session's SQL dialect (DataFusion's `datafusion.sql_parser.dialect`; unknown: generic).
///
/// Errors: one line giving the estimate and the bound.
pub fn check_expression_depth(sql: &str, dialect: &str) -> Result<(), String> {
    let depth = match dialect_from_str(dialect) {
        Some(d) => expression_depth(sql, d.as_ref()),
        None => expression_depth(sql, &GenericDialect {}),
    };
    match depth > MAX_EXPRESSION_DEPTH {
        true => Err(format!(
            "an expression of the statement chains or nests about {depth} operators, more \
             than {MAX_EXPRESSION_DEPTH}: split it, or write a long list of alternatives as \
             IN (…)"
        )),
        false => Ok(()),
    }
}

/// The current part ends (a comma, a clause keyword): it is remembered if the deepest.
fn separate(groups: &mut [Group]) {
    if let Some(group) = groups.last_mut() {
        group.deepest = group.deepest.max(group.part);
        group.part = 0;
    }
}

/// Keywords that start another part of a statement, where an expression ends.
fn separates(keyword: Keyword) -> bool {
    matches!(
        keyword,
        Keyword::SELECT
            | Keyword::FROM
            | Keyword::WHERE
            | Keyword::GROUP
            | Keyword::HAVING
            | Keyword::ORDER
            | Keyword::LIMIT
            | Keyword::OFFSET
            | Keyword::ON
            | Keyword::USING
            | Keyword::SET
            | Keyword::VALUES
            | Keyword::BY
            | Keyword::JOIN
            | Keyword::UNION
            | Keyword::INTERSECT
            | Keyword::EXCEPT
            | Keyword::WINDOW
            | Keyword::QUALIFY
            | Keyword::RETURNING
            | Keyword::INTO
    )
}

/// Keywords that join or end expressions into a node (`AND`, `IS`, `CASE` … `END`, …).
fn is_operator_keyword(keyword: Keyword) -> bool {
    matches!(
        keyword,
        Keyword::AND
            | Keyword::OR
            | Keyword::XOR
            | Keyword::NOT
            | Keyword::IS
            | Keyword::LIKE
            | Keyword::ILIKE
            | Keyword::SIMILAR
            | Keyword::RLIKE
            | Keyword::REGEXP
            | Keyword::BETWEEN
            | Keyword::IN
            | Keyword::COLLATE
            | Keyword::AT
            | Keyword::DIV
            | Keyword::CASE
            | Keyword::WHEN
            | Keyword::THEN
            | Keyword::ELSE
            | Keyword::END
            | Keyword::OVERLAPS
            | Keyword::ESCAPE
    )
}

/// Whether `token` may make a node of an expression: every token but names, literals,
/// placeholders, commas, `;` and parentheses (a literal kind this list misses is counted,
/// which only overcounts).
fn is_operator(token: &Token) -> bool {
    match token {
        Token::Word(w) => w.quote_style.is_none() && is_operator_keyword(w.keyword),
        Token::Number(..)
        | Token::Char(_)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::TripleSingleQuotedString(_)
        | Token::TripleDoubleQuotedString(_)
        | Token::DollarQuotedString(_)
        | Token::SingleQuotedByteStringLiteral(_)
        | Token::DoubleQuotedByteStringLiteral(_)
        | Token::TripleSingleQuotedByteStringLiteral(_)
        | Token::TripleDoubleQuotedByteStringLiteral(_)
        | Token::SingleQuotedRawStringLiteral(_)
        | Token::DoubleQuotedRawStringLiteral(_)
        | Token::TripleSingleQuotedRawStringLiteral(_)
        | Token::TripleDoubleQuotedRawStringLiteral(_)
        | Token::NationalStringLiteral(_)
        | Token::EscapedStringLiteral(_)
        | Token::UnicodeStringLiteral(_)
        | Token::HexStringLiteral(_)
        | Token::Placeholder(_)
        | Token::Comma
        | Token::SemiColon
        | Token::LParen
        | Token::RParen
        | Token::Whitespace(_)
        | Token::EOF => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(sql: &str) -> usize {
        expression_depth(sql, &GenericDialect {})
    }

    /// Chains of any operator and nested groups count; lists and separate clauses do not add.
    #[test]
    fn chains_and_groups_count_lists_do_not() {
        assert_eq!(depth("SELECT 1"), 0);
        assert_eq!(depth("SELECT a + b + c FROM t"), 2);
        assert_eq!(depth("SELECT ((1))"), 2);
        let ors = (0..5000)
            .map(|i| format!("a = {i}"))
            .collect::<Vec<_>>()
            .join(" OR ");
        assert!(depth(&format!("SELECT 1 FROM t WHERE {ors}")) >= 4999);
        let list = (0..5000)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        assert!(depth(&format!("SELECT 1 FROM t WHERE a IN ({list})")) < 5);
        let nested = format!("SELECT {}1{}", "(".repeat(3000), ")".repeat(3000));
        assert_eq!(depth(&nested), 3000);
        // A string or a comment holds no operator.
        assert_eq!(depth("SELECT 'a + b + c' -- + + +\n"), 0);
        let e = check_expression_depth(&nested, "generic").unwrap_err();
        assert!(e.contains("more than 2000"), "{e}");
        check_expression_depth(
            "SELECT a AND b OR c FROM t WHERE x = 1 AND y = 2",
            "generic",
        )
        .unwrap();
    }

    /// What a chain of other operators builds counts as well: comparisons, `IS`, casts,
    /// `CASE` … `END` side by side, and chains split over nested groups (each adds its depth
    /// where it stands, however the parts around it are separated).
    #[test]
    fn no_chain_hides() {
        let long = |unit: &str, n: usize| unit.repeat(n);
        for sql in [
            format!("SELECT true{}", long(" = true", 2500)),
            format!("SELECT 1{}", long(" IS NULL", 2500)),
            format!("SELECT 1{}", long("::int", 2500)),
            format!("SELECT 1{}", long(" + CASE WHEN true THEN 1 END", 700)),
            format!("SELECT f({}, 1)", long("1 + ", 2500) + "1"),
        ] {
            assert!(depth(&sql) > MAX_EXPRESSION_DEPTH, "{}", &sql[..60]);
        }
        // 40 groups, each a chain of 100: the chains add up.
        let mut nest = String::from("1");
        for _ in 0..40 {
            nest = format!("({nest}{})", long(" + 1", 100));
        }
        assert!(depth(&format!("SELECT {nest}")) > 4000);
    }

    /// The session's dialect tokenizes: MySQL's nested comments do not hide a chain.
    #[test]
    fn the_sessions_dialect_reads_the_text() {
        let sql = format!("SELECT /* /* */ 1{} /* */", " OR 1".repeat(2500));
        assert!(check_expression_depth(&sql, "mysql").is_err());
        assert!(check_expression_depth(&sql, "MySQL").is_err());
    }
}
