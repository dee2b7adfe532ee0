//! The nested-field table: a wide struct beside a flat control column, in three layouts, for
//! nested-field pruning tests and the bench (`iceflight load nested`).
//!
//! ```text
//!   nested(id long, flat_key long,
//!          s struct<key long, name string, score double,
//!                   addr struct<city string, zip int>,
//!                   note1 … note4 string>)
//!
//!   row with key k (0 ≤ k < rows, every key once):
//!     flat_key = s.key = k        (the flat control column holds the nested field's values)
//!     s.name = "user-<k>", s.score = (k·37 mod 1000) / 10, s.addr.city = "city-NN", NN = k / ⌈rows/50⌉,
//!     s.addr.zip uniform in [10000, 99999], s.noteN 16 random hex digits (wide, incompressible);
//!     every 97th row has s = NULL (so s.key, flat_key stay set: flat_key = k)
//! ```
//!
//! Layouts (the order rows are written in; `id` = position):
//! - `clustered`: by `s.key`;
//! - `zorder`: by the Z-order (Morton) value of `s.key` and `s.addr.zip`, 16 bits each, so both
//!   columns are partly clustered;
//! - `random`: shuffled.
//!
//! Data is a pure function of `rows` and the layout (seeded [`StdRng`]).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray, StructArray,
};
use arrow::buffer::NullBuffer;
use arrow::compute::take_record_batch;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::error::ArrowError;
use iceberg::spec::{NestedField, PrimitiveType, Schema, StructType, Type};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Table name.
pub const TABLE: &str = "nested";

/// Every `NULL_STRUCT_EVERY`-th key (k % 97 == 0) has a NULL `s`.
pub const NULL_STRUCT_EVERY: usize = 97;

/// Row order of the written table (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NestedLayout {
    /// Sorted by `s.key`.
    Clustered,
    /// Z-order of `s.key` and `s.addr.zip`.
    Zorder,
    /// Shuffled.
    Random,
}

/// `clustered`, `zorder` or `random`, as [`std::str::FromStr`] reads it.
impl std::fmt::Display for NestedLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Clustered => "clustered",
            Self::Zorder => "zorder",
            Self::Random => "random",
        })
    }
}

/// Parses `clustered`, `zorder` or `random`.
impl std::str::FromStr for NestedLayout {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "clustered" => Ok(Self::Clustered),
            "zorder" => Ok(Self::Zorder),
            "random" => Ok(Self::Random),
            _ => Err(format!(
                "unknown layout {s:?}: expected clustered, zorder or random"
            )),
        }
    }
}

/// The table's iceberg schema (every field optional; ids as listed, reassigned by the catalog
/// in the same order).
pub fn schema() -> Schema {
    let string = || Type::Primitive(PrimitiveType::String);
    let addr = StructType::new(vec![
        NestedField::optional(9, "city", string()).into(),
        NestedField::optional(10, "zip", Type::Primitive(PrimitiveType::Int)).into(),
    ]);
    let s = StructType::new(vec![
        NestedField::optional(4, "key", Type::Primitive(PrimitiveType::Long)).into(),
        NestedField::optional(5, "name", string()).into(),
        NestedField::optional(6, "score", Type::Primitive(PrimitiveType::Double)).into(),
        NestedField::optional(7, "addr", Type::Struct(addr)).into(),
        NestedField::optional(8, "note1", string()).into(),
        NestedField::optional(11, "note2", string()).into(),
        NestedField::optional(12, "note3", string()).into(),
        NestedField::optional(13, "note4", string()).into(),
    ]);
    Schema::builder()
        .with_fields(vec![
            NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(2, "flat_key", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(3, "s", Type::Struct(s)).into(),
        ])
        .build()
        .expect("valid schema")
}

const CITIES: usize = 50;

/// Generates the `rows` rows in `layout` order as one batch of `schema` (the table's Arrow
/// schema, whose field ids the writer needs).
///
/// Errors: an Arrow error when `schema` is not the table's.
pub fn generate(
    schema: &SchemaRef,
    rows: usize,
    layout: NestedLayout,
) -> Result<RecordBatch, ArrowError> {
    let mut rng = StdRng::seed_from_u64(0x1ce_f117);
    let keys: Vec<i64> = (0..rows as i64).collect();
    let zips: Vec<i32> = (0..rows)
        .map(|_| rng.random_range(10_000..=99_999))
        .collect();
    let mut notes = || -> ArrayRef {
        Arc::new(StringArray::from_iter_values(
            (0..rows).map(|_| format!("{:016x}", rng.random::<u64>())),
        ))
    };
    let (note1, note2, note3, note4) = (notes(), notes(), notes(), notes());
    let DataType::Struct(s_fields) = schema.field_with_name("s")?.data_type().clone() else {
        return Err(ArrowError::SchemaError("s is not a struct".into()));
    };
    let DataType::Struct(addr_fields) =
        s_fields
            .find("addr")
            .map(|(_, f)| f.data_type().clone())
            .ok_or_else(|| ArrowError::SchemaError("s.addr missing".into()))?
    else {
        return Err(ArrowError::SchemaError("s.addr is not a struct".into()));
    };
    let per_city = rows.div_ceil(CITIES).max(1);
    let addr = StructArray::try_new(
        addr_fields,
        vec![
            Arc::new(StringArray::from_iter_values(
                keys.iter()
                    .map(|k| format!("city-{:02}", *k as usize / per_city)),
            )),
            Arc::new(Int32Array::from(zips.clone())),
        ],
        None,
    )?;
    let s_valid = NullBuffer::from_iter(
        keys.iter()
            .map(|k| !(*k as usize).is_multiple_of(NULL_STRUCT_EVERY)),
    );
    let s = StructArray::try_new(
        s_fields,
        vec![
            Arc::new(Int64Array::from(keys.clone())),
            Arc::new(StringArray::from_iter_values(
                keys.iter().map(|k| format!("user-{k:07}")),
            )),
            Arc::new(Float64Array::from_iter_values(
                keys.iter().map(|k| (k * 37 % 1000) as f64 / 10.0),
            )),
            Arc::new(addr),
            note1,
            note2,
            note3,
            note4,
        ],
        Some(s_valid),
    )?;
    let by_key = RecordBatch::try_new(
        Arc::clone(schema),
        vec![
            Arc::new(Int64Array::from(vec![0i64; rows])),
            Arc::new(Int64Array::from(keys.clone())),
            Arc::new(s),
        ],
    )?;
    let mut order: Vec<u32> = (0..rows as u32).collect();
    match layout {
        NestedLayout::Clustered => {}
        NestedLayout::Random => order.shuffle(&mut rng),
        NestedLayout::Zorder => {
            let scale = |v: u64, max: u64| (v * 0xffff / max.max(1)) as u32;
            order.sort_by_key(|&i| {
                let k = scale(i as u64, rows as u64 - 1);
                let z = scale((zips[i as usize] - 10_000) as u64, 89_999);
                morton(k, z)
            });
        }
    }
    let ordered = take_record_batch(&by_key, &arrow::array::UInt32Array::from(order))?;
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows as i64));
    let mut columns = ordered.columns().to_vec();
    columns[0] = ids;
    RecordBatch::try_new(Arc::clone(schema), columns)
}

/// Interleaves the low 16 bits of `a` (odd bit positions) and `b` (even ones).
fn morton(a: u32, b: u32) -> u64 {
    let spread = |v: u32| {
        let mut x = u64::from(v & 0xffff);
        x = (x | (x << 8)) & 0x00ff_00ff;
        x = (x | (x << 4)) & 0x0f0f_0f0f;
        x = (x | (x << 2)) & 0x3333_3333;
        (x | (x << 1)) & 0x5555_5555
    };
    (spread(a) << 1) | spread(b)
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Int64Type;

    use super::*;

    fn batch(layout: NestedLayout) -> RecordBatch {
        let schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema()).unwrap());
        generate(&schema, 1000, layout).unwrap()
    }

    #[test]
    fn layouts_hold_the_same_rows() {
        let keys = |b: &RecordBatch| {
            let mut k: Vec<i64> = b.column(1).as_primitive::<Int64Type>().values().to_vec();
            k.sort_unstable();
            k
        };
        let clustered = batch(NestedLayout::Clustered);
        let random = batch(NestedLayout::Random);
        let zorder = batch(NestedLayout::Zorder);
        assert_eq!(keys(&clustered), (0..1000).collect::<Vec<_>>());
        assert_eq!(keys(&random), keys(&clustered));
        assert_eq!(keys(&zorder), keys(&clustered));
        // Clustered is in key order; random is not.
        let first: Vec<i64> =
            clustered.column(1).as_primitive::<Int64Type>().values()[..5].to_vec();
        assert_eq!(first, [0, 1, 2, 3, 4]);
        assert_ne!(
            random.column(1).as_primitive::<Int64Type>().values()[..5],
            first[..]
        );
        // s.key equals flat_key wherever s is set; s is NULL every 97th key.
        let s = clustered.column(2).as_struct();
        assert_eq!(s.null_count(), 1000usize.div_ceil(NULL_STRUCT_EVERY));
        let s_key = s.column(0).as_primitive::<Int64Type>();
        assert_eq!(s_key.value(5), 5);
    }

    #[test]
    fn morton_interleaves() {
        assert_eq!(morton(0, 0), 0);
        assert_eq!(morton(1, 0), 0b10);
        assert_eq!(morton(0, 1), 0b01);
        assert_eq!(morton(0xffff, 0xffff), 0xffff_ffff);
    }
}
