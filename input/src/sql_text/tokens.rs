//! The tokens of SQL text and where they lie in it: what every text rewrite of this folder
//! works on, so that strings, quoted names and comments are never taken for keywords.

use sqlparser::dialect::{Dialect, GenericDialect};
use sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer};

/// The tokens of `sql` (sqlparser's tokenizer, generic dialect) without whitespace and
/// comments, which never separate the words the rewrites look for; `None` when the text does
/// not tokenize (the parser then reports the error). Shared by the text rewrites.
pub fn significant_tokens(sql: &str) -> Option<Vec<TokenWithSpan>> {
    significant_tokens_in(sql, &GenericDialect {})
}

/// [`significant_tokens`] as `dialect` tokenizes `sql`.
pub fn significant_tokens_in(sql: &str, dialect: &dyn Dialect) -> Option<Vec<TokenWithSpan>> {
    let tokens = Tokenizer::new(dialect, sql).tokenize_with_location().ok()?;
    Some(
        tokens
            .into_iter()
            .filter(|t| !matches!(t.token, Token::Whitespace(_)))
            .collect(),
    )
}

/// Byte offsets of the tokenizer's locations (1-based lines, 1-based columns in characters).
pub struct Offsets<'a> {
    sql: &'a str,
    lines: Vec<usize>,
}

impl<'a> Offsets<'a> {
    pub fn new(sql: &'a str) -> Self {
        let mut lines = vec![0];
        lines.extend(sql.match_indices('\n').map(|(i, _)| i + 1));
        Self { sql, lines }
    }

    pub fn at(&self, location: Location) -> usize {
        let Some(&start) = self.lines.get((location.line as usize).saturating_sub(1)) else {
            return self.sql.len();
        };
        let column = (location.column as usize).saturating_sub(1);
        self.sql[start..]
            .char_indices()
            .nth(column)
            .map_or(self.sql.len(), |(i, _)| start + i)
    }
}
