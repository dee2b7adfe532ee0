//! Physical optimizer rule: a partial aggregate grouped by low-cardinality string columns of an
//! Iceberg scan groups by integer codes of their values, read from the Parquet dictionaries.
//!
//! ```text
//!   AggregateExec(Partial, gby=[s, t])          ProjectionExec [value(s) AS s, value(t) AS t, states…]
//!     (ProjectionExec | FilterExec)*       ──►    AggregateExec(Partial, gby=[s, t])      (Int32 codes)
//!                                                   ProjectionExec [code(s) AS s, code(t) AS t, …]
//!       IcebergScanExec (s, t: Utf8)                  (the same nodes, rebuilt)
//!                                                       IcebergScanExec (s, t: Dictionary(Int32, Utf8))
//! ```
//!
//! **Why.** A string column stored dictionary-encoded is decoded by copying every row's string
//! out of the dictionary page (`OffsetBuffer::extend_from_dictionary`), then hashed and compared
//! per row by the aggregate's group values. TPC-H q01 groups 6 M rows by `l_returnflag` and
//! `l_linestatus` (3 and 2 values): about a fifth of its CPU went to those copies, hashes and
//! compares (`bench/reports/issue32-progress-20261204.md`). Read as dictionaries, each batch
//! carries its dictionary's few values and a key per row; [`DictionaryCodeExpr`] gives each
//! distinct value one code for the whole query (one lookup per dictionary value, not per row),
//! the aggregate groups by integers, and [`CodeValueExpr`] turns the codes of its few output
//! rows back into strings, so the final aggregate and everything above see the plan's own types.
//!
//! **When.** Partial aggregates with plain grouping (no grouping sets, no limit, unordered
//! input) whose group keys include `Utf8` columns (those are coded) passed unchanged from a scan without dynamic
//! filters, through projections and filters that read them only to pass them on, and that no aggregate argument or filter reads. The scan's statistics must show a low
//! cardinality: at most [`MAX_STORED_BYTES_PER_VALUE`] stored bytes per value (a column stored
//! in less than a byte or two per row holds dictionary keys of a few bits, not strings).
//! Not on a distributed coordinator (the codec carries neither expression).
//!
//! **Answers.** Codes are a bijection with the values (a shared table, one per column and
//! plan), NULL stays NULL, so the groups are the groups of the strings and every aggregate sees
//! the same rows. The rewritten partial aggregate's output schema is checked equal to the
//! original's; any difference, or a node that refuses the new types, leaves the plan as it was.

use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int32Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Int32Type, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result, internal_datafusion_err, internal_err};
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::InputOrderMode;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};

use crate::exec::scan_exec::IcebergScanExec;
use crate::read::native_reader::string_dictionary;

/// Largest stored size per value (bytes, compressed, from the manifests' column sizes over the
/// scan's rows) of a column the rule codes. TPC-H SF 1 lineitem: `l_returnflag` 0.18,
/// `l_linestatus` 0.11, `l_shipmode` 0.38; `l_comment` 9.9.
pub const MAX_STORED_BYTES_PER_VALUE: f64 = 2.0;

/// Physical optimizer rule (module docs); switched by `iceflight.optimizer.dictionary_group_by`.
#[derive(Debug, Default)]
pub struct DictionaryGroupBy;

impl PhysicalOptimizerRule for DictionaryGroupBy {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !iceflight_options::IceflightOptions::of(config)
            .optimizer
            .dictionary_group_by
        {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            Ok(match rewrite(&node) {
                Ok(Some(new)) => Transformed::yes(new),
                Ok(None) => Transformed::no(node),
                // A node DataFusion refuses to rebuild over the dictionaries: the plan as it was.
                Err(e) => {
                    tracing::debug!(error = %e, "dictionary GROUP BY left out");
                    Transformed::no(node)
                }
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "iceflight_dictionary_group_by"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The rewritten aggregate (module docs), `None` where the rule does not apply.
fn rewrite(node: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(agg) = node.downcast_ref::<AggregateExec>() else {
        return Ok(None);
    };
    let group_by = agg.group_expr();
    if *agg.mode() != AggregateMode::Partial
        || !group_by.is_single()
        || agg.limit_options().is_some()
        || *agg.input_order_mode() != InputOrderMode::Linear
    {
        return Ok(None);
    }
    let input = agg.input();
    let input_schema = input.schema();
    // Coded keys: group keys that are plain Utf8 columns of the aggregate's input (by group
    // position and input column); no other group key, aggregate argument or filter reads them.
    let mut coded_keys: Vec<(usize, usize)> = vec![];
    for (g, (expr, _)) in group_by.expr().iter().enumerate() {
        if let Some(c) = expr.downcast_ref::<Column>()
            && input_schema.field(c.index()).data_type() == &DataType::Utf8
            && coded_keys.iter().all(|&(_, k)| k != c.index())
        {
            coded_keys.push((g, c.index()));
        }
    }
    let keys: Vec<usize> = coded_keys.iter().map(|&(_, k)| k).collect();
    let read_elsewhere = agg
        .aggr_expr()
        .iter()
        .flat_map(|a| {
            let all = a.all_expressions();
            all.args.into_iter().chain(all.order_by_exprs)
        })
        .chain(agg.filter_expr().iter().flatten().cloned())
        .chain(
            group_by
                .expr()
                .iter()
                .enumerate()
                .filter(|(g, _)| coded_keys.iter().all(|(c, _)| c != g))
                .map(|(_, (e, _))| Arc::clone(e)),
        )
        .flat_map(|e| collect_columns(&e))
        .any(|c| keys.contains(&c.index()));
    if keys.is_empty() || read_elsewhere {
        return Ok(None);
    }
    // Down the chain to the scan, following each key's position.
    let mut chain: Vec<Arc<dyn ExecutionPlan>> = vec![];
    let mut at: Vec<usize> = keys.clone();
    let mut plan = Arc::clone(input);
    let scan = loop {
        if let Some(scan) = plan.downcast_ref::<IcebergScanExec>() {
            break scan.clone();
        }
        let Some(below) = positions_below(&plan, &at) else {
            return Ok(None);
        };
        at = below;
        let child = Arc::clone(plan.children()[0]);
        chain.push(plan);
        plan = child;
    };
    if !low_cardinality(&scan, &at)? {
        return Ok(None);
    }
    let Some(scan) = scan.with_dictionary_columns(&at) else {
        return Ok(None);
    };
    // The chain again, bottom-up, over the scan's dictionaries.
    let mut rebuilt: Arc<dyn ExecutionPlan> = Arc::new(scan);
    for node in chain.iter().rev() {
        rebuilt = match node.downcast_ref::<ProjectionExec>() {
            // Its `with_new_children` keeps the output schema it computed before.
            Some(p) => Arc::new(ProjectionExec::try_new(p.expr().to_vec(), rebuilt)?),
            None => Arc::clone(node).with_new_children(vec![rebuilt])?,
        };
    }
    let dictionary = rebuilt.schema();
    if keys
        .iter()
        .any(|&k| dictionary.field(k).data_type() != &string_dictionary())
    {
        return Ok(None);
    }
    let tables: Vec<Arc<CodeTable>> = keys.iter().map(|_| Arc::default()).collect();
    let coded = ProjectionExec::try_new(
        dictionary.fields().iter().enumerate().map(|(i, f)| {
            let column: Arc<dyn PhysicalExpr> = Arc::new(Column::new(f.name(), i));
            let expr: Arc<dyn PhysicalExpr> = match keys.iter().position(|&k| k == i) {
                Some(k) => Arc::new(DictionaryCodeExpr::new(column, Arc::clone(&tables[k]))),
                None => column,
            };
            ProjectionExpr {
                expr,
                alias: f.name().clone(),
            }
        }),
        rebuilt,
    )?;
    let coded: Arc<dyn ExecutionPlan> = Arc::new(coded);
    let grouped = AggregateExec::try_new(
        AggregateMode::Partial,
        group_by.clone(),
        agg.aggr_expr().to_vec(),
        agg.filter_expr().to_vec(),
        Arc::clone(&coded),
        coded.schema(),
    )?;
    let grouped: Arc<dyn ExecutionPlan> = Arc::new(grouped);
    let original = node.schema();
    let values = ProjectionExec::try_new(
        grouped.schema().fields().iter().enumerate().map(|(i, f)| {
            let column: Arc<dyn PhysicalExpr> = Arc::new(Column::new(f.name(), i));
            let table = coded_keys
                .iter()
                .position(|&(g, _)| g == i)
                .map(|k| &tables[k]);
            let expr: Arc<dyn PhysicalExpr> = match table {
                Some(table) => Arc::new(CodeValueExpr::new(
                    column,
                    Arc::clone(table),
                    original.field(i).is_nullable(),
                )),
                None => column,
            };
            ProjectionExpr {
                expr,
                alias: f.name().clone(),
            }
        }),
        grouped,
    )?;
    if values.schema().as_ref() != original.as_ref() {
        return Ok(None);
    }
    Ok(Some(Arc::new(values)))
}

/// The positions in `plan`'s input of its output columns `at`, where `plan` passes them on
/// unchanged and reads them nowhere else; `None` for any other node.
fn positions_below(plan: &Arc<dyn ExecutionPlan>, at: &[usize]) -> Option<Vec<usize>> {
    if let Some(p) = plan.downcast_ref::<ProjectionExec>() {
        let exprs = p.expr();
        let below: Option<Vec<usize>> = at
            .iter()
            .map(|&i| {
                exprs
                    .get(i)?
                    .expr
                    .downcast_ref::<Column>()
                    .map(Column::index)
            })
            .collect();
        let below = below?;
        // Another expression reading the column (a cast, a comparison) needs its type.
        let elsewhere = exprs.iter().enumerate().any(|(i, e)| {
            !at.contains(&i)
                && collect_columns(&e.expr)
                    .iter()
                    .any(|c| below.contains(&c.index()))
        });
        return (!elsewhere).then_some(below);
    }
    if let Some(f) = plan.downcast_ref::<FilterExec>() {
        let below: Vec<usize> = match f.projection() {
            Some(projection) => at
                .iter()
                .map(|&i| projection.get(i).copied())
                .collect::<Option<_>>()?,
            None => at.to_vec(),
        };
        let read = collect_columns(f.predicate())
            .iter()
            .any(|c| below.contains(&c.index()));
        return (!read).then_some(below);
    }
    None
}

/// Whether the scan's statistics show every column at `columns` stored in at most
/// [`MAX_STORED_BYTES_PER_VALUE`] per row.
fn low_cardinality(scan: &IcebergScanExec, columns: &[usize]) -> Result<bool> {
    let stats = scan.partition_statistics(None)?;
    let Some(&rows) = stats.num_rows.get_value() else {
        return Ok(false);
    };
    Ok(rows > 0
        && columns.iter().all(|&c| {
            stats
                .column_statistics
                .get(c)
                .and_then(|s| s.byte_size.get_value().copied())
                .is_some_and(|b| b as f64 <= MAX_STORED_BYTES_PER_VALUE * rows as f64)
        }))
}

/// The codes of one column's values for one plan: code `i` is the `i`-th distinct value met,
/// shared by every partition (a code means the same value in all of them).
#[derive(Debug, Default)]
pub struct CodeTable {
    inner: Mutex<Codes>,
}

#[derive(Debug, Default)]
struct Codes {
    by_value: HashMap<String, i32>,
    values: Vec<String>,
    /// The codes of the last [`REMAPS_KEPT`] dictionaries met (their values array, held so its
    /// address stays its own): the batches of one column chunk share one dictionary, which is
    /// then looked up once, not once per batch.
    remaps: Vec<(ArrayRef, Arc<Vec<Option<i32>>>)>,
}

/// Dictionaries whose codes a [`CodeTable`] keeps: one per partition reading at a time, with
/// room to spare.
const REMAPS_KEPT: usize = 8;

impl Codes {
    fn code(&mut self, value: &str) -> Result<i32> {
        if let Some(&c) = self.by_value.get(value) {
            return Ok(c);
        }
        let c = i32::try_from(self.values.len())
            .map_err(|_| internal_datafusion_err!("more than 2^31 distinct values to code"))?;
        self.values.push(value.to_string());
        self.by_value.insert(value.to_string(), c);
        Ok(c)
    }
}

impl CodeTable {
    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Codes>> {
        self.inner
            .lock()
            .map_err(|_| internal_datafusion_err!("a code table's lock was poisoned"))
    }

    /// `Int32` codes of a `Dictionary(Int32, Utf8)` or `Utf8` array, NULL where it is NULL.
    ///
    /// Errors: any other type; more than 2^31 distinct values.
    pub fn encode(&self, array: &ArrayRef) -> Result<Int32Array> {
        let mut codes = self.lock()?;
        match array.data_type() {
            DataType::Dictionary(_, _) => {
                let Some(dict) = array.as_dictionary_opt::<Int32Type>() else {
                    return internal_err!("code: dictionary keys are not Int32");
                };
                let remap = match codes
                    .remaps
                    .iter()
                    .find(|(v, _)| Arc::ptr_eq(v, dict.values()))
                {
                    Some((_, remap)) => Arc::clone(remap),
                    None => {
                        let values = dict.values().as_string_opt::<i32>().ok_or_else(|| {
                            internal_datafusion_err!("code: dictionary values are not Utf8")
                        })?;
                        // One lookup per dictionary value; a NULL value codes as NULL.
                        let remap: Vec<Option<i32>> = (0..values.len())
                            .map(|i| {
                                (!values.is_null(i))
                                    .then(|| codes.code(values.value(i)))
                                    .transpose()
                            })
                            .collect::<Result<_>>()?;
                        let remap = Arc::new(remap);
                        if codes.remaps.len() == REMAPS_KEPT {
                            codes.remaps.remove(0);
                        }
                        codes
                            .remaps
                            .push((Arc::clone(dict.values()), Arc::clone(&remap)));
                        remap
                    }
                };
                Ok(dict
                    .keys()
                    .iter()
                    .map(|k| k.and_then(|k| remap.get(k as usize).copied().flatten()))
                    .collect())
            }
            DataType::Utf8 => array
                .as_string::<i32>()
                .iter()
                .map(|v| v.map(|v| codes.code(v)).transpose())
                .collect(),
            other => internal_err!("code: cannot code {other}"),
        }
    }

    /// The values of `codes` (`Int32`), NULL where it is NULL.
    ///
    /// Errors: a code this table did not give.
    pub fn decode(&self, codes: &Int32Array) -> Result<StringArray> {
        let table = self.lock()?;
        codes
            .iter()
            .map(|c| {
                c.map(|c| {
                    table
                        .values
                        .get(c as usize)
                        .map(String::as_str)
                        .ok_or_else(|| internal_datafusion_err!("value: unknown code {c}"))
                })
                .transpose()
            })
            .collect()
    }
}

/// `code(s)`: the [`CodeTable`] code of each value of a string column (`Int32`).
#[derive(Debug, Clone)]
pub struct DictionaryCodeExpr {
    input: Arc<dyn PhysicalExpr>,
    table: Arc<CodeTable>,
}

impl DictionaryCodeExpr {
    /// Codes of `input` (a `Dictionary(Int32, Utf8)` or `Utf8` expression) in `table`.
    pub fn new(input: Arc<dyn PhysicalExpr>, table: Arc<CodeTable>) -> Self {
        Self { input, table }
    }
}

/// `value(c)`: the string of each [`CodeTable`] code (`Utf8`).
#[derive(Debug, Clone)]
pub struct CodeValueExpr {
    input: Arc<dyn PhysicalExpr>,
    table: Arc<CodeTable>,
    nullable: bool,
}

impl CodeValueExpr {
    /// Values of the codes `input` (`Int32`) in `table`; `nullable` as the column it restores.
    pub fn new(input: Arc<dyn PhysicalExpr>, table: Arc<CodeTable>, nullable: bool) -> Self {
        Self {
            input,
            table,
            nullable,
        }
    }
}

/// Both expressions are equal when they read the same input through the same table.
macro_rules! same_table {
    ($t:ty) => {
        impl PartialEq for $t {
            fn eq(&self, other: &Self) -> bool {
                Arc::ptr_eq(&self.table, &other.table) && self.input.eq(&other.input)
            }
        }
        impl Eq for $t {}
        impl Hash for $t {
            fn hash<H: Hasher>(&self, state: &mut H) {
                self.input.hash(state);
                (Arc::as_ptr(&self.table) as usize).hash(state);
            }
        }
    };
}
same_table!(DictionaryCodeExpr);
same_table!(CodeValueExpr);

impl fmt::Display for DictionaryCodeExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "code({})", self.input)
    }
}

impl fmt::Display for CodeValueExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "value({})", self.input)
    }
}

/// The one child `with_new_children` hands `code` and `value`.
fn only_child(children: Vec<Arc<dyn PhysicalExpr>>) -> Result<Arc<dyn PhysicalExpr>> {
    let [input]: [Arc<dyn PhysicalExpr>; 1] = children
        .try_into()
        .map_err(|_| internal_datafusion_err!("code and value have one child"))?;
    Ok(input)
}

impl PhysicalExpr for DictionaryCodeExpr {
    fn data_type(&self, _input_schema: &Schema) -> Result<DataType> {
        Ok(DataType::Int32)
    }

    fn nullable(&self, input_schema: &Schema) -> Result<bool> {
        self.input.nullable(input_schema)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let array = self.input.evaluate(batch)?.into_array(batch.num_rows())?;
        Ok(ColumnarValue::Array(Arc::new(self.table.encode(&array)?)))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![&self.input]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        Ok(Arc::new(Self::new(
            only_child(children)?,
            Arc::clone(&self.table),
        )))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.input.fmt_sql(f)
    }
}

impl PhysicalExpr for CodeValueExpr {
    fn data_type(&self, _input_schema: &Schema) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn nullable(&self, _input_schema: &Schema) -> Result<bool> {
        Ok(self.nullable)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let array = self.input.evaluate(batch)?.into_array(batch.num_rows())?;
        let Some(codes) = array.as_primitive_opt::<Int32Type>() else {
            return internal_err!("value: codes are not Int32");
        };
        Ok(ColumnarValue::Array(Arc::new(self.table.decode(codes)?)))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![&self.input]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        Ok(Arc::new(Self::new(
            only_child(children)?,
            Arc::clone(&self.table),
            self.nullable,
        )))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.input.fmt_sql(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::DictionaryArray;

    /// Codes are given in order of first sight (a dictionary's values in their order), shared by
    /// arrays of either type, and undone by
    /// `decode`; NULL keys, NULL dictionary values and NULL strings code as NULL.
    #[test]
    fn codes_round_trip_through_dictionaries_and_strings() {
        let table = CodeTable::default();
        let values = StringArray::from(vec![Some("R"), Some("A"), None, Some("N")]);
        let keys = Int32Array::from(vec![Some(1), Some(0), None, Some(2), Some(3), Some(1)]);
        let dict: ArrayRef = Arc::new(DictionaryArray::new(keys, Arc::new(values)));
        let codes = table.encode(&dict).unwrap();
        // Codes follow the dictionary's values: R 0, A 1, N 2.
        assert_eq!(
            codes.iter().collect::<Vec<_>>(),
            [Some(1), Some(0), None, None, Some(2), Some(1)]
        );
        let plain: ArrayRef = Arc::new(StringArray::from(vec![Some("N"), None, Some("F")]));
        let more = table.encode(&plain).unwrap();
        assert_eq!(more.iter().collect::<Vec<_>>(), [Some(2), None, Some(3)]);
        let back = table.decode(&codes).unwrap();
        assert_eq!(
            back.iter().collect::<Vec<_>>(),
            [Some("A"), Some("R"), None, None, Some("N"), Some("A")]
        );
        assert!(table.decode(&Int32Array::from(vec![9])).is_err());
        // A second batch of the same dictionary (one column chunk) reuses its codes.
        let again: ArrayRef = Arc::new(DictionaryArray::new(
            Int32Array::from(vec![3, 0]),
            Arc::clone(dict.as_dictionary::<Int32Type>().values()),
        ));
        let codes = table.encode(&again).unwrap();
        assert_eq!(codes.iter().collect::<Vec<_>>(), [Some(2), Some(0)]);
        assert_eq!(table.lock().unwrap().remaps.len(), 1);
    }
}
