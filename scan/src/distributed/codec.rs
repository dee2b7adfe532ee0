//! [`IcebergScanCodec`]: an [`IcebergScanExec`] to bytes and back, for plans a coordinator
//! sends to its workers (datafusion-distributed encodes every stage with datafusion-proto and
//! the codecs registered on both sides).
//!
//! ```text
//!   coordinator: IcebergScanExec ──► ScanNode { catalog, table, metadata location, snapshot id,
//!                schema id, projection, tasks per partition, static and dynamic filters,
//!                NULL proof, settings }
//!   worker:      ScanNode ──► TableLoader (the worker's own configuration of that catalog)
//!                ──► the metadata file the coordinator planned (immutable; read again only
//!                    when the table moved on since) ──► at the planned snapshot and schema
//!                    (`time_travel.rs`) ──► manifest metrics (cached per snapshot)
//!                ──► provider::assemble (the same statistics, bounds, layouts)
//!                ──► filters pushed again ──► IcebergScanExec
//! ```
//!
//! **What travels.** The table's identity and the planned tasks, never the table's storage
//! configuration: a worker loads the table from its own configuration of the same catalog, so
//! credentials stay in each process's configuration. The tasks travel (path, byte range, file
//! size, record count, delete files, identity-partition tuple) rather than being planned again
//! on every worker: planning reads the manifests, which the coordinator has already done, and a
//! worker given the same tasks reads exactly the row groups the coordinator assigned to it.
//!
//! **Dynamic filters** travel as datafusion-proto encodes them (`DynamicFilterPhysicalExpr`
//! with its expression id); each decodes as a copy of its own. On the worker,
//! [`IcebergScanExec::relink_dynamic_filters`] attaches each to its producer in the same
//! decoded task (a hash join, TopK or aggregate) by that id, as datafusion-proto's
//! `DeduplicatingProtoConverter` would; a filter produced in another stage has no producer
//! there and is dropped (nothing would ever update it).

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use datafusion::common::{Result, exec_err, internal_datafusion_err};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::from_proto::parse_physical_expr;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use datafusion_proto::physical_plan::{DefaultPhysicalExtensionCodec, PhysicalExtensionCodec};
use datafusion_proto::protobuf::PhysicalExprNode;
use iceberg::expr::Predicate;
use iceberg::scan::{FileScanTask, FileScanTaskDeleteFile};
use iceberg::spec::{DataContentType, DataFileFormat, Literal, NameMapping, TableMetadata, Type};
use iceberg::table::Table;
use iceberg::{NamespaceIdent, TableIdent};
use prost::Message;

use crate::exec::scan_exec::{DynamicNulls, IcebergScanExec, IcebergScanExecBuilder};
use crate::model::iceberg_error::external;
use crate::plan::planned::{ScanInputs, assemble};
use crate::read::caches::ScanCaches;
use iceflight_iceberg::time_travel::at_snapshot;
use iceflight_options::{ScanReader, ScanSettings};

/// Loads a table by catalog name and identifier, as the process's own configuration of that
/// catalog reaches it (a worker decoding a scan).
#[async_trait]
pub trait TableLoader: Debug + Send + Sync {
    /// The table `ident` of the configured catalog `catalog`.
    ///
    /// Errors: an unknown catalog, a catalog that cannot be reached, an unknown table.
    async fn load_table(&self, catalog: &str, ident: &TableIdent) -> Result<Table>;
}

/// Encodes and decodes [`IcebergScanExec`] (module docs). Register the same codec on the
/// coordinator and on every worker.
#[derive(Debug, Clone)]
pub struct IcebergScanCodec {
    tables: Arc<dyn TableLoader>,
    caches: Arc<ScanCaches>,
}

impl IcebergScanCodec {
    /// A codec whose decoded scans load their tables through `tables` and their manifest
    /// metrics through `caches` (the engine's).
    pub fn new(tables: Arc<dyn TableLoader>, caches: Arc<ScanCaches>) -> Self {
        Self { tables, caches }
    }

    fn encode(&self, scan: &IcebergScanExec) -> Result<ScanNode> {
        let scan = scan.description();
        let inputs = &scan.inputs;
        let table = &inputs.table;
        let Some(catalog) = inputs.catalog.clone() else {
            return exec_err!(
                "table {} was not loaded from a configured catalog: its scan cannot run on a worker",
                table.identifier()
            );
        };
        let Some(metadata_location) = table.metadata_location() else {
            return exec_err!(
                "table {} has no metadata location: its scan cannot run on a worker",
                table.identifier()
            );
        };
        let metadata = table.metadata();
        let current = metadata.current_schema();
        let arrow = with_metadata_columns(
            iceberg::arrow::schema_to_arrow_schema(current).map_err(external)?,
        );
        let projection = inputs
            .schema
            .fields()
            .iter()
            .map(|f| arrow.index_of(f.name()).map(|i| i as u32))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let first = scan.file_groups.iter().flatten().next();
        let name_mapping = first
            .and_then(|t| t.name_mapping.as_ref())
            .map(|m| serde_json::to_string(m.as_ref()))
            .transpose()
            .map_err(|e| internal_datafusion_err!("name mapping: {e}"))?;
        let groups = scan
            .file_groups
            .iter()
            .map(|g| {
                Ok(TaskGroup {
                    tasks: g
                        .iter()
                        .map(|t| encode_task(t, metadata))
                        .collect::<Result<_>>()?,
                })
            })
            .collect::<Result<_>>()?;
        let codec = DefaultPhysicalExtensionCodec {};
        let exprs = |exprs: &[Arc<dyn PhysicalExpr>]| -> Result<Vec<Vec<u8>>> {
            exprs
                .iter()
                .map(|e| Ok(serialize_physical_expr(e, &codec)?.encode_to_vec()))
                .collect()
        };
        let settings = inputs.settings;
        Ok(ScanNode {
            catalog,
            namespace: table.identifier().namespace().clone().inner(),
            table: table.identifier().name().to_string(),
            metadata_location: metadata_location.to_string(),
            snapshot_id: metadata.current_snapshot().map(|s| s.snapshot_id()),
            schema_id: current.schema_id(),
            projection,
            groups,
            predicate_json: inputs
                .predicate
                .as_ref()
                .map(serde_json::to_string)
                .transpose()
                .map_err(|e| internal_datafusion_err!("predicate: {e}"))?,
            name_mapping_json: name_mapping,
            case_sensitive: first.is_none_or(|t| t.case_sensitive),
            limit: inputs.limit.map(|l| l as u64),
            batch_size: inputs.batch_size as u64,
            static_filters: exprs(&scan.pushed.fixed)?,
            dynamic_filters: exprs(&scan.pushed.dynamic)?,
            dynamic_nulls: match scan.pushed.nulls {
                DynamicNulls::Unproven => 0,
                DynamicNulls::MayPass => 1,
                DynamicNulls::Rejected => 2,
            },
            inlist_cap: scan.pushed.inlist_cap as u64,
            dynamic_pruning: settings.dynamic_pruning,
            dynamic_filter_wait_ms: settings.dynamic_filter_wait.as_millis() as u64,
            reader_predicate: settings.reader_predicate,
            reader_iceberg: settings.reader == ScanReader::Iceberg,
            dynamic_row_filter: settings.dynamic_row_filter,
            late_materialization: settings.late_materialization,
            static_row_filter: settings.static_row_filter,
            dictionary_strings: settings.dictionary_strings,
            cut_row_groups: settings.cut_row_groups,
            files_pruned_statistics: scan.files_pruned_statistics as u64,
            files_pruned_manifest: scan.files_pruned_manifest as u64,
        })
    }

    async fn decode(&self, node: ScanNode, ctx: &TaskContext) -> Result<IcebergScanExec> {
        let ident = TableIdent::new(
            NamespaceIdent::from_vec(node.namespace.clone()).map_err(external)?,
            node.table.clone(),
        );
        let loaded = self.tables.load_table(&node.catalog, &ident).await?;
        let table = if loaded.metadata_location() == Some(node.metadata_location.as_str()) {
            loaded
        } else {
            // The table moved on since the coordinator planned: read the metadata it planned
            // with (metadata files are never rewritten), through this process's storage.
            let metadata = TableMetadata::read_from(loaded.file_io(), &node.metadata_location)
                .await
                .map_err(external)?;
            Table::builder()
                .metadata(metadata)
                .metadata_location(node.metadata_location.clone())
                .identifier(ident.clone())
                .file_io(loaded.file_io().clone())
                .runtime(iceberg::Runtime::try_current().map_err(external)?)
                .build()
                .map_err(external)?
        };
        // A time-travel scan (`time_travel.rs`) planned another snapshot than the current one:
        // the same in-memory rewrite as on the coordinator.
        let table = match node.snapshot_id {
            Some(id) => at_snapshot(&table, id, node.schema_id).map_err(external)?,
            None if table.metadata().current_snapshot().is_none() => table,
            None => {
                return exec_err!(
                    "table {ident}: the coordinator planned a scan without a snapshot, the metadata at {} has one",
                    node.metadata_location
                );
            }
        };
        let metadata = table.metadata();
        let current = Arc::clone(metadata.current_schema());
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&current).map_err(external)?);
        let indices: Vec<usize> = node.projection.iter().map(|&i| i as usize).collect();
        let schema = Arc::new(with_metadata_columns(arrow.as_ref().clone()).project(&indices)?);
        let field_id = |f: &arrow::datatypes::Field| -> Result<i32> {
            f.metadata()
                .get(parquet::arrow::PARQUET_FIELD_ID_META_KEY)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| internal_datafusion_err!("column {} has no field id", f.name()))
        };
        let field_ids = schema
            .fields()
            .iter()
            .map(|f| field_id(f))
            .collect::<Result<Vec<_>>>()?;
        let field_types = arrow
            .fields()
            .iter()
            .map(|f| Ok((field_id(f)?, f.data_type().clone())))
            .collect::<Result<Vec<_>>>()?;
        let name_mapping = node
            .name_mapping_json
            .as_deref()
            .map(serde_json::from_str::<NameMapping>)
            .transpose()
            .map_err(|e| internal_datafusion_err!("name mapping: {e}"))?
            .map(Arc::new);
        let file_groups = node
            .groups
            .iter()
            .map(|g| {
                g.tasks
                    .iter()
                    .map(|t| {
                        let mut task = decode_task(t, metadata)?;
                        task.schema = Arc::clone(&current);
                        task.project_field_ids = field_ids.clone();
                        task.name_mapping = name_mapping.clone();
                        task.case_sensitive = node.case_sensitive;
                        Ok(task)
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        let index = self.caches.indexes.load(&table).await.map_err(external)?;
        let predicate = node
            .predicate_json
            .as_deref()
            .map(serde_json::from_str::<Predicate>)
            .transpose()
            .map_err(|e| internal_datafusion_err!("predicate: {e}"))?;
        let settings = ScanSettings {
            dynamic_pruning: node.dynamic_pruning,
            dynamic_filter_wait: Duration::from_millis(node.dynamic_filter_wait_ms),
            reader_predicate: node.reader_predicate,
            reader: if node.reader_iceberg {
                ScanReader::Iceberg
            } else {
                ScanReader::Native
            },
            dynamic_row_filter: node.dynamic_row_filter,
            late_materialization: node.late_materialization,
            static_row_filter: node.static_row_filter,
            dictionary_strings: node.dictionary_strings,
            cut_row_groups: node.cut_row_groups,
        };
        let planned = assemble(
            ScanInputs {
                table,
                catalog: Some(node.catalog.clone()),
                schema: Arc::clone(&schema),
                field_ids,
                field_types,
                predicate,
                limit: node.limit.map(|l| l as usize),
                batch_size: node.batch_size as usize,
                settings,
            },
            index,
            file_groups,
        );
        let codec = DefaultPhysicalExtensionCodec {};
        let exprs = |bytes: &[Vec<u8>]| -> Result<Vec<Arc<dyn PhysicalExpr>>> {
            bytes
                .iter()
                .map(|b| {
                    let node = PhysicalExprNode::decode(b.as_slice())
                        .map_err(|e| internal_datafusion_err!("scan filter: {e}"))?;
                    parse_physical_expr(&node, ctx, &schema, &codec)
                })
                .collect()
        };
        let nulls = match node.dynamic_nulls {
            0 => DynamicNulls::Unproven,
            1 => DynamicNulls::MayPass,
            2 => DynamicNulls::Rejected,
            n => return exec_err!("scan node: unknown NULL proof {n}"),
        };
        Ok(IcebergScanExecBuilder::new(planned)
            .with_pushed_filters(
                exprs(&node.static_filters)?,
                exprs(&node.dynamic_filters)?,
                node.inlist_cap as usize,
            )
            .with_pruned_counts(
                node.files_pruned_manifest as usize,
                node.files_pruned_statistics as usize,
            )
            .with_dynamic_nulls(nulls)
            .build())
    }
}

impl PhysicalExtensionCodec for IcebergScanCodec {
    /// Decodes a scan: loads its table (a catalog request, answered from the catalog's cache
    /// while the metadata location is unchanged) on this thread, so decoding must run inside
    /// a multi-threaded tokio runtime, as a worker's does.
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !inputs.is_empty() {
            return exec_err!("IcebergScanExec has no inputs, got {}", inputs.len());
        }
        let node = ScanNode::decode(buf).map_err(|e| internal_datafusion_err!("scan node: {e}"))?;
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|e| internal_datafusion_err!("decoding a scan needs a tokio runtime: {e}"))?;
        if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            return exec_err!("decoding a scan needs a multi-threaded tokio runtime");
        }
        let scan = tokio::task::block_in_place(|| handle.block_on(self.decode(node, ctx)))?;
        Ok(Arc::new(scan))
    }

    fn try_encode(&self, node: Arc<dyn ExecutionPlan>, buf: &mut Vec<u8>) -> Result<()> {
        let Some(scan) = node.downcast_ref::<IcebergScanExec>() else {
            return exec_err!("IcebergScanCodec cannot encode {}", node.name());
        };
        self.encode(scan)?.encode(buf).map_err(|e| {
            internal_datafusion_err!("encoding the scan of {}: {e}", scan.table().identifier())
        })
    }
}

/// One data file's piece: what [`FileScanTask`] holds that the worker cannot derive from the
/// table (the schema, projection and name mapping are the scan's).
fn encode_task(task: &FileScanTask, metadata: &TableMetadata) -> Result<TaskNode> {
    // The identity-partition tuple travels only with the spec it belongs to (the native
    // reader and iceberg's use it only then), typed by that spec.
    let (partition_json, partition_spec_id) = match (&task.partition_spec, &task.partition) {
        (Some(spec), Some(tuple)) => {
            let ty = Type::Struct(
                spec.partition_type(metadata.current_schema())
                    .map_err(external)?,
            );
            let json = Literal::Struct(tuple.clone())
                .try_into_json(&ty)
                .map_err(external)?;
            (Some(json.to_string()), Some(spec.spec_id()))
        }
        _ => (None, None),
    };
    Ok(TaskNode {
        path: task.data_file_path.clone(),
        start: task.start,
        length: task.length,
        file_size: task.file_size_in_bytes,
        record_count: task.record_count,
        format: task.data_file_format.to_string(),
        deletes: task
            .deletes
            .iter()
            .map(|d| DeleteNode {
                path: d.file_path.clone(),
                file_size: d.file_size_in_bytes,
                content: d.file_type as i32,
                partition_spec_id: d.partition_spec_id,
                equality_ids: d.equality_ids.clone().unwrap_or_default(),
                has_equality_ids: d.equality_ids.is_some(),
            })
            .collect(),
        partition_json,
        partition_spec_id,
    })
}

/// [`encode_task`] reversed; the scan-level fields are filled by the caller.
fn decode_task(node: &TaskNode, metadata: &TableMetadata) -> Result<FileScanTask> {
    let (partition, partition_spec) = match (&node.partition_json, node.partition_spec_id) {
        (Some(json), Some(id)) => {
            let Some(spec) = metadata.partition_spec_by_id(id) else {
                return exec_err!("data file {}: unknown partition spec {id}", node.path);
            };
            let ty = Type::Struct(
                spec.partition_type(metadata.current_schema())
                    .map_err(external)?,
            );
            let value = serde_json::from_str(json)
                .map_err(|e| internal_datafusion_err!("partition tuple: {e}"))?;
            match Literal::try_from_json(value, &ty).map_err(external)? {
                Some(Literal::Struct(tuple)) => (Some(tuple), Some(Arc::clone(spec))),
                _ => return exec_err!("data file {}: partition tuple is not a struct", node.path),
            }
        }
        _ => (None, None),
    };
    let deletes = node
        .deletes
        .iter()
        .map(|d| {
            Ok(FileScanTaskDeleteFile {
                file_path: d.path.clone(),
                file_size_in_bytes: d.file_size,
                file_type: DataContentType::try_from(d.content).map_err(external)?,
                partition_spec_id: d.partition_spec_id,
                equality_ids: d.has_equality_ids.then(|| d.equality_ids.clone()),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(FileScanTask {
        file_size_in_bytes: node.file_size,
        start: node.start,
        length: node.length,
        record_count: node.record_count,
        data_file_path: node.path.clone(),
        data_file_format: node.format.parse::<DataFileFormat>().map_err(external)?,
        schema: Arc::clone(metadata.current_schema()),
        project_field_ids: vec![],
        predicate: None,
        deletes,
        partition,
        partition_spec,
        name_mapping: None,
        case_sensitive: true,
    })
}

/// An [`IcebergScanExec`] on the wire (module docs).
#[derive(Clone, PartialEq, prost::Message)]
struct ScanNode {
    /// The configured catalog's name (the same on every process).
    #[prost(string, tag = "1")]
    catalog: String,
    #[prost(string, repeated, tag = "2")]
    namespace: Vec<String>,
    #[prost(string, tag = "3")]
    table: String,
    /// The metadata file the coordinator planned with.
    #[prost(string, tag = "4")]
    metadata_location: String,
    #[prost(int64, optional, tag = "5")]
    snapshot_id: Option<i64>,
    #[prost(int32, tag = "6")]
    schema_id: i32,
    /// Output columns as indices into the current schema's top-level columns.
    #[prost(uint32, repeated, tag = "7")]
    projection: Vec<u32>,
    /// Tasks per output partition.
    #[prost(message, repeated, tag = "8")]
    groups: Vec<TaskGroup>,
    /// The static predicate `plan_files` was given (EXPLAIN only).
    #[prost(string, optional, tag = "9")]
    predicate_json: Option<String>,
    #[prost(string, optional, tag = "10")]
    name_mapping_json: Option<String>,
    #[prost(bool, tag = "11")]
    case_sensitive: bool,
    #[prost(uint64, optional, tag = "12")]
    limit: Option<u64>,
    #[prost(uint64, tag = "13")]
    batch_size: u64,
    /// `PhysicalExprNode`s over the output schema.
    #[prost(bytes = "vec", repeated, tag = "14")]
    static_filters: Vec<Vec<u8>>,
    /// `PhysicalExprNode`s (dynamic filters, with their expression ids).
    #[prost(bytes = "vec", repeated, tag = "15")]
    dynamic_filters: Vec<Vec<u8>>,
    /// [`DynamicNulls`]: 0 unproven, 1 may pass, 2 rejected.
    #[prost(int32, tag = "16")]
    dynamic_nulls: i32,
    #[prost(uint64, tag = "17")]
    inlist_cap: u64,
    #[prost(bool, tag = "18")]
    dynamic_pruning: bool,
    #[prost(uint64, tag = "19")]
    dynamic_filter_wait_ms: u64,
    #[prost(bool, tag = "20")]
    reader_predicate: bool,
    #[prost(bool, tag = "21")]
    reader_iceberg: bool,
    #[prost(bool, tag = "22")]
    dynamic_row_filter: bool,
    #[prost(bool, tag = "23")]
    late_materialization: bool,
    #[prost(bool, tag = "26")]
    static_row_filter: bool,
    #[prost(bool, tag = "27")]
    dictionary_strings: bool,
    #[prost(bool, tag = "28")]
    cut_row_groups: bool,
    /// Scan-wide counters reported by the scan's first partition.
    #[prost(uint64, tag = "24")]
    files_pruned_statistics: u64,
    #[prost(uint64, tag = "25")]
    files_pruned_manifest: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TaskGroup {
    #[prost(message, repeated, tag = "1")]
    tasks: Vec<TaskNode>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TaskNode {
    #[prost(string, tag = "1")]
    path: String,
    #[prost(uint64, tag = "2")]
    start: u64,
    #[prost(uint64, tag = "3")]
    length: u64,
    #[prost(uint64, tag = "4")]
    file_size: u64,
    #[prost(uint64, optional, tag = "5")]
    record_count: Option<u64>,
    #[prost(string, tag = "6")]
    format: String,
    #[prost(message, repeated, tag = "7")]
    deletes: Vec<DeleteNode>,
    /// The identity-partition tuple as Iceberg's JSON single-value form, typed by its spec.
    #[prost(string, optional, tag = "8")]
    partition_json: Option<String>,
    #[prost(int32, optional, tag = "9")]
    partition_spec_id: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct DeleteNode {
    #[prost(string, tag = "1")]
    path: String,
    #[prost(uint64, tag = "2")]
    file_size: u64,
    /// `DataContentType` as its manifest value.
    #[prost(int32, tag = "3")]
    content: i32,
    #[prost(int32, tag = "4")]
    partition_spec_id: i32,
    #[prost(int32, repeated, tag = "5")]
    equality_ids: Vec<i32>,
    #[prost(bool, tag = "6")]
    has_equality_ids: bool,
}

/// `schema` (a table's current columns) followed by the four metadata columns: a projection's
/// indices past the table's columns name them (a row change's scan, a query naming `_row_id`;
/// `model/metadata_columns.rs`).
fn with_metadata_columns(schema: arrow::datatypes::Schema) -> arrow::datatypes::Schema {
    let mut fields: Vec<arrow::datatypes::FieldRef> = schema.fields().to_vec();
    fields.extend(crate::model::metadata_columns::all_fields().map(Arc::new));
    arrow::datatypes::Schema::new_with_metadata(fields, schema.metadata().clone())
}
