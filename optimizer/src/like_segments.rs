//! Physical optimizer rule: `LIKE` patterns made of literal segments between `%`s are matched
//! by searching for the segments in order, not by a regular expression.
//!
//! ```text
//!   s [NOT] LIKE 'a%b%c'      ('%' inside, no '_' and no '\', case-sensitive, a literal)
//!     ──► starts with a, then b found after it, then ends with c after that   (memchr::memmem)
//!   any other LIKE            ──► unchanged (arrow's kernel)
//! ```
//!
//! **Why.** arrow-string 58.4's `Predicate::like` turns a pattern into an
//! equality, a prefix, a suffix or a substring search when it has at most a leading and a
//! trailing `%`; every other pattern becomes a regular expression. TPC-H q13's `o_comment NOT
//! LIKE '%special%requests%'` and q16's `s_comment LIKE '%Customer%Complaints%'` are such
//! patterns: at SF 10, four scans of `orders` with the first took 8.35 s of CPU against 4.90 s
//! with `NOT LIKE '%special%'` (6 alternating pairs, `bench/reports/issue32-progress-20261205.md`).
//!
//! **Rule of the match.** With `%` the only wildcard, a string matches when its first segment
//! is a prefix (unless the pattern starts with `%`), its last a suffix (unless it ends with
//! `%`), and the segments between occur in order without overlapping. Taking each segment's
//! leftmost occurrence after the previous one is enough: a later occurrence leaves less room for
//! the rest, never more. The suffix must start at or after where the previous segment ended.
//!
//! Evaluated on `Utf8`, `LargeUtf8` and `Utf8View` arrays; any other input (a dictionary, a
//! scalar) goes to the `LikeExpr` it replaced, whose display and SQL it also keeps.

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use datafusion::arrow::buffer::BooleanBuffer;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result, ScalarValue, internal_datafusion_err};
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{LikeExpr, Literal};
use datafusion::physical_expr_common::datum::apply_cmp;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use memchr::memmem::Finder;

/// Physical optimizer rule: `LIKE` with literal segments between `%`s becomes
/// [`LikeSegmentsExpr`] in projections, filters and aggregate arguments (module docs).
#[derive(Debug, Default)]
pub struct LikeSegments;

impl PhysicalOptimizerRule for LikeSegments {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !iceflight_options::IceflightOptions::of(config)
            .optimizer
            .like_segments
        {
            return Ok(plan);
        }
        crate::expr_rewrite::rewrite_plan(plan, &rewrite_expr)
    }

    fn name(&self) -> &str {
        "like_segments"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `expr` with every `LIKE` it holds (at any depth) that [`Segments::parse`] accepts
/// rewritten.
pub fn rewrite_expr(
    expr: Arc<dyn PhysicalExpr>,
    _schema: &Schema,
) -> Result<Transformed<Arc<dyn PhysicalExpr>>> {
    expr.transform_up(|e| {
        let Some(like) = e.downcast_ref::<LikeExpr>() else {
            return Ok(Transformed::no(e));
        };
        let Some(segments) = literal_segments(like) else {
            return Ok(Transformed::no(e));
        };
        let new = LikeSegmentsExpr {
            like: Arc::new(LikeExpr::new(
                like.negated(),
                false,
                Arc::clone(like.expr()),
                Arc::clone(like.pattern()),
            )),
            segments: Arc::new(segments),
        };
        Ok(Transformed::yes(Arc::new(new) as Arc<dyn PhysicalExpr>))
    })
}

/// The segments of a case-sensitive `LIKE` whose pattern is a string literal
/// [`Segments::parse`] accepts.
fn literal_segments(like: &LikeExpr) -> Option<Segments> {
    if like.case_insensitive() {
        return None;
    }
    match like
        .pattern()
        .downcast_ref::<Literal>()
        .map(Literal::value)?
    {
        ScalarValue::Utf8(Some(p))
        | ScalarValue::LargeUtf8(Some(p))
        | ScalarValue::Utf8View(Some(p)) => Segments::parse(p),
        _ => None,
    }
}

/// A `LIKE` pattern's literal segments: `prefix%middle₁%…%middleₙ%suffix`.
#[derive(Debug)]
pub struct Segments {
    /// Must start the string (`None`: the pattern starts with `%`).
    prefix: Option<String>,
    /// Must follow in order, each after the previous.
    middle: Vec<Finder<'static>>,
    /// Must end the string after the middle segments (`None`: the pattern ends with `%`).
    suffix: Option<String>,
}

impl Segments {
    /// The segments of `pattern` when `%` is its only wildcard, it has no `\` (DataFusion's
    /// escape), and arrow would match it with a regular expression (a `%` that is neither
    /// its first nor its last character); else `None`.
    pub fn parse(pattern: &str) -> Option<Self> {
        if pattern.contains(['_', '\\']) {
            return None;
        }
        let inner = pattern.strip_prefix('%').unwrap_or(pattern);
        let inner = inner.strip_suffix('%').unwrap_or(inner);
        if !inner.contains('%') {
            return None;
        }
        let parts: Vec<&str> = pattern.split('%').collect();
        let (first, rest) = parts.split_first()?;
        let (last, between) = rest.split_last()?;
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Some(Self {
            prefix: some(first),
            middle: between
                .iter()
                .filter(|s| !s.is_empty())
                .map(|s| Finder::new(s.as_bytes()).into_owned())
                .collect(),
            suffix: some(last),
        })
    }

    /// Whether `s` matches the pattern (module docs: leftmost occurrences in order).
    pub fn matches(&self, s: &[u8]) -> bool {
        let mut at = 0;
        if let Some(prefix) = &self.prefix {
            if !s.starts_with(prefix.as_bytes()) {
                return false;
            }
            at = prefix.len();
        }
        for finder in &self.middle {
            match finder.find(&s[at..]) {
                Some(i) => at += i + finder.needle().len(),
                None => return false,
            }
        }
        match &self.suffix {
            Some(suffix) => s.len() >= at + suffix.len() && s.ends_with(suffix.as_bytes()),
            None => true,
        }
    }
}

/// `expr [NOT] LIKE pattern` matched by [`Segments`]; displays as the `LikeExpr` it replaced.
#[derive(Debug, Clone)]
pub struct LikeSegmentsExpr {
    like: Arc<LikeExpr>,
    segments: Arc<Segments>,
}

// Equal and hashed as the `LikeExpr` it holds: the segments follow from its pattern.
impl PartialEq for LikeSegmentsExpr {
    fn eq(&self, other: &Self) -> bool {
        self.like == other.like
    }
}

impl Eq for LikeSegmentsExpr {}

impl Hash for LikeSegmentsExpr {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.like.hash(state);
    }
}

impl fmt::Display for LikeSegmentsExpr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        fmt::Display::fmt(&self.like, f)
    }
}

impl LikeSegmentsExpr {
    /// Matches every string of `array` (nulls stay null); `None` for a type it leaves to
    /// arrow's kernel.
    fn on_strings(&self, array: &ArrayRef) -> Option<BooleanArray> {
        let negated = self.like.negated();
        let test = |s: &[u8]| self.segments.matches(s) != negated;
        let values = match array.data_type() {
            DataType::Utf8 => {
                let a = array.as_string::<i32>();
                BooleanBuffer::collect_bool(a.len(), |i| test(a.value(i).as_bytes()))
            }
            DataType::LargeUtf8 => {
                let a = array.as_string::<i64>();
                BooleanBuffer::collect_bool(a.len(), |i| test(a.value(i).as_bytes()))
            }
            DataType::Utf8View => {
                let a = array.as_string_view();
                BooleanBuffer::collect_bool(a.len(), |i| test(a.value(i).as_bytes()))
            }
            _ => return None,
        };
        Some(BooleanArray::new(values, array.logical_nulls()))
    }
}

impl PhysicalExpr for LikeSegmentsExpr {
    fn data_type(&self, input_schema: &Schema) -> Result<DataType> {
        self.like.data_type(input_schema)
    }

    fn nullable(&self, input_schema: &Schema) -> Result<bool> {
        self.like.nullable(input_schema)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let value = self.like.expr().evaluate(batch)?;
        if let ColumnarValue::Array(array) = &value
            && let Some(result) = self.on_strings(array)
        {
            return Ok(ColumnarValue::Array(Arc::new(result)));
        }
        // Dictionaries and scalars: arrow's kernel, as `LikeExpr::evaluate` calls it.
        let op = if self.like.negated() {
            Operator::NotLikeMatch
        } else {
            Operator::LikeMatch
        };
        apply_cmp(op, &value, &self.like.pattern().evaluate(batch)?)
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![self.like.expr(), self.like.pattern()]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        let [expr, pattern]: [Arc<dyn PhysicalExpr>; 2] = children
            .try_into()
            .map_err(|_| internal_datafusion_err!("LIKE has two children"))?;
        let like = LikeExpr::new(self.like.negated(), false, expr, pattern);
        // A new pattern child is parsed again; one the segments cannot take stays a LikeExpr.
        match literal_segments(&like) {
            Some(segments) => Ok(Arc::new(Self {
                like: Arc::new(like),
                segments: Arc::new(segments),
            })),
            None => Ok(Arc::new(like)),
        }
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.like.fmt_sql(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn like(pattern: &str, s: &str) -> bool {
        Segments::parse(pattern)
            .expect("segments")
            .matches(s.as_bytes())
    }

    #[test]
    fn only_patterns_arrow_would_match_by_regex() {
        for arrow_handles in ["abc", "abc%", "%abc", "%abc%", "%", "%%"] {
            assert!(Segments::parse(arrow_handles).is_none(), "{arrow_handles}");
        }
        for wildcard_or_escape in ["a_%b", "a%b\\%c"] {
            assert!(Segments::parse(wildcard_or_escape).is_none());
        }
        assert!(Segments::parse("%special%requests%").is_some());
        assert!(Segments::parse("a%b").is_some());
        assert!(Segments::parse("a%%b").is_some());
    }

    #[test]
    fn segments_match_in_order_without_overlap() {
        assert!(like("%special%requests%", "x special y requests z"));
        assert!(!like("%special%requests%", "requests before special"));
        assert!(like("%special%requests%", "specialrequests"));
        assert!(like("a%b", "ab"));
        assert!(like("a%b", "a-b"));
        assert!(!like("a%b", "a-b-"));
        // The suffix may not reuse the prefix's bytes.
        assert!(!like("ab%b", "ab"));
        assert!(like("ab%b", "abb"));
        assert!(!like("a%bc%c", "abc"));
        assert!(like("a%bc%c", "abcc"));
        assert!(like("%a%a%", "aa"));
        assert!(!like("%a%a%", "a"));
        assert!(like("é%ß", "é und ß"));
    }

    /// The rewritten expression on a string column, a dictionary column (arrow's kernel) and
    /// after a new pattern child: one it cannot take gives back a plain `LikeExpr`.
    #[test]
    fn evaluates_strings_and_dictionaries_and_reparses_new_patterns() {
        use datafusion::arrow::array::{DictionaryArray, StringArray};
        use datafusion::arrow::datatypes::{Field, Int32Type};
        use datafusion::physical_expr::expressions::{Column, lit};

        let strings: ArrayRef = Arc::new(StringArray::from(vec![Some("a-b"), None, Some("ba")]));
        let dictionary: ArrayRef = Arc::new(
            vec![Some("a-b"), None, Some("ba")]
                .into_iter()
                .collect::<DictionaryArray<Int32Type>>(),
        );
        let like = |negated: bool| -> Arc<dyn PhysicalExpr> {
            Arc::new(LikeExpr::new(
                negated,
                false,
                Arc::new(Column::new("s", 0)),
                lit("a%b"),
            ))
        };
        for array in [strings, dictionary] {
            let schema = Arc::new(Schema::new(vec![Field::new(
                "s",
                array.data_type().clone(),
                true,
            )]));
            let batch = RecordBatch::try_new(Arc::clone(&schema), vec![array]).unwrap();
            for negated in [false, true] {
                let rewritten = rewrite_expr(like(negated), &schema).unwrap();
                assert!(rewritten.transformed);
                let got = rewritten
                    .data
                    .evaluate(&batch)
                    .unwrap()
                    .into_array(3)
                    .unwrap();
                let want = like(negated)
                    .evaluate(&batch)
                    .unwrap()
                    .into_array(3)
                    .unwrap();
                assert_eq!(got.as_boolean(), want.as_boolean(), "negated {negated}");
                assert_eq!(rewritten.data.to_string(), like(negated).to_string());
            }
        }
        let rewritten = rewrite_expr(like(false), &Schema::empty()).unwrap().data;
        let children = vec![Arc::new(Column::new("s", 0)) as _, lit("a_b")];
        let renewed = rewritten.with_new_children(children).unwrap();
        assert!(renewed.downcast_ref::<LikeExpr>().is_some());
    }

    /// Every pattern over the alphabet {a, b, %} up to length 5 against every string over
    /// {a, b} up to length 5, checked against a backtracking matcher of SQL's definition.
    #[test]
    fn agrees_with_a_backtracking_matcher() {
        fn reference(p: &[u8], s: &[u8]) -> bool {
            match p.split_first() {
                None => s.is_empty(),
                Some((b'%', rest)) => (0..=s.len()).any(|i| reference(rest, &s[i..])),
                Some((c, rest)) => s.first() == Some(c) && reference(rest, &s[1..]),
            }
        }
        fn words(alphabet: &[u8], max: usize) -> Vec<Vec<u8>> {
            let mut all = vec![vec![]];
            let mut last = vec![vec![]];
            for _ in 0..max {
                last = last
                    .iter()
                    .flat_map(|w: &Vec<u8>| {
                        alphabet.iter().map(move |c| {
                            let mut w = w.clone();
                            w.push(*c);
                            w
                        })
                    })
                    .collect();
                all.extend(last.iter().cloned());
            }
            all
        }
        let mut checked = 0;
        for p in words(b"ab%", 5) {
            let pattern = String::from_utf8(p.clone()).unwrap();
            let Some(segments) = Segments::parse(&pattern) else {
                continue;
            };
            for s in words(b"ab", 5) {
                assert_eq!(
                    segments.matches(&s),
                    reference(&p, &s),
                    "{pattern:?} on {:?}",
                    String::from_utf8_lossy(&s)
                );
                checked += 1;
            }
        }
        assert!(checked > 1000, "{checked}");
    }
}
