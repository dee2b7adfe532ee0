//! `iceflight-bench`: measurements behind design decisions (speed goes here, not in tests).
//!
//! `readpath` — the Parquet read-path decision of the scan (scan/README.md): TPC-H q6 over the same
//! lineitem data files read (a) through our Iceberg scan (the session's reader, `iceflight.scan.reader`, native by default) and (b) through
//! DataFusion's own Parquet reader (`ListingTable` over the data files), with DataFusion's row
//! filter off and on. Rounds alternate the order; prints per-path median/min/max in ms.
//!
//! `nested` — bytes read by nested struct-field predicates in three layouts beside a flat control
//! column (`nested.rs`).
//!
//! `clients` — many concurrent Flight SQL clients running a mix of queries (`load.rs`).

use std::sync::Arc;
use std::time::Instant;

use clap::{Parser, Subcommand};
use datafusion::catalog::{CatalogProvider, MemoryCatalogProvider, MemorySchemaProvider};
use datafusion::prelude::SessionContext;
use iceberg::{NamespaceIdent, TableIdent};
use iceflight::config::Config;
use iceflight::session::Engine;
use iceflight_scan::plan::metrics_index::FileMetricsIndex;

#[derive(Parser)]
#[command(name = "iceflight-bench", about = "iceflight measurements")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compare Parquet read paths on TPC-H q6 (lineitem loaded by `iceflight load tpch`).
    Readpath {
        /// Data directory of the embedded catalog.
        #[arg(long, default_value = "./iceflight-data")]
        data_dir: std::path::PathBuf,
        /// Namespace holding the TPC-H tables.
        #[arg(long, default_value = "tpch")]
        namespace: String,
        /// Measured rounds (after one warm-up round).
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Partitions per query.
        #[arg(long, default_value_t = 2)]
        partitions: usize,
    },
    /// Flight SQL over loopback: DoGet throughput of all of lineitem beside a raw arrow-flight
    /// DoGet of the same batches from memory, and `SELECT 1` round trips.
    Flight {
        /// Data directory of the embedded catalog.
        #[arg(long, default_value = "./iceflight-data")]
        data_dir: std::path::PathBuf,
        /// Namespace holding the TPC-H tables.
        #[arg(long, default_value = "tpch")]
        namespace: String,
        /// Measured DoGet rounds per path (after one warm-up).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// `SELECT 1` calls for the latency figures.
        #[arg(long, default_value_t = 1000)]
        calls: usize,
    },
    /// Generates a suite's tables once into the benchmark catalog (by default the lake of
    /// bench/scripts/lake.sh: SeaweedFS REST + S3, which every engine reads), namespace
    /// `<suite>_sf<scale>[_sorted]`.
    Load {
        #[command(flatten)]
        data: run::DataArgs,
        /// Drop and reload an existing namespace.
        #[arg(long)]
        replace: bool,
    },
    /// A suite's queries on several engines over the same files, alternating rounds, answers
    /// compared; writes `bench/results/{suite}-sf{scale}[-sorted]-{yyyymmdd}` .json, .md and .png.
    Run(run::Args),
    /// Redraws the PNG chart of results files (`<stem>.json` → `<stem>.png`).
    Chart {
        /// Results files written by `run`.
        #[arg(required = true)]
        results: Vec<std::path::PathBuf>,
    },
    /// Concurrent Flight SQL clients × mixed queries against a running server: errors,
    /// p50 / p99 per kind, the server's peak RSS (`load.rs`).
    Clients(load::Args),
    /// Bytes read by nested-field predicates as % of a full scan, three layouts, flat control.
    Nested {
        /// Data directory of the embedded catalog (namespaces nested_clustered, nested_zorder,
        /// nested_random).
        #[arg(long, default_value = "./iceflight-data")]
        data_dir: std::path::PathBuf,
        /// Rows per layout.
        #[arg(long, default_value_t = 400_000)]
        rows: usize,
        /// Rows per Parquet row group.
        #[arg(long, default_value_t = 10_000)]
        row_group_rows: usize,
        /// Target data file size.
        #[arg(long, default_value = "8MiB")]
        target_file_size: String,
        /// (Re)load the three layouts first.
        #[arg(long)]
        load: bool,
    },
}

mod chart;
mod error;
mod fileio_store;
mod flight;
mod load;
mod nested;
mod run;
mod tpcds;

const Q6: &str = "SELECT sum(l_extendedprice * l_discount) AS revenue FROM {t} \
    WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' \
    AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24";

/// Errors are one line on stderr with exit code 1, as `iceflight`'s.
fn main() -> std::process::ExitCode {
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    match runtime.block_on(dispatch(Cli::parse().command)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", e.to_string().replace('\n', " "));
            std::process::ExitCode::FAILURE
        }
    }
}

async fn dispatch(command: Command) -> datafusion::common::Result<()> {
    match command {
        Command::Readpath {
            data_dir,
            namespace,
            rounds,
            partitions,
        } => readpath(data_dir, &namespace, rounds, partitions).await,
        Command::Flight {
            data_dir,
            namespace,
            rounds,
            calls,
        } => flight::run(data_dir, &namespace, rounds, calls).await,
        Command::Load { data, replace } => run::load(&data, replace).await,
        Command::Clients(args) => {
            let outcome = load::drive(&args).await?;
            println!("{}", load::report(&args, &outcome));
            Ok(())
        }
        Command::Chart { results } => {
            for r in results {
                let png = chart::redraw(&r).map_err(datafusion::common::DataFusionError::Plan)?;
                println!("wrote {}", png.display());
            }
            Ok(())
        }
        Command::Run(args) => run::run(args).await,
        Command::Nested {
            data_dir,
            rows,
            row_group_rows,
            target_file_size,
            load,
        } => {
            nested::run(nested::Args {
                data_dir,
                rows,
                row_group_rows,
                target_file_size,
                load,
            })
            .await
        }
    }
}

async fn readpath(
    data_dir: std::path::PathBuf,
    namespace: &str,
    rounds: usize,
    partitions: usize,
) -> datafusion::common::Result<()> {
    let mut config = Config {
        data_dir,
        ..Config::default()
    };
    config.query.target_partitions = partitions;
    let engine = Engine::connect(config)
        .await
        .map_err(|e| datafusion::common::DataFusionError::External(Box::new(e)))?;
    let catalog = engine.catalogs().get("local").expect("embedded catalog");
    let table = catalog
        .load_table(&TableIdent::new(
            NamespaceIdent::new(namespace.into()),
            "lineitem".into(),
        ))
        .await
        .map_err(|e| datafusion::common::DataFusionError::External(Box::new(e)))?;
    let index = FileMetricsIndex::load(&table)
        .await
        .map_err(|e| datafusion::common::DataFusionError::External(Box::new(e)))?;
    println!("lineitem: {} data files", index.len());

    let ours = engine.session(None, Some(namespace), &[])?;
    let make_raw = |pushdown: bool| {
        let settings = vec![
            (
                "datafusion.execution.target_partitions".to_string(),
                partitions.to_string(),
            ),
            (
                "datafusion.execution.parquet.pushdown_filters".to_string(),
                pushdown.to_string(),
            ),
        ];
        engine.session(None, Some(namespace), &settings)
    };
    let raw_off = make_raw(false)?;
    let raw_on = make_raw(true)?;
    for ctx in [&raw_off, &raw_on] {
        let table = run::listing_table(ctx, index.paths()).await?;
        let catalog = Arc::new(MemoryCatalogProvider::new());
        catalog.register_schema("public", Arc::new(MemorySchemaProvider::new()))?;
        ctx.register_catalog("raw", catalog);
        ctx.register_table("raw.public.lineitem_raw", Arc::new(table))?;
    }
    let paths: Vec<(&str, &SessionContext, String)> = vec![
        ("our Iceberg scan", &ours, Q6.replace("{t}", "lineitem")),
        (
            "DataFusion ParquetSource, filter above",
            &raw_off,
            Q6.replace("{t}", "raw.public.lineitem_raw"),
        ),
        (
            "DataFusion ParquetSource, row filter",
            &raw_on,
            Q6.replace("{t}", "raw.public.lineitem_raw"),
        ),
    ];
    let mut times: Vec<Vec<f64>> = vec![vec![]; paths.len()];
    let mut answers = vec![String::new(); paths.len()];
    for round in 0..=rounds {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..paths.len()).collect()
        } else {
            (0..paths.len()).rev().collect()
        };
        for i in order {
            let (_, ctx, sql) = &paths[i];
            let start = Instant::now();
            let batches = ctx.sql(sql).await?.collect().await?;
            let ms = start.elapsed().as_secs_f64() * 1000.0;
            answers[i] =
                datafusion::arrow::util::pretty::pretty_format_batches(&batches)?.to_string();
            if round > 0 {
                times[i].push(ms);
            }
        }
    }
    for w in answers.windows(2) {
        assert_eq!(w[0], w[1], "read paths disagree on q6");
    }
    println!(
        "q6 over {} partitions, {rounds} alternating rounds (ms): median [min, max]",
        partitions
    );
    for ((name, _, _), mut t) in paths.iter().zip(times) {
        t.sort_by(|a, b| a.total_cmp(b));
        println!(
            "  {name:<42} {:>8.1} [{:.1}, {:.1}]",
            t[t.len() / 2],
            t[0],
            t[t.len() - 1]
        );
    }
    Ok(())
}
