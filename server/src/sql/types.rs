//! SQL type names as the standard and the clients' dialects mean them, where DataFusion's
//! planner reads them otherwise or not at all (`CREATE TABLE`, `CAST`, `ALTER TABLE … ADD
//! COLUMN`). Every other name is DataFusion's.
//!
//! | SQL | Arrow | why |
//! |---|---|---|
//! | `FLOAT`, `FLOAT(25..=53)` | `Float64` | SQL:2016 §6.1: `FLOAT(p)` has at least p binary digits; PostgreSQL and SQL Server read `FLOAT` as `FLOAT(53)`; SQLAlchemy renders Python's `float` (pandas' `float64`) as `FLOAT` or `FLOAT(53)` |
//! | `FLOAT(1..=24)` | `Float32` | 24 binary digits fit a 32-bit float (pandas' `float32` renders `FLOAT(23)`) |
//! | `FLOAT(p)`, p = 0 or > 53 | error | no binary float has the precision |
//! | `TIMESTAMP [(p)] WITH TIME ZONE`, `TIMESTAMPTZ` | `Timestamp(unit, "+00:00")` | an instant, as Iceberg's `timestamptz` reads; DataFusion drops the zone when the session has none |
//! | `DATETIME [(p)]`, `DATETIME2`, `SMALLDATETIME` | `Timestamp(µs)` | a date and time without a zone (MySQL, SQL Server; SQLAlchemy's `DateTime`) |
//! | `CHARACTER [VARYING]`, `CHAR VARYING`, `NVARCHAR`, `NCHAR`, `CLOB`, `CHARACTER LARGE OBJECT`, `TINYTEXT`…`LONGTEXT`, `LONGVARCHAR`, `LONGNVARCHAR`, `NTEXT`, `NCLOB`, `VARCHAR2`, `NVARCHAR2`, `JSON` | `Utf8View` | character strings, as DataFusion's `VARCHAR` (Iceberg `string`) |
//! | `BINARY [(n)]`, `VARBINARY [(n)]`, `BLOB`, `BYTES`, `TINYBLOB`…`LONGBLOB`, `LONGVARBINARY`, `IMAGE` | `Binary` | byte strings (Iceberg `binary`) |
//!
//! Lengths are accepted and not enforced, as DataFusion does for `VARCHAR(n)`.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use datafusion::common::{Result, plan_err};
use datafusion::logical_expr::planner::TypePlanner;
use datafusion::sql::sqlparser::ast::{DataType as SqlType, ExactNumberInfo, TimezoneInfo};

/// The zone of `TIMESTAMP WITH TIME ZONE` values: UTC, spelled as iceberg's Arrow schemas
/// spell the zone of `timestamptz`.
pub const UTC: &str = "+00:00";

/// The [`TypePlanner`] of the module docs; registered on every session of ours
/// (`session::with_engine_semantics`).
#[derive(Debug, Default)]
pub struct SqlTypes;

impl TypePlanner for SqlTypes {
    fn plan_type_field(&self, sql_type: &SqlType) -> Result<Option<FieldRef>> {
        Ok(arrow_type(sql_type)?.map(|t| Arc::new(Field::new("", t, true))))
    }
}

/// The Arrow type of `sql_type` per the module docs; `None`: DataFusion's own reading.
///
/// Errors: `FLOAT(p)` with a precision no binary float has.
pub fn arrow_type(sql_type: &SqlType) -> Result<Option<DataType>> {
    let string = DataType::Utf8View;
    Ok(Some(match sql_type {
        SqlType::Float(ExactNumberInfo::None) => DataType::Float64,
        SqlType::Float(ExactNumberInfo::Precision(p))
        | SqlType::Float(ExactNumberInfo::PrecisionAndScale(p, _)) => match *p {
            1..=24 => DataType::Float32,
            25..=53 => DataType::Float64,
            _ => {
                return plan_err!(
                    "FLOAT({p}): the precision of FLOAT is 1 to 24 (REAL) or 25 to 53 (DOUBLE) binary digits"
                );
            }
        },
        SqlType::Timestamp(precision, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz) => {
            DataType::Timestamp(unit(*precision, TimeUnit::Nanosecond)?, Some(UTC.into()))
        }
        SqlType::Datetime(precision) => {
            DataType::Timestamp(unit(*precision, TimeUnit::Microsecond)?, None)
        }
        SqlType::Character(_)
        | SqlType::CharacterVarying(_)
        | SqlType::CharVarying(_)
        | SqlType::Nvarchar(_)
        | SqlType::Clob(_)
        | SqlType::CharacterLargeObject(_)
        | SqlType::CharLargeObject(_)
        | SqlType::TinyText
        | SqlType::MediumText
        | SqlType::LongText
        | SqlType::JSON => string,
        SqlType::Binary(_)
        | SqlType::Varbinary(_)
        | SqlType::Blob(_)
        | SqlType::Bytes(_)
        | SqlType::TinyBlob
        | SqlType::MediumBlob
        | SqlType::LongBlob => DataType::Binary,
        SqlType::Custom(name, _) => {
            let name = name.to_string().to_ascii_uppercase();
            match name.as_str() {
                "NCHAR" | "NTEXT" | "NCLOB" | "LONGVARCHAR" | "LONGNVARCHAR" | "VARCHAR2"
                | "NVARCHAR2" => string,
                "LONGVARBINARY" | "IMAGE" => DataType::Binary,
                "DATETIME2" | "SMALLDATETIME" => DataType::Timestamp(TimeUnit::Microsecond, None),
                _ => return Ok(None),
            }
        }
        _ => return Ok(None),
    }))
}

/// The time unit of a fractional-seconds precision (digits after the point); `default` when
/// none is given. Units in between round up (`DATETIME(2)` keeps milliseconds).
///
/// Errors: more than 9 digits.
fn unit(precision: Option<u64>, default: TimeUnit) -> Result<TimeUnit> {
    Ok(match precision {
        None => default,
        Some(0) => TimeUnit::Second,
        Some(1..=3) => TimeUnit::Millisecond,
        Some(4..=6) => TimeUnit::Microsecond,
        Some(7..=9) => TimeUnit::Nanosecond,
        Some(p) => return plan_err!("a time precision of {p} digits: at most 9 are kept"),
    })
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    use super::*;

    fn planned(sql_type: &str) -> Result<Option<DataType>> {
        let mut parser = Parser::new(&GenericDialect {})
            .try_with_sql(sql_type)
            .expect("tokenizes");
        arrow_type(&parser.parse_data_type().expect("parses"))
    }

    #[test]
    fn floats_take_the_precision_they_name() {
        assert_eq!(planned("FLOAT").unwrap(), Some(DataType::Float64));
        assert_eq!(planned("FLOAT(53)").unwrap(), Some(DataType::Float64));
        assert_eq!(planned("FLOAT(25)").unwrap(), Some(DataType::Float64));
        assert_eq!(planned("FLOAT(24)").unwrap(), Some(DataType::Float32));
        assert_eq!(planned("FLOAT(23)").unwrap(), Some(DataType::Float32));
        assert!(planned("FLOAT(54)").is_err());
        assert!(planned("FLOAT(0)").is_err());
        // REAL and DOUBLE are DataFusion's already.
        assert_eq!(planned("REAL").unwrap(), None);
        assert_eq!(planned("DOUBLE").unwrap(), None);
    }

    #[test]
    fn timestamps_keep_their_zone_and_datetime_is_a_local_timestamp() {
        let utc = Some(Arc::from(UTC));
        assert_eq!(
            planned("TIMESTAMP WITH TIME ZONE").unwrap(),
            Some(DataType::Timestamp(TimeUnit::Nanosecond, utc.clone()))
        );
        assert_eq!(
            planned("TIMESTAMP(6) WITH TIME ZONE").unwrap(),
            Some(DataType::Timestamp(TimeUnit::Microsecond, utc))
        );
        assert_eq!(planned("TIMESTAMP").unwrap(), None);
        assert_eq!(
            planned("DATETIME").unwrap(),
            Some(DataType::Timestamp(TimeUnit::Microsecond, None))
        );
        assert_eq!(
            planned("DATETIME(3)").unwrap(),
            Some(DataType::Timestamp(TimeUnit::Millisecond, None))
        );
        assert!(planned("DATETIME(12)").is_err());
    }

    #[test]
    fn character_and_byte_strings_of_other_dialects() {
        for name in [
            "NVARCHAR(20)",
            "CHARACTER VARYING(5)",
            "CLOB",
            "LONGTEXT",
            "JSON",
            "NCHAR(3)",
            "LONGVARCHAR",
        ] {
            assert_eq!(planned(name).unwrap(), Some(DataType::Utf8View), "{name}");
        }
        for name in ["VARBINARY(16)", "BLOB", "BINARY(4)", "LONGVARBINARY"] {
            assert_eq!(planned(name).unwrap(), Some(DataType::Binary), "{name}");
        }
        assert_eq!(planned("UNHEARD_OF").unwrap(), None);
    }
}
