//! `ALTER TABLE t EXECUTE add_files(location => …)` (Trino's procedure): Parquet files already
//! in storage become data files of the table as they are, without being read or rewritten.
//!
//! ```text
//!   location ──► LocationLister ──► *.parquet (hidden files `_…`, `.…` left out)
//!      each not yet in the table: footer ──► columns checked against the table's schema
//!        (by field id when the file has them, else by name) ──► metrics: iceberg's
//!        ParquetWriter::parquet_to_data_file_builder (counts, null counts, bounds)
//!   ──► one `append` snapshot with every file, and, for files without field ids, the table's
//!       name mapping (`schema.name-mapping.default`) set or extended to the current columns in
//!       the same commit
//! ```
//!
//! A file that does not fit fails the whole call, naming the file and the column; nothing is
//! committed. What fits: every column of the file is a column of the table with the same name
//! and type (strings and binaries of any Arrow width; a nested column's children alike), all
//! found by field id or all by name, and every required column of the table is in the file
//! (a primitive one without NULLs). A file already in the table is
//! refused (its rows would count twice). Partitioned tables are not supported yet: the files'
//! partition values would have to be proven from their rows.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema as ArrowSchema};
use iceberg::arrow::{ArrowFileReader, schema_to_arrow_schema};
use iceberg::spec::{
    DEFAULT_SCHEMA_NAME_MAPPING, DataFile, ListType, MapType, MappedField, NameMapping,
    NestedFieldRef, Schema, StructType, Type,
};
use iceberg::table::Table;
use iceberg::writer::file_writer::ParquetWriter;
use iceberg::{Error, ErrorKind, Result};
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::file::metadata::ParquetMetaData;

use crate::commit::{CommitCatalog, FileChanges, commit_changes};
use crate::orphan_files::{LocationLister, comparable};

/// What [`add_files`] added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddFilesReport {
    /// Data files added.
    pub added_files: u64,
    /// Rows they hold.
    pub added_rows: u64,
    /// Their size in bytes.
    pub added_bytes: u64,
}

/// Adds the Parquet files under `location` to `table` in one snapshot, through `catalog`
/// (module docs).
///
/// Errors: `FeatureUnsupported` for a partitioned table; `DataInvalid` for no Parquet file under
/// `location`, a file already in the table, or a file whose columns do not fit (one line naming
/// the file and the column); `CatalogCommitConflicts` when another commit came first (the caller
/// re-reads and retries); listing, reading and catalog failures.
pub async fn add_files(
    catalog: &dyn CommitCatalog,
    table: &Table,
    lister: &dyn LocationLister,
    location: &str,
) -> Result<AddFilesReport> {
    let metadata = table.metadata();
    let spec = metadata.default_partition_spec();
    if !spec.fields().is_empty() {
        return Err(Error::new(
            ErrorKind::FeatureUnsupported,
            format!(
                "add_files of partitioned table {} is not supported yet",
                table.identifier()
            ),
        ));
    }
    let location = on_table_storage(location, metadata.location())?;
    let location = location.trim_end_matches('/');
    let mut paths: Vec<String> = lister
        .list(location)
        .await?
        .into_iter()
        .map(|f| f.path)
        .filter(|p| is_data_file(p))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            format!("add_files: no Parquet file under {location}"),
        ));
    }
    let present: HashSet<String> = match metadata.current_snapshot() {
        None => HashSet::new(),
        Some(s) => crate::snapshots::reachable_paths(table, &[s.snapshot_id()])
            .await?
            .paths
            .iter()
            .map(|p| comparable(p))
            .collect(),
    };
    if let Some(p) = paths.iter().find(|p| present.contains(&comparable(p))) {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            format!(
                "add_files: {p} is already a data file of {}",
                table.identifier()
            ),
        ));
    }
    let schema = metadata.current_schema();
    let table_arrow = schema_to_arrow_schema(schema)?;
    let mut report = AddFilesReport::default();
    let mut added: Vec<DataFile> = vec![];
    let mut without_ids = false;
    for path in paths {
        let unreadable = |e: Error| {
            Error::new(
                e.kind(),
                format!("add_files: {path} cannot be read: {}", e.message()),
            )
        };
        let input = table.file_io().new_input(&path).map_err(unreadable)?;
        let file_metadata = input.metadata().await.map_err(unreadable)?;
        let size = file_metadata.size;
        let mut reader = ArrowFileReader::new(file_metadata, input.reader().await?);
        let footer = reader.get_metadata(None).await.map_err(|e| {
            Error::new(
                ErrorKind::DataInvalid,
                format!("add_files: {path}: no Parquet footer could be read: {e}"),
            )
        })?;
        without_ids |= check_columns(&path, &footer, schema, &table_arrow)?;
        // Counts, null counts and bounds by column, as iceberg's writer records them.
        let mut builder = ParquetWriter::parquet_to_data_file_builder(
            Arc::clone(schema),
            Arc::clone(&footer),
            size as usize,
            path.clone(),
            HashMap::new(),
        )?;
        builder.partition_spec_id(spec.spec_id());
        let file = builder
            .build()
            .map_err(|e| Error::new(ErrorKind::Unexpected, e.to_string()))?;
        report.added_files += 1;
        report.added_rows += file.record_count();
        report.added_bytes += file.file_size_in_bytes();
        added.push(file);
    }
    // Files without field ids are read by name: the table's mapping must name every current
    // column (a column added since the mapping was written would otherwise read as NULL).
    let mut properties = HashMap::new();
    if without_ids {
        let existing: Option<NameMapping> = metadata
            .properties()
            .get(DEFAULT_SCHEMA_NAME_MAPPING)
            .and_then(|m| serde_json::from_str(m).ok());
        let mapping = match &existing {
            Some(old) => {
                let old: Vec<&MappedField> = old.fields().iter().collect();
                NameMapping::new(merge(&old, mapped_fields(schema.as_struct())))
            }
            None => name_mapping(schema),
        };
        if existing.as_ref() != Some(&mapping) {
            let mapping = serde_json::to_string(&mapping)
                .map_err(|e| Error::new(ErrorKind::Unexpected, e.to_string()))?;
            properties.insert(DEFAULT_SCHEMA_NAME_MAPPING.to_string(), mapping);
        }
    }
    let changes = FileChanges {
        added_data_files: added,
        properties,
        ..FileChanges::default()
    };
    commit_changes(catalog, table, &changes).await?;
    Ok(report)
}

/// `location` on the storage of the table at `table_location`: a path without a scheme is a
/// local path, taken only for a table on local storage (as `file://…`, the table's own
/// spelling); another scheme than the table's is refused, so a caller reaches no storage the
/// table does not already use.
///
/// Errors: `DataInvalid` naming both schemes.
fn on_table_storage(location: &str, table_location: &str) -> Result<String> {
    let scheme = |l: &str| match l.split_once("://") {
        Some((s, _)) => s
            .to_ascii_lowercase()
            .replace("s3a", "s3")
            .replace("s3n", "s3"),
        None => "file".to_string(),
    };
    if !location.contains("://") && !location.starts_with('/') {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            format!("add_files: location {location} is relative; give an absolute path or URL"),
        ));
    }
    let (theirs, ours) = (scheme(location), scheme(table_location));
    if theirs != ours {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            format!(
                "add_files: {location} is not on the table's storage ({ours}://); the files must \
                 be where the table's data is"
            ),
        ));
    }
    Ok(match location.contains("://") {
        true => location.to_string(),
        false if table_location.starts_with("file:") => {
            format!("file://{}", location.trim_start_matches("file:"))
        }
        false => location.to_string(),
    })
}

/// Whether a listed path is a data file to add: a `.parquet` file that is not hidden (names
/// starting with `_` or `.`, as Hive, Spark and Trino skip `_SUCCESS` and `.crc` files).
fn is_data_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    !name.starts_with('_')
        && !name.starts_with('.')
        && name.to_ascii_lowercase().ends_with(".parquet")
}

/// Checks the columns of the Parquet file at `path` (its `footer`) against the table's `schema`
/// (`table_arrow` its Arrow form, with field ids): returns whether the file lacks field ids
/// (then it is read by name).
///
/// Errors: `DataInvalid` naming the file and the first column that does not fit (module docs).
fn check_columns(
    path: &str,
    footer: &ParquetMetaData,
    schema: &Schema,
    table_arrow: &ArrowSchema,
) -> Result<bool> {
    let misfit =
        |why: String| Error::new(ErrorKind::DataInvalid, format!("add_files: {path}: {why}"));
    let file_arrow = parquet::arrow::parquet_to_arrow_schema(
        footer.file_metadata().schema_descr(),
        footer.file_metadata().key_value_metadata(),
    )
    .map_err(|e| misfit(format!("its schema does not convert to Arrow: {e}")))?;
    let without_ids = file_arrow.fields().iter().all(|f| field_id(f).is_none());
    if !without_ids && file_arrow.fields().iter().any(|f| field_id(f).is_none()) {
        return Err(misfit(
            "some columns have field ids and some do not; a file is read by ids or by names"
                .to_string(),
        ));
    }
    let mut found: HashSet<i32> = HashSet::new();
    for column in file_arrow.fields() {
        let table_field = match field_id(column) {
            Some(id) => table_arrow
                .fields()
                .iter()
                .find(|f| field_id(f) == Some(id))
                .map(|f| f.as_ref()),
            None => table_arrow.field_with_name(column.name()).ok(),
        };
        let Some(table_field) = table_field else {
            return Err(misfit(format!(
                "column {} is not a column of the table",
                column.name()
            )));
        };
        // Metrics are taken by column name (iceberg's footer reading): a file whose ids name
        // other columns than the table's would describe them under the wrong ids.
        if table_field.name() != column.name() {
            return Err(misfit(format!(
                "column {} has the field id of the table's column {}",
                column.name(),
                table_field.name()
            )));
        }
        if !same_type(column.data_type(), table_field.data_type()) {
            return Err(misfit(format!(
                "column {} is {} in the file, {} in the table",
                column.name(),
                column.data_type(),
                table_field.data_type()
            )));
        }
        let id = field_id(table_field).expect("the table's Arrow schema has field ids");
        found.insert(id);
        let required = schema.field_by_id(id).is_some_and(|f| f.required);
        // A primitive column's NULLs, from its chunks' statistics (a chunk without a null count
        // counts as holding NULLs).
        let nulls = |rg: &parquet::file::metadata::RowGroupMetaData| {
            rg.columns()
                .iter()
                .find(|c| c.column_descr().path().parts() == [column.name().clone()])
                .map(|c| c.statistics().and_then(|s| s.null_count_opt()).unwrap_or(1))
                .unwrap_or(0)
        };
        if required && footer.row_groups().iter().map(nulls).sum::<u64>() > 0 {
            return Err(misfit(format!(
                "column {} holds NULL, and the table's column is NOT NULL",
                column.name()
            )));
        }
    }
    if let Some(missing) = schema
        .as_struct()
        .fields()
        .iter()
        .find(|f| f.required && !found.contains(&f.id))
    {
        return Err(misfit(format!(
            "the table's NOT NULL column {} is not in the file",
            missing.name
        )));
    }
    Ok(without_ids)
}

/// The Iceberg field id of an Arrow field (`PARQUET:field_id`, as iceberg's Arrow schemas and
/// the Parquet reader spell it).
fn field_id(field: &Field) -> Option<i32> {
    field
        .metadata()
        .get(parquet::arrow::PARQUET_FIELD_ID_META_KEY)
        .and_then(|v| v.parse().ok())
}

/// Whether a file's column type is the table's: equal, with strings and binaries of any Arrow
/// width, and nested types compared child by child (names of list items and map entries, and
/// nullability, aside).
fn same_type(file: &DataType, table: &DataType) -> bool {
    use DataType::*;
    let child = |a: &Field, b: &Field| same_type(a.data_type(), b.data_type());
    match (file, table) {
        (Utf8 | LargeUtf8 | Utf8View, Utf8 | LargeUtf8 | Utf8View) => true,
        (Binary | LargeBinary | BinaryView, Binary | LargeBinary | BinaryView) => true,
        (List(a) | LargeList(a), List(b) | LargeList(b)) => child(a, b),
        (Map(a, _), Map(b, _)) => child(a, b),
        (Struct(a), Struct(b)) => {
            a.len() == b.len()
                && a.iter().all(|fa| {
                    b.iter()
                        .find(|fb| fb.name() == fa.name())
                        .is_some_and(|fb| child(fa, fb))
                })
        }
        (Timestamp(ua, za), Timestamp(ub, zb)) => ua == ub && za.is_some() == zb.is_some(),
        (a, b) => a == b,
    }
}

/// The name mapping of `schema`: each field by its name, at every depth (a list's element as
/// `element`, a map's `key` and `value`), as the Iceberg spec's "Column Projection" reads a
/// file without field ids.
fn name_mapping(schema: &Schema) -> NameMapping {
    NameMapping::new(mapped_fields(schema.as_struct()))
}

fn mapped_fields(s: &StructType) -> Vec<MappedField> {
    s.fields().iter().map(mapped_field).collect()
}

fn mapped_field(f: &NestedFieldRef) -> MappedField {
    MappedField::new(Some(f.id), vec![f.name.clone()], nested(&f.field_type))
}

fn nested(t: &Type) -> Vec<MappedField> {
    match t {
        Type::Struct(s) => mapped_fields(s),
        Type::List(ListType { element_field }) => vec![mapped_field(element_field)],
        Type::Map(MapType {
            key_field,
            value_field,
        }) => vec![mapped_field(key_field), mapped_field(value_field)],
        Type::Primitive(_) => vec![],
    }
}

/// `old` mapped fields with `fresh` ones merged in by field id: a field keeps its old names and
/// gains its current one (a renamed column is found under either), its children merged alike;
/// fields only `fresh` names are added, fields only `old` names are kept (older files may hold
/// them).
fn merge(old: &[&MappedField], fresh: Vec<MappedField>) -> Vec<MappedField> {
    let mut out: Vec<MappedField> = vec![];
    for f in old {
        let now = fresh
            .iter()
            .find(|n| n.field_id().is_some() && n.field_id() == f.field_id());
        let mut names = f.names().to_vec();
        let children = match now {
            Some(n) => {
                for name in n.names() {
                    if !names.contains(name) {
                        names.push(name.clone());
                    }
                }
                let fresh_children = n.fields().iter().map(|c| c.as_ref().clone()).collect();
                let old_children: Vec<&MappedField> =
                    f.fields().iter().map(|c| c.as_ref()).collect();
                merge(&old_children, fresh_children)
            }
            None => f.fields().iter().map(|c| c.as_ref().clone()).collect(),
        };
        out.push(MappedField::new(f.field_id(), names, children));
    }
    for n in fresh {
        if !old
            .iter()
            .any(|f| f.field_id().is_some() && f.field_id() == n.field_id())
        {
            out.push(n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Local paths only for a local table, spelled as the table spells its files.
    #[test]
    fn locations_stay_on_the_table_storage() {
        let local = "file:///data/warehouse/ns/t";
        assert_eq!(
            on_table_storage("/tmp/in", local).unwrap(),
            "file:///tmp/in"
        );
        assert!(on_table_storage("/tmp/in", "s3://b/ns/t").is_err());
        assert!(on_table_storage("s3a://b/in", "s3://b/ns/t").is_ok());
        assert!(on_table_storage("gs://b/in", local).is_err());
        assert!(on_table_storage("in/dir", local).is_err());
    }

    /// A merged mapping keeps old names and gains new fields and current names.
    #[test]
    fn mappings_merge_by_field_id() {
        let (a, b) = (
            MappedField::new(Some(1), vec!["id".into()], vec![]),
            MappedField::new(Some(2), vec!["old_name".into()], vec![]),
        );
        let old = vec![&a, &b];
        let fresh = vec![
            MappedField::new(Some(1), vec!["id".into()], vec![]),
            MappedField::new(Some(2), vec!["new_name".into()], vec![]),
            MappedField::new(Some(3), vec!["added".into()], vec![]),
        ];
        let merged = merge(&old, fresh);
        let names: Vec<Vec<String>> = merged.iter().map(|f| f.names().to_vec()).collect();
        assert_eq!(
            names,
            [
                vec!["id".to_string()],
                vec!["old_name".into(), "new_name".into()],
                vec!["added".into()]
            ]
        );
    }

    /// Hidden and non-Parquet files are not added.
    #[test]
    fn only_visible_parquet_files_are_data() {
        assert!(is_data_file("s3://b/in/part-0.parquet"));
        assert!(is_data_file("/x/y/A.PARQUET"));
        assert!(!is_data_file("/x/_SUCCESS"));
        assert!(!is_data_file("/x/.part-0.parquet.crc"));
        assert!(!is_data_file("/x/_tmp.parquet"));
        assert!(!is_data_file("/x/notes.txt"));
    }

    /// Types match across Arrow widths and nested names, not across kinds or units.
    #[test]
    fn types_match_as_iceberg_reads_them() {
        use arrow::datatypes::TimeUnit;
        assert!(same_type(&DataType::LargeUtf8, &DataType::Utf8));
        let item = |n: &str| Arc::new(Field::new(n, DataType::Int64, true));
        assert!(same_type(
            &DataType::List(item("item")),
            &DataType::List(item("element"))
        ));
        assert!(!same_type(&DataType::Int32, &DataType::Int64));
        assert!(!same_type(
            &DataType::Timestamp(TimeUnit::Nanosecond, None),
            &DataType::Timestamp(TimeUnit::Microsecond, None)
        ));
    }
}
