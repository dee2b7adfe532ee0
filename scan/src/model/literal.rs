//! Values between iceberg and DataFusion, in one place: a query's literal as an iceberg
//! [`Datum`] (for predicates and pruning), a manifest bound as a [`ScalarValue`] (statistics,
//! domains), and an iceberg [`Literal`] (a column's default, a partition value) as a
//! [`ScalarValue`] of a given Arrow type.

use std::sync::Arc;

use arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;
use iceberg::scan::FileScanTask;
use iceberg::spec::{Datum, Literal, PrimitiveLiteral, PrimitiveType, Transform};

/// Converts a non-null literal whose Arrow type is exactly `arrow_type` to a [`Datum`] of the
/// column's iceberg type `ty`. `None` for NULL, another type, or a float NaN / ±0.0.
pub fn scalar_to_datum(
    value: &ScalarValue,
    arrow_type: &DataType,
    ty: &PrimitiveType,
) -> Option<Datum> {
    if &value.data_type() != arrow_type {
        return None;
    }
    Some(match (value, ty) {
        (ScalarValue::Boolean(Some(v)), PrimitiveType::Boolean) => Datum::bool(*v),
        (ScalarValue::Int32(Some(v)), PrimitiveType::Int) => Datum::int(*v),
        (ScalarValue::Int64(Some(v)), PrimitiveType::Long) => Datum::long(*v),
        (ScalarValue::Float32(Some(v)), PrimitiveType::Float) => {
            if v.is_nan() || *v == 0.0 {
                return None;
            }
            Datum::float(*v)
        }
        (ScalarValue::Float64(Some(v)), PrimitiveType::Double) => {
            if v.is_nan() || *v == 0.0 {
                return None;
            }
            Datum::double(*v)
        }
        (ScalarValue::Decimal128(Some(v), p, s), PrimitiveType::Decimal { precision, scale })
            if u32::from(*p) == *precision && i64::from(*s) == i64::from(*scale) =>
        {
            Datum::try_from_bytes(&v.to_be_bytes(), ty.clone()).ok()?
        }
        (ScalarValue::Utf8(Some(v)), PrimitiveType::String)
        | (ScalarValue::LargeUtf8(Some(v)), PrimitiveType::String)
        | (ScalarValue::Utf8View(Some(v)), PrimitiveType::String) => Datum::string(v),
        (ScalarValue::Date32(Some(v)), PrimitiveType::Date) => Datum::date(*v),
        (ScalarValue::TimestampMicrosecond(Some(v), None), PrimitiveType::Timestamp) => {
            Datum::timestamp_micros(*v)
        }
        (ScalarValue::TimestampMicrosecond(Some(v), Some(_)), PrimitiveType::Timestamptz) => {
            Datum::timestamptz_micros(*v)
        }
        (ScalarValue::TimestampNanosecond(Some(v), None), PrimitiveType::TimestampNs) => {
            Datum::timestamp_nanos(*v)
        }
        (ScalarValue::TimestampNanosecond(Some(v), Some(_)), PrimitiveType::TimestamptzNs) => {
            Datum::timestamptz_nanos(*v)
        }
        _ => return None,
    })
}

/// Converts a manifest bound to a scalar of the column's Arrow type; `None` where the types do not
/// correspond exactly.
pub fn datum_to_scalar(datum: &Datum, data_type: &DataType) -> Option<ScalarValue> {
    Some(match (datum.data_type(), datum.literal(), data_type) {
        (PrimitiveType::Boolean, PrimitiveLiteral::Boolean(v), DataType::Boolean) => {
            ScalarValue::Boolean(Some(*v))
        }
        (PrimitiveType::Int, PrimitiveLiteral::Int(v), DataType::Int32) => {
            ScalarValue::Int32(Some(*v))
        }
        (PrimitiveType::Int, PrimitiveLiteral::Int(v), DataType::Int64) => {
            ScalarValue::Int64(Some(i64::from(*v)))
        }
        (PrimitiveType::Long, PrimitiveLiteral::Long(v), DataType::Int64) => {
            ScalarValue::Int64(Some(*v))
        }
        (PrimitiveType::Float, PrimitiveLiteral::Float(v), DataType::Float32) => {
            ScalarValue::Float32(Some(v.0))
        }
        (PrimitiveType::Double, PrimitiveLiteral::Double(v), DataType::Float64) => {
            ScalarValue::Float64(Some(v.0))
        }
        (
            PrimitiveType::Decimal { .. },
            PrimitiveLiteral::Int128(v),
            DataType::Decimal128(p, s),
        ) => ScalarValue::Decimal128(Some(*v), *p, *s),
        (PrimitiveType::Date, PrimitiveLiteral::Int(v), DataType::Date32) => {
            ScalarValue::Date32(Some(*v))
        }
        (PrimitiveType::String, PrimitiveLiteral::String(v), DataType::Utf8) => {
            ScalarValue::Utf8(Some(v.clone()))
        }
        (PrimitiveType::String, PrimitiveLiteral::String(v), DataType::LargeUtf8) => {
            ScalarValue::LargeUtf8(Some(v.clone()))
        }
        (
            PrimitiveType::Timestamp,
            PrimitiveLiteral::Long(v),
            DataType::Timestamp(TimeUnit::Microsecond, None),
        ) => ScalarValue::TimestampMicrosecond(Some(*v), None),
        (
            PrimitiveType::Timestamptz,
            PrimitiveLiteral::Long(v),
            DataType::Timestamp(TimeUnit::Microsecond, Some(tz)),
        ) => ScalarValue::TimestampMicrosecond(Some(*v), Some(Arc::clone(tz))),
        (
            PrimitiveType::TimestampNs,
            PrimitiveLiteral::Long(v),
            DataType::Timestamp(TimeUnit::Nanosecond, None),
        ) => ScalarValue::TimestampNanosecond(Some(*v), None),
        (
            PrimitiveType::TimestamptzNs,
            PrimitiveLiteral::Long(v),
            DataType::Timestamp(TimeUnit::Nanosecond, Some(tz)),
        ) => ScalarValue::TimestampNanosecond(Some(*v), Some(Arc::clone(tz))),
        _ => return None,
    })
}

/// `lit` as a value of the Arrow type `ty`; `None` for what is not converted (nested values,
/// or a primitive of another type).
pub fn literal_scalar(lit: &Literal, ty: &DataType) -> Option<ScalarValue> {
    let Literal::Primitive(p) = lit else {
        return None;
    };
    let raw = match (p, ty) {
        (PrimitiveLiteral::Int128(v), DataType::Decimal128(precision, scale)) => {
            return Some(ScalarValue::Decimal128(Some(*v), *precision, *scale));
        }
        (PrimitiveLiteral::UInt128(v), DataType::FixedSizeBinary(16)) => {
            return Some(ScalarValue::FixedSizeBinary(
                16,
                Some(v.to_be_bytes().to_vec()),
            ));
        }
        (PrimitiveLiteral::Boolean(v), _) => ScalarValue::Boolean(Some(*v)),
        (PrimitiveLiteral::Int(v), _) => ScalarValue::Int32(Some(*v)),
        (PrimitiveLiteral::Long(v), _) => ScalarValue::Int64(Some(*v)),
        (PrimitiveLiteral::Float(v), _) => ScalarValue::Float32(Some(v.0)),
        (PrimitiveLiteral::Double(v), _) => ScalarValue::Float64(Some(v.0)),
        (PrimitiveLiteral::String(v), _) => ScalarValue::Utf8(Some(v.clone())),
        (PrimitiveLiteral::Binary(v), _) => ScalarValue::Binary(Some(v.clone())),
        _ => return None,
    };
    if raw.data_type() == *ty {
        return Some(raw);
    }
    raw.cast_to(ty).ok()
}

/// The value field `id` has in every row of `task`'s data file when the file's partition spec
/// partitions by it with the identity transform (the Iceberg spec: an identity partition value
/// is the rows' value, and the column may be left out of the file; case c05): `Some(None)` for a
/// NULL partition value; `None` when the field is not identity-partitioned in that spec.
pub fn identity_partition_value(task: &FileScanTask, id: i32) -> Option<Option<Literal>> {
    let (spec, partition) = (task.partition_spec.as_ref()?, task.partition.as_ref()?);
    let at = spec
        .fields()
        .iter()
        .position(|f| f.source_id == id && f.transform == Transform::Identity)?;
    partition.fields().get(at).cloned()
}
