//! Tables created and appended to from Arrow: `CREATE TABLE [AS SELECT]` and Flight SQL bulk
//! ingest (`server/src/flight/ingest.rs`).
//!
//! ```text
//!   CREATE TABLE t AS SELECT … ──► DataFusion: rows collected into a MemTable ──► register_table
//!     ──► create_from: Iceberg schema from the Arrow columns (ids assigned in order)
//!         ──► Catalog::create_table (format v2, unpartitioned)
//!         ──► rows written and appended in one snapshot (iceflight_scan::sink)
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
use datafusion::common::{DataFusionError, Result, plan_err};
use datafusion::datasource::{MemTable, TableType};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;
use iceberg::table::Table;
use iceberg::{Catalog, TableCreation, TableIdent};
use iceflight_scan::sink::{commit_append, write_data_files};

use crate::provider::to_df_error;

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
    let table = create_empty(catalog, ident, &source.schema()).await?;
    let mut batches = vec![];
    for partition in &memory.batches {
        batches.extend(partition.read().await.iter().cloned());
    }
    if batches.iter().all(|b| b.num_rows() == 0) {
        return Ok(());
    }
    let stream = RecordBatchStreamAdapter::new(
        source.schema(),
        futures::stream::iter(batches.into_iter().map(Ok)),
    );
    if let Err(e) = append(catalog, &table, Box::pin(stream)).await {
        if let Err(drop) = catalog.drop_table(ident).await {
            tracing::warn!(table = %ident, error = %drop, "dropping a table whose rows failed to write");
        }
        return Err(e);
    }
    Ok(())
}

/// Creates Iceberg table `ident` (format v2, unpartitioned) with the columns of `schema`
/// (module docs: column types; field ids assigned in column order).
///
/// Errors: a column type Iceberg cannot store; the catalog's (the table exists, the namespace
/// does not).
pub async fn create_empty(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    schema: &SchemaRef,
) -> Result<Table> {
    let schema = iceberg_columns(schema)?;
    let iceberg_schema = iceberg::arrow::arrow_schema_to_schema_auto_assign_ids(&schema)
        .map_err(|e| DataFusionError::Plan(format!("table {ident}: {}", e.message())))?;
    let creation = TableCreation::builder()
        .name(ident.name().to_string())
        .schema(iceberg_schema)
        .build();
    catalog
        .create_table(ident.namespace(), creation)
        .await
        .map_err(to_df_error)
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
    let (files, rows) = write_data_files(table, &table_schema, Box::pin(reordered)).await?;
    if rows > 0 {
        commit_append(catalog, table, files).await?;
    }
    Ok(rows)
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
                DataFusionError::Plan(format!(
                    "column {} of type {} has no Iceberg type",
                    f.name(),
                    f.data_type()
                ))
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
        | DataType::FixedSizeBinary(_)
        | DataType::Time64(_) => data_type.clone(),
        DataType::Timestamp(_, zone) => {
            DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, zone.clone())
        }
        _ => return None,
    })
}
