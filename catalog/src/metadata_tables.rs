//! Metadata tables: a table's snapshots, history, references, manifests, files, partitions
//! and properties, queried as `"orders$snapshots"` (Trino's names and columns).
//!
//! ```text
//!   "orders$files" ──► table_ref::split ──► MetadataTable::Files ──► load "orders" (current
//!                      metadata) ──► build: metadata JSON / manifest list / manifests
//!                      ──► one RecordBatch ──► MemTable (read-only)
//! ```
//!
//! `$snapshots` is iceberg's own (`Table::inspect`: the columns of Iceberg's Java
//! `SnapshotsTable`, which Trino and pyiceberg share); the others are built here from the
//! metadata and the current snapshot's manifest list and manifests, with Trino's columns
//! (`$manifests`: Iceberg Java's and pyiceberg's, then Trino's row counts):
//!
//! | table | columns |
//! |---|---|
//! | `$manifests` | content, path, length, partition_spec_id, added_snapshot_id, {added, existing, deleted}_{data, delete}_files_count, partition_summaries, {added, existing, deleted}_rows_count |
//! | `$history` | made_current_at, snapshot_id, parent_id, is_current_ancestor |
//! | `$refs` | name, type (`BRANCH`/`TAG`), snapshot_id, max_reference_age_in_ms, min_snapshots_to_keep, max_snapshot_age_in_ms |
//! | `$files` | content, file_path, file_format, spec_id, partition, record_count, file_size_in_bytes, column_sizes, value_counts, null_value_counts, nan_value_counts, lower_bounds, upper_bounds, key_metadata, split_offsets, equality_ids, sort_order_id |
//! | `$partitions` | partition, record_count, file_count, total_size (data files only) |
//! | `$properties` | key, value |
//!
//! `partition` is a struct of every partition field any spec of the table ever had (Iceberg's
//! `Partitioning.partitionType`), NULL where a file's spec lacks the field; it is absent from
//! an unpartitioned table's `$files` and `$partitions` (as in Trino). Bounds are rendered as
//! text (Trino's `map(integer, varchar)`). The maps' field-id keys are 64-bit (Trino's are
//! `integer`) so that `value_counts[3]` works: DataFusion 54 does not coerce a literal to a
//! map's key type.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::builder::{
    BinaryBuilder, BooleanBuilder, Int32Builder, Int64Builder, ListBuilder, MapBuilder,
    StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::array::{Array, ArrayRef, RecordBatch, StructArray};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::datasource::MemTable;
use futures::TryStreamExt;
use futures::future::try_join_all;
use iceberg::spec::{DataContentType, DataFile, ManifestStatus, Type};
use iceberg::table::Table;
use iceflight_iceberg::time_travel::refs;
use iceflight_scan::model::literal::literal_scalar;

use crate::error::to_df_error;

/// A metadata table kind, by its Trino name (after the `$`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataTable {
    /// `$snapshots`: one row per snapshot.
    Snapshots,
    /// `$history`: the snapshot log (when each snapshot was made current).
    History,
    /// `$refs`: branches and tags.
    Refs,
    /// `$manifests`: the current snapshot's manifests.
    Manifests,
    /// `$files`: the current snapshot's data and delete files.
    Files,
    /// `$partitions`: the current snapshot's data files grouped by partition.
    Partitions,
    /// `$properties`: the table properties.
    Properties,
}

impl MetadataTable {
    /// Every kind, in the order they are listed in errors.
    pub const ALL: [Self; 7] = [
        Self::Snapshots,
        Self::History,
        Self::Refs,
        Self::Manifests,
        Self::Files,
        Self::Partitions,
        Self::Properties,
    ];

    /// The name after the `$`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Snapshots => "snapshots",
            Self::History => "history",
            Self::Refs => "refs",
            Self::Manifests => "manifests",
            Self::Files => "files",
            Self::Partitions => "partitions",
            Self::Properties => "properties",
        }
    }

    /// The kind named `name` (case-insensitive), if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name))
    }

    /// The metadata table of `table`, read now from its current metadata.
    ///
    /// Errors: a manifest list or manifest that cannot be read (as the catalog's errors).
    pub async fn provider(self, catalog: &str, table: &Table) -> Result<Arc<dyn TableProvider>> {
        let base = (catalog.to_string(), table.identifier().clone());
        let batch = match self {
            Self::Snapshots => {
                let batches: Vec<RecordBatch> = table
                    .inspect()
                    .snapshots()
                    .scan()
                    .await
                    .map_err(to_df_error)?
                    .try_collect()
                    .await
                    .map_err(to_df_error)?;
                return mem_table(base, batches);
            }
            Self::Manifests => manifests(table).await?,
            Self::History => history(table)?,
            Self::Refs => refs_table(table)?,
            Self::Files => files(table).await?,
            Self::Partitions => partitions(table).await?,
            Self::Properties => properties(table)?,
        };
        mem_table(base, vec![batch])
    }
}

fn mem_table(
    base: (String, iceberg::TableIdent),
    batches: Vec<RecordBatch>,
) -> Result<Arc<dyn TableProvider>> {
    let Some(schema) = batches.first().map(|b| b.schema()) else {
        return plan_err!("metadata table without a schema");
    };
    // iceberg's own metadata tables carry field ids; no table shows field metadata (case c11).
    let schema = Arc::new(iceflight_scan::model::output::plain_schema(&schema));
    let batches = batches
        .into_iter()
        .map(|b| iceflight_scan::model::output::plain_batch(b, &schema))
        .collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(MetadataTableProvider {
        rows: MemTable::try_new(schema, vec![batches])?,
        base,
    }))
}

/// A metadata table: its rows read like a `MemTable`'s, and nothing writes to it (a
/// `MemTable` would take `INSERT` and forget it).
#[derive(Debug)]
pub struct MetadataTableProvider {
    rows: MemTable,
    /// The catalog and table it describes.
    base: (String, iceberg::TableIdent),
}

impl MetadataTableProvider {
    /// The configured catalog's name and the table this metadata table describes (whose
    /// privileges reading it needs).
    pub fn base(&self) -> (&str, &iceberg::TableIdent) {
        (&self.base.0, &self.base.1)
    }
}

#[async_trait::async_trait]
impl TableProvider for MetadataTableProvider {
    fn schema(&self) -> arrow::datatypes::SchemaRef {
        self.rows.schema()
    }

    fn table_type(&self) -> datafusion::datasource::TableType {
        datafusion::datasource::TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn datafusion::catalog::Session,
        projection: Option<&Vec<usize>>,
        filters: &[datafusion::logical_expr::Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        self.rows.scan(state, projection, filters, limit).await
    }

    async fn insert_into(
        &self,
        _state: &dyn datafusion::catalog::Session,
        _input: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
        _op: datafusion::logical_expr::dml::InsertOp,
    ) -> Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        datafusion::common::not_impl_err!("metadata tables are read-only")
    }

    async fn delete_from(
        &self,
        _state: &dyn datafusion::catalog::Session,
        _filters: Vec<datafusion::logical_expr::Expr>,
    ) -> Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        datafusion::common::not_impl_err!("metadata tables are read-only")
    }

    async fn update(
        &self,
        _state: &dyn datafusion::catalog::Session,
        _assignments: Vec<(String, datafusion::logical_expr::Expr)>,
        _filters: Vec<datafusion::logical_expr::Expr>,
    ) -> Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        datafusion::common::not_impl_err!("metadata tables are read-only")
    }
}

/// A timestamp with time zone in microseconds, as iceberg's `timestamptz` maps to Arrow.
fn timestamptz() -> DataType {
    DataType::Timestamp(
        arrow::datatypes::TimeUnit::Microsecond,
        Some("+00:00".into()),
    )
}

fn history(table: &Table) -> Result<RecordBatch> {
    let metadata = table.metadata();
    let mut ancestors = std::collections::HashSet::new();
    let mut next = metadata.current_snapshot_id();
    while let Some(id) = next {
        if !ancestors.insert(id) {
            break;
        }
        next = metadata
            .snapshot_by_id(id)
            .and_then(|s| s.parent_snapshot_id());
    }
    let mut made = TimestampMicrosecondBuilder::new().with_timezone("+00:00");
    let (mut id, mut parent, mut ancestor) = (
        Int64Builder::new(),
        Int64Builder::new(),
        BooleanBuilder::new(),
    );
    for entry in metadata.history() {
        made.append_value(entry.timestamp_ms * 1000);
        id.append_value(entry.snapshot_id);
        parent.append_option(
            metadata
                .snapshot_by_id(entry.snapshot_id)
                .and_then(|s| s.parent_snapshot_id()),
        );
        ancestor.append_value(ancestors.contains(&entry.snapshot_id));
    }
    let schema = Schema::new(vec![
        Field::new("made_current_at", timestamptz(), false),
        Field::new("snapshot_id", DataType::Int64, false),
        Field::new("parent_id", DataType::Int64, true),
        Field::new("is_current_ancestor", DataType::Boolean, false),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(made.finish()),
        Arc::new(id.finish()),
        Arc::new(parent.finish()),
        Arc::new(ancestor.finish()),
    ];
    Ok(RecordBatch::try_new(Arc::new(schema), columns)?)
}

/// `$manifests`, built here rather than by iceberg's `inspect`, which (0.10.1) counts a data
/// manifest's files also as delete files and panics on a spec whose source column was dropped
/// (case c10). Columns: Iceberg Java's (pyiceberg's) and Trino's row counts.
async fn manifests(table: &Table) -> Result<RecordBatch> {
    use iceberg::spec::ManifestContentType;
    let metadata = table.metadata();
    let entries = match metadata.current_snapshot() {
        Some(snapshot) => table
            .manifest_list_reader(snapshot)
            .load()
            .await
            .map_err(to_df_error)?
            .consume_entries()
            .into_iter()
            .collect(),
        None => vec![],
    };
    let (mut content, mut path, mut length, mut spec_id, mut added_snapshot) = (
        Int32Builder::new(),
        StringBuilder::new(),
        Int64Builder::new(),
        Int32Builder::new(),
        Int64Builder::new(),
    );
    let mut counts: Vec<Int32Builder> = (0..6).map(|_| Int32Builder::new()).collect();
    let mut rows: Vec<Int64Builder> = (0..3).map(|_| Int64Builder::new()).collect();
    let summary_fields = Fields::from(vec![
        Field::new("contains_null", DataType::Boolean, false),
        Field::new("contains_nan", DataType::Boolean, true),
        Field::new("lower_bound", DataType::Utf8, true),
        Field::new("upper_bound", DataType::Utf8, true),
    ]);
    let mut summaries = ListBuilder::new(arrow::array::builder::StructBuilder::from_fields(
        summary_fields.clone(),
        0,
    ));
    for m in &entries {
        let is_data = m.content == ManifestContentType::Data;
        content.append_value(if is_data { 0 } else { 1 });
        path.append_value(&m.manifest_path);
        length.append_value(m.manifest_length);
        spec_id.append_value(m.partition_spec_id);
        added_snapshot.append_value(m.added_snapshot_id);
        let files = [
            m.added_files_count,
            m.existing_files_count,
            m.deleted_files_count,
        ];
        for (k, n) in files.iter().enumerate() {
            let n = n.map_or(0, |n| n as i32);
            counts[k].append_value(if is_data { n } else { 0 });
            counts[k + 3].append_value(if is_data { 0 } else { n });
        }
        let row_counts = [
            m.added_rows_count,
            m.existing_rows_count,
            m.deleted_rows_count,
        ];
        for (k, n) in row_counts.iter().enumerate() {
            rows[k].append_option(n.map(|n| n as i64));
        }
        let types = spec_result_types(table, m.partition_spec_id);
        for (k, summary) in m.partitions.iter().flatten().enumerate() {
            let render = |bytes: Option<&[u8]>| -> Option<String> {
                let bytes = bytes?;
                match types.get(k).cloned().flatten() {
                    Some(Type::Primitive(p)) => iceberg::spec::Datum::try_from_bytes(bytes, p)
                        .ok()
                        .map(|d| match d.literal() {
                            iceberg::spec::PrimitiveLiteral::String(s) => s.clone(),
                            _ => d.to_string(),
                        }),
                    _ => None,
                }
            };
            let fields = summaries.values();
            fields
                .field_builder::<BooleanBuilder>(0)
                .expect("contains_null")
                .append_value(summary.contains_null);
            fields
                .field_builder::<BooleanBuilder>(1)
                .expect("contains_nan")
                .append_option(summary.contains_nan);
            fields
                .field_builder::<StringBuilder>(2)
                .expect("lower_bound")
                .append_option(render(summary.lower_bound.as_ref().map(|b| b.as_slice())));
            fields
                .field_builder::<StringBuilder>(3)
                .expect("upper_bound")
                .append_option(render(summary.upper_bound.as_ref().map(|b| b.as_slice())));
            fields.append(true);
        }
        summaries.append(true);
    }
    let mut fields = vec![
        Field::new("content", DataType::Int32, false),
        Field::new("path", DataType::Utf8, false),
        Field::new("length", DataType::Int64, false),
        Field::new("partition_spec_id", DataType::Int32, false),
        Field::new("added_snapshot_id", DataType::Int64, false),
    ];
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(content.finish()),
        Arc::new(path.finish()),
        Arc::new(length.finish()),
        Arc::new(spec_id.finish()),
        Arc::new(added_snapshot.finish()),
    ];
    let count_names = [
        "added_data_files_count",
        "existing_data_files_count",
        "deleted_data_files_count",
        "added_delete_files_count",
        "existing_delete_files_count",
        "deleted_delete_files_count",
    ];
    for (name, mut builder) in count_names.into_iter().zip(counts) {
        fields.push(Field::new(name, DataType::Int32, false));
        columns.push(Arc::new(builder.finish()));
    }
    let summaries = summaries.finish();
    fields.push(Field::new(
        "partition_summaries",
        summaries.data_type().clone(),
        true,
    ));
    columns.push(Arc::new(summaries));
    let row_names = [
        "added_rows_count",
        "existing_rows_count",
        "deleted_rows_count",
    ];
    for (name, mut builder) in row_names.into_iter().zip(rows) {
        fields.push(Field::new(name, DataType::Int64, true));
        columns.push(Arc::new(builder.finish()));
    }
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

/// The result type of each field of spec `spec_id`, from any schema that holds its source
/// (`None` where none does).
fn spec_result_types(table: &Table, spec_id: i32) -> Vec<Option<Type>> {
    let metadata = table.metadata();
    let Some(spec) = metadata.partition_spec_by_id(spec_id) else {
        return vec![];
    };
    spec.fields()
        .iter()
        .map(|field| {
            let source = source_type(table, field.source_id)?;
            field.transform.result_type(&source).ok()
        })
        .collect()
}

/// The type of column `source_id` in any schema of the table: a partition source may have been
/// dropped since (case c10).
fn source_type(table: &Table, source_id: i32) -> Option<Type> {
    table.metadata().schemas_iter().find_map(|s| {
        s.field_by_id(source_id)
            .map(|f| f.field_type.as_ref().clone())
    })
}

fn refs_table(table: &Table) -> Result<RecordBatch> {
    let (mut name, mut kind) = (StringBuilder::new(), StringBuilder::new());
    let (mut id, mut max_ref_age, mut min_keep, mut max_snapshot_age) = (
        Int64Builder::new(),
        Int64Builder::new(),
        Int32Builder::new(),
        Int64Builder::new(),
    );
    for (ref_name, reference) in refs(table).map_err(to_df_error)? {
        name.append_value(&ref_name);
        id.append_value(reference.snapshot_id);
        match reference.retention {
            iceberg::spec::SnapshotRetention::Branch {
                min_snapshots_to_keep,
                max_snapshot_age_ms,
                max_ref_age_ms,
            } => {
                kind.append_value("BRANCH");
                max_ref_age.append_option(max_ref_age_ms);
                min_keep.append_option(min_snapshots_to_keep);
                max_snapshot_age.append_option(max_snapshot_age_ms);
            }
            iceberg::spec::SnapshotRetention::Tag { max_ref_age_ms } => {
                kind.append_value("TAG");
                max_ref_age.append_option(max_ref_age_ms);
                min_keep.append_null();
                max_snapshot_age.append_null();
            }
        }
    }
    let schema = Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("type", DataType::Utf8, false),
        Field::new("snapshot_id", DataType::Int64, false),
        Field::new("max_reference_age_in_ms", DataType::Int64, true),
        Field::new("min_snapshots_to_keep", DataType::Int32, true),
        Field::new("max_snapshot_age_in_ms", DataType::Int64, true),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(name.finish()),
        Arc::new(kind.finish()),
        Arc::new(id.finish()),
        Arc::new(max_ref_age.finish()),
        Arc::new(min_keep.finish()),
        Arc::new(max_snapshot_age.finish()),
    ];
    Ok(RecordBatch::try_new(Arc::new(schema), columns)?)
}

fn properties(table: &Table) -> Result<RecordBatch> {
    let sorted: BTreeMap<&String, &String> = table.metadata().properties().iter().collect();
    let (mut key, mut value) = (StringBuilder::new(), StringBuilder::new());
    for (k, v) in sorted {
        key.append_value(k);
        value.append_value(v);
    }
    let schema = Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("value", DataType::Utf8, false),
    ]);
    let columns: Vec<ArrayRef> = vec![Arc::new(key.finish()), Arc::new(value.finish())];
    Ok(RecordBatch::try_new(Arc::new(schema), columns)?)
}

/// The live files of the current snapshot (data and delete files), each with the spec id of
/// the manifest that lists it, in manifest order.
async fn live_files(table: &Table) -> Result<Vec<(i32, DataFile)>> {
    let Some(snapshot) = table.metadata().current_snapshot() else {
        return Ok(vec![]);
    };
    let list = table
        .manifest_list_reader(snapshot)
        .load()
        .await
        .map_err(to_df_error)?;
    let manifests = try_join_all(list.entries().iter().map(|m| async move {
        let manifest = m.load_manifest(table.file_io()).await?;
        Ok::<_, iceberg::Error>((m.partition_spec_id, manifest))
    }))
    .await
    .map_err(to_df_error)?;
    let mut out = vec![];
    for (spec_id, manifest) in manifests {
        for entry in manifest.entries() {
            if entry.status() != ManifestStatus::Deleted {
                out.push((spec_id, entry.data_file().clone()));
            }
        }
    }
    Ok(out)
}

/// Every partition field any spec of the table had, by field id: its name and Arrow type
/// (module docs). Empty for a table only ever unpartitioned.
fn partition_fields(table: &Table) -> Result<Vec<(i32, Field)>> {
    let metadata = table.metadata();
    let mut specs: Vec<_> = metadata.partition_specs_iter().collect();
    specs.sort_by_key(|s| s.spec_id());
    let mut out: Vec<(i32, Field)> = vec![];
    for spec in specs {
        for field in spec.fields() {
            if out.iter().any(|(id, _)| *id == field.field_id) {
                continue;
            }
            let Some(source) = source_type(table, field.source_id) else {
                continue;
            };
            let result: Type = field.transform.result_type(&source).map_err(to_df_error)?;
            let arrow = iceberg::arrow::type_to_arrow_type(&result).map_err(to_df_error)?;
            out.push((field.field_id, Field::new(&field.name, arrow, true)));
        }
    }
    Ok(out)
}

/// The `partition` column for `files`: a struct over `fields` (see [`partition_fields`]).
fn partition_column(
    table: &Table,
    fields: &[(i32, Field)],
    files: &[(i32, &DataFile)],
) -> Result<ArrayRef> {
    let metadata = table.metadata();
    let mut columns: Vec<ArrayRef> = vec![];
    for (field_id, field) in fields {
        let values = files.iter().map(|(spec_id, file)| {
            let position = metadata
                .partition_spec_by_id(*spec_id)
                .and_then(|spec| spec.fields().iter().position(|f| f.field_id == *field_id));
            position
                .and_then(|at| file.partition().fields().get(at).cloned().flatten())
                .and_then(|lit| literal_scalar(&lit, field.data_type()))
                .map_or_else(|| ScalarValue::try_from(field.data_type()), Ok)
        });
        let values = values.collect::<Result<Vec<_>>>()?;
        columns.push(if values.is_empty() {
            arrow::array::new_empty_array(field.data_type())
        } else {
            ScalarValue::iter_to_array(values)?
        });
    }
    let struct_fields: Fields = fields.iter().map(|(_, f)| f.clone()).collect();
    Ok(Arc::new(StructArray::try_new(
        struct_fields,
        columns,
        None,
    )?))
}

fn int_long_map(
    files: &[(i32, &DataFile)],
    get: impl Fn(&DataFile) -> &std::collections::HashMap<i32, u64>,
) -> ArrayRef {
    let mut map = MapBuilder::new(None, Int64Builder::new(), Int64Builder::new());
    for &(_, file) in files {
        let sorted: BTreeMap<i32, u64> = get(file).iter().map(|(k, v)| (*k, *v)).collect();
        for (k, v) in sorted {
            map.keys().append_value(i64::from(k));
            map.values().append_value(v as i64);
        }
        map.append(true).expect("keys and values appended together");
    }
    Arc::new(map.finish())
}

fn bounds_map(
    files: &[(i32, &DataFile)],
    get: impl Fn(&DataFile) -> &std::collections::HashMap<i32, iceberg::spec::Datum>,
) -> ArrayRef {
    let mut map = MapBuilder::new(None, Int64Builder::new(), StringBuilder::new());
    for &(_, file) in files {
        let sorted: BTreeMap<i32, String> = get(file)
            .iter()
            .map(|(k, v)| {
                let text = match v.literal() {
                    // Trino's rendering: the text itself (iceberg's Display quotes it).
                    iceberg::spec::PrimitiveLiteral::String(s) => s.clone(),
                    _ => v.to_string(),
                };
                (*k, text)
            })
            .collect();
        for (k, v) in sorted {
            map.keys().append_value(i64::from(k));
            map.values().append_value(v);
        }
        map.append(true).expect("keys and values appended together");
    }
    Arc::new(map.finish())
}

fn content_code(content: DataContentType) -> i32 {
    match content {
        DataContentType::Data => 0,
        DataContentType::PositionDeletes => 1,
        DataContentType::EqualityDeletes => 2,
    }
}

async fn files(table: &Table) -> Result<RecordBatch> {
    let live = live_files(table).await?;
    let files: Vec<(i32, &DataFile)> = live.iter().map(|(s, f)| (*s, f)).collect();
    let partition = partition_fields(table)?;
    let (mut content, mut path, mut format, mut spec) = (
        Int32Builder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
        Int32Builder::new(),
    );
    let (mut records, mut size, mut key_metadata, mut sort_order) = (
        Int64Builder::new(),
        Int64Builder::new(),
        BinaryBuilder::new(),
        Int32Builder::new(),
    );
    let mut split_offsets = ListBuilder::new(Int64Builder::new());
    let mut equality_ids = ListBuilder::new(Int32Builder::new());
    for (spec_id, file) in &files {
        content.append_value(content_code(file.content_type()));
        path.append_value(file.file_path());
        format.append_value(file.file_format().to_string().to_uppercase());
        spec.append_value(*spec_id);
        records.append_value(file.record_count() as i64);
        size.append_value(file.file_size_in_bytes() as i64);
        key_metadata.append_option(file.key_metadata());
        match file.split_offsets() {
            Some(offsets) => {
                split_offsets.values().append_slice(offsets);
                split_offsets.append(true);
            }
            None => split_offsets.append(false),
        }
        match file.equality_ids() {
            Some(ids) => {
                equality_ids.values().append_slice(&ids);
                equality_ids.append(true);
            }
            None => equality_ids.append(false),
        }
        sort_order.append_option(file.sort_order_id());
    }
    let mut fields = vec![
        Field::new("content", DataType::Int32, false),
        Field::new("file_path", DataType::Utf8, false),
        Field::new("file_format", DataType::Utf8, false),
        Field::new("spec_id", DataType::Int32, false),
    ];
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(content.finish()),
        Arc::new(path.finish()),
        Arc::new(format.finish()),
        Arc::new(spec.finish()),
    ];
    if !partition.is_empty() {
        let column = partition_column(table, &partition, &files)?;
        fields.push(Field::new("partition", column.data_type().clone(), false));
        columns.push(column);
    }
    let maps: [(&str, ArrayRef); 6] = [
        ("column_sizes", int_long_map(&files, DataFile::column_sizes)),
        ("value_counts", int_long_map(&files, DataFile::value_counts)),
        (
            "null_value_counts",
            int_long_map(&files, DataFile::null_value_counts),
        ),
        (
            "nan_value_counts",
            int_long_map(&files, DataFile::nan_value_counts),
        ),
        ("lower_bounds", bounds_map(&files, DataFile::lower_bounds)),
        ("upper_bounds", bounds_map(&files, DataFile::upper_bounds)),
    ];
    fields.push(Field::new("record_count", DataType::Int64, false));
    columns.push(Arc::new(records.finish()));
    fields.push(Field::new("file_size_in_bytes", DataType::Int64, false));
    columns.push(Arc::new(size.finish()));
    for (name, column) in maps {
        fields.push(Field::new(name, column.data_type().clone(), true));
        columns.push(column);
    }
    let tail: [(&str, ArrayRef); 4] = [
        ("key_metadata", Arc::new(key_metadata.finish())),
        ("split_offsets", Arc::new(split_offsets.finish())),
        ("equality_ids", Arc::new(equality_ids.finish())),
        ("sort_order_id", Arc::new(sort_order.finish())),
    ];
    for (name, column) in tail {
        fields.push(Field::new(name, column.data_type().clone(), true));
        columns.push(column);
    }
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

async fn partitions(table: &Table) -> Result<RecordBatch> {
    let live = live_files(table).await?;
    let data: Vec<(i32, &DataFile)> = live
        .iter()
        .filter(|(_, f)| f.content_type() == DataContentType::Data)
        .map(|(s, f)| (*s, f))
        .collect();
    let partition = partition_fields(table)?;
    let schema_fields = |partition_type: Option<&DataType>| -> SchemaRef {
        let mut fields = vec![];
        if let Some(t) = partition_type {
            fields.push(Field::new("partition", t.clone(), false));
        }
        fields.extend([
            Field::new("record_count", DataType::Int64, false),
            Field::new("file_count", DataType::Int64, false),
            Field::new("total_size", DataType::Int64, false),
        ]);
        Arc::new(Schema::new(fields))
    };
    // Group by the partition struct's rows: one key per distinct value tuple.
    let column = match partition.is_empty() {
        true => None,
        false => Some(partition_column(table, &partition, &data)?),
    };
    // Keyed by the partition value itself (NULL and the string 'NULL' stay apart), in order
    // of first appearance.
    let mut index: std::collections::HashMap<Option<ScalarValue>, usize> = Default::default();
    let mut groups: Vec<(usize, i64, i64, i64)> = vec![];
    for (row, (_, file)) in data.iter().enumerate() {
        let key = match &column {
            None => None,
            Some(column) => Some(ScalarValue::try_from_array(column, row)?),
        };
        let at = *index.entry(key).or_insert_with(|| {
            groups.push((row, 0, 0, 0));
            groups.len() - 1
        });
        let group = &mut groups[at];
        group.1 += file.record_count() as i64;
        group.2 += 1;
        group.3 += file.file_size_in_bytes() as i64;
    }
    let (mut records, mut count, mut size) = (
        Int64Builder::new(),
        Int64Builder::new(),
        Int64Builder::new(),
    );
    let mut first_rows = vec![];
    for (first, r, c, s) in &groups {
        first_rows.push(*first as u64);
        records.append_value(*r);
        count.append_value(*c);
        size.append_value(*s);
    }
    let mut columns: Vec<ArrayRef> = vec![];
    let schema = match &column {
        None => schema_fields(None),
        Some(column) => {
            let indices = arrow::array::UInt64Array::from(first_rows);
            columns.push(arrow::compute::take(column.as_ref(), &indices, None)?);
            schema_fields(Some(column.data_type()))
        }
    };
    columns.push(Arc::new(records.finish()));
    columns.push(Arc::new(count.finish()));
    columns.push(Arc::new(size.finish()));
    Ok(RecordBatch::try_new(schema, columns)?)
}
