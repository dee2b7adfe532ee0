//! The block cache over real S3: TPC-H SF 0.01 loaded by our loader through SeaweedFS's Iceberg
//! REST catalog into its S3 (`weed mini`, see `weed/mod.rs`), read by engines that differ only in
//! `[cache]`.
//!
//! - A warm run of a query sends no request to S3, and the scans' `remote_requests` and
//!   `cache_miss_bytes` are 0.
//! - A cache far smaller than the working set evicts, stays under its bound after every query,
//!   and every answer equals the uncached engine's.
//! - Eight concurrent identical queries on a cold engine fetch exactly the bytes one query alone
//!   fetches: each block once.
//! - `iceflight_invalidate_cache()` empties it: the next run fetches again.
//! - The small cache over a disk tier (`[cache] disk`): the second round sends nothing to S3.

mod common;
mod weed;

use std::path::Path;
use std::sync::Arc;

use common::{execute, repo_root, rows, scan_metric};
use iceberg::NamespaceIdent;
use iceflight::config::Config;
use iceflight::session::Engine;
use iceflight_catalog::CatalogConfig;
use iceflight_datagen::load::{LoadOptions, load_tpch};
use weed::{KEY, SECRET, Weed, lake};

/// Block size of the test engines: SF 0.01's files are 0.1–2 MiB, so 64 KiB gives each file
/// many blocks.
const BLOCK: &str = "64KiB";

/// The TPC-H queries the test runs (scans, joins, TopK, semi/anti joins).
const QUERIES: [&str; 6] = ["q01", "q03", "q06", "q10", "q18", "q21"];

async fn engine(dir: &Path, weed: &Weed, memory: Option<&str>) -> Engine {
    engine_with(dir, weed, memory, None).await
}

/// An engine on the lake with `[cache] memory` (`None`: cache off) and a disk tier in `disk`.
async fn engine_with(dir: &Path, weed: &Weed, memory: Option<&str>, disk: Option<&Path>) -> Engine {
    let mut config = Config {
        data_dir: dir.to_path_buf(),
        ..Config::default()
    };
    let mut lake: CatalogConfig = lake(weed, &format!("{KEY}:{SECRET}"));
    lake.listing_cache_ttl = Some(std::time::Duration::ZERO);
    config.catalogs = vec![lake];
    config.default_schema = Some("tpch".into());
    config.query.target_partitions = 2;
    config.cache.block_size = BLOCK.parse().unwrap();
    config.cache.disk = disk.map(Path::to_path_buf);
    config.cache.disk_capacity = "64MiB".parse().unwrap();
    match memory {
        Some(m) => config.cache.memory = Some(m.parse().unwrap()),
        None => config.cache.enabled = false,
    }
    Engine::connect(config).await.unwrap()
}

fn sql(name: &str) -> String {
    std::fs::read_to_string(repo_root().join(format!("bench/queries/tpch/{name}.sql"))).unwrap()
}

/// The `block` row of `system.runtime.cache`: (entries, bytes, capacity, evictions,
/// remote_requests, remote_bytes).
async fn block_stats(engine: &Engine) -> [u64; 6] {
    let ctx = engine.session(None, None, &[]).unwrap();
    let out = execute(
        &ctx,
        "SELECT entries, bytes, capacity_bytes, evictions, remote_requests, remote_bytes \
         FROM system.runtime.cache WHERE cache = 'block'",
    )
    .await
    .unwrap();
    let row = rows(&out.batches).pop().expect("a block row");
    std::array::from_fn(|i| row[i].parse().unwrap())
}

/// Runs `name` on `engine`: its rows and the scans' (remote_requests, cache_miss_bytes,
/// cache_hit_bytes).
async fn run(engine: &Engine, name: &str) -> (Vec<Vec<String>>, [usize; 3]) {
    let ctx = engine.session(None, None, &[]).unwrap();
    let out = execute(&ctx, &sql(name)).await.unwrap();
    let counters = ["remote_requests", "cache_miss_bytes", "cache_hit_bytes"]
        .map(|m| scan_metric(&out.plan, m));
    (rows(&out.batches), counters)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_queries_fetch_nothing_and_small_caches_stay_right() {
    let dir = tempfile::tempdir().unwrap();
    let weed = Weed::start(dir.path());
    let uncached = engine(&dir.path().join("a"), &weed, None).await;
    let options = LoadOptions {
        scale: 0.01,
        row_group_rows: 8192,
        progress: false,
        ..LoadOptions::default()
    };
    let catalog = Arc::clone(uncached.catalogs().get("lake").unwrap());
    load_tpch(&catalog, &NamespaceIdent::new("tpch".into()), &options)
        .await
        .unwrap();

    let mut answers = vec![];
    for q in QUERIES {
        let (rows, [requests, misses, hits]) = run(&uncached, q).await;
        assert_eq!(
            (misses, hits),
            (0, 0),
            "{q}: the uncached engine has no cache traffic"
        );
        assert_eq!(
            requests, 0,
            "{q}: uncached reads are not counted as the cache's"
        );
        answers.push(rows);
    }

    // Cold, then warm: the second round sends nothing to S3 (manifests included). In the cold
    // round a query whose columns an earlier one read (q06 after q01) already finds them.
    let cached = engine(&dir.path().join("b"), &weed, Some("256MiB")).await;
    let mut failures = vec![];
    for (i, (q, answer)) in QUERIES.iter().zip(&answers).enumerate() {
        let (rows, [requests, misses, _]) = run(&cached, q).await;
        if &rows != answer {
            failures.push(format!("{q} cold: wrong answer"));
        }
        if i == 0 && (requests == 0 || misses == 0) {
            failures.push(format!(
                "{q} cold: {requests} requests, {misses} bytes missed"
            ));
        }
    }
    let before = block_stats(&cached).await;
    for (q, answer) in QUERIES.iter().zip(&answers) {
        let (rows, [requests, misses, hits]) = run(&cached, q).await;
        if &rows != answer {
            failures.push(format!("{q} warm: wrong answer"));
        }
        if requests != 0 || misses != 0 || hits == 0 {
            failures.push(format!(
                "{q} warm: {requests} requests, {misses} bytes missed, {hits} hit"
            ));
        }
    }
    let after = block_stats(&cached).await;
    if after[4] != before[4] {
        failures.push(format!(
            "warm round sent {} requests to S3",
            after[4] - before[4]
        ));
    }
    // Invalidation empties the cache: the next run fetches again.
    let ctx = cached.session(None, None, &[]).unwrap();
    execute(&ctx, "SELECT iceflight_invalidate_cache()")
        .await
        .unwrap();
    assert_eq!(
        block_stats(&cached).await[0],
        0,
        "no entry after invalidation"
    );
    let (rows, [requests, ..]) = run(&cached, "q06").await;
    assert_eq!(rows, answers[2]);
    assert!(requests > 0, "q06 after invalidation fetched nothing");

    // A cache far smaller than the working set: evicts, stays bounded, answers right.
    let small = engine(&dir.path().join("c"), &weed, Some("512KiB")).await;
    for round in 0..2 {
        for (q, answer) in QUERIES.iter().zip(&answers) {
            let (rows, _) = run(&small, q).await;
            if &rows != answer {
                failures.push(format!("{q} small cache round {round}: wrong answer"));
            }
            let [_, bytes, capacity, ..] = block_stats(&small).await;
            if bytes > capacity {
                failures.push(format!("{q}: {bytes} bytes held, bound {capacity}"));
            }
        }
    }
    let [_, _, capacity, evictions, ..] = block_stats(&small).await;
    assert_eq!(capacity, 512 * 1024);
    if evictions == 0 {
        failures.push("the small cache never evicted".into());
    }

    // The same small memory over a disk tier: the second round reads nothing from S3.
    let tiered = engine_with(
        &dir.path().join("f"),
        &weed,
        Some("512KiB"),
        Some(&dir.path().join("disk")),
    )
    .await;
    let mut remote = vec![];
    for round in 0..2 {
        for (q, answer) in QUERIES.iter().zip(&answers) {
            if &run(&tiered, q).await.0 != answer {
                failures.push(format!("{q} disk tier round {round}: wrong answer"));
            }
        }
        remote.push(block_stats(&tiered).await[4]);
    }
    if remote[1] != remote[0] {
        failures.push(format!(
            "with a disk tier the second round sent {} requests to S3",
            remote[1] - remote[0]
        ));
    }

    // Eight identical queries on a cold engine fetch what one alone fetches.
    let alone = engine(&dir.path().join("d"), &weed, Some("256MiB")).await;
    let (one_rows, _) = run(&alone, "q01").await;
    let one = block_stats(&alone).await[5];
    let crowd = Arc::new(engine(&dir.path().join("e"), &weed, Some("256MiB")).await);
    let runs = (0..8).map(|_| {
        let crowd = Arc::clone(&crowd);
        tokio::spawn(async move { run(&crowd, "q01").await.0 })
    });
    for r in futures::future::join_all(runs).await {
        if r.unwrap() != one_rows {
            failures.push("q01 concurrent: wrong answer".into());
        }
    }
    let eight = block_stats(&crowd).await[5];
    if eight != one {
        failures.push(format!(
            "8 concurrent q01 fetched {eight} bytes, one alone {one}"
        ));
    }
    assert!(one > 0);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
