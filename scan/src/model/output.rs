//! What the scan hands DataFusion: its schema without field-level metadata, and batches under
//! that schema with every float NaN in one bit pattern (Iceberg's `float` and `double`).
//!
//! ```text
//!   iceberg schema ──► schema_to_arrow_schema (fields carry PARQUET:field_id) ──► the scan's
//!                                                       own use: field ids, struct evolution
//!                  ──► plain_schema (no field metadata) ──► TableProvider::schema, PlanProperties
//!   decoded batch  ──► plain_batch: same buffers, plain types, NaN as f64::NAN / f32::NAN
//! ```
//!
//! **No field metadata (case c11).** DataFusion merges the field metadata of a union's inputs one
//! way in the logical plan and another way in the physical plan; two tables whose same-named
//! columns carry different field ids (`a.v` id 2, `b.v` id 3) made an aggregate over their
//! `UNION ALL` fail with "Physical input schema should be the same as the one converted from
//! logical input schema". Field ids are the scan's business only (it binds columns by them, case
//! c03), so nothing above the scan sees them: no set operation, join, CTE, view or `INSERT …
//! SELECT` can then disagree about metadata that came from a scan.
//!
//! **One NaN (case c12).** DataFusion and arrow compare floats by IEEE 754 total order, under
//! which a NaN with its sign bit set (what x86 produces for `0/0`, so what many writers store)
//! sorts below every number and differs from the NaN literal. SQL engines (DuckDB, PostgreSQL)
//! treat every NaN as one value, greater than any number. Rewriting each NaN to the canonical
//! one as it leaves the scan makes total order agree with them on stored data; the value stays
//! NaN, so no answer changes otherwise. A column without such a NaN is passed on unchanged.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, FixedSizeListArray, GenericListArray, MapArray, OffsetSizeTrait,
    PrimitiveArray, RecordBatch, RecordBatchOptions, StructArray,
};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Field, FieldRef, Fields, Float32Type, Float64Type, Schema,
    SchemaRef,
};
use datafusion::common::{Result, internal_err};

/// `schema` without field-level metadata, nested fields included (schema-level metadata kept).
pub fn plain_schema(schema: &Schema) -> Schema {
    let fields: Vec<FieldRef> = schema.fields().iter().map(plain_field).collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

fn plain_field(field: &FieldRef) -> FieldRef {
    Arc::new(
        Field::new(
            field.name(),
            plain_type(field.data_type()),
            field.is_nullable(),
        )
        .with_dict_is_ordered(field.dict_is_ordered().unwrap_or(false)),
    )
}

fn plain_fields(fields: &Fields) -> Fields {
    fields.iter().map(plain_field).collect()
}

/// `data_type` with the fields of its nested types stripped of metadata.
fn plain_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Struct(fields) => DataType::Struct(plain_fields(fields)),
        DataType::List(f) => DataType::List(plain_field(f)),
        DataType::LargeList(f) => DataType::LargeList(plain_field(f)),
        DataType::ListView(f) => DataType::ListView(plain_field(f)),
        DataType::LargeListView(f) => DataType::LargeListView(plain_field(f)),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(plain_field(f), *n),
        DataType::Map(f, sorted) => DataType::Map(plain_field(f), *sorted),
        other => other.clone(),
    }
}

/// `batch` (the scan's decoded rows, fields with metadata) under `schema`, its
/// [`plain_schema`]: the same buffers, nested arrays re-labelled with plain fields, and
/// non-canonical NaNs rewritten (module docs).
///
/// Errors: internal, when `batch` does not have `schema`'s shape (a bug of the scan).
pub fn plain_batch(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    if batch.num_columns() != schema.fields().len() {
        return internal_err!(
            "the scan decoded {} columns for a schema of {}",
            batch.num_columns(),
            schema.fields().len()
        );
    }
    let rows = batch.num_rows();
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| plain_array(column, field.data_type()))
        .collect::<Result<Vec<_>>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        columns,
        &options,
    )?)
}

/// `array` as an array of `target` (its plain type), NaNs canonical.
fn plain_array(array: &ArrayRef, target: &DataType) -> Result<ArrayRef> {
    Ok(match (array.data_type(), target) {
        (DataType::Float64, _) => canonical_nan::<Float64Type>(
            array,
            |v| v.is_nan() && v.to_bits() != f64::NAN.to_bits(),
            f64::NAN,
        ),
        (DataType::Float32, _) => canonical_nan::<Float32Type>(
            array,
            |v| v.is_nan() && v.to_bits() != f32::NAN.to_bits(),
            f32::NAN,
        ),
        (DataType::Struct(_), DataType::Struct(fields)) => {
            let (_, children, nulls) = downcast::<StructArray>(array)?.clone().into_parts();
            let children = children
                .iter()
                .zip(fields)
                .map(|(c, f)| plain_array(c, f.data_type()))
                .collect::<Result<Vec<_>>>()?;
            Arc::new(StructArray::try_new_with_length(
                fields.clone(),
                children,
                nulls,
                array.len(),
            )?)
        }
        (DataType::List(_), DataType::List(field)) => plain_list::<i32>(array, field)?,
        (DataType::LargeList(_), DataType::LargeList(field)) => plain_list::<i64>(array, field)?,
        (DataType::FixedSizeList(..), DataType::FixedSizeList(field, _)) => {
            let (_, size, values, nulls) =
                downcast::<FixedSizeListArray>(array)?.clone().into_parts();
            let values = plain_array(&values, field.data_type())?;
            Arc::new(FixedSizeListArray::try_new(
                Arc::clone(field),
                size,
                values,
                nulls,
            )?)
        }
        (DataType::Map(..), DataType::Map(field, _)) => {
            let (_, offsets, entries, nulls, sorted) =
                downcast::<MapArray>(array)?.clone().into_parts();
            let entries: ArrayRef = Arc::new(entries);
            let entries = plain_array(&entries, field.data_type())?;
            let entries = downcast::<StructArray>(&entries)?.clone();
            Arc::new(MapArray::try_new(
                Arc::clone(field),
                offsets,
                entries,
                nulls,
                sorted,
            )?)
        }
        _ => Arc::clone(array),
    })
}

fn plain_list<O: OffsetSizeTrait>(array: &ArrayRef, field: &FieldRef) -> Result<ArrayRef> {
    let (_, offsets, values, nulls) = downcast::<GenericListArray<O>>(array)?.clone().into_parts();
    let values = plain_array(&values, field.data_type())?;
    Ok(Arc::new(GenericListArray::<O>::try_new(
        Arc::clone(field),
        offsets,
        values,
        nulls,
    )?))
}

fn downcast<T: Array + 'static>(array: &ArrayRef) -> Result<&T> {
    match array.as_any().downcast_ref::<T>() {
        Some(a) => Ok(a),
        None => internal_err!(
            "the scan decoded {} where it expected another type",
            array.data_type()
        ),
    }
}

/// `array` with every NaN that `odd` finds (a NaN of another bit pattern than `nan`) replaced
/// by `nan`; unchanged (no copy) when there is none.
fn canonical_nan<T: ArrowPrimitiveType>(
    array: &ArrayRef,
    odd: fn(T::Native) -> bool,
    nan: T::Native,
) -> ArrayRef {
    let Some(values) = array.as_any().downcast_ref::<PrimitiveArray<T>>() else {
        return Arc::clone(array);
    };
    if !values.values().iter().any(|v| odd(*v)) {
        return Arc::clone(array);
    }
    Arc::new(values.unary::<_, T>(|v| if odd(v) { nan } else { v }))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow::array::{Float64Array, Int32Array, ListArray};
    use arrow::datatypes::Int32Type;
    use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

    use super::*;

    fn id(name: &str, data_type: DataType, id: i32) -> Field {
        Field::new(name, data_type, true).with_metadata(HashMap::from([(
            PARQUET_FIELD_ID_META_KEY.to_string(),
            id.to_string(),
        )]))
    }

    /// Field ids go from top-level and nested fields alike; names, types and nullability stay.
    #[test]
    fn plain_schema_has_no_field_metadata() {
        let inner = Fields::from(vec![id("a", DataType::Int32, 3)]);
        let schema = Schema::new(vec![
            id("s", DataType::Struct(inner), 2),
            id(
                "l",
                DataType::List(Arc::new(id("element", DataType::Float64, 5))),
                4,
            ),
        ]);
        let plain = plain_schema(&schema);
        insta::assert_snapshot!(format!("{plain:?}"), @r#"Schema { fields: [Field { name: "s", data_type: Struct([Field { name: "a", data_type: Int32, nullable: true }]), nullable: true }, Field { name: "l", data_type: List(Field { name: "element", data_type: Float64, nullable: true }), nullable: true }], metadata: {} }"#);
    }

    /// A batch decoded under field ids reads under the plain schema, struct and list included,
    /// and a NaN with its sign bit set becomes the canonical NaN; other values keep their bits
    /// (-0.0 too).
    #[test]
    fn plain_batch_relabels_and_canonicalizes_nan() {
        let negative_nan = f64::from_bits(f64::NAN.to_bits() | (1 << 63));
        let inner = Fields::from(vec![id("a", DataType::Int32, 3)]);
        let element = Arc::new(id("element", DataType::Float64, 5));
        let schema = Arc::new(Schema::new(vec![
            id("f", DataType::Float64, 1),
            id("s", DataType::Struct(inner.clone()), 2),
            id("l", DataType::List(Arc::clone(&element)), 4),
        ]));
        let floats = Float64Array::from(vec![Some(-0.0), None, Some(negative_nan)]);
        let s = StructArray::new(
            inner,
            vec![Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef],
            None,
        );
        let l = ListArray::new(
            element,
            arrow::buffer::OffsetBuffer::from_lengths([1, 0, 1]),
            Arc::new(Float64Array::from(vec![negative_nan, 2.0])),
            None,
        );
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(floats), Arc::new(s), Arc::new(l)],
        )
        .unwrap();
        let plain = Arc::new(plain_schema(&schema));
        let out = plain_batch(batch, &plain).unwrap();
        assert_eq!(out.schema(), plain);
        let f = out
            .column(0)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        assert_eq!(f.value(0).to_bits(), (-0.0f64).to_bits());
        assert!(f.is_null(1));
        assert_eq!(f.value(2).to_bits(), f64::NAN.to_bits());
        let l = out.column(2).as_any().downcast_ref::<ListArray>().unwrap();
        let values = l.values().as_any().downcast_ref::<Float64Array>().unwrap();
        assert_eq!(values.value(0).to_bits(), f64::NAN.to_bits());
        let s = out
            .column(1)
            .as_any()
            .downcast_ref::<StructArray>()
            .unwrap();
        let a = s
            .column(0)
            .as_any()
            .downcast_ref::<PrimitiveArray<Int32Type>>();
        assert_eq!(a.unwrap().values().to_vec(), vec![1, 2, 3]);
    }
}
