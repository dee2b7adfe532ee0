//! Tables created and appended to from Arrow: `CREATE TABLE [AS SELECT]`, `CREATE TABLE …
//! WITH (partitioning = …, sorted_by = …)` ([`CreateTableWith`], [`TableLayout`]) and Flight SQL
//! bulk ingest (`server/src/flight/ingest.rs`).
//!
//! ```text
//!   CREATE TABLE t AS SELECT …  ──► CreateTableWith (server/src/sql/ddl.rs) ──► create_table_with:
//!   CREATE TABLE t (…) ──► DataFusion: an empty MemTable ──► register_table ──► create_from:
//!     Iceberg schema from the Arrow columns (ids assigned in order)
//!         ──► Catalog::create_table (format v2, unpartitioned)
//!         ──► the query's rows streamed, written and appended in one snapshot
//!             (iceflight_scan::write::sink); the rows written answer the statement
//!         ──► on a failed write the new table is dropped again (all or nothing)
//! ```
//!
//! Column types: DataFusion's string and binary views become Iceberg `string` and `binary`,
//! dictionaries their value type; a type Iceberg has no counterpart for (unsigned 64-bit
//! integers, intervals, …) is refused naming the column. `NOT NULL` columns are required.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::{DataFusionError, Result, plan_datafusion_err, plan_err};
use datafusion::datasource::{MemTable, TableType};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;
use iceberg::spec::FormatVersion;
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, TableCreation, TableIdent};
use iceflight_scan::write::sink::append_rows;

use crate::error::to_df_error;

/// Creates Iceberg table `ident` with the columns and rows of `source` (DataFusion's in-memory
/// table of a `CREATE TABLE` statement; module docs).
///
/// Errors: a view or another kind of table; a column type Iceberg cannot store; the catalog's
/// (the table exists, the namespace does not); a failed write (the table is dropped again).
pub async fn create_from(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    source: Arc<dyn TableProvider>,
) -> Result<()> {
    if source.table_type() == TableType::View {
        return plan_err!("CREATE VIEW is not supported: iceflight stores Iceberg tables");
    }
    let Some(memory) = source.downcast_ref::<MemTable>() else {
        return plan_err!("table {ident} cannot be created from this kind of table");
    };
    let mut batches = vec![];
    for partition in &memory.batches {
        batches.extend(partition.read().await.iter().cloned());
    }
    let stream = RecordBatchStreamAdapter::new(
        source.schema(),
        futures::stream::iter(batches.into_iter().map(Ok)),
    );
    let layout = TableLayout::default();
    create_filled(catalog, ident, &source.schema(), &layout, Box::pin(stream)).await?;
    Ok(())
}

/// Creates Iceberg table `ident` (format v2) with the columns of `schema` (module docs: column
/// types; field ids assigned in column order), partitioned and sorted as `layout` says.
///
/// Errors: a name that would be a path (`names.rs`); a location property (`write.data.path`,
/// …: only once the table exists); a column type Iceberg cannot store; a partitioning or sort
/// entry that does not parse or names no column; the catalog's (the table exists, the
/// namespace does not).
pub async fn create_empty(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    schema: &SchemaRef,
    layout: &TableLayout,
) -> Result<Table> {
    crate::names::check_table(ident)?;
    if let Some((key, _)) = layout
        .properties
        .iter()
        .find(|(k, _)| crate::names::LOCATION_PROPERTIES.contains(&k.as_str()))
    {
        return plan_err!(
            "table property {key} cannot be given when the table is created: set it with ALTER              TABLE … SET TBLPROPERTIES once the table exists, to a path inside its location"
        );
    }
    let mut schema = iceberg_columns(schema)?;
    if layout.format_version == Some(3) && !layout.nanosecond_columns.is_empty() {
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Timestamp(_, zone) if layout.nanosecond_columns.contains(f.name()) => {
                    f.as_ref().clone().with_data_type(DataType::Timestamp(
                        arrow::datatypes::TimeUnit::Nanosecond,
                        zone.clone(),
                    ))
                }
                _ => f.as_ref().clone(),
            })
            .collect();
        schema = Schema::new(fields);
    }
    let iceberg_schema = iceberg::arrow::arrow_schema_to_schema_auto_assign_ids(&schema)
        .map_err(|e| plan_datafusion_err!("table {ident}: {}", e.message()))?;
    let spec = layout.partition_spec(&iceberg_schema)?;
    let order = layout.sort_order(&iceberg_schema)?;
    let creation = TableCreation::builder()
        .name(ident.name().to_string())
        .schema(iceberg_schema)
        .partition_spec_opt(spec)
        .sort_order_opt(order)
        .properties(layout.properties.iter().cloned())
        .format_version(match layout.format_version {
            Some(1) => FormatVersion::V1,
            Some(3) => FormatVersion::V3,
            _ => FormatVersion::V2,
        })
        .build();
    let asked = creation.format_version;
    let table = catalog
        .create_table(ident.namespace(), creation)
        .await
        .map_err(to_df_error)?;
    if table.metadata().format_version() >= asked {
        return Ok(table);
    }
    // iceberg 0.10.1's REST client does not send the format version: upgrade; a catalog that
    // refuses leaves no table behind.
    let tx = Transaction::new(&table);
    let upgraded = match tx
        .upgrade_table_version()
        .set_format_version(asked)
        .apply(tx)
    {
        Ok(tx) => tx.commit(catalog).await,
        Err(e) => Err(e),
    };
    match upgraded {
        Ok(table) => Ok(table),
        Err(e) => {
            let _ = catalog.drop_table(ident).await;
            plan_err!(
                "table {ident}: the catalog created a format {} table and refused to upgrade it \
                 to {asked} ({}); nothing was created",
                table.metadata().format_version(),
                e.message()
            )
        }
    }
}

/// Appends the rows of `data` to `table` in one snapshot; returns the rows written. The
/// stream's columns are matched to the table's by name (any order), each cast to the table's
/// type.
///
/// Errors: a column missing on either side, a type that does not cast, a NULL in a required
/// column (nothing is committed); the commit's.
pub async fn append(
    catalog: &dyn Catalog,
    table: &Table,
    data: SendableRecordBatchStream,
) -> Result<u64> {
    iceflight_scan::plan::planner::ScanPlanner::try_new(table.clone())?.check_writable()?;
    let table_schema = Arc::new(
        iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema())
            .map_err(to_df_error)?,
    );
    let order = column_order(table.identifier(), &data.schema(), &table_schema)?;
    let reordered = RecordBatchStreamAdapter::new(
        Arc::clone(&table_schema),
        data.map(move |batch| {
            let batch = batch?;
            let fields: Vec<Field> = order
                .iter()
                .map(|&i| batch.schema().field(i).clone())
                .collect();
            let columns = order.iter().map(|&i| Arc::clone(batch.column(i))).collect();
            Ok(RecordBatch::try_new(
                Arc::new(Schema::new(fields)),
                columns,
            )?)
        }),
    );
    append_rows(catalog, table, Box::pin(reordered)).await
}

/// Creates table `ident` (see [`create_empty`]) and appends `data` (see [`append`]); when the
/// rows fail to write, the new table is dropped again, so a failed statement leaves no table.
///
/// Errors: those of [`create_empty`] and [`append`].
pub async fn create_filled(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    schema: &SchemaRef,
    layout: &TableLayout,
    data: SendableRecordBatchStream,
) -> Result<u64> {
    let table = create_empty(catalog, ident, schema, layout).await?;
    let written = append(catalog, &table, data).await;
    if written.is_err()
        && let Err(drop) = catalog.drop_table(ident).await
    {
        tracing::warn!(table = %ident, error = %drop, "dropping a table whose rows failed to write");
    }
    written
}

/// For each column of `table`, the index of the column of `input` with its name.
///
/// Errors: a name on one side only (a plan error listing them).
fn column_order(ident: &TableIdent, input: &SchemaRef, table: &SchemaRef) -> Result<Vec<usize>> {
    let missing: Vec<&str> = table
        .fields()
        .iter()
        .filter(|f| input.index_of(f.name()).is_err())
        .map(|f| f.name().as_str())
        .collect();
    let extra: Vec<&str> = input
        .fields()
        .iter()
        .filter(|f| table.index_of(f.name()).is_err())
        .map(|f| f.name().as_str())
        .collect();
    if !missing.is_empty() || !extra.is_empty() {
        return plan_err!(
            "the rows do not match the columns of table {ident}: missing [{}], not in the table [{}]",
            missing.join(", "),
            extra.join(", ")
        );
    }
    Ok(table
        .fields()
        .iter()
        .map(|f| input.index_of(f.name()).expect("checked above"))
        .collect())
}

/// `schema` with every type Iceberg stores (module docs).
///
/// Errors: a column whose type has no Iceberg counterpart.
pub(crate) fn iceberg_columns(schema: &SchemaRef) -> Result<Schema> {
    let fields = schema
        .fields()
        .iter()
        .map(|f| {
            let data_type = storable(f.data_type()).ok_or_else(|| {
                plan_datafusion_err!(
                    "column {} of type {} has no Iceberg type",
                    f.name(),
                    f.data_type()
                )
            })?;
            Ok(Field::new(f.name(), data_type, f.is_nullable()))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Schema::new(fields))
}

fn storable(data_type: &DataType) -> Option<DataType> {
    Some(match data_type {
        DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
        DataType::BinaryView | DataType::LargeBinary => DataType::Binary,
        DataType::Dictionary(_, value) => return storable(value),
        DataType::Int8 | DataType::Int16 | DataType::UInt8 | DataType::UInt16 => DataType::Int32,
        DataType::UInt32 => DataType::Int64,
        DataType::Float16 => DataType::Float32,
        DataType::Boolean
        | DataType::Int32
        | DataType::Int64
        | DataType::Float32
        | DataType::Float64
        | DataType::Utf8
        | DataType::Binary
        | DataType::Date32
        | DataType::Decimal128(_, _)
        | DataType::FixedSizeBinary(_) => data_type.clone(),
        // Iceberg's `time` is microseconds (DataFusion's TIME is nanoseconds).
        DataType::Time32(_) | DataType::Time64(_) => {
            DataType::Time64(arrow::datatypes::TimeUnit::Microsecond)
        }
        DataType::Timestamp(_, zone) => {
            DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, zone.clone())
        }
        _ => return None,
    })
}

/// Trino's table properties for partitioning and sorting, as `CREATE TABLE … WITH
/// (partitioning = ARRAY['p', 'day(ts)', 'bucket(id, 16)'], sorted_by = ARRAY['id DESC'])`
/// takes them (Trino's Iceberg connector documents the forms).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd)]
pub struct TableLayout {
    /// Partition fields: `col` (identity), `year(col)`, `month(col)`, `day(col)`, `hour(col)`,
    /// `bucket(col, n)`, `truncate(col, width)`, `void(col)`.
    pub partitioning: Vec<String>,
    /// Sort fields: `col [ASC|DESC] [NULLS FIRST|NULLS LAST]` (ascending, nulls first by
    /// default, as Iceberg's).
    pub sorted_by: Vec<String>,
    /// The table format version asked for (`format_version = 3`); `None`: 2.
    pub format_version: Option<u8>,
    /// Columns written `TIMESTAMP(9)`: Iceberg `timestamp_ns` / `timestamptz_ns` on a format
    /// version 3 table (other timestamps are microseconds).
    pub nanosecond_columns: Vec<String>,
    /// Iceberg table properties given by their own names (`'write.delete.mode' =
    /// 'merge-on-read'`, as DuckDB and Spark take them), sorted by key.
    pub properties: Vec<(String, String)>,
}

impl TableLayout {
    /// The unbound partition spec over `schema`; `None` when unpartitioned. Field names follow
    /// Iceberg's defaults (`ts_day`, `id_bucket`, `s_trunc`).
    ///
    /// Errors: an entry that does not parse or names no column of `schema`.
    pub fn partition_spec(
        &self,
        schema: &iceberg::spec::Schema,
    ) -> Result<Option<iceberg::spec::UnboundPartitionSpec>> {
        use iceberg::spec::{Transform, UnboundPartitionSpec};
        if self.partitioning.is_empty() {
            return Ok(None);
        }
        let mut builder = UnboundPartitionSpec::builder();
        for entry in &self.partitioning {
            let (function, args) = call(entry);
            let (column, transform, suffix) = match (function.as_deref(), args.as_slice()) {
                (None, [column]) => (column.as_str(), Transform::Identity, None),
                (Some(f @ ("year" | "month" | "day" | "hour")), [column]) => {
                    let t = f.parse::<Transform>().map_err(|e| plan_error(entry, &e))?;
                    (column.as_str(), t, Some(f.to_string()))
                }
                (Some("void"), [column]) => (column.as_str(), Transform::Void, Some("null".into())),
                (Some("bucket"), [column, n]) => {
                    let n = positive(entry, n)?;
                    (column.as_str(), Transform::Bucket(n), Some("bucket".into()))
                }
                (Some("truncate"), [column, width]) => {
                    let width = positive(entry, width)?;
                    (
                        column.as_str(),
                        Transform::Truncate(width),
                        Some("trunc".into()),
                    )
                }
                _ => return Err(bad(entry)),
            };
            let field = schema.field_by_name(column).ok_or_else(|| {
                plan_datafusion_err!("partitioning '{entry}': no column {column}")
            })?;
            let name = match suffix {
                None => column.to_string(),
                Some(suffix) => format!("{column}_{suffix}"),
            };
            builder = builder
                .add_partition_field(field.id, name, transform)
                .map_err(|e| plan_error(entry, &e))?;
        }
        Ok(Some(builder.build()))
    }

    /// The sort order over `schema`; `None` when unsorted.
    ///
    /// Errors: an entry that does not parse or names no column of `schema`.
    pub fn sort_order(
        &self,
        schema: &iceberg::spec::Schema,
    ) -> Result<Option<iceberg::spec::SortOrder>> {
        use iceberg::spec::{SortField, SortOrder, Transform};
        if self.sorted_by.is_empty() {
            return Ok(None);
        }
        let mut fields = vec![];
        for (entry, (column, direction, null_order)) in self.sorted_by.iter().zip(self.sort_keys()?)
        {
            let field = schema
                .field_by_name(&column)
                .ok_or_else(|| plan_datafusion_err!("sorted_by '{entry}': no column {column}"))?;
            fields.push(SortField {
                source_id: field.id,
                transform: Transform::Identity,
                direction,
                null_order,
            });
        }
        SortOrder::builder()
            .with_order_id(1)
            .with_fields(fields)
            .build(schema)
            .map(Some)
            .map_err(|e| plan_datafusion_err!("sorted_by: {}", e.message()))
    }
}

impl TableLayout {
    /// The `sorted_by` entries parsed: column, direction, null order (module docs of
    /// [`TableLayout`]).
    ///
    /// Errors: an entry that does not parse.
    fn sort_keys(
        &self,
    ) -> Result<
        Vec<(
            String,
            iceberg::spec::SortDirection,
            iceberg::spec::NullOrder,
        )>,
    > {
        use iceberg::spec::{NullOrder, SortDirection};
        self.sorted_by
            .iter()
            .map(|entry| {
                let words: Vec<String> = entry.split_whitespace().map(str::to_lowercase).collect();
                let (column, rest) = match entry.split_whitespace().next() {
                    Some(column) => (column.to_string(), &words[1..]),
                    None => return Err(bad(entry)),
                };
                let (direction, rest) = match rest.first().map(String::as_str) {
                    Some("desc") => (SortDirection::Descending, &rest[1..]),
                    Some("asc") => (SortDirection::Ascending, &rest[1..]),
                    _ => (SortDirection::Ascending, rest),
                };
                let null_order = match rest.iter().map(String::as_str).collect::<Vec<_>>()[..] {
                    [] => NullOrder::First,
                    ["nulls", "first"] => NullOrder::First,
                    ["nulls", "last"] => NullOrder::Last,
                    _ => return Err(bad(entry)),
                };
                Ok((column, direction, null_order))
            })
            .collect()
    }

    /// The sort order as DataFusion sort expressions over the table's columns (empty when
    /// unsorted).
    ///
    /// Errors: an entry that does not parse.
    pub fn sort_exprs(&self) -> Result<Vec<datafusion::logical_expr::SortExpr>> {
        Ok(self
            .sort_keys()?
            .into_iter()
            .map(|(column, direction, null_order)| {
                datafusion::prelude::col(format!("\"{column}\"")).sort(
                    direction == iceberg::spec::SortDirection::Ascending,
                    null_order == iceberg::spec::NullOrder::First,
                )
            })
            .collect())
    }
}

/// `f(a, b)` as (`Some("f")`, `[a, b]`); a bare `a` as (`None`, `[a]`). Lowercased function.
fn call(entry: &str) -> (Option<String>, Vec<String>) {
    let entry = entry.trim();
    match (entry.find('('), entry.strip_suffix(')')) {
        (Some(open), Some(inner)) => (
            Some(entry[..open].trim().to_lowercase()),
            inner[open + 1..]
                .split(',')
                .map(|a| a.trim().to_string())
                .collect(),
        ),
        _ => (None, vec![entry.to_string()]),
    }
}

/// A bucket count or truncation width: 1 to `i32::MAX` (0 would divide by zero when rows are
/// written, a larger one overflow Iceberg's 32-bit partition values).
fn positive(entry: &str, text: &str) -> Result<u32> {
    match text.parse::<u32>() {
        Ok(n) if n >= 1 && n <= i32::MAX as u32 => Ok(n),
        _ => plan_err!("'{entry}': {text} is not a count from 1 to {}", i32::MAX),
    }
}

fn bad(entry: &str) -> DataFusionError {
    plan_datafusion_err!(
        "'{entry}' is not a partition or sort entry iceflight reads (col, year(col), month(col), \
         day(col), hour(col), bucket(col, n), truncate(col, width), void(col); col [ASC|DESC] \
         [NULLS FIRST|LAST])"
    )
}

fn plan_error(entry: &str, e: &iceberg::Error) -> DataFusionError {
    plan_datafusion_err!("'{entry}': {}", e.message())
}

/// `CREATE TABLE … WITH (partitioning = …, sorted_by = …) [AS SELECT …]`, which DataFusion 54
/// does not plan (it takes no table options): a carrier node made by the SQL front end
/// (`server/src/session.rs`, `plan_statement`) and run by [`create_table_with`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub struct CreateTableWith {
    /// The configured catalog's name.
    pub catalog: String,
    /// The namespace, dotted.
    pub namespace: String,
    /// The new table's name.
    pub table: String,
    /// `IF NOT EXISTS`: an existing table is no error (and receives no rows).
    pub if_not_exists: bool,
    /// Columns: name, Arrow type, nullable.
    pub columns: Vec<(String, DataType, bool)>,
    /// Partitioning and sort order.
    pub layout: TableLayout,
    /// `AS SELECT …`: its plan, whose rows fill the table sorted by the sort order.
    pub query: Option<datafusion::logical_expr::LogicalPlan>,
}

impl CreateTableWith {
    /// The node as a logical plan.
    pub fn into_plan(self) -> datafusion::logical_expr::LogicalPlan {
        datafusion::logical_expr::LogicalPlan::Extension(datafusion::logical_expr::Extension {
            node: Arc::new(self),
        })
    }

    /// The node inside `plan`, when `plan` is one.
    pub fn of(plan: &datafusion::logical_expr::LogicalPlan) -> Option<&CreateTableWith> {
        match plan {
            datafusion::logical_expr::LogicalPlan::Extension(e) => e.node.as_any().downcast_ref(),
            _ => None,
        }
    }
}

static NO_COLUMNS: std::sync::LazyLock<datafusion::common::DFSchemaRef> =
    std::sync::LazyLock::new(|| Arc::new(datafusion::common::DFSchema::empty()));

impl datafusion::logical_expr::UserDefinedLogicalNodeCore for CreateTableWith {
    fn name(&self) -> &str {
        "CreateTableWith"
    }

    fn inputs(&self) -> Vec<&datafusion::logical_expr::LogicalPlan> {
        self.query.iter().collect()
    }

    fn schema(&self) -> &datafusion::common::DFSchemaRef {
        &NO_COLUMNS
    }

    fn expressions(&self) -> Vec<datafusion::logical_expr::Expr> {
        vec![]
    }

    fn fmt_for_explain(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "CreateTableWith: {}.{}.{} {:?}",
            self.catalog, self.namespace, self.table, self.layout
        )
    }

    fn with_exprs_and_inputs(
        &self,
        _exprs: Vec<datafusion::logical_expr::Expr>,
        inputs: Vec<datafusion::logical_expr::LogicalPlan>,
    ) -> Result<Self> {
        Ok(Self {
            query: inputs.into_iter().next(),
            ..self.clone()
        })
    }
}

/// Runs `node` (see [`CreateTableWith`]) in `ctx` against `catalog`: creates the table, then
/// appends the query's rows, sorted by the table's sort order, in one snapshot; a failed write
/// drops the new table again. Returns the rows written by `… AS SELECT` (`None` without a
/// query; `Some(0)` when `IF NOT EXISTS` found the table).
///
/// Errors: the table exists (unless `IF NOT EXISTS`); see [`create_empty`] and [`append`].
pub async fn create_table_with(
    ctx: &datafusion::prelude::SessionContext,
    catalog: &dyn Catalog,
    node: &CreateTableWith,
) -> Result<Option<u64>> {
    let namespace =
        iceberg::NamespaceIdent::from_strs(node.namespace.split('.')).map_err(to_df_error)?;
    let ident = TableIdent::new(namespace, node.table.clone());
    if catalog.table_exists(&ident).await.map_err(to_df_error)? {
        if node.if_not_exists {
            return Ok(node.query.as_ref().map(|_| 0));
        }
        return plan_err!("table {ident} already exists");
    }
    let schema = Arc::new(Schema::new(
        node.columns
            .iter()
            .map(|(name, data_type, nullable)| Field::new(name, data_type.clone(), *nullable))
            .collect::<Vec<_>>(),
    ));
    let Some(query) = &node.query else {
        create_empty(catalog, &ident, &schema, &node.layout).await?;
        return Ok(None);
    };
    let mut df = ctx.execute_logical_plan(query.clone()).await?;
    let sort = node.layout.sort_exprs()?;
    if !sort.is_empty() {
        df = df.sort(sort)?;
    }
    let rows = df.execute_stream().await?;
    let written = create_filled(catalog, &ident, &schema, &node.layout, rows).await?;
    Ok(Some(written))
}
