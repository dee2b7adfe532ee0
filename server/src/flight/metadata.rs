//! Metadata results (`GetCatalogs`, `GetDbSchemas`, `GetTables`, `GetTableTypes`,
//! `GetXdbcTypeInfo`, key commands) built with arrow-flight's builders, whose schemas are the ones
//! clients check field by field (nullability included).

use std::sync::{Arc, LazyLock};

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow_flight::sql::metadata::{XdbcTypeInfo, XdbcTypeInfoData, XdbcTypeInfoDataBuilder};
use arrow_flight::sql::{
    CommandGetCatalogs, CommandGetDbSchemas, CommandGetTableTypes, CommandGetTables, Nullable,
    Searchable, XdbcDataType, XdbcDatetimeSubcode,
};
use datafusion::common::{DataFusionError, Result, TableReference};
use datafusion::datasource::TableType;
use datafusion::prelude::SessionContext;

use super::results::flight_schema;

fn arrow_err(e: arrow_flight::error::FlightError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// The session's catalogs the user may see (`access/`: `system` always), sorted.
fn visible_catalogs(ctx: &SessionContext) -> Vec<String> {
    let access = crate::access::Access::of_context(ctx);
    let mut names = ctx.catalog_names();
    names.retain(|c| {
        c == crate::system::CATALOG || access.as_ref().is_none_or(|a| a.catalog_visible(c))
    });
    names.sort();
    names
}

/// Catalog names the user may see, sorted.
pub fn catalogs(ctx: &SessionContext, query: CommandGetCatalogs) -> Result<RecordBatch> {
    let mut builder = query.into_builder();
    for name in visible_catalogs(ctx) {
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
    for c in visible_catalogs(ctx) {
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
    let state = ctx.state();
    for (catalog, schema) in schema_pairs(ctx, filter.as_deref()) {
        // information_schema is the session's, not the catalog's: its views are listed as
        // SHOW TABLES and information_schema.tables list them.
        let provider = match schema.as_str() {
            "information_schema" => state
                .schema_for_ref(TableReference::full(
                    catalog.as_str(),
                    schema.as_str(),
                    "tables",
                ))
                .ok(),
            _ => ctx.catalog(&catalog).and_then(|c| c.schema(&schema)),
        };
        let Some(provider) = provider else {
            continue;
        };
        let mut names = provider.table_names();
        names.sort();
        for name in names {
            // The type of an Iceberg table is known without loading it; the system catalog's and
            // information_schema's tables are in memory, and some are views (as SHOW TABLES and
            // information_schema.tables say).
            let load = include_schema
                || schema == "information_schema"
                || catalog == crate::system::CATALOG;
            let (kind, table_schema) = if load {
                match provider.table(&name).await {
                    Ok(Some(t)) => (
                        t.table_type(),
                        with_column_metadata(
                            &flight_schema(&t.schema()),
                            &catalog,
                            &schema,
                            &name,
                            !writable(t.as_ref()),
                        ),
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

/// Whether INSERT, DELETE, UPDATE and MERGE can change `table`: an Iceberg table at its current
/// snapshot whose columns iceflight can all write.
fn writable(table: &dyn datafusion::catalog::TableProvider) -> bool {
    table
        .downcast_ref::<iceflight_scan::IcebergTableProvider>()
        .is_some_and(|t| t.is_writable())
}

/// Adds the Flight SQL column metadata keys (`ARROW:FLIGHT:SQL:*`, FlightSql.proto) to every
/// field of a table schema, as `GetTables(include_schema)` clients read them: names, the SQL
/// type name, precision and scale ([`column_size`]; absent for nested types, where the client
/// derives its own), and the boolean keys as FlightSql.proto encodes them, `"1"` or `"0"`
/// (the JDBC driver reads anything else as false). `read_only`: no statement can write the
/// table.
pub fn with_column_metadata(
    schema: &SchemaRef,
    catalog: &str,
    db_schema: &str,
    table: &str,
    read_only: bool,
) -> SchemaRef {
    let flag = |b: bool| if b { "1" } else { "0" }.to_string();
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            let mut m = f.metadata().clone();
            let mut keys = vec![
                ("CATALOG_NAME", catalog.to_string()),
                ("DB_SCHEMA_NAME", db_schema.to_string()),
                ("TABLE_NAME", table.to_string()),
                ("TYPE_NAME", sql_type_name(f.data_type()).to_string()),
                ("IS_AUTO_INCREMENT", flag(false)),
                (
                    "IS_CASE_SENSITIVE",
                    flag(matches!(
                        f.data_type(),
                        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                    )),
                ),
                ("IS_READ_ONLY", flag(read_only)),
                ("IS_SEARCHABLE", flag(true)),
            ];
            if let Some((precision, scale)) = column_size(f.data_type()) {
                keys.push(("PRECISION", precision.to_string()));
                keys.push(("SCALE", scale.to_string()));
            }
            for (k, v) in keys {
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

/// JDBC's `COLUMN_SIZE` and `DECIMAL_DIGITS` of a column of type `t` (`DatabaseMetaData.getColumns`:
/// digits of a number, characters of a date or time value's text, characters of a string, bytes
/// of a binary; unbounded strings and binaries report `i32::MAX`, as `GetXdbcTypeInfo` does).
/// `None` for nested types.
pub fn column_size(t: &DataType) -> Option<(i32, i32)> {
    use arrow::datatypes::TimeUnit;
    let digits = |unit: &TimeUnit| match unit {
        TimeUnit::Second => 0,
        TimeUnit::Millisecond => 3,
        TimeUnit::Microsecond => 6,
        TimeUnit::Nanosecond => 9,
    };
    // `yyyy-mm-dd hh:mm:ss` is 19 characters, `hh:mm:ss` 8; a fraction adds its point; a zone
    // adds `+hh:mm`.
    let fraction = |d: i32| if d > 0 { d + 1 } else { 0 };
    Some(match t {
        DataType::Boolean => (1, 0),
        DataType::Int8 => (3, 0),
        DataType::Int16 => (5, 0),
        DataType::Int32 => (10, 0),
        DataType::Int64 => (19, 0),
        DataType::Float32 => (7, 0),
        DataType::Float64 => (15, 0),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => (i32::from(*p), i32::from(*s)),
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView => (i32::MAX, 0),
        DataType::FixedSizeBinary(n) => (*n, 0),
        DataType::Date32 | DataType::Date64 => (10, 0),
        DataType::Time32(u) | DataType::Time64(u) => (8 + fraction(digits(u)), digits(u)),
        DataType::Timestamp(u, zone) => {
            let zone = if zone.is_some() { 6 } else { 0 };
            (19 + fraction(digits(u)) + zone, digits(u))
        }
        _ => return None,
    })
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

/// SQL types iceflight returns, for `GetXdbcTypeInfo`: every scalar type a result or a table
/// column can have ([`sql_type_name`]), with the sizes [`column_size`] reports for its columns
/// (a timestamp's and a time's at microseconds, Iceberg's unit), sorted by data type as ODBC's
/// `SQLGetTypeInfo` orders them. Nested types (STRUCT, ARRAY, MAP) have no XDBC data type.
pub static XDBC_TYPES: LazyLock<XdbcTypeInfoData> = LazyLock::new(|| {
    use arrow::datatypes::TimeUnit::Microsecond;
    let mut b = XdbcTypeInfoDataBuilder::new();
    let utc = Some(Arc::from("UTC"));
    // (name, XDBC type, Arrow type it stands for, literal prefix, create params)
    type Row<'a> = (
        &'a str,
        XdbcDataType,
        DataType,
        Option<&'a str>,
        Option<&'a str>,
    );
    let types: [Row; 14] = [
        (
            "BOOLEAN",
            XdbcDataType::XdbcBit,
            DataType::Boolean,
            None,
            None,
        ),
        (
            "TINYINT",
            XdbcDataType::XdbcTinyint,
            DataType::Int8,
            None,
            None,
        ),
        (
            "SMALLINT",
            XdbcDataType::XdbcSmallint,
            DataType::Int16,
            None,
            None,
        ),
        (
            "INTEGER",
            XdbcDataType::XdbcInteger,
            DataType::Int32,
            None,
            None,
        ),
        (
            "BIGINT",
            XdbcDataType::XdbcBigint,
            DataType::Int64,
            None,
            None,
        ),
        (
            "REAL",
            XdbcDataType::XdbcReal,
            DataType::Float32,
            None,
            None,
        ),
        (
            "DOUBLE",
            XdbcDataType::XdbcDouble,
            DataType::Float64,
            None,
            None,
        ),
        (
            "DECIMAL",
            XdbcDataType::XdbcDecimal,
            DataType::Decimal128(38, 0),
            None,
            Some("precision,scale"),
        ),
        (
            "VARCHAR",
            XdbcDataType::XdbcVarchar,
            DataType::Utf8,
            Some("'"),
            None,
        ),
        (
            "VARBINARY",
            XdbcDataType::XdbcVarbinary,
            DataType::Binary,
            Some("X'"),
            None,
        ),
        (
            "DATE",
            XdbcDataType::XdbcDate,
            DataType::Date32,
            Some("DATE '"),
            None,
        ),
        (
            "TIME",
            XdbcDataType::XdbcTime,
            DataType::Time64(Microsecond),
            Some("TIME '"),
            None,
        ),
        (
            "TIMESTAMP",
            XdbcDataType::XdbcTimestamp,
            DataType::Timestamp(Microsecond, None),
            Some("TIMESTAMP '"),
            None,
        ),
        (
            "TIMESTAMP WITH TIME ZONE",
            XdbcDataType::XdbcTimestamp,
            DataType::Timestamp(Microsecond, utc),
            Some("TIMESTAMP '"),
            None,
        ),
    ];
    for (name, data_type, arrow_type, prefix, create_params) in types {
        let (size, scale) = column_size(&arrow_type).expect("a scalar type");
        let numeric = arrow_type.is_numeric();
        let datetime = matches!(
            data_type,
            XdbcDataType::XdbcDate | XdbcDataType::XdbcTime | XdbcDataType::XdbcTimestamp
        );
        b.append(XdbcTypeInfo {
            type_name: name.to_string(),
            data_type,
            column_size: Some(size),
            literal_prefix: prefix.map(str::to_string),
            literal_suffix: prefix.map(|_| "'".to_string()),
            create_params: create_params.map(|p| p.split(',').map(str::to_string).collect()),
            nullable: Nullable::NullabilityNullable,
            case_sensitive: name == "VARCHAR",
            searchable: Searchable::Full,
            unsigned_attribute: numeric.then_some(false),
            fixed_prec_scale: name == "DECIMAL",
            auto_increment: numeric.then_some(false),
            local_type_name: Some(name.to_string()),
            minimum_scale: (name == "DECIMAL" || datetime).then_some(0),
            maximum_scale: match name {
                "DECIMAL" => Some(38),
                _ if datetime => Some(scale),
                _ => None,
            },
            // ODBC: SQL_DATETIME (9) with a subcode for date and time types.
            sql_data_type: if datetime {
                XdbcDataType::XdbcDatetime
            } else {
                data_type
            },
            datetime_subcode: match data_type {
                // SQL_CODE_DATE (1): FlightSql.proto's XDBC_SUBCODE_DATE, an alias the Rust enum
                // keeps only as its first name.
                XdbcDataType::XdbcDate => Some(XdbcDatetimeSubcode::XdbcSubcodeYear),
                XdbcDataType::XdbcTime => Some(XdbcDatetimeSubcode::XdbcSubcodeTime),
                XdbcDataType::XdbcTimestamp => Some(XdbcDatetimeSubcode::XdbcSubcodeTimestamp),
                _ => None,
            },
            num_prec_radix: numeric.then_some(10),
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

/// `GetPrimaryKeys`: an Iceberg table's identifier fields (the columns its schema says identify
/// a row; Iceberg's closest thing to a primary key, which no engine enforces), in field id
/// order, as `key_sequence` 1, 2, …; nothing for other tables. An omitted
/// catalog or schema does not narrow the search (FlightSql.proto).
pub async fn primary_keys(
    ctx: &SessionContext,
    query: &arrow_flight::sql::CommandGetPrimaryKeys,
) -> Result<RecordBatch> {
    use arrow::array::{Int32Array, StringArray};
    let mut rows: Vec<(String, String, String, i32)> = vec![];
    for (catalog, schema) in schema_pairs(ctx, query.catalog.as_deref()) {
        if query.db_schema.as_deref().is_some_and(|s| s != schema) {
            continue;
        }
        let Some(provider) = ctx.catalog(&catalog).and_then(|c| c.schema(&schema)) else {
            continue;
        };
        // A table the user may not see has no keys to them, as it is not listed.
        let visible = crate::access::Access::of_context(ctx)
            .is_none_or(|a| a.table_visible(&catalog, &schema, &query.table));
        if !visible || !provider.table_exist(&query.table) {
            continue;
        }
        let Some(table) = provider.table(&query.table).await? else {
            continue;
        };
        let Some(iceberg) = table.downcast_ref::<iceflight_scan::IcebergTableProvider>() else {
            continue;
        };
        let current = iceberg.table().metadata().current_schema();
        let mut ids: Vec<i32> = current.identifier_field_ids().collect();
        ids.sort_unstable();
        for (i, id) in ids.into_iter().enumerate() {
            if let Some(name) = current.name_by_field_id(id) {
                rows.push((
                    catalog.clone(),
                    schema.clone(),
                    name.to_string(),
                    i as i32 + 1,
                ));
            }
        }
    }
    let column = |f: fn(&(String, String, String, i32)) -> &str| {
        Arc::new(StringArray::from_iter_values(rows.iter().map(f))) as _
    };
    RecordBatch::try_new(
        primary_keys_schema(),
        vec![
            column(|r| &r.0),
            column(|r| &r.1),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|_| query.table.as_str()),
            )),
            column(|r| &r.2),
            Arc::new(StringArray::new_null(rows.len())),
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.3))),
        ],
    )
    .map_err(DataFusionError::from)
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
