//! What the scan tells DataFusion's planner: output partitioning and statistics from manifests,
//! on the six-file table that pyiceberg builds (`tests/fixtures/make_cases.py`). The cases' SQL
//! behaviour is in `slt/cases/`.

mod common;

use common::{execute, make_case_fixtures, rows, scans};
use datafusion::prelude::SessionContext;
use iceflight::session::Engine;

async fn setup(partitions: usize) -> (tempfile::TempDir, Engine, SessionContext) {
    let dir = tempfile::tempdir().unwrap();
    make_case_fixtures(dir.path());
    let engine = common::engine(dir.path(), partitions).await;
    let ctx = engine.session(None, Some("cases"), &[]).unwrap();
    (dir, engine, ctx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_file_table_is_partitioned_and_reports_statistics_from_manifests() {
    let (_dir, _engine, ctx) = setup(2).await;

    let run = execute(&ctx, "SELECT count(*), sum(id) FROM multi_file")
        .await
        .unwrap();
    assert_eq!(rows(&run.batches), [["6000", "17997000"]]);
    let scan = &scans(&run.plan)[0];
    assert_eq!(
        scan.properties().output_partitioning().partition_count(),
        2,
        "6 files over 2 target partitions"
    );

    // Statistics from manifests: the scan reports the row count.
    let stats = scans(&run.plan)[0].partition_statistics(None).unwrap();
    assert_eq!(stats.num_rows.get_value(), Some(&6000));

    // Byte sizes are the projection's Arrow sizes (DataFusion's semantics), not the files':
    // one BIGINT column of 6000 rows is 48 000 bytes, two 8-byte columns 96 000. No distinct
    // counts reach DataFusion (metrics_index.rs says why).
    for (sql, bytes) in [
        ("SELECT id FROM multi_file WHERE id > 10", 48_000),
        ("SELECT id, v FROM multi_file WHERE id > 10", 96_000),
    ] {
        let run = execute(&ctx, sql).await.unwrap();
        let stats = scans(&run.plan)[0].partition_statistics(None).unwrap();
        assert_eq!(stats.total_byte_size.get_value(), Some(&bytes), "{sql}");
        let id = &stats.column_statistics[0];
        assert_eq!(id.byte_size.get_value(), Some(&48_000), "{sql}");
        assert_eq!(id.distinct_count.get_value(), None, "{sql}");
    }
    // The table's statistics, for the join order: the distinct count of an integer column is
    // its bounds' range (0..5999), capped at the rows; a double column has none.
    let table = ctx.table_provider("multi_file").await.unwrap();
    let stats = table.statistics().expect("statistics from the manifests");
    assert_eq!(stats.num_rows.get_value(), Some(&6000));
    let distinct: Vec<Option<&usize>> = stats
        .column_statistics
        .iter()
        .map(|c| c.distinct_count.get_value())
        .collect();
    assert_eq!(distinct, [Some(&6000), None]);
}
