//! Every `GetSqlInfo` value iceflight advertises, by Flight SQL id (`FlightSql.proto`, enum
//! `SqlInfo`). JDBC's `DatabaseMetaData` reads most of them and fails on a missing id, so all ids
//! 0–9 and 500–576 that describe a SQL engine are present with the spec's value type.

use std::collections::HashMap;
use std::sync::LazyLock;

use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};

/// Server version reported as id 1.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The advertised values, built once.
pub static SQL_INFO: LazyLock<SqlInfoData> = LazyLock::new(|| build().expect("valid SqlInfo data"));

fn build() -> Result<SqlInfoData, arrow_flight::error::FlightError> {
    let mut b = SqlInfoDataBuilder::new();
    // Server (0..)
    b.append(0u32, "iceflight"); // FLIGHT_SQL_SERVER_NAME
    b.append(1u32, VERSION); // FLIGHT_SQL_SERVER_VERSION
    b.append(2u32, "58"); // FLIGHT_SQL_SERVER_ARROW_VERSION
    b.append(3u32, false); // FLIGHT_SQL_SERVER_READ_ONLY: INSERT, CREATE TABLE [AS], DROP TABLE
    b.append(4u32, true); // FLIGHT_SQL_SERVER_SQL
    b.append(5u32, false); // FLIGHT_SQL_SERVER_SUBSTRAIT
    b.append(8u32, 0i32); // FLIGHT_SQL_SERVER_TRANSACTION: none
    b.append(9u32, true); // FLIGHT_SQL_SERVER_CANCEL
    b.append(10u32, true); // FLIGHT_SQL_SERVER_BULK_INGESTION (ingest.rs)
    b.append(11u32, false); // FLIGHT_SQL_SERVER_INGEST_TRANSACTIONS_SUPPORTED
    b.append(100u32, 0i32); // FLIGHT_SQL_SERVER_STATEMENT_TIMEOUT: none
    b.append(101u32, 0i32); // FLIGHT_SQL_SERVER_TRANSACTION_TIMEOUT: none
    // SQL (500..)
    b.append(500u32, false); // SQL_DDL_CATALOG
    b.append(501u32, true); // SQL_DDL_SCHEMA (CREATE SCHEMA)
    b.append(502u32, true); // SQL_DDL_TABLE (CREATE TABLE [AS], DROP TABLE)
    b.append(503u32, 3i32); // SQL_IDENTIFIER_CASE: lowercase
    b.append(504u32, "\""); // SQL_IDENTIFIER_QUOTE_CHAR
    b.append(505u32, 0i32); // SQL_QUOTED_IDENTIFIER_CASE: case sensitive (unknown=0)
    b.append(506u32, true); // SQL_ALL_TABLES_ARE_SELECTABLE
    b.append(507u32, 2i32); // SQL_NULL_ORDERING: nulls sorted at end (DataFusion ASC NULLS LAST)
    b.append(508u32, KEYWORDS); // SQL_KEYWORDS
    b.append(509u32, NUMERIC_FUNCTIONS); // SQL_NUMERIC_FUNCTIONS
    b.append(510u32, STRING_FUNCTIONS); // SQL_STRING_FUNCTIONS
    b.append(511u32, SYSTEM_FUNCTIONS); // SQL_SYSTEM_FUNCTIONS
    b.append(512u32, DATETIME_FUNCTIONS); // SQL_DATETIME_FUNCTIONS
    b.append(513u32, "\\"); // SQL_SEARCH_STRING_ESCAPE
    b.append(514u32, ""); // SQL_EXTRA_NAME_CHARACTERS
    b.append(515u32, true); // SQL_SUPPORTS_COLUMN_ALIASING
    b.append(516u32, true); // SQL_NULL_PLUS_NULL_IS_NULL
    b.append(517u32, HashMap::<i32, Vec<i32>>::new()); // SQL_SUPPORTS_CONVERT: none advertised
    b.append(518u32, true); // SQL_SUPPORTS_TABLE_CORRELATION_NAMES
    b.append(519u32, false); // SQL_SUPPORTS_DIFFERENT_TABLE_CORRELATION_NAMES
    b.append(520u32, true); // SQL_SUPPORTS_EXPRESSIONS_IN_ORDER_BY
    b.append(521u32, true); // SQL_SUPPORTS_ORDER_BY_UNRELATED
    b.append(522u32, 3i32); // SQL_SUPPORTED_GROUP_BY: unrelated | beyond select (bitmask)
    b.append(523u32, true); // SQL_SUPPORTS_LIKE_ESCAPE_CLAUSE
    b.append(524u32, true); // SQL_SUPPORTS_NON_NULLABLE_COLUMNS
    b.append(525u32, 3i32); // SQL_SUPPORTED_GRAMMAR: minimum | core (bitmask)
    b.append(526u32, 3i32); // SQL_ANSI92_SUPPORTED_LEVEL: entry | intermediate (bitmask)
    b.append(527u32, false); // SQL_SUPPORTS_INTEGRITY_ENHANCEMENT_FACILITY
    b.append(528u32, 2i32); // SQL_OUTER_JOINS_SUPPORT_LEVEL: full outer joins
    b.append(529u32, "schema"); // SQL_SCHEMA_TERM
    b.append(530u32, "procedure"); // SQL_PROCEDURE_TERM
    b.append(531u32, "catalog"); // SQL_CATALOG_TERM
    b.append(532u32, true); // SQL_CATALOG_AT_START
    b.append(533u32, 0i32); // SQL_SCHEMAS_SUPPORTED_ACTIONS (bitmask)
    b.append(534u32, 0i32); // SQL_CATALOGS_SUPPORTED_ACTIONS (bitmask)
    b.append(535u32, 0i32); // SQL_SUPPORTED_POSITIONED_COMMANDS (bitmask)
    b.append(536u32, false); // SQL_SELECT_FOR_UPDATE_SUPPORTED
    b.append(537u32, false); // SQL_STORED_PROCEDURES_SUPPORTED
    b.append(538u32, 15i32); // SQL_SUPPORTED_SUBQUERIES: comparisons | EXISTS | IN | quantified
    b.append(539u32, true); // SQL_CORRELATED_SUBQUERIES_SUPPORTED
    b.append(540u32, 3i32); // SQL_SUPPORTED_UNIONS: UNION | UNION ALL
    for id in 541u32..=555 {
        b.append(id, 0i64); // SQL_MAX_*_LENGTH / counts: 0 = no limit known
    }
    b.append(556u32, false); // SQL_MAX_ROW_SIZE_INCLUDES_BLOBS
    for id in 557u32..=561 {
        b.append(id, 0i64); // SQL_MAX_STATEMENT_LENGTH .. SQL_MAX_USERNAME_LENGTH
    }
    b.append(562u32, 0i64); // SQL_DEFAULT_TRANSACTION_ISOLATION: none
    b.append(563u32, false); // SQL_TRANSACTIONS_SUPPORTED
    b.append(564u32, 0i32); // SQL_SUPPORTED_TRANSACTIONS_ISOLATION_LEVELS (bitmask)
    b.append(565u32, false); // SQL_DATA_DEFINITION_CAUSES_TRANSACTION_COMMIT
    b.append(566u32, false); // SQL_DATA_DEFINITIONS_IN_TRANSACTIONS_IGNORED
    b.append(567u32, 1i32); // SQL_SUPPORTED_RESULT_SET_TYPES: forward only (bitmask)
    for id in 568u32..=571 {
        b.append(id, 0i32); // SQL_SUPPORTED_CONCURRENCIES_FOR_RESULT_SET_*
    }
    b.append(572u32, false); // SQL_BATCH_UPDATES_SUPPORTED
    b.append(573u32, false); // SQL_SAVEPOINTS_SUPPORTED
    b.append(574u32, false); // SQL_NAMED_PARAMETERS_SUPPORTED
    b.append(575u32, false); // SQL_LOCATORS_UPDATE_COPY
    b.append(576u32, false); // SQL_STORED_FUNCTIONS_USING_CALL_SYNTAX_SUPPORTED
    b.build()
}

const KEYWORDS: &[&str] = &[
    "ANALYZE", "EXPLAIN", "ILIKE", "LIMIT", "OFFSET", "QUALIFY", "SHOW", "UNNEST",
];
const NUMERIC_FUNCTIONS: &[&str] = &[
    "abs", "acos", "asin", "atan", "atan2", "ceil", "cos", "exp", "floor", "ln", "log", "log10",
    "pi", "power", "random", "round", "signum", "sin", "sqrt", "tan", "trunc",
];
const STRING_FUNCTIONS: &[&str] = &[
    "ascii",
    "btrim",
    "char_length",
    "concat",
    "initcap",
    "left",
    "length",
    "lower",
    "lpad",
    "ltrim",
    "replace",
    "repeat",
    "reverse",
    "right",
    "rpad",
    "rtrim",
    "split_part",
    "starts_with",
    "strpos",
    "substr",
    "substring",
    "translate",
    "trim",
    "upper",
];
const SYSTEM_FUNCTIONS: &[&str] = &["arrow_typeof", "version"];
const DATETIME_FUNCTIONS: &[&str] = &[
    "current_date",
    "current_time",
    "date_bin",
    "date_part",
    "date_trunc",
    "extract",
    "now",
    "to_timestamp",
];
