//! How deep the expressions of a statement can nest, estimated from its tokens before anything
//! recursive sees it. sqlparser reads `a OR b OR c …` without recursing, into a left-deep tree
//! as deep as the chain is long; cloning, planning and dropping that tree recurse once per
//! level (10 000 `OR`s overflowed an 8 MiB stack in DataFusion's planner), so a statement that
//! could nest deeper than [`MAX_EXPRESSION_DEPTH`] is refused in one line, as DuckDB refuses one
//! past its `max_expression_depth` (1 000).
//!
//! ```text
//!   per statement: depth = open parentheses + binary operators since the last separator at
//!   that level (a comma, `;`, or a clause keyword: SELECT, FROM, WHERE, ON, WHEN, THEN, …)
//! ```
//!
//! The estimate never undercounts a chain: every chaining operator counts, whatever binds
//! tighter (`a * b + c` counts 2); comparisons, which do not chain, do not.

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::Token;

use super::tokens::significant_tokens;

/// The deepest expression a statement may build (DuckDB's default `max_expression_depth`).
pub const MAX_EXPRESSION_DEPTH: usize = 1000;

/// The estimated deepest expression nesting of the statements of `sql` (module docs); 0 when
/// the text does not tokenize (the parser then reports it).
pub fn expression_depth(sql: &str) -> usize {
    let Some(tokens) = significant_tokens(sql) else {
        return 0;
    };
    // Operators counted at each open parenthesis level, the statement's own first.
    let mut levels: Vec<usize> = vec![0];
    let mut deepest = 0;
    for token in tokens.iter().map(|t| &t.token) {
        match token {
            Token::LParen => levels.push(0),
            Token::RParen if levels.len() > 1 => {
                levels.pop();
            }
            Token::SemiColon => levels = vec![0],
            Token::Comma => {
                if let Some(last) = levels.last_mut() {
                    *last = 0;
                }
            }
            Token::Word(w) if w.quote_style.is_none() && separates(w.keyword) => {
                if let Some(last) = levels.last_mut() {
                    *last = 0;
                }
            }
            t if is_binary_operator(t) => {
                if let Some(last) = levels.last_mut() {
                    *last += 1;
                }
            }
            _ => {}
        }
        let here = levels.len() - 1 + levels.last().copied().unwrap_or(0);
        deepest = deepest.max(here);
    }
    deepest
}

/// Refuses `sql` when its expressions could nest deeper than [`MAX_EXPRESSION_DEPTH`].
///
/// Errors: one line giving the depth and the bound.
pub fn check_expression_depth(sql: &str) -> Result<(), String> {
    let depth = expression_depth(sql);
    match depth > MAX_EXPRESSION_DEPTH {
        true => Err(format!(
            "the statement nests expressions about {depth} levels deep, deeper than \
             {MAX_EXPRESSION_DEPTH}: split it, or write a long list of alternatives as IN (…)"
        )),
        false => Ok(()),
    }
}

/// Keywords that start another part of a statement, where an expression chain ends.
fn separates(keyword: Keyword) -> bool {
    matches!(
        keyword,
        Keyword::SELECT
            | Keyword::FROM
            | Keyword::WHERE
            | Keyword::HAVING
            | Keyword::ON
            | Keyword::WHEN
            | Keyword::THEN
            | Keyword::ELSE
            | Keyword::END
            | Keyword::SET
            | Keyword::VALUES
            | Keyword::BY
            | Keyword::LIMIT
            | Keyword::JOIN
            | Keyword::UNION
            | Keyword::INTERSECT
            | Keyword::EXCEPT
    )
}

/// Whether `token` joins two expressions into a node that a chain of them nests: `AND`, `OR`,
/// arithmetic, bit and string operators (a comparison takes two of their chains, it does not
/// chain itself).
fn is_binary_operator(token: &Token) -> bool {
    match token {
        Token::Word(w) => {
            w.quote_style.is_none() && matches!(w.keyword, Keyword::AND | Keyword::OR)
        }
        Token::Plus
        | Token::Minus
        | Token::Mul
        | Token::Div
        | Token::Mod
        | Token::StringConcat
        | Token::Caret
        | Token::Ampersand
        | Token::Pipe
        | Token::ShiftLeft
        | Token::ShiftRight => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_and_parentheses_count_lists_do_not() {
        assert_eq!(expression_depth("SELECT 1"), 0);
        assert_eq!(expression_depth("SELECT a + b + c FROM t"), 2);
        assert_eq!(expression_depth("SELECT ((1))"), 2);
        let ors = (0..5000)
            .map(|i| format!("a = {i}"))
            .collect::<Vec<_>>()
            .join(" OR ");
        assert!(expression_depth(&format!("SELECT 1 FROM t WHERE {ors}")) >= 4999);
        let list = (0..5000)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        assert!(expression_depth(&format!("SELECT 1 FROM t WHERE a IN ({list})")) < 5);
        let nested = format!("SELECT {}1{}", "(".repeat(2000), ")".repeat(2000));
        assert_eq!(expression_depth(&nested), 2000);
        // A string or a comment holds no operator.
        assert_eq!(expression_depth("SELECT 'a + b + c' -- + + +\n"), 0);
        let e = check_expression_depth(&nested).unwrap_err();
        assert!(e.contains("deeper than 1000"), "{e}");
        check_expression_depth("SELECT a AND b OR c FROM t WHERE x = 1 AND y = 2").unwrap();
    }
}
