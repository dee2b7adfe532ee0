//! `nested` — bytes read by nested struct-field predicates as a share of a full scan, in three
//! layouts, beside a flat control column holding the same values (issue 5): the measurement
//! behind `scan/README.md`'s "Nested struct fields".
//!
//! ```text
//!   load nested (rows, 3 layouts) ──► per layout, per column (s.key | flat_key), per query:
//!     clear the footer cache ──► SELECT * … WHERE <predicate> ──► bytes_scanned + footer_bytes_read
//!   share = bytes / bytes of SELECT * without a predicate
//! ```
//!
//! Bytes are deterministic counters (what iceberg's reader fetched plus our footer reads), so
//! one run suffices. Manifest reads at planning are not counted for any query.

use std::path::PathBuf;
use std::sync::Arc;

use datafusion::common::{DataFusionError, Result};
use datafusion::physical_plan::{ExecutionPlan, collect};
use iceberg::NamespaceIdent;
use iceflight::config::Config;
use iceflight::session::Engine;
use iceflight_datagen::load::{LoadOptions, load_nested, parse_size};
use iceflight_datagen::nested::NestedLayout;
use iceflight_scan::IcebergScanExec;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};

/// Options of one run.
pub struct Args {
    pub data_dir: PathBuf,
    pub rows: usize,
    pub row_group_rows: usize,
    pub target_file_size: String,
    pub load: bool,
}

const LAYOUTS: [(&str, NestedLayout); 3] = [
    ("clustered on the nested field", NestedLayout::Clustered),
    (
        "zone-ordered (Z-order of s.key, s.addr.zip)",
        NestedLayout::Zorder,
    ),
    ("randomly distributed", NestedLayout::Random),
];

fn namespace(layout: NestedLayout) -> String {
    format!("nested_{layout:?}").to_lowercase()
}

fn ext<E: std::error::Error + Send + Sync + 'static>(e: E) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// Counters summed over the plan's scans.
#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    bytes: usize,
    rows_out: usize,
    files_opened: usize,
    row_groups_pruned: usize,
}

fn counters(plan: &Arc<dyn ExecutionPlan>) -> Counters {
    let mut out = Counters::default();
    let mut stack = vec![Arc::clone(plan)];
    while let Some(p) = stack.pop() {
        if p.is::<IcebergScanExec>()
            && let Some(m) = p.metrics()
        {
            let get = |name: &str| {
                m.sum_by_name(name)
                    .map(|v| v.as_usize())
                    .unwrap_or_default()
            };
            out.bytes += get("bytes_scanned") + get("footer_bytes_read");
            out.rows_out += m.output_rows().unwrap_or_default();
            out.files_opened += get("files_opened");
            out.row_groups_pruned += get("row_groups_pruned");
        }
        stack.extend(p.children().into_iter().cloned());
    }
    out
}

async fn measure(engine: &Engine, ns: &str, predicate: Option<&str>) -> Result<Counters> {
    engine.caches().footers.clear();
    let ctx = engine.session(None, Some(ns), &[])?;
    let sql = match predicate {
        Some(p) => format!("SELECT * FROM nested WHERE {p}"),
        None => "SELECT * FROM nested".to_string(),
    };
    let plan = ctx.sql(&sql).await?.create_physical_plan().await?;
    collect(Arc::clone(&plan), ctx.task_ctx()).await?;
    Ok(counters(&plan))
}

/// Data pages per `s.key` column chunk, read from the page index of every data file (page-level
/// selection could only add where a chunk has several pages).
async fn pages_per_chunk(engine: &Engine, ns: &str) -> Result<(usize, usize)> {
    let catalog = engine.catalogs().get("local").map_err(ext)?;
    let table = catalog
        .load_table(&iceberg::TableIdent::new(
            NamespaceIdent::new(ns.into()),
            "nested".into(),
        ))
        .await
        .map_err(ext)?;
    let index = iceflight_scan::plan::metrics_index::FileMetricsIndex::load(&table)
        .await
        .map_err(ext)?;
    let (mut chunks, mut pages) = (0, 0);
    for path in index.paths() {
        let local = path.strip_prefix("file://").unwrap_or(path);
        let file = std::fs::File::open(local).map_err(ext)?;
        let metadata = ParquetMetaDataReader::new()
            .with_page_index_policy(PageIndexPolicy::Required)
            .parse_and_finish(&file)
            .map_err(ext)?;
        let descr = metadata.file_metadata().schema_descr();
        let Some(leaf) = descr
            .columns()
            .iter()
            .position(|c| c.path().string() == "s.key")
        else {
            continue;
        };
        if let Some(offsets) = metadata.offset_index() {
            for rg in offsets {
                chunks += 1;
                pages += rg[leaf].page_locations().len();
            }
        }
    }
    Ok((chunks, pages))
}

/// Loads (when asked) and measures; prints a markdown report on stdout.
pub async fn run(args: Args) -> Result<()> {
    let config = Config {
        data_dir: args.data_dir.clone(),
        ..Config::default()
    };
    let engine = Engine::connect(config).await.map_err(ext)?;
    let catalog = Arc::clone(engine.catalogs().get("local").map_err(ext)?);
    let options = LoadOptions {
        target_file_size: parse_size(&args.target_file_size).map_err(ext)?,
        row_group_rows: args.row_group_rows,
        replace: true,
        progress: false,
        ..LoadOptions::default()
    };
    if args.load {
        for (_, layout) in LAYOUTS {
            let report = load_nested(
                &catalog,
                &NamespaceIdent::new(namespace(layout)),
                args.rows,
                layout,
                &options,
            )
            .await
            .map_err(ext)?;
            eprintln!("loaded {}: {:?}", namespace(layout), report.tables);
        }
    }
    let rows = args.rows as i64;
    let mid = rows / 2 + 17;
    let queries = [
        ("point `=`", format!("= {mid}")),
        (
            "`BETWEEN`, 1 %",
            format!("BETWEEN {mid} AND {}", mid + rows / 100 - 1),
        ),
        (
            "`BETWEEN`, 10 %",
            format!("BETWEEN {mid} AND {}", mid + rows / 10 - 1),
        ),
        ("absent value", "= -1".to_string()),
    ];
    println!(
        "{} rows, {}-row row groups, target file size {}; bytes read (iceberg reader + our footer \
         reads, footer cache cleared before each query) as % of `SELECT *` without a predicate\n",
        args.rows, args.row_group_rows, args.target_file_size
    );
    print!("| data layout | column |");
    for (name, _) in &queries {
        print!(" {name} |");
    }
    println!(" full scan |");
    println!("|---|---|{}---|", "---|".repeat(queries.len()));
    let mut details = vec![];
    for (label, layout) in LAYOUTS {
        let ns = namespace(layout);
        let full = measure(&engine, &ns, None).await?;
        for column in ["s.key", "flat_key"] {
            print!("| {label} | `{column}` |");
            for (name, predicate) in &queries {
                let c = measure(&engine, &ns, Some(&format!("{column} {predicate}"))).await?;
                print!(
                    " {:.2} % |",
                    100.0 * c.bytes as f64 / full.bytes.max(1) as f64
                );
                details.push(format!(
                    "| {label} | `{column}` | {name} | {} | {} | {} | {} |",
                    c.bytes, c.files_opened, c.row_groups_pruned, c.rows_out
                ));
            }
            println!(" {} B |", full.bytes);
        }
    }
    println!(
        "\n| data layout | column | query | bytes read | files opened | row groups pruned | rows out of the scan |"
    );
    println!("|---|---|---|---|---|---|---|");
    for d in details {
        println!("{d}");
    }
    println!();
    for (label, layout) in LAYOUTS {
        let (chunks, pages) = pages_per_chunk(&engine, &namespace(layout)).await?;
        println!("{label}: {chunks} `s.key` column chunks, {pages} data pages");
    }
    Ok(())
}
