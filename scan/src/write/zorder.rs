//! Z-order for `optimize(sort_by => 'zorder(a, b)')` (Spark's spelling of the same option):
//! rows sorted by a key interleaving the bits of each column's position in its value range, so
//! that every column, not only the first, ends up clustered in the files written and each file's
//! bounds on each column are narrow.
//!
//! ```text
//!   column value ──► 32-bit position       numbers, dates, timestamps, decimals, booleans:
//!                                           (v − min) / (max − min) of the table's bounds
//!                                           (manifest metrics), × 2³²−1; no bounds: the
//!                                           high 32 bits of the value's order-preserving
//!                                           64-bit form
//!                                         strings, binary: the 4 bytes after the prefix the
//!                                           bounds share
//!                                         NULL: 2³²−1 (last)
//!   positions (n columns) ──► interleaved bit by bit, high bits first ──► n × 4 bytes, compared
//!                                                                         as bytes by the sort
//! ```
//!
//! Scaling by the bounds matters: columns whose raw forms vary in bits of different rank (a
//! date in 15 bits, an amount in 30) would otherwise sort by the wider one first.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryBuilder};
use arrow::datatypes::{DataType, Float64Type};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// How one column's values become 32-bit positions (module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ZScale {
    /// A number's place between the bounds `lo` and `hi` (`f64` bits; `lo < hi`).
    Linear {
        /// `f64::to_bits` of the lower bound.
        lo: u64,
        /// `f64::to_bits` of the upper bound.
        hi: u64,
    },
    /// A number without bounds: the high 32 bits of its order-preserving form.
    Bits,
    /// Bytes (strings, binary) after `skip` leading bytes all values share.
    Prefix {
        /// Bytes skipped.
        skip: usize,
    },
}

impl ZScale {
    /// The scale of a column of `data_type` whose values lie in `bounds` (lower, upper), as
    /// the table's manifests give them.
    pub fn of(data_type: &DataType, bounds: Option<(ScalarValue, ScalarValue)>) -> Self {
        if is_bytes(data_type) {
            let skip = match bounds {
                Some((lo, hi)) => match (bytes_of(&lo), bytes_of(&hi)) {
                    (Some(lo), Some(hi)) => lo.iter().zip(&hi).take_while(|(a, b)| a == b).count(),
                    _ => 0,
                },
                None => 0,
            };
            return ZScale::Prefix { skip };
        }
        let number = |v: &ScalarValue| -> Option<f64> {
            let v = match v.data_type().is_temporal() {
                true => v.cast_to(&DataType::Int64).ok()?,
                false => v.clone(),
            };
            match v.cast_to(&DataType::Float64).ok()? {
                ScalarValue::Float64(Some(f)) if f.is_finite() => Some(f),
                _ => None,
            }
        };
        match bounds {
            Some((lo, hi)) => match (number(&lo), number(&hi)) {
                (Some(lo), Some(hi)) if lo < hi => ZScale::Linear {
                    lo: lo.to_bits(),
                    hi: hi.to_bits(),
                },
                _ => ZScale::Bits,
            },
            None => ZScale::Bits,
        }
    }

    /// The positions of `array`'s values (NULL: `u32::MAX`).
    fn positions(&self, array: &ArrayRef) -> Result<Vec<u32>> {
        let n = array.len();
        match self {
            ZScale::Prefix { skip } => {
                let binary = as_binary(array)?;
                let binary = binary.as_binary::<i32>();
                Ok((0..n)
                    .map(|i| match binary.is_null(i) {
                        true => u32::MAX,
                        false => {
                            let v = binary.value(i);
                            let mut key = [0u8; 4];
                            for (k, b) in key.iter_mut().zip(v.iter().skip(*skip)) {
                                *k = *b;
                            }
                            u32::from_be_bytes(key)
                        }
                    })
                    .collect())
            }
            ZScale::Linear { lo, hi } => {
                let (lo, hi) = (f64::from_bits(*lo), f64::from_bits(*hi));
                let numbers = as_f64(array)?;
                let numbers = numbers.as_primitive::<Float64Type>();
                Ok((0..n)
                    .map(|i| match numbers.is_null(i) {
                        true => u32::MAX,
                        false => {
                            let share = ((numbers.value(i) - lo) / (hi - lo)).clamp(0.0, 1.0);
                            // NaN (a NaN value) clamps to NaN: place it last, as Iceberg orders it.
                            match share.is_nan() {
                                true => u32::MAX,
                                false => (share * (u32::MAX - 1) as f64) as u32,
                            }
                        }
                    })
                    .collect())
            }
            ZScale::Bits => {
                let numbers = as_f64(array)?;
                let numbers = numbers.as_primitive::<Float64Type>();
                Ok((0..n)
                    .map(|i| match numbers.is_null(i) {
                        true => u32::MAX,
                        false => {
                            let bits = numbers.value(i).to_bits();
                            // IEEE 754 in total order: negatives flipped, positives above them.
                            let ordered = match bits >> 63 {
                                1 => !bits,
                                _ => bits | (1 << 63),
                            };
                            ((ordered >> 32) as u32).min(u32::MAX - 1)
                        }
                    })
                    .collect())
            }
        }
    }
}

fn is_bytes(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_)
    )
}

fn bytes_of(v: &ScalarValue) -> Option<Vec<u8>> {
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Some(s.as_bytes().to_vec()),
        ScalarValue::Binary(Some(b))
        | ScalarValue::LargeBinary(Some(b))
        | ScalarValue::BinaryView(Some(b))
        | ScalarValue::FixedSizeBinary(_, Some(b)) => Some(b.clone()),
        _ => None,
    }
}

fn as_binary(array: &ArrayRef) -> Result<ArrayRef> {
    let utf8 = match array.data_type() {
        DataType::LargeUtf8 | DataType::Utf8View => arrow::compute::cast(array, &DataType::Utf8)?,
        DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => {
            return Ok(arrow::compute::cast(array, &DataType::Binary)?);
        }
        _ => Arc::clone(array),
    };
    Ok(arrow::compute::cast(&utf8, &DataType::Binary)?)
}

fn as_f64(array: &ArrayRef) -> Result<ArrayRef> {
    let array = match array.data_type().is_temporal() {
        true => arrow::compute::cast(array, &DataType::Int64)?,
        false => Arc::clone(array),
    };
    Ok(arrow::compute::cast(&array, &DataType::Float64)?)
}

/// The Z-order key of its arguments: `iceflight_zorder(c1, …, cn)` → `Binary` of n × 4 bytes
/// (module docs), one [`ZScale`] per argument.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ZOrderKey {
    scales: Vec<ZScale>,
    signature: Signature,
}

impl ZOrderKey {
    /// A key over columns scaled by `scales`, in order.
    pub fn new(scales: Vec<ZScale>) -> Self {
        Self {
            scales,
            signature: Signature::variadic_any(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ZOrderKey {
    fn name(&self) -> &str {
        "iceflight_zorder"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Binary)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if args.args.len() != self.scales.len() {
            return exec_err!(
                "iceflight_zorder has {} scales for {} arguments",
                self.scales.len(),
                args.args.len()
            );
        }
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let positions = self
            .scales
            .iter()
            .zip(&arrays)
            .map(|(scale, array)| scale.positions(array))
            .collect::<Result<Vec<_>>>()?;
        Ok(ColumnarValue::Array(Arc::new(interleave(
            &positions,
            args.number_rows,
        ))))
    }
}

/// Per row, the bits of `positions` (one vector per column) interleaved, high bits first.
fn interleave(positions: &[Vec<u32>], rows: usize) -> arrow::array::BinaryArray {
    let width = positions.len() * 4;
    let mut out = BinaryBuilder::with_capacity(rows, rows * width);
    let mut key = vec![0u8; width];
    for row in 0..rows {
        key.iter_mut().for_each(|b| *b = 0);
        let mut bit = 0usize;
        for shift in (0..32).rev() {
            for column in positions {
                if (column[row] >> shift) & 1 == 1 {
                    key[bit / 8] |= 0x80 >> (bit % 8);
                }
                bit += 1;
            }
        }
        out.append_value(&key);
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, StringArray};

    #[test]
    fn interleaves_high_bits_first() {
        // x = 0b10…, y = 0b01…: the key's bits are x31 y31 x30 y30 … = 1 0 0 1 ….
        let key = interleave(&[vec![0x8000_0000], vec![0x4000_0000]], 1);
        assert_eq!(key.value(0), &[0b1001_0000, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn positions_follow_the_bounds_and_put_nulls_last() {
        let scale = ZScale::of(
            &DataType::Int32,
            Some((ScalarValue::Int32(Some(0)), ScalarValue::Int32(Some(100)))),
        );
        let array: ArrayRef = Arc::new(Int32Array::from(vec![Some(0), Some(50), Some(100), None]));
        let p = scale.positions(&array).unwrap();
        assert_eq!(p[0], 0);
        assert!((p[1] as i64 - (u32::MAX / 2) as i64).abs() < 2);
        assert!(p[2] < u32::MAX && p[2] > p[1]);
        assert_eq!(p[3], u32::MAX);

        let scale = ZScale::of(
            &DataType::Utf8,
            Some((
                ScalarValue::Utf8(Some("key-0001".into())),
                ScalarValue::Utf8(Some("key-0999".into())),
            )),
        );
        assert_eq!(scale, ZScale::Prefix { skip: 5 });
        let array: ArrayRef = Arc::new(StringArray::from(vec!["key-0001", "key-0999"]));
        let p = scale.positions(&array).unwrap();
        assert!(p[0] < p[1]);
    }

    #[test]
    fn keys_cluster_both_columns() {
        // A 4×4 grid: each quarter of the key order is one 2×2 quadrant.
        let xs: Vec<i32> = (0..16).map(|i| i % 4).collect();
        let ys: Vec<i32> = (0..16).map(|i| i / 4).collect();
        let bounds = Some((ScalarValue::Int32(Some(0)), ScalarValue::Int32(Some(3))));
        let scales = [
            ZScale::of(&DataType::Int32, bounds.clone()),
            ZScale::of(&DataType::Int32, bounds),
        ];
        let x: ArrayRef = Arc::new(Int32Array::from(xs.clone()));
        let y: ArrayRef = Arc::new(Int32Array::from(ys.clone()));
        let keys = interleave(
            &[
                scales[0].positions(&x).unwrap(),
                scales[1].positions(&y).unwrap(),
            ],
            16,
        );
        let mut order: Vec<usize> = (0..16).collect();
        order.sort_by_key(|&i| keys.value(i).to_vec());
        for quarter in order.chunks(4) {
            let qx: std::collections::HashSet<i32> = quarter.iter().map(|&i| xs[i] / 2).collect();
            let qy: std::collections::HashSet<i32> = quarter.iter().map(|&i| ys[i] / 2).collect();
            assert_eq!((qx.len(), qy.len()), (1, 1), "{quarter:?}");
        }
    }
}
