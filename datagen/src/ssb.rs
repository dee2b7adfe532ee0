//! Star Schema Benchmark tables derived from TPC-H, following the SSB specification (P. O'Neil,
//! E. O'Neil, X. Chen, "Star Schema Benchmark", revision 3, 2009, §2: LINEORDER is LINEITEM
//! joined to ORDERS and PARTSUPP; PART, SUPPLIER and CUSTOMER lose their TPC-H foreign keys and
//! gain denormalised city / nation / region and manufacturer / category / brand columns; DATE is
//! a new dimension over 1992-01-01 .. 1998-12-31).
//!
//! ```text
//!   tpchgen (in memory, all 8 tables) ──► DataFusion SQL per SSB table ──► Arrow batches
//!   Rust calendar ─────────────────────────────────────────────────────► dwdate
//! ```
//!
//! Deviations from the specification, all deterministic:
//! - cardinalities stay TPC-H's (customer 150 000 × SF instead of 30 000 × SF, supplier
//!   10 000 × SF, part 200 000 × SF); LINEORDER has LINEITEM's rows (≈ 6 M × SF, as in SSB);
//! - the date table is `dwdate` (`date` is a reserved word in every engine under test);
//! - money columns are whole cents in `BIGINT` (`lo_extendedprice = l_extendedprice × 100`), so
//!   every engine sums them exactly; `lo_revenue = lo_extendedprice × (100 − lo_discount) / 100`
//!   in integer arithmetic (spec §2.2);
//! - the city digit is `key % 10` and the brand number `p_partkey % 40 + 1` (the spec draws
//!   them at random);
//! - `d_holidayfl` marks only Jan 1, Jul 4 and Dec 25.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use chrono::{Datelike, NaiveDate, Weekday};
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};
use iceberg::spec::{PrimitiveType, Schema};

use crate::tpch;

/// The five SSB tables, in load order (small first).
pub const TABLES: [&str; 5] = ["dwdate", "supplier", "customer", "part", "lineorder"];

#[derive(Clone, Copy)]
enum Col {
    Key,
    Int,
    Text,
}

fn columns(table: &str) -> Option<&'static [(&'static str, Col)]> {
    use Col::*;
    Some(match table {
        "dwdate" => &[
            ("d_datekey", Int),
            ("d_date", Text),
            ("d_dayofweek", Text),
            ("d_month", Text),
            ("d_year", Int),
            ("d_yearmonthnum", Int),
            ("d_yearmonth", Text),
            ("d_daynuminweek", Int),
            ("d_daynuminmonth", Int),
            ("d_daynuminyear", Int),
            ("d_monthnuminyear", Int),
            ("d_weeknuminyear", Int),
            ("d_sellingseason", Text),
            ("d_lastdayinweekfl", Int),
            ("d_lastdayinmonthfl", Int),
            ("d_holidayfl", Int),
            ("d_weekdayfl", Int),
        ],
        "supplier" => &[
            ("s_suppkey", Key),
            ("s_name", Text),
            ("s_address", Text),
            ("s_city", Text),
            ("s_nation", Text),
            ("s_region", Text),
            ("s_phone", Text),
        ],
        "customer" => &[
            ("c_custkey", Key),
            ("c_name", Text),
            ("c_address", Text),
            ("c_city", Text),
            ("c_nation", Text),
            ("c_region", Text),
            ("c_phone", Text),
            ("c_mktsegment", Text),
        ],
        "part" => &[
            ("p_partkey", Key),
            ("p_name", Text),
            ("p_mfgr", Text),
            ("p_category", Text),
            ("p_brand1", Text),
            ("p_color", Text),
            ("p_type", Text),
            ("p_size", Int),
            ("p_container", Text),
        ],
        "lineorder" => &[
            ("lo_orderkey", Key),
            ("lo_linenumber", Int),
            ("lo_custkey", Key),
            ("lo_partkey", Key),
            ("lo_suppkey", Key),
            ("lo_orderdate", Int),
            ("lo_orderpriority", Text),
            ("lo_shippriority", Int),
            ("lo_quantity", Int),
            ("lo_extendedprice", Key),
            ("lo_ordtotalprice", Key),
            ("lo_discount", Int),
            ("lo_revenue", Key),
            ("lo_supplycost", Key),
            ("lo_tax", Int),
            ("lo_commitdate", Int),
            ("lo_shipmode", Text),
        ],
        _ => return None,
    })
}

/// The iceberg schema of an SSB table (`BIGINT` keys and cents, `INT` dates as `yyyymmdd` and
/// small numbers, `VARCHAR` text; every field required, ids 1.. in column order); `None` for an
/// unknown name.
pub fn schema(table: &str) -> Option<Schema> {
    tpch::required_schema(columns(table)?.iter().map(|(name, col)| {
        let ty = match col {
            Col::Key => PrimitiveType::Long,
            Col::Int => PrimitiveType::Int,
            Col::Text => PrimitiveType::String,
        };
        (*name, ty)
    }))
}

/// `'Manufacturer#m'` → `'MFGR#m'`, `'Brand#mn'` → category `'MFGR#mn'` and brand
/// `'MFGR#mn' || (p_partkey % 40 + 1)`, the colour is `p_name`'s first word (spec §2.4).
const PART: &str = "SELECT p_partkey, p_name,
    concat('MFGR#', substr(p_mfgr, 14)) AS p_mfgr,
    concat('MFGR#', substr(p_brand, 7)) AS p_category,
    concat('MFGR#', substr(p_brand, 7), CAST(p_partkey % 40 + 1 AS VARCHAR)) AS p_brand1,
    split_part(p_name, ' ', 1) AS p_color, p_type, p_size, p_container
  FROM part ORDER BY p_partkey";

/// City = the nation's first 9 characters, space-padded, plus one digit (spec §2.5/§2.6).
fn located(prefix: &str, key: &str, extra: &str) -> String {
    let table = if prefix == "s" {
        "supplier"
    } else {
        "customer"
    };
    format!(
        "SELECT {key}, {p}_name, {p}_address,
            concat(rpad(substr(n_name, 1, 9), 9, ' '), CAST({key} % 10 AS VARCHAR)) AS {p}_city,
            n_name AS {p}_nation, r_name AS {p}_region, {p}_phone{extra}
          FROM {table} JOIN nation ON {p}_nationkey = n_nationkey
            JOIN region ON n_regionkey = r_regionkey
          ORDER BY {key}",
        p = prefix
    )
}

/// LINEITEM ⋈ ORDERS ⋈ PARTSUPP (spec §2.2), dates as `yyyymmdd`, money in cents.
fn lineorder(sorted: bool) -> String {
    let order = if sorted {
        "lo_orderdate, lo_orderkey, lo_linenumber"
    } else {
        "lo_orderkey, lo_linenumber"
    };
    format!(
        "SELECT l_orderkey AS lo_orderkey, l_linenumber AS lo_linenumber,
            o_custkey AS lo_custkey, l_partkey AS lo_partkey, l_suppkey AS lo_suppkey,
            CAST(to_char(o_orderdate, '%Y%m%d') AS INT) AS lo_orderdate,
            o_orderpriority AS lo_orderpriority, o_shippriority AS lo_shippriority,
            CAST(l_quantity AS INT) AS lo_quantity,
            CAST(l_extendedprice * 100 AS BIGINT) AS lo_extendedprice,
            CAST(o_totalprice * 100 AS BIGINT) AS lo_ordtotalprice,
            CAST(l_discount * 100 AS INT) AS lo_discount,
            CAST(l_extendedprice * 100 AS BIGINT) * (100 - CAST(l_discount * 100 AS BIGINT)) / 100
              AS lo_revenue,
            CAST(ps_supplycost * 100 AS BIGINT) AS lo_supplycost,
            CAST(l_tax * 100 AS INT) AS lo_tax,
            CAST(to_char(l_commitdate, '%Y%m%d') AS INT) AS lo_commitdate,
            l_shipmode AS lo_shipmode
          FROM lineitem JOIN orders ON l_orderkey = o_orderkey
            JOIN partsupp ON l_partkey = ps_partkey AND l_suppkey = ps_suppkey
          ORDER BY {order}"
    )
}

/// The DataFusion query producing `table` from the TPC-H tables registered by [`tpch_context`];
/// `None` for `dwdate` (built by [`dwdate`]) and unknown names. `sorted` orders LINEORDER by
/// `lo_orderdate` (the "sorted" layout); otherwise it keeps TPC-H's order-key order, in which
/// order dates are shuffled.
pub fn query(table: &str, sorted: bool) -> Option<String> {
    match table {
        "part" => Some(PART.to_string()),
        "supplier" => Some(located("s", "s_suppkey", "")),
        "customer" => Some(located("c", "c_custkey", ", c_mktsegment")),
        "lineorder" => Some(lineorder(sorted)),
        _ => None,
    }
}

/// A DataFusion session with the eight TPC-H tables at `scale` generated into memory (≈ 1.4 GB
/// of Arrow at SF 1). Errors: generation failures, as text.
pub async fn tpch_context(scale: f64) -> Result<SessionContext, String> {
    let ctx = SessionContext::new_with_config(
        SessionConfig::new()
            .with_target_partitions(std::thread::available_parallelism().map_or(1, |n| n.get())),
    );
    for name in tpch::TABLES {
        let schema: SchemaRef = Arc::new(
            iceberg::arrow::schema_to_arrow_schema(&tpch::schema(name).expect("known table"))
                .map_err(|e| e.to_string())?,
        );
        let (s, n) = (Arc::clone(&schema), name.to_string());
        let batches = tokio::task::spawn_blocking(move || {
            let mut out = vec![];
            tpch::generate(&n, scale, s, 64 * 1024, |b| {
                out.push(b);
                Ok(())
            })
            .map(|()| out)
        })
        .await
        .map_err(|e| e.to_string())??;
        let table = MemTable::try_new(schema, vec![batches]).map_err(|e| e.to_string())?;
        ctx.register_table(name, Arc::new(table))
            .map_err(|e| e.to_string())?;
    }
    Ok(ctx)
}

/// The date dimension, one row per day from 1992-01-01 through 1998-12-31 (2 557 rows), under
/// `schema` (the Arrow form of `schema("dwdate")`). Week numbers count 7-day blocks from
/// January 1 (`(d_daynuminyear − 1) / 7 + 1`); `d_daynuminweek` is 1 on Sunday.
pub fn dwdate(schema: SchemaRef) -> Result<RecordBatch, String> {
    let first = NaiveDate::from_ymd_opt(1992, 1, 1).expect("valid date");
    let last = NaiveDate::from_ymd_opt(1998, 12, 31).expect("valid date");
    let days: Vec<NaiveDate> = first.iter_days().take_while(|d| *d <= last).collect();
    let ints = |f: &dyn Fn(&NaiveDate) -> i32| -> ArrayRef {
        Arc::new(Int32Array::from_iter_values(days.iter().map(f)))
    };
    let texts = |f: &dyn Fn(&NaiveDate) -> String| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(days.iter().map(f)))
    };
    let season = |d: &NaiveDate| match d.month() {
        12 => "Christmas",
        1 | 2 => "Winter",
        3..=5 => "Spring",
        6..=8 => "Summer",
        _ => "Fall",
    };
    let columns = vec![
        ints(&|d| d.year() * 10_000 + d.month() as i32 * 100 + d.day() as i32),
        texts(&|d| d.format("%B %-d, %Y").to_string()),
        texts(&|d| d.format("%A").to_string()),
        texts(&|d| d.format("%B").to_string()),
        ints(&|d| d.year()),
        ints(&|d| d.year() * 100 + d.month() as i32),
        texts(&|d| d.format("%b%Y").to_string()),
        ints(&|d| d.weekday().num_days_from_sunday() as i32 + 1),
        ints(&|d| d.day() as i32),
        ints(&|d| d.ordinal() as i32),
        ints(&|d| d.month() as i32),
        ints(&|d| (d.ordinal() as i32 - 1) / 7 + 1),
        texts(&|d| season(d).to_string()),
        ints(&|d| i32::from(d.weekday() == Weekday::Sat)),
        ints(&|d| i32::from(d.succ_opt().is_none_or(|n| n.month() != d.month()))),
        ints(&|d| i32::from(matches!((d.month(), d.day()), (1, 1) | (7, 4) | (12, 25)))),
        ints(&|d| i32::from(!matches!(d.weekday(), Weekday::Sat | Weekday::Sun))),
    ];
    RecordBatch::try_new(schema, columns).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::Int64Type;

    fn arrow_schema(table: &str) -> SchemaRef {
        Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema(table).unwrap()).unwrap())
    }

    #[test]
    fn dwdate_covers_seven_years_with_consistent_fields() {
        let b = dwdate(arrow_schema("dwdate")).unwrap();
        assert_eq!(b.num_rows(), 2557);
        let key = b.column(0).as_primitive::<arrow::datatypes::Int32Type>();
        assert_eq!((key.value(0), key.value(2556)), (19920101, 19981231));
        let text = |c: usize, i: usize| b.column(c).as_string::<i32>().value(i).to_string();
        // 1992-01-01 was a Wednesday; 1994-02-07 is in week 6 of 1994 (Q1.3's filter).
        assert_eq!(text(1, 0), "January 1, 1992");
        assert_eq!(text(2, 0), "Wednesday");
        assert_eq!(text(6, 2556), "Dec1998");
        let i = (0..b.num_rows())
            .find(|&i| key.value(i) == 19940207)
            .unwrap();
        let int = |c: usize| {
            b.column(c)
                .as_primitive::<arrow::datatypes::Int32Type>()
                .value(i)
        };
        assert_eq!((int(4), int(5), int(11)), (1994, 199402, 6));
        // Feb 1992 is a leap month: its last day flag is on the 29th.
        let j = (0..b.num_rows())
            .find(|&i| key.value(i) == 19920229)
            .unwrap();
        assert_eq!(
            b.column(14)
                .as_primitive::<arrow::datatypes::Int32Type>()
                .value(j),
            1
        );
    }

    #[tokio::test]
    async fn lineorder_follows_the_spec_rules() {
        let ctx = tpch_context(0.01).await.unwrap();
        let lineitem = ctx
            .sql("SELECT count(*) FROM lineitem")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let batches = ctx
            .sql(&query("lineorder", true).unwrap())
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(
            rows as i64,
            lineitem[0].column(0).as_primitive::<Int64Type>().value(0)
        );
        let mut last_date = 0;
        for b in &batches {
            let col = |n: &str| b.column(b.schema().index_of(n).unwrap()).clone();
            let date = col("lo_orderdate");
            let date = date.as_primitive::<arrow::datatypes::Int32Type>();
            let price = col("lo_extendedprice");
            let price = price.as_any().downcast_ref::<Int64Array>().unwrap();
            let disc = col("lo_discount");
            let disc = disc.as_primitive::<arrow::datatypes::Int32Type>();
            let revenue = col("lo_revenue");
            let revenue = revenue.as_any().downcast_ref::<Int64Array>().unwrap();
            for i in 0..b.num_rows() {
                assert!(date.value(i) >= last_date, "sorted layout orders by date");
                last_date = date.value(i);
                assert!((19920101..=19981231).contains(&last_date));
                assert!((0..=10).contains(&disc.value(i)));
                assert_eq!(
                    revenue.value(i),
                    price.value(i) * (100 - disc.value(i) as i64) / 100
                );
            }
        }
    }

    #[tokio::test]
    async fn dimensions_carry_ssb_codes() {
        let ctx = tpch_context(0.01).await.unwrap();
        let part = ctx
            .sql(&format!(
                "SELECT count(*) FILTER (WHERE p_mfgr NOT SIMILAR TO 'MFGR#[1-5]'
                   OR p_category NOT SIMILAR TO 'MFGR#[1-5][1-5]'
                   OR p_brand1 NOT LIKE p_category || '%'
                   OR CAST(substr(p_brand1, 8) AS INT) NOT BETWEEN 1 AND 40), count(*)
                 FROM ({})",
                query("part", false).unwrap()
            ))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let bad = part[0].column(0).as_primitive::<Int64Type>().value(0);
        assert_eq!(bad, 0);
        assert_eq!(part[0].column(1).as_primitive::<Int64Type>().value(0), 2000);
        let cities = ctx
            .sql(&format!(
                "SELECT DISTINCT c_city FROM ({}) WHERE c_nation = 'UNITED KINGDOM' ORDER BY 1",
                query("customer", false).unwrap()
            ))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let cities: Vec<String> = cities
            .iter()
            .flat_map(|b| {
                let c =
                    arrow::compute::cast(b.column(0), &arrow::datatypes::DataType::Utf8).unwrap();
                let c = c.as_string::<i32>();
                (0..b.num_rows())
                    .map(|i| c.value(i).to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(cities.len(), 10);
        assert_eq!(cities[1], "UNITED KI1");
    }
}
