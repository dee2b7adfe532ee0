//! Metadata results (`GetCatalogs`, `GetDbSchemas`, `GetTables`, `GetTableTypes`,
//! `GetXdbcTypeInfo`, key commands) built with arrow-flight's builders, whose schemas are the ones
//! clients check field by field (nullability included).

use std::sync::{Arc, LazyLock};

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow_flight::sql::metadata::{XdbcTypeInfo, XdbcTypeInfoData, XdbcTypeInfoDataBuilder};
use arrow_flight::sql::{
    CommandGetCatalogs, CommandGetDbSchemas, CommandGetTableTypes, CommandGetTables, Nullable,
    Searchable, XdbcDataType,
};
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::TableType;
use datafusion::prelude::SessionContext;

use super::results::flight_schema;

fn arrow_err(e: arrow_flight::error::FlightError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// Catalog names, sorted.
pub fn catalogs(ctx: &SessionContext, query: CommandGetCatalogs) -> Result<RecordBatch> {
    let mut builder = query.into_builder();
    let mut names = ctx.catalog_names();
    names.sort();
    for name in names {
        builder.append(name);
    }
    builder.build().map_err(arrow_err)
}

/// `(catalog, schema)` pairs; a NULL catalog filter means every catalog.
pub fn db_schemas(ctx: &SessionContext, query: CommandGetDbSchemas) -> Result<RecordBatch> {
    let filter = query.catalog.clone();
    let mut builder = query.into_builder();
    for (catalog, schema) in schema_pairs(ctx, filter.as_deref()) {
        builder.append(catalog, schema);
    }
    builder.build().map_err(arrow_err)
}

fn schema_pairs(ctx: &SessionContext, catalog: Option<&str>) -> Vec<(String, String)> {
    let mut out = vec![];
    let mut names = ctx.catalog_names();
    names.sort();
    for c in names {
        if catalog.is_some_and(|f| f != c) {
            continue;
        }
        let Some(provider) = ctx.catalog(&c) else {
            continue;
        };
        let mut schemas = provider.schema_names();
        if ctx.copied_config().information_schema()
            && !schemas.iter().any(|s| s == "information_schema")
        {
            schemas.push("information_schema".to_string());
        }
        schemas.sort();
        for s in schemas {
            out.push((c.clone(), s));
        }
    }
    out
}

/// How a client names table types. Each ecosystem matches its own spelling: JDBC's
/// `DatabaseMetaData` and FlightSql.proto's examples say `TABLE` and `VIEW`; ADBC's drivers
/// (SQLite, PostgreSQL) say `table` and `view`, and ADBC-based tools match that literally
/// (`sqlalchemy-adbc` lists only tables whose type is `"table"`, so pandas' `read_sql_table`
/// found none). The ADBC Flight SQL driver names itself in its gRPC user agent (`ADBC Flight SQL
/// Driver <version>`); every other client gets Flight SQL's spelling. A table-type filter
/// matches either spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableTypeNames {
    /// `TABLE`, `VIEW`, `LOCAL TEMPORARY` (Flight SQL, JDBC).
    Upper,
    /// `table`, `view`, `local temporary` (ADBC).
    Lower,
}

impl TableTypeNames {
    /// The spelling for a client whose gRPC `user-agent` header is `user_agent`.
    pub fn for_user_agent(user_agent: Option<&str>) -> Self {
        match user_agent {
            Some(agent) if agent.starts_with("ADBC ") => Self::Lower,
            _ => Self::Upper,
        }
    }

    fn name(self, kind: TableType) -> &'static str {
        match (kind, self) {
            (TableType::Base, Self::Upper) => "TABLE",
            (TableType::View, Self::Upper) => "VIEW",
            (TableType::Temporary, Self::Upper) => "LOCAL TEMPORARY",
            (TableType::Base, Self::Lower) => "table",
            (TableType::View, Self::Lower) => "view",
            (TableType::Temporary, Self::Lower) => "local temporary",
        }
    }

    /// A client's table-type filter in this spelling.
    fn spell(self, filter: &str) -> String {
        match self {
            Self::Upper => filter.to_uppercase(),
            Self::Lower => filter.to_lowercase(),
        }
    }
}

/// Tables with their type (named as `spelling` says) and, when asked, their Arrow schema (as
/// clients receive results).
pub async fn tables(
    ctx: &SessionContext,
    mut query: CommandGetTables,
    spelling: TableTypeNames,
) -> Result<RecordBatch> {
    let filter = query.catalog.clone();
    let include_schema = query.include_schema;
    query.table_types = query
        .table_types
        .iter()
        .map(|t| spelling.spell(t))
        .collect();
    let mut builder = query.into_builder();
    for (catalog, schema) in schema_pairs(ctx, filter.as_deref()) {
        let Some(provider) = ctx.catalog(&catalog).and_then(|c| c.schema(&schema)) else {
            continue;
        };
        let mut names = provider.table_names();
        names.sort();
        for name in names {
            let (kind, table_schema) = if include_schema || schema == "information_schema" {
                match provider.table(&name).await {
                    Ok(Some(t)) => (
                        t.table_type(),
                        with_column_metadata(&flight_schema(&t.schema()), &catalog, &schema, &name),
                    ),
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!(table = %name, error = %e, "skipping table in GetTables");
                        continue;
                    }
                }
            } else {
                (TableType::Base, Arc::new(Schema::empty()))
            };
            builder
                .append(&catalog, &schema, &name, spelling.name(kind), &table_schema)
                .map_err(arrow_err)?;
        }
    }
    builder.build().map_err(arrow_err)
}

/// Adds the Flight SQL column metadata keys (`ARROW:FLIGHT:SQL:*`, FlightSql.proto) to every
/// field of a table schema, as `GetTables(include_schema)` clients read them.
pub fn with_column_metadata(
    schema: &SchemaRef,
    catalog: &str,
    db_schema: &str,
    table: &str,
) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            let mut m = f.metadata().clone();
            let (precision, scale) = match f.data_type() {
                DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => {
                    (i32::from(*p), i32::from(*s))
                }
                _ => (0, 0),
            };
            for (k, v) in [
                ("CATALOG_NAME", catalog.to_string()),
                ("DB_SCHEMA_NAME", db_schema.to_string()),
                ("TABLE_NAME", table.to_string()),
                ("TYPE_NAME", sql_type_name(f.data_type()).to_string()),
                ("PRECISION", precision.to_string()),
                ("SCALE", scale.to_string()),
                ("IS_AUTO_INCREMENT", "false".to_string()),
                (
                    "IS_CASE_SENSITIVE",
                    matches!(f.data_type(), DataType::Utf8 | DataType::LargeUtf8).to_string(),
                ),
                ("IS_READ_ONLY", "true".to_string()),
                ("IS_SEARCHABLE", "true".to_string()),
            ] {
                m.insert(format!("ARROW:FLIGHT:SQL:{k}"), v);
            }
            // The keys ADBC's GetObjects fills a column's nullability from (its drivers'
            // `DefaultXdbcMetadataBuilder`): 1 / "YES" nullable, 0 / "NO" not (JDBC's
            // `columnNullable` / `columnNoNulls`). The Flight SQL Go driver 1.13 does not read
            // them (docs/flight-sql.md, "Metadata"); clients of the table schema do.
            let (nullable, is_nullable) = match f.is_nullable() {
                true => ("1", "YES"),
                false => ("0", "NO"),
            };
            m.insert("XDBC_NULLABLE".to_string(), nullable.to_string());
            m.insert("XDBC_IS_NULLABLE".to_string(), is_nullable.to_string());
            f.as_ref().clone().with_metadata(m)
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The SQL name of an Arrow type, as `TYPE_NAME` reports it.
fn sql_type_name(t: &DataType) -> &'static str {
    match t {
        DataType::Boolean => "BOOLEAN",
        DataType::Int8 => "TINYINT",
        DataType::Int16 => "SMALLINT",
        DataType::Int32 => "INTEGER",
        DataType::Int64 => "BIGINT",
        DataType::Float32 => "REAL",
        DataType::Float64 => "DOUBLE",
        DataType::Decimal128(..) | DataType::Decimal256(..) => "DECIMAL",
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "VARCHAR",
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => "VARBINARY",
        DataType::Date32 | DataType::Date64 => "DATE",
        DataType::Time32(_) | DataType::Time64(_) => "TIME",
        DataType::Timestamp(_, None) => "TIMESTAMP",
        DataType::Timestamp(_, Some(_)) => "TIMESTAMP WITH TIME ZONE",
        DataType::Struct(_) => "STRUCT",
        DataType::List(_) | DataType::LargeList(_) => "ARRAY",
        DataType::Map(..) => "MAP",
        _ => "OTHER",
    }
}

/// The table types iceflight has, named as `names` says.
pub fn table_types(query: CommandGetTableTypes, names: TableTypeNames) -> Result<RecordBatch> {
    let mut builder = query.into_builder();
    for t in [TableType::Base, TableType::View] {
        builder.append(names.name(t));
    }
    builder.build().map_err(arrow_err)
}

/// SQL types iceflight returns, for `GetXdbcTypeInfo`.
pub static XDBC_TYPES: LazyLock<XdbcTypeInfoData> = LazyLock::new(|| {
    let mut b = XdbcTypeInfoDataBuilder::new();
    let types: [(&str, XdbcDataType, Option<i32>, Option<&str>); 10] = [
        ("BOOLEAN", XdbcDataType::XdbcBit, Some(1), None),
        ("TINYINT", XdbcDataType::XdbcTinyint, Some(3), None),
        ("SMALLINT", XdbcDataType::XdbcSmallint, Some(5), None),
        ("INTEGER", XdbcDataType::XdbcInteger, Some(10), None),
        ("BIGINT", XdbcDataType::XdbcBigint, Some(19), None),
        ("REAL", XdbcDataType::XdbcReal, Some(7), None),
        ("DOUBLE", XdbcDataType::XdbcDouble, Some(15), None),
        ("DECIMAL", XdbcDataType::XdbcDecimal, Some(38), None),
        (
            "VARCHAR",
            XdbcDataType::XdbcVarchar,
            Some(i32::MAX),
            Some("'"),
        ),
        ("DATE", XdbcDataType::XdbcDate, Some(10), Some("DATE '")),
    ];
    for (name, data_type, size, prefix) in types {
        b.append(XdbcTypeInfo {
            type_name: name.to_string(),
            data_type,
            column_size: size,
            literal_prefix: prefix.map(str::to_string),
            literal_suffix: prefix.map(|_| "'".to_string()),
            create_params: None,
            nullable: Nullable::NullabilityNullable,
            case_sensitive: name == "VARCHAR",
            searchable: Searchable::Full,
            unsigned_attribute: Some(false),
            fixed_prec_scale: name == "DECIMAL",
            auto_increment: Some(false),
            local_type_name: Some(name.to_string()),
            minimum_scale: None,
            maximum_scale: None,
            sql_data_type: data_type,
            datetime_subcode: None,
            num_prec_radix: Some(10),
            interval_precision: None,
        });
    }
    b.build().expect("valid xdbc type info")
});

/// Schema of `GetPrimaryKeys` results (FlightSql.proto).
pub fn primary_keys_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("catalog_name", DataType::Utf8, true),
        Field::new("db_schema_name", DataType::Utf8, true),
        Field::new("table_name", DataType::Utf8, false),
        Field::new("column_name", DataType::Utf8, false),
        Field::new("key_name", DataType::Utf8, true),
        Field::new("key_sequence", DataType::Int32, false),
    ]))
}

/// Schema of `GetExportedKeys`, `GetImportedKeys` and `GetCrossReference` results.
pub fn foreign_keys_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("pk_catalog_name", DataType::Utf8, true),
        Field::new("pk_db_schema_name", DataType::Utf8, true),
        Field::new("pk_table_name", DataType::Utf8, false),
        Field::new("pk_column_name", DataType::Utf8, false),
        Field::new("fk_catalog_name", DataType::Utf8, true),
        Field::new("fk_db_schema_name", DataType::Utf8, true),
        Field::new("fk_table_name", DataType::Utf8, false),
        Field::new("fk_column_name", DataType::Utf8, false),
        Field::new("key_sequence", DataType::Int32, false),
        Field::new("fk_key_name", DataType::Utf8, true),
        Field::new("pk_key_name", DataType::Utf8, true),
        Field::new("update_rule", DataType::UInt8, false),
        Field::new("delete_rule", DataType::UInt8, false),
    ]))
}
