//! Row lineage of format v3 tables (table spec, "Row Lineage"): which `_row_id` a data file's
//! first row has when its manifest entry leaves `first_row_id` unset.
//!
//! ```text
//!   manifest list entry   first_row_id = 1000
//!   manifest entries      a.parquet  first_row_id null, 10 rows  ─► 1000
//!                         b.parquet  first_row_id 500            ─► 500 (its own)
//!                         c.parquet  first_row_id null, 5 rows   ─► 1010
//! ```
//!
//! The spec's "First Row ID Inheritance": a data file without a first row id gets its
//! manifest's, plus the record counts of the files before it in the manifest that had none.
//! Deleted entries take no ids: the manifest list gives a manifest as many ids as its added
//! and existing rows (`ManifestListWriter::add_manifests`). iceberg 0.10.1's `load_manifest`
//! inherits snapshot ids and sequence numbers but not first row ids, hence this module; a
//! commit that carries an entry into a new manifest writes the inherited id explicitly
//! (`commit.rs`), so rows keep their ids.

use iceberg::Result;
use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, Manifest, ManifestFile};

/// The first row id of each entry of `manifest` (same order as `manifest.entries()`), read
/// through `list_entry`, its entry in the manifest list. `None` for delete files and on tables
/// without row lineage (the list entry has no first row id).
pub fn first_row_ids(list_entry: &ManifestFile, manifest: &Manifest) -> Vec<Option<i64>> {
    let mut next = list_entry.first_row_id.map(|id| id as i64);
    manifest
        .entries()
        .iter()
        .map(|entry| {
            let file = entry.data_file();
            if file.content_type() != DataContentType::Data {
                return None;
            }
            if let Some(own) = file.first_row_id() {
                return Some(own);
            }
            let id = next?;
            if entry.is_alive() {
                next = Some(id + file.record_count() as i64);
            }
            Some(id)
        })
        .collect()
}

/// `file` with its first row id set to `id`, everything else kept.
///
/// Errors: the builder's (not expected: every field is copied from a valid file).
pub fn with_first_row_id(file: &DataFile, id: i64) -> Result<DataFile> {
    let mut builder = DataFileBuilder::default();
    builder
        .content(file.content_type())
        .file_path(file.file_path().to_string())
        .file_format(file.file_format())
        .partition(file.partition().clone())
        .record_count(file.record_count())
        .file_size_in_bytes(file.file_size_in_bytes())
        .column_sizes(file.column_sizes().clone())
        .value_counts(file.value_counts().clone())
        .null_value_counts(file.null_value_counts().clone())
        .nan_value_counts(file.nan_value_counts().clone())
        .lower_bounds(file.lower_bounds().clone())
        .upper_bounds(file.upper_bounds().clone())
        .key_metadata(file.key_metadata().map(<[u8]>::to_vec))
        .split_offsets(file.split_offsets().map(<[i64]>::to_vec))
        .equality_ids(file.equality_ids())
        .first_row_id(Some(id))
        .referenced_data_file(file.referenced_data_file())
        .content_offset(file.content_offset())
        .content_size_in_bytes(file.content_size_in_bytes());
    if let Some(order) = file.sort_order_id() {
        builder.sort_order_id(order);
    }
    builder.build().map_err(|e| {
        iceberg::Error::new(
            iceberg::ErrorKind::Unexpected,
            format!("copying data file {}: {e}", file.file_path()),
        )
    })
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{PrimitiveType, Schema, Type};

    /// The vendored iceberg (`vendor/iceberg.patch`) loads a schema with format v3 types it
    /// cannot serve as `PrimitiveType::Unsupported` and writes them back as they were.
    #[test]
    fn unsupported_types_load_and_round_trip() {
        let json = serde_json::json!({
            "type": "struct", "schema-id": 1, "fields": [
                {"id": 1, "name": "id", "required": true, "type": "long"},
                {"id": 2, "name": "v", "required": false, "type": "variant"},
                {"id": 3, "name": "g", "required": false, "type": "geometry(srid:4326)"},
                {"id": 4, "name": "h", "required": false, "type": "geography(srid:4326, karney)"},
                {"id": 5, "name": "u", "required": false, "type": "unknown"},
                {"id": 6, "name": "l", "required": false, "type": {
                    "type": "list", "element-id": 7, "element-required": false,
                    "element": "variant"}}
            ]
        });
        let schema: Schema = serde_json::from_value(json.clone()).unwrap();
        let unsupported = |id: i32| match schema.field_by_id(id).unwrap().field_type.as_ref() {
            Type::Primitive(PrimitiveType::Unsupported(name)) => name.clone(),
            other => panic!("field {id}: {other:?}"),
        };
        assert_eq!(unsupported(2), "variant");
        assert_eq!(unsupported(3), "geometry(srid:4326)");
        assert_eq!(unsupported(4), "geography(srid:4326, karney)");
        assert_eq!(unsupported(5), "unknown");
        assert_eq!(unsupported(7), "variant");
        assert_eq!(serde_json::to_value(&schema).unwrap(), json);
        let arrow = iceberg::arrow::schema_to_arrow_schema(&schema).unwrap();
        assert_eq!(
            arrow.field_with_name("v").unwrap().data_type(),
            &arrow::datatypes::DataType::Null
        );
    }
}
