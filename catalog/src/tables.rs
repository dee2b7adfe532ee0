//! `CREATE TABLE [AS SELECT]` into an Iceberg catalog.
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

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::{DataFusionError, Result, plan_err};
use datafusion::datasource::{MemTable, TableType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
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
    let schema = iceberg_columns(&source.schema())?;
    let iceberg_schema = iceberg::arrow::arrow_schema_to_schema_auto_assign_ids(&schema)
        .map_err(|e| DataFusionError::Plan(format!("table {ident}: {}", e.message())))?;
    let creation = TableCreation::builder()
        .name(ident.name().to_string())
        .schema(iceberg_schema)
        .build();
    let table = catalog
        .create_table(ident.namespace(), creation)
        .await
        .map_err(to_df_error)?;
    let mut batches = vec![];
    for partition in &memory.batches {
        batches.extend(partition.read().await.iter().cloned());
    }
    if batches.iter().all(|b| b.num_rows() == 0) {
        return Ok(());
    }
    let written = async {
        let table_schema = Arc::new(
            iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema())
                .map_err(to_df_error)?,
        );
        let stream = RecordBatchStreamAdapter::new(
            source.schema(),
            futures::stream::iter(batches.into_iter().map(Ok)),
        );
        let (files, _) = write_data_files(&table, &table_schema, Box::pin(stream)).await?;
        commit_append(catalog, &table, files).await
    }
    .await;
    if let Err(e) = written {
        if let Err(drop) = catalog.drop_table(ident).await {
            tracing::warn!(table = %ident, error = %drop, "dropping a table whose rows failed to write");
        }
        return Err(e);
    }
    Ok(())
}

/// `schema` with every type Iceberg stores (module docs).
///
/// Errors: a column whose type has no Iceberg counterpart.
fn iceberg_columns(schema: &SchemaRef) -> Result<Schema> {
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
