//! [`ScanPlanner`]: the tasks of one scan of an Iceberg table, from its manifests.
//!
//! ```text
//!   filters ──► PredicateConverter ──► TableScan::plan_files (manifest + partition pruning)
//!   tasks   ──► current schema, field-id projection, partition spec, no reader predicate,
//!               only the position delete files that may delete from their data file
//! ```
//!
//! The schema is the table's **current** schema (case c06: a column added without a write is
//! visible and reads as NULL); each Arrow field carries its iceberg field id in
//! `PARQUET:field_id` metadata.

use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::{Result, internal_datafusion_err, not_impl_err};
use datafusion::logical_expr::Expr;
use datafusion::prelude::SessionConfig;
use futures::TryStreamExt;
use iceberg::scan::FileScanTask;
use iceberg::spec::{DataContentType, PartitionSpec, PrimitiveType, Type};
use iceberg::table::Table;
use iceflight_options::ScanSettings;
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

use crate::model::iceberg_error::external;
use crate::model::metadata_columns::MetadataColumns;
use crate::plan::metrics_index::{FileMetricsIndex, IndexCache};
use crate::plan::planned::ScanInputs;
use crate::pushdown::predicate::PredicateConverter;

/// One table at the snapshot it was loaded at, ready to plan scans of it.
#[derive(Debug, Clone)]
pub struct ScanPlanner {
    table: Table,
    /// The configured catalog the table was loaded from, named in plans sent to workers.
    catalog: Option<String>,
    /// The current schema, each field with its iceberg field id (`PARQUET:field_id`).
    schema: SchemaRef,
    /// `schema` without field metadata: what DataFusion sees (`model/output.rs`).
    plain: SchemaRef,
    /// The metadata columns `schema` ends with ([`Self::with_row_positions`],
    /// [`Self::with_metadata_columns`]).
    metadata_columns: MetadataColumns,
}

impl ScanPlanner {
    /// Plans scans of a loaded table. Errors if its current schema has no Arrow form.
    pub fn try_new(table: Table) -> Result<Self> {
        let schema = iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema())
            .map_err(external)?;
        Ok(Self {
            table,
            catalog: None,
            plain: Arc::new(crate::model::output::plain_schema(&schema)),
            schema: Arc::new(schema),
            metadata_columns: MetadataColumns::None,
        })
    }

    /// A planner of `table` (the same table at another snapshot) with this one's catalog and
    /// metadata columns.
    ///
    /// Errors: as [`Self::try_new`].
    pub fn at(&self, table: Table) -> Result<Self> {
        let mut planner = Self::try_new(table)?;
        planner.catalog = self.catalog.clone();
        Ok(planner.appending(self.metadata_columns))
    }

    /// The configured catalog the table was loaded from, if named.
    pub fn catalog(&self) -> Option<&str> {
        self.catalog.as_deref()
    }

    /// The same planner with the metadata columns `_file` and `_pos` after the table's columns
    /// (`model/metadata_columns.rs`): what a row-level change reads to name the rows it deletes.
    pub fn with_row_positions(self) -> Self {
        self.appending(MetadataColumns::RowPositions)
    }

    /// The same planner with all four metadata columns after the table's columns: `_file`,
    /// `_pos`, `_row_id`, `_last_updated_sequence_number` (`model/metadata_columns.rs`), what
    /// a query that names one of them reads.
    pub fn with_metadata_columns(self) -> Self {
        self.appending(MetadataColumns::All)
    }

    /// The metadata columns this planner's schema ends with.
    pub fn metadata_columns(&self) -> MetadataColumns {
        self.metadata_columns
    }

    /// The planner whose schema is the table's columns then `columns` (at least those it
    /// has already).
    fn appending(mut self, columns: MetadataColumns) -> Self {
        let columns = columns.max(self.metadata_columns);
        if columns == self.metadata_columns {
            return self;
        }
        let table_columns = self.schema.fields().len() - self.metadata_columns.fields().len();
        let mut fields: Vec<arrow::datatypes::FieldRef> =
            self.schema.fields()[..table_columns].to_vec();
        fields.extend(columns.fields().into_iter().map(Arc::new));
        let schema =
            arrow::datatypes::Schema::new_with_metadata(fields, self.schema.metadata().clone());
        self.plain = Arc::new(crate::model::output::plain_schema(&schema));
        self.schema = Arc::new(schema);
        self.metadata_columns = columns;
        self
    }

    /// Names the configured catalog the table was loaded from (`distributed/codec.rs`).
    pub fn with_catalog(mut self, catalog: impl Into<String>) -> Self {
        self.catalog = Some(catalog.into());
        self
    }

    /// The iceberg table.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// The current schema with field ids in each field's metadata.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The current schema without field metadata, as DataFusion sees it.
    pub fn plain_schema(&self) -> &SchemaRef {
        &self.plain
    }

    /// The iceberg field id of column `index` of [`Self::schema`]. Errors: a column without one.
    pub fn field_id(&self, index: usize) -> Result<i32> {
        let field = self.schema.field(index);
        field
            .metadata()
            .get(PARQUET_FIELD_ID_META_KEY)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| {
                internal_datafusion_err!("column {} has no iceberg field id", field.name())
            })
    }

    /// The table's columns whose type (or a type nested in it) iceflight cannot read or write
    /// (`PrimitiveType::Unsupported`: format v3's `variant`, `geometry`, `geography`,
    /// `unknown`, kept as written by `vendor/iceberg`): `(column index, name, type)`.
    pub fn unsupported_columns(&self) -> Vec<(usize, String, String)> {
        let current = self.table.metadata().current_schema();
        let table_columns = self.schema.fields().len() - self.metadata_columns.fields().len();
        (0..table_columns)
            .filter_map(|i| {
                let field = current.field_by_id(self.field_id(i).ok()?)?;
                let name = unsupported_type(&field.field_type)?;
                Some((i, field.name.clone(), name))
            })
            .collect()
    }

    /// Errors unless every column of `indices` can be read: one clear line naming the first
    /// column of a type iceflight cannot read ([`Self::unsupported_columns`]). Only a query
    /// reading such a column fails; `count(*)` and the other columns read.
    pub fn check_readable(&self, indices: &[usize]) -> Result<()> {
        match self
            .unsupported_columns()
            .into_iter()
            .find(|(i, _, _)| indices.contains(i))
        {
            Some((_, name, ty)) => not_impl_err!(
                "column {name} of table {} has type {ty}, which iceflight cannot read yet; \
                 select the other columns",
                self.table.identifier()
            ),
            None => Ok(()),
        }
    }

    /// Errors if the table has a column of a type iceflight cannot write: a statement that
    /// writes data or delete files would leave that column unwritten or its files unread.
    pub fn check_writable(&self) -> Result<()> {
        match self.unsupported_columns().into_iter().next() {
            Some((_, name, ty)) => not_impl_err!(
                "table {} has column {name} of type {ty}, which iceflight cannot write yet; \
                 it is read-only here",
                self.table.identifier()
            ),
            None => Ok(()),
        }
    }

    /// Converter for filters on this table: columns by name in the current schema, bound by field
    /// id to the current snapshot's schema (what `TableScanBuilder::build` binds to).
    pub(crate) fn predicate_converter(&self) -> PredicateConverter<'_> {
        let current = self.table.metadata().current_schema();
        PredicateConverter::new(current, self.snapshot_schema(), &self.schema)
    }

    /// The schema the current snapshot was written with (else the current one): what
    /// `TableScanBuilder::build` binds a scan's filter to.
    fn snapshot_schema(&self) -> &iceberg::spec::SchemaRef {
        let metadata = self.table.metadata();
        metadata
            .current_snapshot()
            .and_then(|s| s.schema_id())
            .and_then(|id| metadata.schema_by_id(id))
            .unwrap_or(metadata.current_schema())
    }

    /// Whether every partition spec's source columns are in the schema iceberg binds the scan's
    /// filter to (the snapshot's). iceberg 0.10.1 projects the filter onto every spec while it
    /// plans and fails when a spec's source column was dropped since (case c10): then the scan
    /// is planned without the filter (no manifest or partition pruning), and the files are still
    /// pruned by their column bounds here and the rows filtered above.
    fn specs_bind_to_snapshot_schema(&self) -> bool {
        let schema = self.snapshot_schema();
        self.table.metadata().partition_specs_iter().all(|spec| {
            spec.fields()
                .iter()
                .all(|f| schema.field_by_id(f.source_id).is_some())
        })
    }

    /// The partition spec a planned task's `partition` tuple belongs to. iceberg 0.10.1's
    /// `plan_files` leaves `FileScanTask.partition_spec` unset, so identity-partition constants
    /// (case c05) are only filled when we can name the spec: the table has a single spec, or
    /// exactly one spec has the tuple's arity.
    fn spec_for(&self, task: &FileScanTask) -> Option<Arc<PartitionSpec>> {
        let partition = task.partition.as_ref()?;
        let arity = partition.fields().len();
        let mut candidates = self
            .table
            .metadata()
            .partition_specs_iter()
            .filter(|s| s.fields().len() == arity && !s.fields().is_empty());
        let first = candidates.next()?;
        candidates.next().is_none().then(|| Arc::clone(first))
    }

    /// Plans a scan of the columns `indices` (of [`Self::plain_schema`]) under `filters`:
    /// the scan's inputs, the manifest metrics of the current snapshot and one
    /// [`FileScanTask`] per data file that may hold a row passing `filters` (none for a table
    /// without a snapshot). Shared by `IcebergTableProvider::scan` and `DELETE` (`write/delete.rs`); `indexes` is the
    /// engine's cache of manifest metrics (`read/caches.rs`).
    ///
    /// Errors: a column without a field id, or a failure reading the manifests.
    pub async fn plan_tasks(
        &self,
        config: &SessionConfig,
        indices: &[usize],
        filters: &[Expr],
        limit: Option<usize>,
        indexes: &IndexCache,
    ) -> Result<(ScanInputs, Arc<FileMetricsIndex>, Vec<FileScanTask>)> {
        self.check_readable(indices)?;
        let metadata = self.table.metadata();
        let schema = Arc::new(self.schema.project(indices)?);
        let field_ids = indices
            .iter()
            .map(|&i| self.field_id(i))
            .collect::<Result<Vec<_>>>()?;
        let field_types = (0..self.schema.fields().len())
            .map(|i| Ok((self.field_id(i)?, self.schema.field(i).data_type().clone())))
            .collect::<Result<Vec<(i32, DataType)>>>()?;
        let options = iceflight_options::IceflightOptions::of(config.options());
        let batch_size = match options.scan.batch_size {
            0 => config.batch_size(),
            n => n,
        };

        let mut predicate = None;
        let mut tasks = Vec::new();
        let index = indexes.load(&self.table).await.map_err(external)?;
        if let Some(snapshot) = metadata.current_snapshot() {
            predicate = self.predicate_converter().convert_all(filters);
            let mut builder = self
                .table
                .scan()
                .snapshot_id(snapshot.snapshot_id())
                .select_empty();
            if let Some(p) = &predicate
                && self.specs_bind_to_snapshot_schema()
            {
                builder = builder.with_filter(p.clone());
            }
            let scan = builder.build().map_err(external)?;
            tasks = scan
                .plan_files()
                .await
                .map_err(external)?
                .try_collect::<Vec<_>>()
                .await
                .map_err(external)?;
        }
        let current_schema = Arc::clone(metadata.current_schema());
        for task in &mut tasks {
            // iceberg 0.10.1 attaches every position delete file of the partition; keep those
            // that may delete from this file (`referenced_data_file`), each once.
            let mut seen = std::collections::HashSet::new();
            task.deletes.retain(|d| {
                d.file_type != DataContentType::PositionDeletes
                    || (index.deletes_from(&d.file_path, &task.data_file_path)
                        && seen.insert(d.file_path.clone()))
            });
            task.schema = Arc::clone(&current_schema);
            task.project_field_ids = field_ids.clone();
            task.predicate = None;
            task.partition_spec = self.spec_for(task);
        }
        let inputs = ScanInputs {
            table: self.table.clone(),
            catalog: self.catalog.clone(),
            schema,
            field_ids,
            field_types,
            predicate,
            limit,
            batch_size,
            settings: ScanSettings::of(&options),
        };
        Ok((inputs, index, tasks))
    }
}

/// The first type iceflight cannot read inside `ty` (itself, a struct field, a list element or
/// a map key or value), as table metadata names it.
fn unsupported_type(ty: &Type) -> Option<String> {
    match ty {
        Type::Primitive(PrimitiveType::Unsupported(name)) => Some(name.clone()),
        Type::Primitive(_) => None,
        Type::Struct(s) => s
            .fields()
            .iter()
            .find_map(|f| unsupported_type(&f.field_type)),
        Type::List(l) => unsupported_type(&l.element_field.field_type),
        Type::Map(m) => unsupported_type(&m.key_field.field_type)
            .or_else(|| unsupported_type(&m.value_field.field_type)),
    }
}
