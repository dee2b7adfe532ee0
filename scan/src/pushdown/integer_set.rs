//! A set of integer keys as a bitmap, for the row filter: `col IN (k1, …, kn)` over an integer
//! column, evaluated with one bit test per row.
//!
//! ```text
//!   InListExpr(col, [k1 … kn], not negated)      (a hash join's dynamic filter from a small
//!     col Int8 … Int64, every ki a non-NULL         build side, or a query's own IN list)
//!     literal, max − min < MAX_SPAN
//!   ──► IntegerSetExpr { col, min, bits[(ki − min)] = 1 }
//!   evaluate: row v ──► v − min < span && bit set  (NULL stays NULL, as IN without NULL items)
//! ```
//!
//! **Why.** DataFusion 54.1's `InListExpr` probes a hash set per row (`Int64StaticFilter`);
//! TPC-H q17's lineitem scans test 6 M `l_partkey` values each against the 204 parts of one
//! brand and container, and the probes were 23 % of the query's CPU. A bitmap over the keys'
//! range (here 197 K bits, 24 KiB) answers with one load and a shift. Only in the scan's row
//! filter (`row_filter.rs`), where an expression's NULL counts as false anyway; the answers are
//! `InListExpr`'s, NULLs included.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Int8Type, Int16Type, Int32Type, Int64Type, Schema,
};
use arrow::record_batch::RecordBatch;
use datafusion::common::{Result, ScalarValue, internal_datafusion_err};
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{Column, InListExpr, Literal};

/// Largest key range a bitmap covers (bits; 2^23 bits = 1 MiB).
pub const MAX_SPAN: u64 = 1 << 23;

/// `column IN (keys)` over an integer column as a bitmap of the keys (module docs).
#[derive(Debug, Clone, Eq)]
pub struct IntegerSetExpr {
    column: Arc<dyn PhysicalExpr>,
    /// The smallest key.
    min: i64,
    /// Bit `k − min` set for every key `k`.
    bits: Vec<u64>,
    /// Number of distinct keys.
    keys: usize,
}

impl PartialEq for IntegerSetExpr {
    fn eq(&self, other: &Self) -> bool {
        self.column.eq(&other.column) && self.min == other.min && self.bits == other.bits
    }
}

impl Hash for IntegerSetExpr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.column.hash(state);
        self.min.hash(state);
        self.bits.hash(state);
    }
}

impl IntegerSetExpr {
    /// The set for `in_list`, or `None` when it is not `column IN (integer literals)` (not
    /// negated, no NULL item, an Int8–Int64 column of `schema`) or its keys span more than
    /// [`MAX_SPAN`].
    pub fn try_from_in_list(in_list: &InListExpr, schema: &Schema) -> Option<Self> {
        if in_list.negated() || in_list.list().is_empty() {
            return None;
        }
        let column = in_list.expr();
        column.downcast_ref::<Column>()?;
        let data_type = column.data_type(schema).ok()?;
        if !matches!(
            data_type,
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64
        ) {
            return None;
        }
        let keys = in_list
            .list()
            .iter()
            .map(|item| match item.downcast_ref::<Literal>()?.value() {
                ScalarValue::Int8(Some(v)) => Some(*v as i64),
                ScalarValue::Int16(Some(v)) => Some(*v as i64),
                ScalarValue::Int32(Some(v)) => Some(*v as i64),
                ScalarValue::Int64(Some(v)) => Some(*v),
                _ => None,
            })
            .collect::<Option<Vec<i64>>>()?;
        let (min, max) = (*keys.iter().min()?, *keys.iter().max()?);
        // `max − min` as u64 (exact for any two i64s); a span of all of i64 does not fit.
        let width = max.abs_diff(min);
        if width >= MAX_SPAN {
            return None;
        }
        let span = width + 1;
        let mut bits = vec![0u64; span.div_ceil(64) as usize];
        for k in &keys {
            let i = k.abs_diff(min);
            bits[(i / 64) as usize] |= 1 << (i % 64);
        }
        let distinct = bits.iter().map(|w| w.count_ones() as usize).sum();
        Some(Self {
            column: Arc::clone(column),
            min,
            bits,
            keys: distinct,
        })
    }

    /// Whether `v` is a key.
    #[inline]
    fn contains(&self, v: i64) -> bool {
        let i = v.wrapping_sub(self.min) as u64;
        // A value below `min` wraps to a large offset, outside the bitmap.
        (i / 64) < self.bits.len() as u64 && (self.bits[(i / 64) as usize] >> (i % 64)) & 1 == 1
    }

    fn mask(&self, array: &ArrayRef) -> Result<BooleanArray> {
        let values = match array.data_type() {
            DataType::Int8 => self.members::<Int8Type>(array),
            DataType::Int16 => self.members::<Int16Type>(array),
            DataType::Int32 => self.members::<Int32Type>(array),
            DataType::Int64 => self.members::<Int64Type>(array),
            other => {
                return Err(internal_datafusion_err!(
                    "integer set over a {other} column"
                ));
            }
        };
        Ok(BooleanArray::new(values, array.nulls().cloned()))
    }

    /// One bit per row of `array` (of type `T`): whether its value is a key.
    fn members<T: ArrowPrimitiveType>(&self, array: &ArrayRef) -> BooleanBuffer
    where
        T::Native: Into<i64>,
    {
        let a = array.as_primitive::<T>().values();
        BooleanBuffer::collect_bool(a.len(), |i| self.contains(a[i].into()))
    }
}

impl fmt::Display for IntegerSetExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} IN SET ({} keys)", self.column, self.keys)
    }
}

impl PhysicalExpr for IntegerSetExpr {
    fn data_type(&self, _input_schema: &Schema) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn nullable(&self, input_schema: &Schema) -> Result<bool> {
        self.column.nullable(input_schema)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let array = self.column.evaluate(batch)?.into_array(batch.num_rows())?;
        Ok(ColumnarValue::Array(Arc::new(self.mask(&array)?)))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![&self.column]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        let [column] = <[_; 1]>::try_from(children).map_err(|c| {
            internal_datafusion_err!("an integer set takes 1 child, got {}", c.len())
        })?;
        Ok(Arc::new(Self {
            column,
            ..(*self).clone()
        }))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, Int64Array};
    use arrow::datatypes::Field;
    use datafusion::physical_expr::expressions::{col, in_list, lit};

    fn batch(values: Vec<Option<i64>>) -> RecordBatch {
        let schema = Schema::new(vec![Field::new("k", DataType::Int64, true)]);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(Int64Array::from(values))]).unwrap()
    }

    /// The bitmap answers as `InListExpr` does, NULL rows and values outside the keys' range
    /// (below and above, at the extremes of i64) included.
    #[test]
    fn answers_as_in_list() {
        let b = batch(vec![
            Some(5),
            None,
            Some(4),
            Some(1000),
            Some(i64::MIN),
            Some(i64::MAX),
            Some(70),
            Some(6),
        ]);
        let schema = b.schema();
        let keys = [5i64, 70, 6, 200, 5].map(lit).to_vec();
        let list = in_list(col("k", &schema).unwrap(), keys, &false, &schema).unwrap();
        let in_list = list.downcast_ref::<InListExpr>().unwrap();
        let set = IntegerSetExpr::try_from_in_list(in_list, &schema).unwrap();
        assert_eq!(set.keys, 4);
        let expected = list.evaluate(&b).unwrap().into_array(8).unwrap();
        let got = set.evaluate(&b).unwrap().into_array(8).unwrap();
        assert_eq!(expected.as_ref(), got.as_ref());
        assert_eq!(set.to_string(), "k@0 IN SET (4 keys)");
        // Keys at both ends of i64 span more than a bitmap covers: left to `InListExpr`.
        let ends = datafusion::physical_expr::expressions::in_list(
            col("k", &schema).unwrap(),
            vec![lit(i64::MIN), lit(i64::MAX)],
            &false,
            &schema,
        )
        .unwrap();
        assert!(IntegerSetExpr::try_from_in_list(ends.downcast_ref().unwrap(), &schema).is_none());
    }

    /// Int32 columns too; negated lists, NULL items and wide ranges stay `InListExpr`s.
    #[test]
    fn only_plain_integer_lists_within_the_span() {
        let schema = Schema::new(vec![Field::new("k", DataType::Int32, true)]);
        let b = RecordBatch::try_new(
            Arc::new(schema.clone()),
            vec![Arc::new(Int32Array::from(vec![Some(3), None, Some(9)]))],
        )
        .unwrap();
        let k = col("k", &schema).unwrap();
        let make = |items: Vec<Arc<dyn PhysicalExpr>>, negated: bool| {
            in_list(Arc::clone(&k), items, &negated, &schema).unwrap()
        };
        let plain = make(vec![lit(3i32), lit(4i32)], false);
        let set = IntegerSetExpr::try_from_in_list(plain.downcast_ref().unwrap(), &schema).unwrap();
        assert_eq!(
            plain.evaluate(&b).unwrap().into_array(3).unwrap().as_ref(),
            set.evaluate(&b).unwrap().into_array(3).unwrap().as_ref()
        );
        for refused in [
            make(vec![lit(3i32)], true),
            make(vec![lit(3i32), lit(ScalarValue::Int32(None))], false),
            make(vec![lit(0i32), lit(i32::MAX)], false),
        ] {
            assert!(
                IntegerSetExpr::try_from_in_list(refused.downcast_ref().unwrap(), &schema)
                    .is_none(),
                "{refused}"
            );
        }
    }
}
