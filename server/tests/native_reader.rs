//! The native Parquet read path (`scan/src/read/native_reader.rs`) against iceberg's `ArrowReader`
//! (`iceflight.scan.reader = iceberg`) on the same tables: identical batches on every fixture
//! case (nested, evolution, type promotion, deletes, partitions) and on TPC-H SF 0.1, and the
//! counters the native path promises (metadata parsed once per file, pages pruned on a sorted
//! column, q17's lineitem rows cut by the live join filter).

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use common::{
    execute, make_case_fixtures, query, repo_root, rows, scan_metric, scans, table_scan_metric,
};
use datafusion::physical_plan::ExecutionPlanProperties;
use datafusion::prelude::SessionContext;
use iceflight::session::Engine;

fn settings(reader: &str) -> Vec<(String, String)> {
    vec![("iceflight.scan.reader".to_string(), reader.to_string())]
}

/// `sql` on both readers: (native batches concatenated, iceberg's, native plan).
async fn both(
    native: &SessionContext,
    iceberg: &SessionContext,
    sql: &str,
) -> (
    RecordBatch,
    RecordBatch,
    Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) {
    let a = execute(native, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql} (native): {e}"));
    let b = execute(iceberg, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql} (iceberg): {e}"));
    let schema = a.plan.schema();
    let a_all = concat_batches(&schema, &a.batches).unwrap();
    let b_all = concat_batches(&b.plan.schema(), &b.batches).unwrap();
    (a_all, b_all, a.plan)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_readers_give_identical_batches_on_every_case() {
    let dir = tempfile::tempdir().unwrap();
    make_case_fixtures(dir.path());
    // One partition: both readers then emit rows in the same order (tasks, then row groups).
    let engine = common::engine(dir.path(), 1).await;
    let native = engine
        .session(None, Some("cases"), &settings("native"))
        .unwrap();
    let iceberg = engine
        .session(None, Some("cases"), &settings("iceberg"))
        .unwrap();

    // Every fixture table (tests/fixtures/make_cases.py), as the catalog lists them.
    let tables = common::column(
        &native,
        "SELECT table_name FROM information_schema.tables \
         WHERE table_schema = 'cases' ORDER BY table_name",
    )
    .await;
    assert!(tables.len() >= 16, "fixture tables: {tables:?}");
    let mut queries: Vec<String> = tables
        .iter()
        .flat_map(|t| {
            [
                format!("SELECT * FROM {t}"),
                format!("SELECT count(*) FROM {t}"),
            ]
        })
        .collect();
    queries.extend(
        [
            "SELECT id FROM c01_nested WHERE s.a = 7",
            "SELECT id FROM c01_nested WHERE s.a IS NULL",
            "SELECT id FROM c01_nested WHERE s.a > 50",
            "SELECT c1 FROM c03_renamed WHERE c1 >= 2",
            "SELECT id, p FROM c05_identity WHERE p = 'a'",
            "SELECT id FROM c06_added WHERE email IS NULL",
            "SELECT status FROM c07_eq_delete_null",
            "SELECT v FROM pos_deletes WHERE id > 3",
            "SELECT id FROM multi_file WHERE id BETWEEN 1500 AND 1510",
            "SELECT v, d FROM promoted WHERE v > 0",
            "SELECT label, f FROM promoted",
            "SELECT s FROM nested_evolved WHERE s.a >= 2",
            "SELECT tags, attrs FROM nested_refusal",
        ]
        .map(String::from),
    );
    let mut failures = vec![];
    for sql in &queries {
        let (a, b, plan) = both(&native, &iceberg, sql).await;
        if a != b {
            failures.push(format!(
                "{sql}:\n native  {:?}\n iceberg {:?}",
                rows(&[a]),
                rows(&[b])
            ));
        }
        if !scans(&plan).is_empty() {
            // Every fixture file carries field ids: the native path reads them all.
            let fallback = scan_metric(&plan, "files_fallback");
            if fallback != 0 {
                failures.push(format!(
                    "{sql}: {fallback} files fell back to iceberg's reader"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "readers differ:\n{}",
        failures.join("\n")
    );

    // The promoted values themselves, not only agreement: wider types, renamed and moved.
    assert_eq!(
        query(
            &native,
            "SELECT label, id, v, f, d FROM promoted ORDER BY id NULLS FIRST"
        )
        .await,
        [
            ["NULL", "NULL", "-5", "-0.25", "-0.01"],
            ["a", "1", "2147483647", "1.5", "1234567.89"],
            ["b", "2", "NULL", "NULL", "NULL"],
            ["c", "3", "9000000000", "1e300", "1234567890123.45"],
            ["NULL", "4", "NULL", "NULL", "NULL"],
        ]
    );
    // Positional deletes read as a row selection: rows 1 and 4 (ids 2 and 5) are gone.
    let run = execute(&native, "SELECT id FROM pos_deletes ORDER BY id")
        .await
        .unwrap();
    assert_eq!(
        rows(&run.batches).concat(),
        ["1", "3", "4", "6", "7", "8", "9", "10"]
    );
    assert_eq!(scan_metric(&run.plan, "positional_deleted_rows"), 2);
}

/// TPC-H at SF 0.1, loaded by our loader (page index written, lineitem in `l_orderkey` order),
/// with lineitem's data file count.
async fn tpch_engine(dir: &std::path::Path) -> (Engine, usize) {
    let engine = common::engine(dir, 2).await;
    let report = common::load_tpch_local(&engine, 0.1).await;
    let lineitem = report.tables.iter().find(|t| t.0 == "lineitem").unwrap();
    (engine, lineitem.2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_sf01_both_readers_agree_and_native_counters_hold() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, files) = tpch_engine(dir.path()).await;
    let native = engine
        .session(None, Some("tpch"), &settings("native"))
        .unwrap();
    let iceberg = engine
        .session(None, Some("tpch"), &settings("iceberg"))
        .unwrap();

    // Metadata parsed once per distinct file, however many tasks and row groups open it: the
    // first query touching every lineitem file parses each footer once; again, none.
    let run = execute(&native, "SELECT sum(l_quantity) FROM lineitem")
        .await
        .unwrap();
    assert!(files > 1, "lineitem should span several files");
    assert_eq!(scan_metric(&run.plan, "metadata_parses"), files);
    let run = execute(&native, "SELECT sum(l_quantity) FROM lineitem")
        .await
        .unwrap();
    assert_eq!(scan_metric(&run.plan, "metadata_parses"), 0);

    // Pages pruned on the sorted l_orderkey: fewer rows decoded than one row group holds.
    let sql = "SELECT count(*) FROM lineitem WHERE l_orderkey BETWEEN 1000 AND 1100";
    let (a, b, _) = both(&native, &iceberg, sql).await;
    assert_eq!(a, b);
    let run = execute(&native, sql).await.unwrap();
    assert_ne!(rows(&run.batches)[0][0], "0");
    assert!(scan_metric(&run.plan, "pages_pruned") > 0);
    assert!(
        scan_metric(&run.plan, "rows_decoded") < 65536,
        "decoded {} rows",
        scan_metric(&run.plan, "rows_decoded")
    );

    let mut failures = vec![];
    for q in 1..=22 {
        let name = format!("q{q:02}");
        let sql =
            std::fs::read_to_string(repo_root().join(format!("bench/queries/tpch/{name}.sql")))
                .unwrap();
        let (a, b, plan) = both(&native, &iceberg, &sql).await;
        // Sorted rows: partitions may interleave differently between runs.
        let sorted = |b: RecordBatch| rows(&[b]).into_iter().collect::<BTreeSet<_>>();
        if a.schema() != b.schema() || sorted(a) != sorted(b) {
            failures.push(name.clone());
        }
        if q == 17 {
            // q17's lineitem scans on the default (orderkey) layout: the part filter's join
            // keys are scattered, so only the live row filter cuts them (600 572 rows read).
            let out = table_scan_metric(&plan, "lineitem", "output_rows");
            let dropped = table_scan_metric(&plan, "lineitem", "dynamic_rows_dropped");
            eprintln!(
                "q17 lineitem: output_rows {out}, dynamic_rows_dropped {dropped}, rows_decoded {}",
                table_scan_metric(&plan, "lineitem", "rows_decoded")
            );
            assert!(out < 100_000, "q17 lineitem scans emitted {out} rows");
            assert!(dropped > 0);
        }
    }
    assert!(failures.is_empty(), "readers differ on {failures:?}");
}

/// The first `HashJoinExec` (pre-order) and the tables its build (left) side reads.
fn first_join_build_tables(
    plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) -> Vec<String> {
    let mut stack = vec![Arc::clone(plan)];
    while let Some(p) = stack.pop() {
        if p.name() == "HashJoinExec" {
            return scans(p.children()[0])
                .iter()
                .filter_map(|s| s.downcast_ref::<iceflight_scan::IcebergScanExec>())
                .map(|s| s.table().identifier().name().to_string())
                .collect();
        }
        stack.extend(p.children().into_iter().cloned());
    }
    vec![]
}

/// Nodes named `name` in a plan, once each.
fn count_nodes(plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>, name: &str) -> usize {
    let mut seen: Vec<Arc<dyn datafusion::physical_plan::ExecutionPlan>> = vec![];
    let mut stack = vec![Arc::clone(plan)];
    while let Some(p) = stack.pop() {
        if p.name() == name && !seen.iter().any(|s| Arc::ptr_eq(s, &p)) {
            seen.push(Arc::clone(&p));
        }
        stack.extend(p.children().into_iter().cloned());
    }
    seen.len()
}

/// Every lineitem file `on` opened read string columns as dictionaries; none `off` opened did.
fn dictionaries_in_every_lineitem_file(
    on: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    off: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) {
    let opened = table_scan_metric(on, "lineitem", "files_opened");
    assert!(opened > 0);
    assert_eq!(
        table_scan_metric(on, "lineitem", "dictionary_files"),
        opened
    );
    assert_eq!(table_scan_metric(off, "lineitem", "dictionary_files"), 0);
}

/// A session on the `tpch` namespace with the native reader and `extra` settings.
fn tpch_session(engine: &Engine, extra: &[(&str, &str)]) -> SessionContext {
    let mut s = settings("native");
    s.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    engine.session(None, Some("tpch"), &s).unwrap()
}

/// Issue 32's counters on TPC-H SF 0.1: the query's own filters run in the scan (most
/// selective first) and inside the Parquet reader (rows decoded per column), q12 builds its
/// hash table on the filtered lineitem, and q15's `revenue` CTE runs once. Each against the
/// same query with the lever off; answers equal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_sf01_static_row_filter_build_side_and_shared_subplan() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = tpch_engine(dir.path()).await;
    let session = |extra: &[(&str, &str)]| tpch_session(&engine, extra);
    let on = session(&[]);
    let off = session(&[
        ("iceflight.scan.static_row_filter", "false"),
        ("iceflight.optimizer.shared_subplans", "false"),
        ("iceflight.optimizer.decimal_arithmetic", "false"),
    ]);
    let sorted = |b: &[RecordBatch]| rows(b).into_iter().collect::<BTreeSet<_>>();

    // One month of shipdates (≈ 1.3 % of rows), with a string column to skip: the date is
    // decoded for every row, `l_comment` only for the rows kept.
    let sql = "SELECT l_orderkey, l_comment FROM lineitem \
               WHERE l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'";
    let (a, b) = (
        execute(&on, sql).await.unwrap(),
        execute(&off, sql).await.unwrap(),
    );
    assert_eq!(sorted(&a.batches), sorted(&b.batches));
    let kept: usize = a.batches.iter().map(|b| b.num_rows()).sum();
    let late = scan_metric(&a.plan, "late_filter_rows");
    let decoded = scan_metric(&a.plan, "rows_decoded");
    let read_off = scan_metric(&b.plan, "rows_decoded");
    eprintln!(
        "one month: kept {kept}, late_filter_rows {late}, rows_decoded {decoded} (off: {read_off})"
    );
    assert!(
        read_off > 500_000,
        "without the row filter every row decodes: {read_off}"
    );
    assert!(
        late > 300_000,
        "l_shipdate decoded inside the reader for most rows: {late}"
    );
    assert!(
        decoded < read_off / 4,
        "l_comment decoded for {decoded} rows of {read_off}"
    );
    assert!(scan_metric(&a.plan, "static_rows_dropped") > 500_000);
    assert_eq!(scan_metric(&b.plan, "static_rows_dropped"), 0);
    assert_eq!(table_scan_metric(&a.plan, "lineitem", "output_rows"), kept);

    // q12: the lineitem filter keeps 0.5 %; its estimate lets the join build on lineitem.
    let q12 = std::fs::read_to_string(repo_root().join("bench/queries/tpch/q12.sql")).unwrap();
    let (a, b) = (
        execute(&on, &q12).await.unwrap(),
        execute(&off, &q12).await.unwrap(),
    );
    assert_eq!(rows(&a.batches), rows(&b.batches));
    assert_eq!(first_join_build_tables(&a.plan), ["lineitem"]);
    let out = table_scan_metric(&a.plan, "lineitem", "output_rows");
    let out_off = table_scan_metric(&b.plan, "lineitem", "output_rows");
    assert!(
        out * 20 < out_off,
        "q12 lineitem rows out: {out} with, {out_off} without"
    );
    // `l_shipmode` (seven values, dictionary-encoded in every page) stays a dictionary until the
    // row filter has run, in every lineitem file opened.
    dictionaries_in_every_lineitem_file(&a.plan, &b.plan);

    // q15: the revenue CTE (a lineitem aggregate) is computed once for its two consumers.
    let q15 = std::fs::read_to_string(repo_root().join("bench/queries/tpch/q15.sql")).unwrap();
    let (a, b) = (
        execute(&on, &q15).await.unwrap(),
        execute(&off, &q15).await.unwrap(),
    );
    assert_eq!(rows(&a.batches), rows(&b.batches));
    assert_eq!(count_nodes(&a.plan, "SharedSubplanExec"), 2);
    assert_eq!(count_nodes(&b.plan, "SharedSubplanExec"), 0);
    assert_eq!(scans_of(&a.plan, "lineitem"), 1);
    assert_eq!(scans_of(&b.plan, "lineitem"), 2);
    let decoded = table_scan_metric(&a.plan, "lineitem", "files_opened");
    let decoded_off = table_scan_metric(&b.plan, "lineitem", "files_opened");
    assert_eq!(
        decoded * 2,
        decoded_off,
        "lineitem files opened once, not twice"
    );

    // q01: its decimal products and sums of products run on 64-bit values, same answer.
    let q01 = std::fs::read_to_string(repo_root().join("bench/queries/tpch/q01.sql")).unwrap();
    let (a, b) = (
        execute(&on, &q01).await.unwrap(),
        execute(&off, &q01).await.unwrap(),
    );
    assert_eq!(rows(&a.batches), rows(&b.batches));
    // `l_extendedprice * (1 - l_discount)` (the common subexpression, a projection) and
    // `… * (1 + l_tax)` (an argument of the partial and the final aggregate), each a product
    // and a difference or sum: 2 + 2 × 2.
    assert_eq!(decimal_arithmetic_exprs(&a.plan), 6);
    assert_eq!(decimal_arithmetic_exprs(&b.plan), 0);
}

/// A CTE over a star join, read three times as TPC-DS q47 and q57 read theirs (the aggregate
/// joined with itself on a window rank): the join and its aggregate run once, and the shared
/// lineitem scan keeps the dynamic filter of the join inside the CTE (it still drops rows),
/// while a consumer's join from outside reaches no shared scan. Answers equal with sharing off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_sf01_cte_over_a_join_is_shared_with_its_own_dynamic_filter() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = tpch_engine(dir.path()).await;
    let on = tpch_session(&engine, &[]);
    let off = tpch_session(&engine, &[("iceflight.optimizer.shared_subplans", "false")]);
    let sql = "WITH v AS (\
                 SELECT p_brand, extract(year FROM l_shipdate) AS y, sum(l_quantity) AS q, \
                   rank() OVER (PARTITION BY p_brand ORDER BY extract(year FROM l_shipdate)) AS rn \
                 FROM lineitem JOIN part ON l_partkey = p_partkey \
                 WHERE p_container = 'SM BOX' AND p_size < 10 \
                 GROUP BY p_brand, extract(year FROM l_shipdate)) \
               SELECT v.p_brand, v.y, v.q, prev.q AS prev_q, next.q AS next_q \
               FROM v JOIN v prev ON v.p_brand = prev.p_brand AND v.rn = prev.rn + 1 \
                      JOIN v next ON v.p_brand = next.p_brand AND v.rn = next.rn - 1 \
               ORDER BY 1, 2";
    let (a, b) = (
        execute(&on, sql).await.unwrap(),
        execute(&off, sql).await.unwrap(),
    );
    assert_eq!(rows(&a.batches), rows(&b.batches));
    assert!(!rows(&a.batches).is_empty());
    assert_eq!(count_nodes(&a.plan, "SharedSubplanExec"), 3);
    assert_eq!(count_nodes(&b.plan, "SharedSubplanExec"), 0);
    assert_eq!(scans_of(&a.plan, "lineitem"), 1);
    assert_eq!(scans_of(&b.plan, "lineitem"), 3);
    // The part filter keeps about 1 part in 90: the shared scan's rows out, pruned by the
    // join's dynamic filter, are a small share of lineitem's 600 000.
    let out = table_scan_metric(&a.plan, "lineitem", "output_rows");
    assert!(
        scan_metric(&a.plan, "dynamic_rows_dropped") > 500_000,
        "the shared scan kept its join's dynamic filter"
    );
    assert!(out < 60_000, "shared lineitem scan emitted {out} rows");
}

/// A CTE read three times, each reference keeping another ship mode (TPC-DS q31's shape): the
/// references keep one plan behind their barriers (`optimizer/src/shared_ctes.rs`), so lineitem
/// is read once (a common subexpression in the body too), through the widened filter (three of the seven modes); answers equal with
/// sharing off, which reads it three times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_sf01_cte_filtered_differently_per_reference_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = tpch_engine(dir.path()).await;
    let on = tpch_session(&engine, &[]);
    let off = tpch_session(&engine, &[("iceflight.optimizer.shared_subplans", "false")]);
    // `sum` and `avg` of one expression: DataFusion computes it once per copy, under an alias
    // numbered across the plan (`__common_expr_<n>`), which the copies still share.
    let sql = "WITH t AS (SELECT l_shipmode, l_returnflag, sum(l_quantity) AS q, count(*) AS n, \
                 sum(l_extendedprice * (1 - l_discount)) AS r, \
                 avg(l_extendedprice * (1 - l_discount)) AS ar \
                 FROM lineitem GROUP BY l_shipmode, l_returnflag) \
               SELECT a.l_returnflag, a.q, b.q, c.q, a.n + b.n + c.n, a.r, c.ar FROM t a, t b, t c \
               WHERE a.l_shipmode = 'AIR' AND b.l_shipmode = 'RAIL' AND c.l_shipmode = 'SHIP' \
                 AND a.l_returnflag = b.l_returnflag AND b.l_returnflag = c.l_returnflag \
               ORDER BY 1";
    let (a, b) = (
        execute(&on, sql).await.unwrap(),
        execute(&off, sql).await.unwrap(),
    );
    assert_eq!(rows(&a.batches), rows(&b.batches));
    assert_eq!(rows(&a.batches).len(), 3);
    assert_eq!(count_nodes(&a.plan, "CteReferenceExec"), 3);
    assert_eq!(count_nodes(&b.plan, "CteReferenceExec"), 0);
    assert_eq!(scans_of(&a.plan, "lineitem"), 1);
    assert_eq!(scans_of(&b.plan, "lineitem"), 3);
    // The widened filter reached below the shared aggregate: it groups about 3/7 of
    // lineitem's 600 000 rows, once; with sharing off, the three copies group 1/7 each.
    let (grouped, grouped_off) = (
        partial_aggregate_input_rows(&a.plan, false),
        partial_aggregate_input_rows(&b.plan, false),
    );
    assert!((200_000..300_000).contains(&grouped), "{grouped}");
    assert!((200_000..300_000).contains(&grouped_off), "{grouped_off}");
}

/// Orders per customer segment and year (TPC-DS q04's shape: the build side adds the group
/// column): with eager aggregation on, orders are grouped by customer and year before the join
/// (`optimizer/src/eager_aggregation.rs`), so the join probes one row per group instead of one
/// per order; answers equal with it off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_sf01_orders_are_grouped_by_customer_before_the_join() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = tpch_engine(dir.path()).await;
    let on = tpch_session(&engine, &[]);
    let off = tpch_session(
        &engine,
        &[("iceflight.optimizer.eager_aggregation", "false")],
    );
    let sql = "SELECT c_mktsegment, extract(year FROM o_orderdate) AS y, count(*), \
               sum(o_totalprice), min(o_orderdate), avg(o_shippriority) \
               FROM orders JOIN customer ON o_custkey = c_custkey \
               GROUP BY c_mktsegment, extract(year FROM o_orderdate) ORDER BY 1, 2";
    let (a, b) = (
        execute(&on, sql).await.unwrap(),
        execute(&off, sql).await.unwrap(),
    );
    assert_eq!(rows(&a.batches), rows(&b.batches));
    assert_eq!(rows(&a.batches).len(), 35);
    // 150 000 orders of 10 000 customers over 7 years; each of the 2 partitions groups its
    // own orders (88 000 groups in all).
    let (probed, probed_off) = (hash_join_probe_rows(&a.plan), hash_join_probe_rows(&b.plan));
    assert_eq!(probed_off, 150_000);
    assert!(probed > 0 && probed <= 100_000, "{probed}");
}

/// The join key renamed to another probe column's name (`o_custkey AS o_shippriority`, while
/// `o_shippriority` is read too): the lower aggregate's group columns do not take that name, so
/// the join's dynamic filter on customer keys, carried through the aggregate by name, reaches
/// `o_custkey` and not `o_shippriority` (named after it, the filter compared an Int32 column
/// with the keys' Int64 bounds and the query failed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_sf01_eager_aggregation_keeps_dynamic_filters_on_their_column() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = tpch_engine(dir.path()).await;
    let on = tpch_session(&engine, &[]);
    let off = tpch_session(
        &engine,
        &[("iceflight.optimizer.eager_aggregation", "false")],
    );
    let sql = "SELECT c_mktsegment, o_shippriority, sum(o_totalprice), sum(p) \
               FROM (SELECT c_mktsegment, o_custkey AS o_shippriority, o_totalprice, \
               orders.o_shippriority AS p FROM orders JOIN customer ON o_custkey = c_custkey) t \
               GROUP BY c_mktsegment, o_shippriority ORDER BY 1, 2";
    let (a, b) = (
        execute(&on, sql).await.unwrap(),
        execute(&off, sql).await.unwrap(),
    );
    assert_eq!(rows(&a.batches), rows(&b.batches));
    assert!(rows(&a.batches).len() > 9_000, "{}", rows(&a.batches).len());
}

/// Rows the hash joins of `plan` probed with (their `input_rows`), summed.
fn hash_join_probe_rows(plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>) -> usize {
    use datafusion::physical_plan::ExecutionPlan;
    let own = plan
        .downcast_ref::<datafusion::physical_plan::joins::HashJoinExec>()
        .and_then(ExecutionPlan::metrics)
        .and_then(|m| m.sum_by_name("input_rows"))
        .map_or(0, |v| v.as_usize());
    own + plan
        .children()
        .into_iter()
        .map(hash_join_probe_rows)
        .sum::<usize>()
}

/// A ROLLUP over lineitem (three low-cardinality columns, 4 sets): with the rule on, the
/// grouping-set aggregate hashes the finest groups (at most 3 × 2 × 7), not every row once per
/// set; answers equal with it off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_sf01_rollup_is_computed_from_its_finest_grouping() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = tpch_engine(dir.path()).await;
    let on = tpch_session(&engine, &[]);
    let off = tpch_session(
        &engine,
        &[("iceflight.optimizer.grouping_sets_from_finest", "false")],
    );
    let sql = "SELECT l_returnflag, l_linestatus, l_shipmode, sum(l_quantity), count(*), \
               min(l_shipdate), max(l_extendedprice), avg(l_linenumber) FROM lineitem \
               GROUP BY ROLLUP (l_returnflag, l_linestatus, l_shipmode) ORDER BY 1, 2, 3";
    let (a, b) = (
        execute(&on, sql).await.unwrap(),
        execute(&off, sql).await.unwrap(),
    );
    assert_eq!(rows(&a.batches), rows(&b.batches));
    let (hashed, hashed_off) = (
        partial_aggregate_input_rows(&a.plan, true),
        partial_aggregate_input_rows(&b.plan, true),
    );
    assert!(hashed > 0 && hashed <= 3 * 2 * 7, "{hashed}");
    assert!(hashed_off > 500_000, "{hashed_off}");
}

/// Rows reaching the partial aggregates of `plan` (each counted once, however many consumers
/// share it); with `grouping_sets_only`, only those grouping by several grouping sets.
fn partial_aggregate_input_rows(
    plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    grouping_sets_only: bool,
) -> usize {
    use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
    let mut seen: Vec<Arc<dyn datafusion::physical_plan::ExecutionPlan>> = vec![];
    let mut stack = vec![Arc::clone(plan)];
    while let Some(p) = stack.pop() {
        if let Some(a) = p.downcast_ref::<AggregateExec>()
            && *a.mode() == AggregateMode::Partial
            && (!grouping_sets_only || a.group_expr().groups().len() > 1)
            && !seen.iter().any(|s| Arc::ptr_eq(s, &p))
        {
            seen.push(Arc::clone(&p));
        }
        stack.extend(p.children().into_iter().cloned());
    }
    seen.iter()
        .filter_map(|a| a.children()[0].metrics().and_then(|m| m.output_rows()))
        .sum()
}

/// How many Iceberg scans of `table` `plan` holds.
fn scans_of(plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>, table: &str) -> usize {
    scans(plan)
        .iter()
        .filter(|s| {
            s.downcast_ref::<iceflight_scan::IcebergScanExec>()
                .is_some_and(|e| e.table().identifier().name() == table)
        })
        .count()
}

/// How many `DecimalArithmeticExpr`s the projections and aggregate arguments of `plan` hold.
fn decimal_arithmetic_exprs(plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>) -> usize {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    use datafusion::physical_expr::PhysicalExpr;
    use datafusion::physical_plan::aggregates::AggregateExec;
    use datafusion::physical_plan::projection::ProjectionExec;
    use iceflight_optimizer::decimal_arithmetic::DecimalArithmeticExpr;
    let count = |e: &Arc<dyn PhysicalExpr>| {
        let mut n = 0;
        e.apply(|e| {
            n += usize::from(e.downcast_ref::<DecimalArithmeticExpr>().is_some());
            Ok(TreeNodeRecursion::Continue)
        })
        .unwrap();
        n
    };
    let mut n = 0;
    plan.apply(|node| {
        if let Some(p) = node.downcast_ref::<ProjectionExec>() {
            n += p.expr().iter().map(|e| count(&e.expr)).sum::<usize>();
        }
        if let Some(a) = node.downcast_ref::<AggregateExec>() {
            for f in a.aggr_expr() {
                n += f.expressions().iter().map(count).sum::<usize>();
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    n
}

/// Issue 32, strings kept encoded: q01 groups by `l_returnflag` and `l_linestatus` read from
/// the Parquet dictionaries and coded (`scan/src/exec/dictionary_group_by.rs`): every lineitem file
/// opened keeps both as dictionaries (none with the rule off); answers equal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_sf01_q01_groups_by_dictionary_codes() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = tpch_engine(dir.path()).await;
    let session = |extra: &[(&str, &str)]| tpch_session(&engine, extra);
    let on = session(&[]);
    let off = session(&[("iceflight.optimizer.dictionary_group_by", "false")]);
    let q01 = std::fs::read_to_string(repo_root().join("bench/queries/tpch/q01.sql")).unwrap();
    let (a, b) = (
        execute(&on, &q01).await.unwrap(),
        execute(&off, &q01).await.unwrap(),
    );
    assert_eq!(rows(&a.batches), rows(&b.batches));
    assert_eq!(rows(&a.batches).len(), 4);
    dictionaries_in_every_lineitem_file(&a.plan, &b.plan);
    let plan = datafusion::physical_plan::displayable(a.plan.as_ref())
        .indent(false)
        .to_string();
    assert!(
        plan.contains("dictionaries=[l_returnflag, l_linestatus]") && plan.contains("code("),
        "{plan}"
    );
    // The coded columns' statistics keep no `Utf8` bounds beside their dictionary type (the
    // interval analysis of a filter above would refuse the mismatch).
    let mut coded = 0;
    for scan in scans(&a.plan) {
        let stats = scan.partition_statistics(None).unwrap();
        let schema = scan.schema();
        for (field, cs) in schema.fields().iter().zip(&stats.column_statistics) {
            if matches!(
                field.data_type(),
                arrow::datatypes::DataType::Dictionary(..)
            ) {
                coded += 1;
                assert!(cs.min_value.get_value().is_none(), "{}", field.name());
                assert!(cs.max_value.get_value().is_none(), "{}", field.name());
            }
        }
    }
    assert_eq!(coded, 2);
}

/// Rows of `sql`'s (single) Iceberg scan per output partition, each partition run by itself;
/// planned as the front end plans a query naming a metadata column (`_pos`).
async fn rows_per_partition(ctx: &SessionContext, sql: &str) -> Vec<Vec<Vec<String>>> {
    let state = iceflight::sql::metadata_columns::with_metadata_columns(ctx.state());
    let logical = state.create_logical_plan(sql).await.unwrap();
    let plan = state.create_physical_plan(&logical).await.unwrap();
    let scan = scans(&plan).pop().expect("a scan");
    let mut out = vec![];
    for p in 0..scan.output_partitioning().partition_count() {
        let stream = scan.execute(p, ctx.task_ctx()).unwrap();
        let batches: Vec<RecordBatch> = futures::TryStreamExt::try_collect(stream).await.unwrap();
        out.push(rows(&batches));
    }
    out
}

/// One data file of three row groups (1 Mi, 1 Mi and 0.4 Mi rows, iceberg's writer's default)
/// read by two partitions: cut inside the middle row group, each partition reads about half
/// the rows (before: one row group against two), every row exactly once, `_pos` right across
/// the cut, also when re-split for distributed tasks; a filter pruning pages near the cut and
/// iceberg's reader (which reads a cut row group whole, in the piece holding its midpoint)
/// answer the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_of_three_row_groups_is_read_in_equal_shares() {
    let dir = tempfile::tempdir().unwrap();
    let engine = common::engine(dir.path(), 2).await;
    let setup = engine.session(None, None, &[]).unwrap();
    for sql in [
        "CREATE SCHEMA local.cut",
        "CREATE TABLE local.cut.t AS SELECT value AS id, (value * 2654435761) % 1000003 AS v \
         FROM generate_series(0, 2499999)",
    ] {
        common::statement_ok(&setup, sql).await;
    }
    let session = |extra: &[(&str, &str)]| {
        let settings: Vec<(String, String)> = extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        engine.session(None, Some("cut"), &settings).unwrap()
    };
    let cut = session(&[]);
    let whole = session(&[("iceflight.scan.cut_row_groups", "false")]);
    let iceberg = session(&[("iceflight.scan.reader", "iceberg")]);

    let shares = |parts: &[Vec<Vec<String>>]| parts.iter().map(Vec::len).collect::<Vec<_>>();
    let parts = rows_per_partition(&cut, "SELECT id, _pos FROM t").await;
    let counts = shares(&parts);
    assert_eq!(counts.len(), 2);
    assert_eq!(counts.iter().sum::<usize>(), 2_500_000);
    let (small, large) = (counts[0].min(counts[1]), counts[0].max(counts[1]));
    assert!(large - small < 250_000, "rows per partition: {counts:?}");
    // Every row once, with the position it has when the file is read whole (one partition's
    // row groups, each read whole, in the reader that has always numbered them).
    let mut got: Vec<Vec<String>> = parts.concat();
    got.sort();
    assert_eq!(got.len(), 2_500_000);
    let single = engine
        .session(
            None,
            Some("cut"),
            &[("datafusion.execution.target_partitions".into(), "1".into())],
        )
        .unwrap();
    let want = rows_per_partition(&single, "SELECT id, _pos FROM t").await;
    assert_eq!(want.len(), 1);
    let mut want = want.concat();
    want.sort();
    assert_eq!(got, want);
    // At row-group starts only, the split is one row group against two.
    let before = shares(&rows_per_partition(&whole, "SELECT id FROM t").await);
    assert_eq!(before.iter().min(), Some(&(1 << 20)), "{before:?}");

    // Pages pruned around the cut (half of 2.5 Mi bytes lies in the middle row group).
    for sql in [
        "SELECT count(*), sum(v), min(id), max(id) FROM t WHERE id BETWEEN 1200000 AND 1300000",
        "SELECT count(*), sum(v) FROM t",
        "SELECT count(*) FROM t WHERE v < 1000",
    ] {
        let want = query(&whole, sql).await;
        assert_eq!(query(&cut, sql).await, want, "{sql}");
        assert_eq!(query(&iceberg, sql).await, want, "{sql} (iceberg's reader)");
    }
    let iceberg_counts = shares(&rows_per_partition(&iceberg, "SELECT id FROM t").await);
    assert_eq!(iceberg_counts.iter().sum::<usize>(), 2_500_000);

    // Re-split for 3 distributed tasks (6 pieces, cut again), encoded and decoded as a worker
    // runs them: every row once.
    let codec = iceflight_scan::distributed::codec::IcebergScanCodec::new(
        Arc::new(engine.catalogs().clone()),
        Arc::clone(engine.caches()),
    );
    let got = common::rows_through_codec(&cut, &codec, "SELECT id FROM t", 3)
        .await
        .unwrap();
    let mut ids: Vec<usize> = got.iter().map(|r| r[0].parse().unwrap()).collect();
    ids.sort_unstable();
    assert!(ids.iter().copied().eq(0..2_500_000), "{} rows", ids.len());
}
