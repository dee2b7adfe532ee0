//! Writes generated tables into an Iceberg catalog with iceberg's own Parquet writer.
//!
//! ```text
//!   tpchgen rows ──► Arrow batches ──► [sort] ──► DataFileWriter (rolling at target file size,
//!                                                  row groups of N rows, page index on)
//!                                              ──► fast-append commit, one snapshot per table
//! ```
//!
//! A load is all or nothing per namespace: it refuses an existing namespace unless `replace` is
//! set, and on any failure, or when [`LoadOptions::cancel`] fires (the CLI cancels it on Ctrl-C
//! and SIGTERM), drops what it created (tables, their files and the namespace). Each table is
//! committed in one fast append, so a table with a current snapshot holds all its rows: a load
//! killed outright (SIGKILL, power loss) leaves tables without snapshots, which
//! [`tpch_status`] reports as incomplete.

pub use iceflight_input::units::parse_size;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::{SortColumn, concat_batches, lexsort_to_indices, take_record_batch};
use arrow::datatypes::SchemaRef;
use futures::TryStreamExt;
use iceberg::spec::DataFileFormat;
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use iceberg::{Catalog, NamespaceIdent, TableCreation, TableIdent};
use indicatif::{ProgressBar, ProgressStyle};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use tokio_util::sync::CancellationToken;

use crate::nested::{self, NestedLayout};
use crate::{ssb, tpch};
use iceflight_catalog::CatalogError;

/// Layout options of a load.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// TPC-H scale factor (1.0 = 6M lineitem rows).
    pub scale: f64,
    /// Sort keys per table: `lineitem → [l_shipdate]` sorts lineitem before writing.
    pub sort: HashMap<String, Vec<String>>,
    /// Roll to a new data file past this many bytes (iceberg's default is 512 MiB).
    pub target_file_size: usize,
    /// Rows per Parquet row group.
    pub row_group_rows: usize,
    /// Drop and recreate an existing namespace instead of refusing.
    pub replace: bool,
    /// Show progress on stderr: a bar per table on a terminal, else one line per table.
    pub progress: bool,
    /// Cancelling it stops the load, which then removes what it wrote and fails with
    /// [`CatalogError::Interrupted`].
    pub cancel: CancellationToken,
}

/// Largest scale factor a load accepts (SF 1 is about 1 GB of Parquet-bound data, 6 M lineitem
/// rows; SF 1000 is TPC-H's largest standard size below 3000).
pub const MAX_SCALE: f64 = 1000.0;

/// Checks a scale factor: finite, above 0 and at most [`MAX_SCALE`].
///
/// Errors: [`CatalogError::Config`] naming the value.
pub fn check_scale(scale: f64) -> Result<(), CatalogError> {
    if scale.is_finite() && scale > 0.0 && scale <= MAX_SCALE {
        Ok(())
    } else {
        Err(CatalogError::Config(format!(
            "scale factor {scale} is out of range: it must be above 0 and at most {MAX_SCALE} \
             (SF 1 is about 1 GB of data)"
        )))
    }
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            scale: 0.1,
            sort: HashMap::new(),
            target_file_size: 512 * 1024 * 1024,
            row_group_rows: 128 * 1024,
            replace: false,
            progress: true,
            cancel: CancellationToken::new(),
        }
    }
}

/// What a load wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadReport {
    /// `(table, rows, data files)` in load order.
    pub tables: Vec<(String, u64, usize)>,
}

/// Loads all eight TPC-H tables into `namespace` of `catalog`.
///
/// Errors: [`CatalogError::AlreadyExists`] if the namespace exists and `replace` is false;
/// [`CatalogError::Config`] for an unknown table or column in `sort`; any catalog or write error
/// (after which nothing of this load remains).
pub async fn load_tpch(
    catalog: &Arc<dyn Catalog>,
    namespace: &NamespaceIdent,
    options: &LoadOptions,
) -> Result<LoadReport, CatalogError> {
    for (table, cols) in &options.sort {
        let schema = tpch::schema(table)
            .ok_or_else(|| CatalogError::Config(format!("--sort: unknown TPC-H table {table}")))?;
        for c in cols {
            if schema.field_by_name(c).is_none() {
                return Err(CatalogError::Config(format!(
                    "--sort: table {table} has no column {c}"
                )));
            }
        }
    }
    check_scale(options.scale)?;
    if options.row_group_rows == 0 || options.target_file_size == 0 {
        return Err(CatalogError::Config(
            "row group rows and target file size must be positive".into(),
        ));
    }
    let what = format!("TPC-H SF {} ({} tables)", options.scale, tpch::TABLES.len());
    all_or_nothing(
        catalog,
        namespace,
        options,
        &what,
        load_tables(catalog, namespace, options),
    )
    .await
}

/// Loads the nested-field table `nested` (`nested.rs`: `rows` rows in `layout` order) into
/// `namespace`, with the same namespace rules as [`load_tpch`] (`options.scale` and
/// `options.sort` are not used).
///
/// Errors: as [`load_tpch`]; [`CatalogError::Config`] for zero rows.
pub async fn load_nested(
    catalog: &Arc<dyn Catalog>,
    namespace: &NamespaceIdent,
    rows: usize,
    layout: NestedLayout,
    options: &LoadOptions,
) -> Result<LoadReport, CatalogError> {
    if rows == 0 || options.row_group_rows == 0 || options.target_file_size == 0 {
        return Err(CatalogError::Config(
            "rows, row group rows and target file size must be positive".into(),
        ));
    }
    let loaded = async {
        let (table, arrow_schema) = create_table(
            catalog,
            namespace,
            nested::TABLE,
            nested::schema(),
            &options.cancel,
        )
        .await?;
        let batch = nested::generate(&arrow_schema, rows, layout)
            .map_err(|e| CatalogError::Load(format!("generating {}: {e}", nested::TABLE)))?;
        let mut writer = data_file_writer(&table, nested::TABLE, options).await?;
        let chunk = options.row_group_rows.clamp(1024, 64 * 1024);
        write_chunked(&mut writer, batch, chunk, &options.cancel).await?;
        let files = commit(catalog, &table, writer, &options.cancel).await?;
        Ok(LoadReport {
            tables: vec![(nested::TABLE.to_string(), rows as u64, files)],
        })
    };
    let what = format!("the nested table ({rows} rows, {layout} layout)");
    all_or_nothing(catalog, namespace, options, &what, loaded).await
}

/// Loads the five Star Schema Benchmark tables (`ssb.rs`: derived from TPC-H at
/// `options.scale`) into `namespace`, with the same namespace rules as [`load_tpch`].
/// `sorted_dates` orders LINEORDER by `lo_orderdate`; otherwise it keeps TPC-H's order-key
/// order (dates shuffled). `options.sort` is not used.
///
/// Errors: as [`load_tpch`]; [`CatalogError::Load`] when deriving a table fails.
pub async fn load_ssb(
    catalog: &Arc<dyn Catalog>,
    namespace: &NamespaceIdent,
    options: &LoadOptions,
    sorted_dates: bool,
) -> Result<LoadReport, CatalogError> {
    check_scale(options.scale)?;
    if options.row_group_rows == 0 || options.target_file_size == 0 {
        return Err(CatalogError::Config(
            "row group rows and target file size must be positive".into(),
        ));
    }
    let loaded = async {
        let source = ssb::tpch_context(options.scale)
            .await
            .map_err(CatalogError::Load)?;
        let mut report = LoadReport { tables: vec![] };
        for name in ssb::TABLES {
            let schema = ssb::schema(name).expect("known table");
            let (table, arrow_schema) =
                create_table(catalog, namespace, name, schema, &options.cancel).await?;
            let estimate = match name {
                "dwdate" => 2557,
                "lineorder" => tpch::estimated_rows("lineitem", options.scale),
                other => tpch::estimated_rows(other, options.scale),
            };
            let progress = Progress::start(options.progress, name, estimate);
            let mut writer = data_file_writer(&table, name, options).await?;
            let chunk = options.row_group_rows.clamp(1024, 64 * 1024);
            let mut rows = 0u64;
            let load_err = |e: datafusion::error::DataFusionError| {
                CatalogError::Load(format!("deriving {name}: {e}"))
            };
            match ssb::query(name, sorted_dates) {
                None => {
                    let batch =
                        ssb::dwdate(Arc::clone(&arrow_schema)).map_err(CatalogError::Load)?;
                    rows += batch.num_rows() as u64;
                    write_chunked(&mut writer, batch, chunk, &options.cancel).await?;
                }
                Some(sql) => {
                    let mut stream = source
                        .sql(&sql)
                        .await
                        .map_err(load_err)?
                        .execute_stream()
                        .await
                        .map_err(load_err)?;
                    while let Some(batch) = stream.try_next().await.map_err(load_err)? {
                        let batch = conform(&arrow_schema, &batch)?;
                        progress.inc(batch.num_rows());
                        rows += batch.num_rows() as u64;
                        write_chunked(&mut writer, batch, chunk, &options.cancel).await?;
                    }
                }
            }
            let n_files = commit(catalog, &table, writer, &options.cancel).await?;
            progress.finish(rows, n_files);
            report.tables.push((name.to_string(), rows, n_files));
        }
        Ok(report)
    };
    let what = format!("SSB SF {} ({} tables)", options.scale, ssb::TABLES.len());
    all_or_nothing(catalog, namespace, options, &what, loaded).await
}

/// Creates table `name` in the existing `namespace` with `schema` and commits `files` in one fast
/// append: each inner list of batches becomes one data file (written with the load's Parquet
/// settings, one row group per `options.row_group_rows` rows). Batches are taken by column
/// position and cast to the table's types. For small tables of exact layout (tests, fixtures).
///
/// Errors: a column that cannot be cast, a NULL in a required column, any catalog or write error
/// (the table is then dropped again).
pub async fn create_table_with_files(
    catalog: &Arc<dyn Catalog>,
    namespace: &NamespaceIdent,
    name: &str,
    schema: iceberg::spec::Schema,
    files: Vec<Vec<RecordBatch>>,
    options: &LoadOptions,
) -> Result<Table, CatalogError> {
    let (table, arrow_schema) =
        create_table(catalog, namespace, name, schema, &options.cancel).await?;
    let written = async {
        let mut data_files = vec![];
        for batches in files {
            let mut writer = data_file_writer(&table, name, options).await?;
            for batch in batches {
                writer.write(conform(&arrow_schema, &batch)?).await?;
            }
            data_files.extend(writer.close().await?);
        }
        let tx = Transaction::new(&table);
        let tx = tx.fast_append().add_data_files(data_files).apply(tx)?;
        Ok(tx.commit(catalog.as_ref()).await?)
    }
    .await;
    if written.is_err()
        && let Err(cleanup) = drop_table_and_files(catalog, table.identifier()).await
    {
        tracing::error!(error = %cleanup, "dropping a table whose write failed failed");
    }
    written
}

/// `batch` under the table's Arrow `schema` (field ids, exact types): columns by position, each
/// cast to the schema's type. Errors: a failed cast or a NULL in a required column.
fn conform(schema: &SchemaRef, batch: &RecordBatch) -> Result<RecordBatch, CatalogError> {
    let columns = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, c)| arrow::compute::cast(c, f.data_type()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CatalogError::Load(e.to_string()))?;
    RecordBatch::try_new(Arc::clone(schema), columns).map_err(|e| CatalogError::Load(e.to_string()))
}

/// `Err(Interrupted)` once `cancel` fired: the check a load makes between its steps.
fn go_on(cancel: &CancellationToken) -> Result<(), CatalogError> {
    if cancel.is_cancelled() {
        Err(CatalogError::Interrupted)
    } else {
        Ok(())
    }
}

/// Creates `namespace`, first dropping an existing one when `replace` is set.
async fn create_namespace(
    catalog: &Arc<dyn Catalog>,
    namespace: &NamespaceIdent,
    replace: bool,
) -> Result<(), CatalogError> {
    if namespace.iter().any(|part| part.trim().is_empty()) {
        return Err(CatalogError::Config(format!(
            "invalid namespace {:?}: every dot-separated part must be non-empty",
            namespace.join(".")
        )));
    }
    // Parents of a multi-level namespace first (`a` for `a.b`), so listings can reach it.
    for depth in 1..namespace.len() {
        let parent = NamespaceIdent::from_vec(namespace.iter().take(depth).cloned().collect())?;
        if !catalog.namespace_exists(&parent).await? {
            catalog.create_namespace(&parent, HashMap::new()).await?;
        }
    }
    if catalog.namespace_exists(namespace).await? {
        if !replace {
            return Err(CatalogError::AlreadyExists(format!(
                "namespace {} already exists; pass --replace to overwrite it",
                namespace.join(".")
            )));
        }
        drop_namespace(catalog, namespace).await?;
    }
    catalog.create_namespace(namespace, HashMap::new()).await?;
    Ok(())
}

/// Creates `namespace` (see [`create_namespace`]), announces the load (`what`, on stderr when
/// `options.progress`), then runs `body`, the load of its tables. On an error, including the
/// [`CatalogError::Interrupted`] that `body` returns once `options.cancel` fired, it drops
/// everything in the namespace and the namespace itself: a load leaves all its tables or nothing.
///
/// Cancellation is cooperative: `body` checks the token before each catalog write (table
/// creation, commit) and each slice of rows, never inside a catalog call, so no catalog call is
/// cut half-way (a table whose metadata file was written but whose entry was not would escape
/// the cleanup, which finds tables by listing them).
///
/// Errors: those of `body` and [`create_namespace`].
async fn all_or_nothing(
    catalog: &Arc<dyn Catalog>,
    namespace: &NamespaceIdent,
    options: &LoadOptions,
    what: &str,
    body: impl std::future::Future<Output = Result<LoadReport, CatalogError>>,
) -> Result<LoadReport, CatalogError> {
    go_on(&options.cancel)?;
    create_namespace(catalog, namespace, options.replace).await?;
    if options.progress {
        eprintln!("loading {what} into {}", namespace.join("."));
    }
    let loaded = body.await;
    if loaded.is_err()
        && let Err(cleanup) = drop_namespace(catalog, namespace).await
    {
        tracing::error!(error = %cleanup, "cleanup after a failed load failed");
    }
    loaded
}

async fn load_tables(
    catalog: &Arc<dyn Catalog>,
    namespace: &NamespaceIdent,
    options: &LoadOptions,
) -> Result<LoadReport, CatalogError> {
    let mut report = LoadReport { tables: vec![] };
    for name in tpch::TABLES {
        let schema = tpch::schema(name).expect("known table");
        let (table, arrow_schema) =
            create_table(catalog, namespace, name, schema, &options.cancel).await?;

        let progress = Progress::start(
            options.progress,
            name,
            tpch::estimated_rows(name, options.scale),
        );
        let sort = options.sort.get(name).cloned().unwrap_or_default();
        let mut writer = data_file_writer(&table, name, options).await?;

        // Generation runs on a blocking thread while this task encodes and writes Parquet.
        let (sender, mut receiver) = tokio::sync::mpsc::channel::<RecordBatch>(4);
        let (scale, gen_schema) = (options.scale, Arc::clone(&arrow_schema));
        let generator = tokio::task::spawn_blocking(move || {
            tpch::generate(name, scale, gen_schema, 64 * 1024, |b| {
                sender
                    .blocking_send(b)
                    .map_err(|_| "the writer stopped".to_string())
            })
        });
        // The rolling writer checks the file size before each write: write in slices no larger
        // than a row group so files roll close to the target size.
        let chunk = options.row_group_rows.clamp(1024, 64 * 1024);
        let mut rows = 0u64;
        let mut held = Vec::new();
        while let Some(batch) = receiver.recv().await {
            progress.inc(batch.num_rows());
            rows += batch.num_rows() as u64;
            if sort.is_empty() {
                write_chunked(&mut writer, batch, chunk, &options.cancel).await?;
            } else {
                held.push(batch);
            }
        }
        generator
            .await
            .map_err(|e| CatalogError::Load(format!("generating {name}: {e}")))?
            .map_err(CatalogError::Load)?;
        if !sort.is_empty() {
            for batch in sort_batches(&arrow_schema, held, &sort)? {
                write_chunked(&mut writer, batch, chunk, &options.cancel).await?;
            }
        }
        let n_files = commit(catalog, &table, writer, &options.cancel).await?;
        progress.finish(rows, n_files);
        report.tables.push((name.to_string(), rows, n_files));
    }
    Ok(report)
}

/// Creates table `name` with `schema` in `namespace`; returns it and its Arrow schema (with
/// field ids), the schema its batches are written under.
async fn create_table(
    catalog: &Arc<dyn Catalog>,
    namespace: &NamespaceIdent,
    name: &str,
    schema: iceberg::spec::Schema,
    cancel: &CancellationToken,
) -> Result<(Table, SchemaRef), CatalogError> {
    go_on(cancel)?;
    let creation = TableCreation::builder()
        .name(name.to_string())
        .schema(schema)
        .build();
    let table = catalog.create_table(namespace, creation).await?;
    let arrow_schema = Arc::new(iceberg::arrow::schema_to_arrow_schema(
        table.metadata().current_schema(),
    )?);
    Ok((table, arrow_schema))
}

/// A rolling data-file writer for `table`: ZSTD(1), page-level statistics (page index on),
/// `row_group_rows` rows per row group, a new file past `target_file_size`.
async fn data_file_writer(
    table: &Table,
    name: &str,
    options: &LoadOptions,
) -> Result<impl IcebergWriter, CatalogError> {
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(1).expect("valid level"),
        ))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(options.row_group_rows))
        .build();
    let parquet = ParquetWriterBuilder::new(props, table.metadata().current_schema().clone());
    let rolling = RollingFileWriterBuilder::new(
        parquet,
        options.target_file_size,
        table.file_io().clone(),
        DefaultLocationGenerator::new(table.metadata())?,
        DefaultFileNameGenerator::new(
            format!("{name}-{}", uuid::Uuid::new_v4()),
            None,
            DataFileFormat::Parquet,
        ),
    );
    Ok(DataFileWriterBuilder::new(rolling).build(None).await?)
}

/// Closes `writer` and commits its data files to `table` in one fast append; returns the
/// number of data files.
async fn commit(
    catalog: &Arc<dyn Catalog>,
    table: &Table,
    mut writer: impl IcebergWriter,
    cancel: &CancellationToken,
) -> Result<usize, CatalogError> {
    go_on(cancel)?;
    let files = writer.close().await?;
    let n_files = files.len();
    let tx = Transaction::new(table);
    let tx = tx.fast_append().add_data_files(files).apply(tx)?;
    tx.commit(catalog.as_ref()).await?;
    Ok(n_files)
}

/// Writes `batch` in slices of `chunk` rows, stopping with [`CatalogError::Interrupted`] before
/// any slice once `cancel` fired.
async fn write_chunked(
    writer: &mut impl IcebergWriter,
    batch: RecordBatch,
    chunk: usize,
    cancel: &CancellationToken,
) -> Result<(), CatalogError> {
    let mut start = 0;
    while start < batch.num_rows() {
        go_on(cancel)?;
        let len = chunk.min(batch.num_rows() - start);
        writer.write(batch.slice(start, len)).await?;
        start += len;
    }
    Ok(())
}

fn sort_batches(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    keys: &[String],
) -> Result<Vec<RecordBatch>, CatalogError> {
    let all = concat_batches(schema, &batches).map_err(|e| CatalogError::Load(e.to_string()))?;
    let columns = keys
        .iter()
        .map(|k| {
            let idx = schema
                .index_of(k)
                .map_err(|e| CatalogError::Load(e.to_string()))?;
            Ok(SortColumn {
                values: Arc::clone(all.column(idx)),
                options: None,
            })
        })
        .collect::<Result<Vec<_>, CatalogError>>()?;
    let indices =
        lexsort_to_indices(&columns, None).map_err(|e| CatalogError::Load(e.to_string()))?;
    let sorted =
        take_record_batch(&all, &indices).map_err(|e| CatalogError::Load(e.to_string()))?;
    let chunk = 64 * 1024;
    Ok((0..sorted.num_rows())
        .step_by(chunk)
        .map(|start| sorted.slice(start, chunk.min(sorted.num_rows() - start)))
        .collect())
}

/// Progress of one table's load on stderr: an indicatif bar on a terminal; elsewhere (a log
/// file, CI) one line when the table is done, so a long load is never silent.
struct Progress {
    table: String,
    bar: ProgressBar,
    lines: bool,
    started: std::time::Instant,
}

impl Progress {
    fn start(enabled: bool, table: &str, estimate: u64) -> Self {
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let bar = if enabled && terminal {
            let bar = ProgressBar::new(estimate);
            bar.set_style(
                ProgressStyle::with_template("{msg:>10} [{bar:30}] {pos}/~{len} rows {elapsed}")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            bar.set_message(table.to_string());
            bar
        } else {
            ProgressBar::hidden()
        };
        Self {
            table: table.to_string(),
            bar,
            lines: enabled && !terminal,
            started: std::time::Instant::now(),
        }
    }

    fn inc(&self, rows: usize) {
        self.bar.inc(rows as u64);
    }

    fn finish(&self, rows: u64, files: usize) {
        let line = format!(
            "{}: {rows} rows in {files} data files ({:.1} s)",
            self.table,
            self.started.elapsed().as_secs_f64()
        );
        if self.lines {
            eprintln!("{line}");
        } else {
            self.bar.finish_with_message(line);
        }
    }
}

/// Whether `namespace` holds a complete TPC-H load, as the demo needs it.
#[derive(Debug, Clone, PartialEq)]
pub enum TpchStatus {
    /// The namespace does not exist.
    Missing,
    /// All eight tables, each committed with the row counts of scale factor `scale` (derived
    /// from `customer`: 150 000 rows per unit of scale).
    Complete {
        /// Scale factor of the data.
        scale: f64,
    },
    /// Tables are missing, uncommitted (an interrupted load) or hold other row counts.
    Incomplete {
        /// What is wrong, for a person (`lineitem has no snapshot`).
        reason: String,
        /// Tables in the namespace that are not TPC-H tables (a reload would drop them).
        foreign: Vec<String>,
    },
}

/// Checks `namespace` for a complete TPC-H load from table metadata alone (snapshot summaries'
/// `total-records`; no data file is read).
///
/// Errors: catalog errors.
pub async fn tpch_status(
    catalog: &Arc<dyn Catalog>,
    namespace: &NamespaceIdent,
) -> Result<TpchStatus, CatalogError> {
    if !catalog.namespace_exists(namespace).await? {
        return Ok(TpchStatus::Missing);
    }
    let tables = catalog.list_tables(namespace).await?;
    let foreign: Vec<String> = tables
        .iter()
        .map(|t| t.name().to_string())
        .filter(|n| !tpch::TABLES.contains(&n.as_str()))
        .collect();
    let mut rows = HashMap::new();
    let mut problems = vec![];
    for name in tpch::TABLES {
        let ident = TableIdent::new(namespace.clone(), name.to_string());
        if !tables.contains(&ident) {
            problems.push(format!("{name} is missing"));
            continue;
        }
        let table = catalog.load_table(&ident).await?;
        let records = table
            .metadata()
            .current_snapshot()
            .and_then(|s| s.summary().additional_properties.get("total-records"))
            .and_then(|n| n.parse::<u64>().ok());
        match records {
            Some(n) if n > 0 => {
                rows.insert(name, n);
            }
            _ => problems.push(format!("{name} has no data")),
        }
    }
    let scale = rows.get("customer").map(|c| *c as f64 / 150_000.0);
    if problems.is_empty()
        && let Some(scale) = scale
    {
        for (name, n) in &rows {
            if let Some(expected) = tpch::row_count(name, scale)
                && expected != *n
            {
                problems.push(format!(
                    "{name} has {n} rows, {expected} expected at SF {scale}"
                ));
            }
        }
    }
    problems.sort();
    Ok(match (problems.is_empty(), scale) {
        (true, Some(scale)) => TpchStatus::Complete { scale },
        _ => TpchStatus::Incomplete {
            reason: problems.join(", "),
            foreign,
        },
    })
}

/// Drops every table of `namespace` (catalog entry and files under the table location), then the
/// namespace itself.
pub async fn drop_namespace(
    catalog: &Arc<dyn Catalog>,
    namespace: &NamespaceIdent,
) -> Result<(), CatalogError> {
    for ident in catalog.list_tables(namespace).await? {
        drop_table_and_files(catalog, &ident).await?;
    }
    catalog.drop_namespace(namespace).await?;
    Ok(())
}

async fn drop_table_and_files(
    catalog: &Arc<dyn Catalog>,
    ident: &TableIdent,
) -> Result<(), CatalogError> {
    let table = catalog.load_table(ident).await?;
    let location = table.metadata().location().to_string();
    catalog.drop_table(ident).await?;
    table.file_io().delete_prefix(&location).await?;
    Ok(())
}
