//! TPC-H data as Arrow batches, generated in process with the `tpchgen` crate (a port of dbgen:
//! the same rows as `dbgen` / `tpchgen-cli` for a scale factor).
//!
//! Column types follow tpchgen-cli's Parquet output: keys `BIGINT`, money and quantities
//! `DECIMAL(15,2)`, dates `DATE`, integers `INT`, text `VARCHAR`. Every field is required
//! (TPC-H has no NULLs). Field ids are 1.. in column order.

use std::fmt::Write;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Date32Builder, Decimal128Builder, Int32Builder, Int64Builder, RecordBatch,
    StringBuilder,
};
use arrow::datatypes::SchemaRef;
use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator,
    PartSuppGenerator, RegionGenerator, SupplierGenerator,
};

/// The eight TPC-H tables, in load order (small first).
pub const TABLES: [&str; 8] = [
    "region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem",
];

#[derive(Clone, Copy)]
enum Col {
    Key,
    Int,
    Money,
    Date,
    Text,
}

fn columns(table: &str) -> Option<&'static [(&'static str, Col)]> {
    use Col::*;
    Some(match table {
        "region" => &[("r_regionkey", Key), ("r_name", Text), ("r_comment", Text)],
        "nation" => &[
            ("n_nationkey", Key),
            ("n_name", Text),
            ("n_regionkey", Key),
            ("n_comment", Text),
        ],
        "supplier" => &[
            ("s_suppkey", Key),
            ("s_name", Text),
            ("s_address", Text),
            ("s_nationkey", Key),
            ("s_phone", Text),
            ("s_acctbal", Money),
            ("s_comment", Text),
        ],
        "customer" => &[
            ("c_custkey", Key),
            ("c_name", Text),
            ("c_address", Text),
            ("c_nationkey", Key),
            ("c_phone", Text),
            ("c_acctbal", Money),
            ("c_mktsegment", Text),
            ("c_comment", Text),
        ],
        "part" => &[
            ("p_partkey", Key),
            ("p_name", Text),
            ("p_mfgr", Text),
            ("p_brand", Text),
            ("p_type", Text),
            ("p_size", Int),
            ("p_container", Text),
            ("p_retailprice", Money),
            ("p_comment", Text),
        ],
        "partsupp" => &[
            ("ps_partkey", Key),
            ("ps_suppkey", Key),
            ("ps_availqty", Int),
            ("ps_supplycost", Money),
            ("ps_comment", Text),
        ],
        "orders" => &[
            ("o_orderkey", Key),
            ("o_custkey", Key),
            ("o_orderstatus", Text),
            ("o_totalprice", Money),
            ("o_orderdate", Date),
            ("o_orderpriority", Text),
            ("o_clerk", Text),
            ("o_shippriority", Int),
            ("o_comment", Text),
        ],
        "lineitem" => &[
            ("l_orderkey", Key),
            ("l_partkey", Key),
            ("l_suppkey", Key),
            ("l_linenumber", Int),
            ("l_quantity", Money),
            ("l_extendedprice", Money),
            ("l_discount", Money),
            ("l_tax", Money),
            ("l_returnflag", Text),
            ("l_linestatus", Text),
            ("l_shipdate", Date),
            ("l_commitdate", Date),
            ("l_receiptdate", Date),
            ("l_shipinstruct", Text),
            ("l_shipmode", Text),
            ("l_comment", Text),
        ],
        _ => return None,
    })
}

/// The iceberg schema of a TPC-H table; `None` for an unknown name.
pub fn schema(table: &str) -> Option<Schema> {
    required_schema(columns(table)?.iter().map(|(name, col)| {
        let ty = match col {
            Col::Key => PrimitiveType::Long,
            Col::Int => PrimitiveType::Int,
            Col::Money => PrimitiveType::Decimal {
                precision: 15,
                scale: 2,
            },
            Col::Date => PrimitiveType::Date,
            Col::Text => PrimitiveType::String,
        };
        (*name, ty)
    }))
}

/// A schema of required primitive columns with field ids 1.. in order (the generated suites
/// have no NULLs); `None` if iceberg refuses it (e.g. a repeated name).
pub(crate) fn required_schema<'a>(
    columns: impl Iterator<Item = (&'a str, PrimitiveType)>,
) -> Option<Schema> {
    let fields = columns.enumerate().map(|(i, (name, ty))| {
        Arc::new(NestedField::required(
            i as i32 + 1,
            name,
            Type::Primitive(ty),
        ))
    });
    Schema::builder().with_fields(fields).build().ok()
}

/// Column builders for one batch, in schema order.
enum Builder {
    Key(Int64Builder),
    Int(Int32Builder),
    Money(Decimal128Builder),
    Date(Date32Builder),
    Text(StringBuilder),
}

/// One cell value handed to [`Batcher::push`].
enum Cell<'a> {
    Key(i64),
    Int(i32),
    /// Hundredths (a `TPCHDecimal`, or a quantity × 100).
    Money(i64),
    /// Days since 1970-01-01.
    Date(i32),
    Text(&'a dyn std::fmt::Display),
}

/// Accumulates rows into batches of `batch_rows` under `schema`.
struct Batcher {
    schema: SchemaRef,
    kinds: Vec<Col>,
    builders: Vec<Builder>,
    rows: usize,
    batch_rows: usize,
}

impl Batcher {
    fn new(schema: SchemaRef, table: &str, batch_rows: usize) -> Self {
        let kinds: Vec<Col> = columns(table)
            .expect("known table")
            .iter()
            .map(|(_, c)| *c)
            .collect();
        let mut b = Self {
            schema,
            kinds,
            builders: vec![],
            rows: 0,
            batch_rows,
        };
        b.reset();
        b
    }

    fn reset(&mut self) {
        self.builders = self
            .kinds
            .iter()
            .map(|k| match k {
                Col::Key => Builder::Key(Int64Builder::with_capacity(self.batch_rows)),
                Col::Int => Builder::Int(Int32Builder::with_capacity(self.batch_rows)),
                Col::Money => Builder::Money(
                    Decimal128Builder::with_capacity(self.batch_rows)
                        .with_precision_and_scale(15, 2)
                        .expect("valid decimal"),
                ),
                Col::Date => Builder::Date(Date32Builder::with_capacity(self.batch_rows)),
                Col::Text => Builder::Text(StringBuilder::with_capacity(
                    self.batch_rows,
                    self.batch_rows * 16,
                )),
            })
            .collect();
        self.rows = 0;
    }

    /// Appends one row; returns a finished batch when `batch_rows` is reached.
    fn push(&mut self, cells: &[Cell<'_>]) -> Option<RecordBatch> {
        for (b, c) in self.builders.iter_mut().zip(cells) {
            match (b, c) {
                (Builder::Key(b), Cell::Key(v)) => b.append_value(*v),
                (Builder::Int(b), Cell::Int(v)) => b.append_value(*v),
                (Builder::Money(b), Cell::Money(v)) => b.append_value(i128::from(*v)),
                (Builder::Date(b), Cell::Date(v)) => b.append_value(*v),
                (Builder::Text(b), Cell::Text(v)) => {
                    write!(b, "{v}").expect("write to string builder");
                    b.append_value("");
                }
                _ => unreachable!("cell kinds follow the table's column list"),
            }
        }
        self.rows += 1;
        (self.rows >= self.batch_rows).then(|| self.finish())
    }

    fn finish(&mut self) -> RecordBatch {
        let columns: Vec<ArrayRef> = self
            .builders
            .iter_mut()
            .map(|b| -> ArrayRef {
                match b {
                    Builder::Key(b) => Arc::new(b.finish()),
                    Builder::Int(b) => Arc::new(b.finish()),
                    Builder::Money(b) => Arc::new(b.finish()),
                    Builder::Date(b) => Arc::new(b.finish()),
                    Builder::Text(b) => Arc::new(b.finish()),
                }
            })
            .collect();
        let batch =
            RecordBatch::try_new(Arc::clone(&self.schema), columns).expect("builders match schema");
        self.reset();
        batch
    }

    fn remainder(mut self) -> Option<RecordBatch> {
        (self.rows > 0).then(|| self.finish())
    }
}

/// Generates `table` at `scale` as batches of at most `batch_rows` rows under `schema` (the Arrow
/// form of [`schema`], carrying field ids), calling `sink` for each.
pub fn generate(
    table: &str,
    scale: f64,
    schema: SchemaRef,
    batch_rows: usize,
    mut sink: impl FnMut(RecordBatch) -> Result<(), String>,
) -> Result<(), String> {
    let mut b = Batcher::new(schema, table, batch_rows);
    let mut emit = |cells: &[Cell<'_>], b: &mut Batcher| match b.push(cells) {
        Some(batch) => sink(batch),
        None => Ok(()),
    };
    use Cell::*;
    match table {
        "region" => {
            for r in RegionGenerator::new(scale, 1, 1).iter() {
                emit(
                    &[Key(r.r_regionkey), Text(&r.r_name), Text(&r.r_comment)],
                    &mut b,
                )?;
            }
        }
        "nation" => {
            for n in NationGenerator::new(scale, 1, 1).iter() {
                emit(
                    &[
                        Key(n.n_nationkey),
                        Text(&n.n_name),
                        Key(n.n_regionkey),
                        Text(&n.n_comment),
                    ],
                    &mut b,
                )?;
            }
        }
        "supplier" => {
            for s in SupplierGenerator::new(scale, 1, 1).iter() {
                emit(
                    &[
                        Key(s.s_suppkey),
                        Text(&s.s_name),
                        Text(&s.s_address),
                        Key(s.s_nationkey),
                        Text(&s.s_phone),
                        Money(s.s_acctbal.0),
                        Text(&s.s_comment),
                    ],
                    &mut b,
                )?;
            }
        }
        "customer" => {
            for c in CustomerGenerator::new(scale, 1, 1).iter() {
                emit(
                    &[
                        Key(c.c_custkey),
                        Text(&c.c_name),
                        Text(&c.c_address),
                        Key(c.c_nationkey),
                        Text(&c.c_phone),
                        Money(c.c_acctbal.0),
                        Text(&c.c_mktsegment),
                        Text(&c.c_comment),
                    ],
                    &mut b,
                )?;
            }
        }
        "part" => {
            for p in PartGenerator::new(scale, 1, 1).iter() {
                emit(
                    &[
                        Key(p.p_partkey),
                        Text(&p.p_name),
                        Text(&p.p_mfgr),
                        Text(&p.p_brand),
                        Text(&p.p_type),
                        Int(p.p_size),
                        Text(&p.p_container),
                        Money(p.p_retailprice.0),
                        Text(&p.p_comment),
                    ],
                    &mut b,
                )?;
            }
        }
        "partsupp" => {
            for ps in PartSuppGenerator::new(scale, 1, 1).iter() {
                emit(
                    &[
                        Key(ps.ps_partkey),
                        Key(ps.ps_suppkey),
                        Int(ps.ps_availqty),
                        Money(ps.ps_supplycost.0),
                        Text(&ps.ps_comment),
                    ],
                    &mut b,
                )?;
            }
        }
        "orders" => {
            for o in OrderGenerator::new(scale, 1, 1).iter() {
                let status = o.o_orderstatus.as_str();
                emit(
                    &[
                        Key(o.o_orderkey),
                        Key(o.o_custkey),
                        Text(&status),
                        Money(o.o_totalprice.0),
                        Date(o.o_orderdate.to_unix_epoch()),
                        Text(&o.o_orderpriority),
                        Text(&o.o_clerk),
                        Int(o.o_shippriority),
                        Text(&o.o_comment),
                    ],
                    &mut b,
                )?;
            }
        }
        "lineitem" => {
            for l in LineItemGenerator::new(scale, 1, 1).iter() {
                emit(
                    &[
                        Key(l.l_orderkey),
                        Key(l.l_partkey),
                        Key(l.l_suppkey),
                        Int(l.l_linenumber),
                        Money(l.l_quantity * 100),
                        Money(l.l_extendedprice.0),
                        Money(l.l_discount.0),
                        Money(l.l_tax.0),
                        Text(&l.l_returnflag),
                        Text(&l.l_linestatus),
                        Date(l.l_shipdate.to_unix_epoch()),
                        Date(l.l_commitdate.to_unix_epoch()),
                        Date(l.l_receiptdate.to_unix_epoch()),
                        Text(&l.l_shipinstruct),
                        Text(&l.l_shipmode),
                        Text(&l.l_comment),
                    ],
                    &mut b,
                )?;
            }
        }
        other => return Err(format!("unknown TPC-H table {other}")),
    }
    if let Some(batch) = b.remainder() {
        sink(batch)?;
    }
    Ok(())
}

/// Exact row count of `table` at `scale` as tpchgen generates it; `None` for lineitem (1 to 7
/// lines per order) and unknown tables.
pub fn row_count(table: &str, scale: f64) -> Option<u64> {
    let n = match table {
        "region" => 5,
        "nation" => 25,
        "supplier" => SupplierGenerator::calculate_row_count(scale, 1, 1),
        "customer" => CustomerGenerator::calculate_row_count(scale, 1, 1),
        "part" => PartGenerator::calculate_row_count(scale, 1, 1),
        // Four suppliers per part (TPC-H 4.2.5; the generator counts parts).
        "partsupp" => 4 * PartSuppGenerator::calculate_row_count(scale, 1, 1),
        "orders" => OrderGenerator::calculate_row_count(scale, 1, 1),
        _ => return None,
    };
    u64::try_from(n).ok()
}

/// Expected row count of `table` at `scale` (lineitem: an estimate, 4 per order), for progress.
pub fn estimated_rows(table: &str, scale: f64) -> u64 {
    let base: f64 = match table {
        "region" => return 5,
        "nation" => return 25,
        "supplier" => 10_000.0,
        "customer" => 150_000.0,
        "part" => 200_000.0,
        "partsupp" => 800_000.0,
        "orders" => 1_500_000.0,
        "lineitem" => 6_000_000.0,
        _ => 0.0,
    };
    (base * scale).max(1.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `row_count` says what `generate` makes, at scales that round differently.
    #[test]
    fn row_counts_are_exact() {
        for scale in [0.001, 0.003, 0.01] {
            for table in TABLES {
                let Some(expected) = row_count(table, scale) else {
                    assert_eq!(table, "lineitem");
                    continue;
                };
                let schema = Arc::new(
                    iceberg::arrow::schema_to_arrow_schema(&schema(table).unwrap()).unwrap(),
                );
                let mut rows = 0u64;
                generate(table, scale, schema, 4096, |b| {
                    rows += b.num_rows() as u64;
                    Ok(())
                })
                .unwrap();
                assert_eq!(rows, expected, "{table} at SF {scale}");
            }
        }
    }
}
