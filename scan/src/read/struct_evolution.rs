//! Struct columns whose children were added after a data file was written.
//!
//! ```text
//!   current schema   s struct<a int=3, b int=4>        (b added by schema evolution)
//!   data file        s struct<a int=3>                 (written before)
//!
//!   iceberg 0.10.1's reader casts the file's struct to the current type and fails
//!   ("Incorrect number of arrays for StructArray fields"), so the task gets a schema without
//!   the children its file lacks:
//!     task.schema    s struct<a int=3>  ──► reader ──► align(): b added as NULL ──► output
//! ```
//!
//! Which field ids a file holds comes from its Parquet schema (the cached footer), read only for
//! scans that project a struct column. Children are matched by field id (`PARQUET:field_id`),
//! never by name, so a renamed child still lines up (case c03).

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, StructArray, new_null_array};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field};
use datafusion::common::{Result, not_impl_err};
use iceberg::spec::{NestedField, NestedFieldRef, Schema as IcebergSchema, StructType, Type};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use parquet::file::metadata::ParquetMetaData;
use parquet::schema::types::Type as ParquetType;

use crate::model::iceberg_error::external;

/// Every field id in the file's Parquet schema (groups and leaves).
pub fn file_field_ids(metadata: &ParquetMetaData) -> HashSet<i32> {
    fn walk(t: &ParquetType, out: &mut HashSet<i32>) {
        let info = t.get_basic_info();
        if info.has_id() {
            out.insert(info.id());
        }
        if let ParquetType::GroupType { fields, .. } = t {
            fields.iter().for_each(|f| walk(f, out));
        }
    }
    let mut out = HashSet::new();
    walk(
        metadata.file_metadata().schema_descr().root_schema(),
        &mut out,
    );
    out
}

/// `current` without the struct children (at any depth) that a file holding the field ids
/// `present` lacks, inside the projected top-level struct columns `projected` that the file
/// does hold; `None` when the file lacks none (the common case).
///
/// Errors: the schema does not rebuild (not expected: only optional-or-not children are
/// removed, ids are unchanged).
pub fn schema_for_file(
    current: &IcebergSchema,
    projected: &[i32],
    present: &HashSet<i32>,
) -> Result<Option<IcebergSchema>> {
    let mut changed = false;
    let fields: Vec<NestedFieldRef> = current
        .as_struct()
        .fields()
        .iter()
        .map(|f| {
            if !projected.contains(&f.id) || !present.contains(&f.id) {
                return Ok(Arc::clone(f));
            }
            Ok(match prune(f, present)? {
                Some(pruned) => {
                    changed = true;
                    pruned
                }
                None => Arc::clone(f),
            })
        })
        .collect::<Result<_>>()?;
    if !changed {
        return Ok(None);
    }
    let schema = IcebergSchema::builder()
        .with_schema_id(current.schema_id())
        .with_identifier_field_ids(current.identifier_field_ids())
        .with_fields(fields)
        .build()
        .map_err(external)?;
    Ok(Some(schema))
}

/// `f` without the struct children missing from `present`, or `None` when nothing is missing.
///
/// Errors (not supported rather than a guessed row): a missing child with an `initial-default`
/// (format v3: it must read as that value, not NULL), or a struct the file holds with none of
/// its current children (whether each value is NULL could not be read).
fn prune(f: &NestedFieldRef, present: &HashSet<i32>) -> Result<Option<NestedFieldRef>> {
    let Type::Struct(st) = f.field_type.as_ref() else {
        return Ok(None);
    };
    let mut changed = false;
    let mut children: Vec<NestedFieldRef> = Vec::with_capacity(st.fields().len());
    for c in st.fields() {
        if !present.contains(&c.id) {
            if c.initial_default.is_some() {
                return not_supported(format!(
                    "struct field {} (id {}) was added with an initial default after a data file                      was written",
                    c.name, c.id
                ));
            }
            changed = true;
            continue;
        }
        children.push(match prune(c, present)? {
            Some(p) => {
                changed = true;
                p
            }
            None => Arc::clone(c),
        });
    }
    if !changed {
        return Ok(None);
    }
    if children.is_empty() {
        return not_supported(format!(
            "a data file holds struct {} (id {}) with none of its current fields",
            f.name, f.id
        ));
    }
    let mut pruned: NestedField = f.as_ref().clone();
    pruned.field_type = Box::new(Type::Struct(StructType::new(children)));
    Ok(Some(Arc::new(pruned)))
}

fn not_supported<T>(what: String) -> Result<T> {
    not_impl_err!("{what}")
}

/// `array` as `target`: struct children matched by field id (by name when a side has none),
/// missing ones added as NULL, recursively; other types cast when they differ.
///
/// Errors: a cast Arrow refuses.
pub fn align(array: &ArrayRef, target: &DataType) -> Result<ArrayRef> {
    if array.data_type() == target {
        return Ok(Arc::clone(array));
    }
    let (DataType::Struct(target_fields), Some(source)) =
        (target, array.as_any().downcast_ref::<StructArray>())
    else {
        return Ok(cast(array, target)?);
    };
    let DataType::Struct(source_fields) = source.data_type() else {
        return Ok(cast(array, target)?);
    };
    let children = target_fields
        .iter()
        .map(|t| {
            let found = source_fields
                .iter()
                .position(|s| same_field(s, t))
                .map(|i| source.column(i));
            match found {
                Some(col) => align(col, t.data_type()),
                None => Ok(new_null_array(t.data_type(), source.len())),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(StructArray::try_new(
        target_fields.clone(),
        children,
        source.nulls().cloned(),
    )?))
}

fn same_field(a: &Field, b: &Field) -> bool {
    let id = |f: &Field| f.metadata().get(PARQUET_FIELD_ID_META_KEY).cloned();
    match (id(a), id(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.name() == b.name(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow::array::{AsArray, Int32Array};
    use arrow::datatypes::{Fields, Int32Type};
    use iceberg::spec::PrimitiveType;

    use super::*;

    fn current() -> IcebergSchema {
        let int = || Type::Primitive(PrimitiveType::Int);
        let s = StructType::new(vec![
            NestedField::optional(3, "a", int()).into(),
            NestedField::optional(4, "b", int()).into(),
        ]);
        IcebergSchema::builder()
            .with_fields(vec![
                NestedField::optional(1, "id", int()).into(),
                NestedField::optional(2, "s", Type::Struct(s)).into(),
            ])
            .build()
            .unwrap()
    }

    #[test]
    fn missing_children_are_left_out_of_the_task_schema() {
        let old_file: HashSet<i32> = [1, 2, 3].into();
        let pruned = schema_for_file(&current(), &[1, 2], &old_file)
            .unwrap()
            .expect("s.b is missing");
        assert!(pruned.field_by_id(4).is_none());
        assert!(pruned.field_by_id(3).is_some());
        // A file holding every child, a struct not projected, or a struct the file lacks
        // entirely (the reader adds it as NULL) need no change.
        assert!(
            schema_for_file(&current(), &[1, 2], &[1, 2, 3, 4].into())
                .unwrap()
                .is_none()
        );
        assert!(
            schema_for_file(&current(), &[1], &old_file)
                .unwrap()
                .is_none()
        );
        assert!(
            schema_for_file(&current(), &[1, 2], &[1].into())
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn align_adds_missing_children_as_null_and_keeps_parent_nulls() {
        let with_id = |name: &str, id: i32| {
            Field::new(name, DataType::Int32, true).with_metadata(HashMap::from([(
                PARQUET_FIELD_ID_META_KEY.to_string(),
                id.to_string(),
            )]))
        };
        let source = StructArray::try_new(
            Fields::from(vec![with_id("a", 3)]),
            vec![Arc::new(Int32Array::from(vec![Some(1), Some(2)]))],
            Some(vec![true, false].into()),
        )
        .unwrap();
        // Target: the child renamed (matched by id) and a new child b.
        let target = DataType::Struct(Fields::from(vec![with_id("renamed", 3), with_id("b", 4)]));
        let out = align(&(Arc::new(source) as ArrayRef), &target).unwrap();
        let out = out.as_struct();
        assert_eq!(out.data_type(), &target);
        assert_eq!(out.column(0).as_primitive::<Int32Type>().value(0), 1);
        assert_eq!(out.column(1).null_count(), 2);
        assert!(out.is_null(1), "a NULL parent stays NULL");
    }
}
