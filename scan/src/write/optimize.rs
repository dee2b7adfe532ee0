//! `ALTER TABLE t EXECUTE optimize(file_size_threshold => '128MB') [WHERE …]`: compaction.
//! Small data files, and data files with delete files, are read (their deletes applied) and
//! written again as few files, in the table's sort order; the table's rows do not change.
//!
//! ```text
//!   data files of the current snapshot (WHERE on identity-partition columns: manifest pruning)
//!     candidates: file size < threshold, or any delete file applies to it
//!                 (`sort_by`: every file)
//!     per partition: ≥ 2 candidates, or one with deletes ──► rewritten
//!   rewritten files' live rows ──► sorted by the table's sort order ──► new data files
//!     ──► one `replace` snapshot: the rewritten files removed (with their file-scoped
//!         delete files and deletion vectors), the new ones added (`iceberg/src/commit.rs`)
//!   another writer committed first ──► only appends: committed on top of them
//!                                      otherwise: new files dropped, `WriteConflict` (Aborted)
//! ```
//!
//! A delete file that names its data file (`referenced_data_file`, deletion vectors) goes with
//! it. A partition-scoped position delete file or an equality delete file goes when no data
//! file left in place reads it (equality deletes only when no `WHERE` limits the compaction:
//! they may apply across partitions); otherwise it stays, harmless: it applies to data files of
//! a lower sequence number only, and the new files get this snapshot's, so nothing it deletes
//! comes back and nothing new is deleted. Trino's `optimize` picks its files the
//! same way (size under the threshold; `WHERE` on partition columns only).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use datafusion::common::{Result, plan_err};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::{LexOrdering, LexRequirement, PhysicalSortExpr};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::execute_stream;
use datafusion::physical_plan::sorts::sort::SortExec;
use iceberg::scan::FileScanTask;
use iceflight_iceberg::commit::{CommitCatalog, FileChanges};

use crate::exec::scan_exec::IcebergScanExec;
use crate::plan::planned::assemble;
use crate::plan::planner::ScanPlanner;
use crate::read::caches::ScanCaches;
use crate::write::data_files::write_data_files;
use crate::write::overwrite::commit_on_appends;
use crate::write::row_change::without_empty;
use crate::write::zorder::{ZOrderKey, ZScale};

/// Commits after other writers' appends before giving up. More than a statement's
/// (`delete.rs`: 8): a compaction of a table under a stream of appends is what it is for, and
/// a retry costs only metadata writes.
const REBASES: usize = 32;

/// The order `optimize(sort_by => …)` rewrites every file in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SortBy {
    /// `'c1, c2'`: ascending, NULLs last, by `c1` then `c2`.
    Columns(Vec<String>),
    /// `'zorder(c1, c2)'` (Spark's spelling): by the Z-order key of the columns
    /// (`write/zorder.rs`), which clusters each of them.
    ZOrder(Vec<String>),
}

impl SortBy {
    /// `text` as `sort_by` takes it: `'c1, c2'` or `'zorder(c1, c2)'` (case-insensitive);
    /// a Z-order of one column is a plain sort.
    pub fn parse(text: &str) -> Self {
        let list = |t: &str| -> Vec<String> {
            t.split(',')
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty())
                .collect()
        };
        let trimmed = text.trim();
        let lower = trimmed.to_ascii_lowercase();
        match lower.strip_prefix("zorder") {
            Some(rest) if rest.trim_start().starts_with('(') && rest.ends_with(')') => {
                let open = trimmed.find('(').unwrap_or(0);
                let columns = list(&trimmed[open + 1..trimmed.len() - 1]);
                match columns.len() {
                    0 | 1 => SortBy::Columns(columns),
                    _ => SortBy::ZOrder(columns),
                }
            }
            _ => SortBy::Columns(list(trimmed)),
        }
    }

    /// The columns named, in order.
    pub fn columns(&self) -> &[String] {
        match self {
            SortBy::Columns(c) | SortBy::ZOrder(c) => c,
        }
    }
}

/// What one `optimize` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OptimizeReport {
    /// Data files read and removed.
    pub rewritten_data_files: u64,
    /// Delete files that applied to them (their deletes are now applied).
    pub applied_delete_files: u64,
    /// Of those, the ones that named no single data file and now apply to none, removed from
    /// the table (those that name one go with it).
    pub removed_delete_files: u64,
    /// Data files written.
    pub added_data_files: u64,
    /// Rows written (the live rows of the rewritten files).
    pub rows: u64,
    /// Bytes of the rewritten data files.
    pub rewritten_bytes: u64,
    /// Bytes of the data files written.
    pub added_bytes: u64,
}

/// Compacts `table` (module docs): files under `threshold` bytes, or with deletes, in the
/// partitions `filters` select (conjuncts on identity-partition columns only).
///
/// `table_order` is the table's sort order over the scan's columns (the provider's
/// `write_order`).
///
/// Errors: a table with a column iceflight cannot write; a filter on another column
/// (`InvalidArgument`); [`WriteConflict`](crate::model::write_conflict::WriteConflict) when a writer other than an appender committed
/// first; a read or write failure (nothing committed).
///
/// `sort_by`: rewrite every data file of those partitions (not only the small ones) with the
/// rows in that order ([`SortBy`]; the layout advice's order, `read/table_access.rs`); `None`:
/// the table's own sort order.
pub async fn optimize(
    catalog: &Arc<dyn CommitCatalog>,
    planner: &ScanPlanner,
    table_order: Option<LexRequirement>,
    filters: &[Expr],
    threshold: u64,
    sort_by: Option<&SortBy>,
    context: &Arc<TaskContext>,
) -> Result<OptimizeReport> {
    let ident = planner.table().identifier().clone();
    planner.check_writable()?;
    check_partition_filters(planner.table(), filters)?;
    let columns: Vec<usize> = (0..planner.plain_schema().fields().len()).collect();
    let config = context.session_config();
    let caches = ScanCaches::of(config);
    let (inputs, index, tasks) = planner
        .plan_tasks(config, &columns, filters, None, &caches.indexes)
        .await?;
    if let Some(sort_by) = sort_by
        && let Some(missing) = sort_by
            .columns()
            .iter()
            .find(|c| planner.plain_schema().index_of(c).is_err())
    {
        return plan_err!("optimize's sort_by: {ident} has no column {missing}");
    }
    // Delete files a data file left in place still reads.
    let mut deletes_of_all: Vec<(String, HashSet<String>)> = tasks
        .iter()
        .map(|t| {
            let deletes = t.deletes.iter().map(|d| d.file_path.clone()).collect();
            (t.data_file_path.clone(), deletes)
        })
        .collect();
    let chosen = match sort_by {
        Some(_) => tasks,
        None => choose(tasks, threshold, |t| index.spec_id(&t.data_file_path)),
    };
    if chosen.is_empty() {
        return Ok(OptimizeReport::default());
    }
    let mut report = OptimizeReport {
        rewritten_data_files: chosen.len() as u64,
        rewritten_bytes: chosen.iter().map(|t| t.file_size_in_bytes).sum(),
        ..OptimizeReport::default()
    };
    let deletes: HashSet<&str> = chosen
        .iter()
        .flat_map(|t| t.deletes.iter().map(|d| d.file_path.as_str()))
        .collect();
    report.applied_delete_files = deletes.len() as u64;
    let removed: HashSet<String> = chosen.iter().map(|t| t.data_file_path.clone()).collect();
    deletes_of_all.retain(|(path, _)| !removed.contains(path));
    let still_read: HashSet<&String> = deletes_of_all.iter().flat_map(|(_, d)| d).collect();
    // A delete file every data file it applies to is rewritten: removed with them. Position
    // deletes are partition-scoped, and the WHERE selects whole partitions; an equality delete
    // file may apply across partitions, so only when every partition is compacted.
    let removed_delete_files: HashSet<String> = chosen
        .iter()
        .flat_map(|t| &t.deletes)
        .filter(|d| !still_read.contains(&d.file_path))
        .filter(|d| {
            d.file_type == iceberg::spec::DataContentType::PositionDeletes || filters.is_empty()
        })
        .map(|d| d.file_path.clone())
        .collect();
    report.removed_delete_files = removed_delete_files.len() as u64;

    let mut inputs = inputs;
    inputs.predicate = None;
    let scan: Arc<dyn ExecutionPlan> = Arc::new(IcebergScanExec::new(assemble(
        inputs,
        Arc::clone(&index),
        vec![chosen],
    )));
    let order = match sort_by {
        Some(SortBy::Columns(columns)) => by_columns(columns, &scan.schema())?,
        Some(SortBy::ZOrder(columns)) => {
            let key = zorder_key(columns, &scan.schema(), planner, &index, context)?;
            LexRequirement::new([datafusion::physical_expr::PhysicalSortRequirement::new(
                key,
                Some(arrow::compute::SortOptions {
                    descending: false,
                    nulls_first: false,
                }),
            )])
        }
        None => table_order,
    };
    let rows: Arc<dyn ExecutionPlan> = match order {
        Some(requirement) => {
            let ordering: Vec<PhysicalSortExpr> = requirement
                .into_iter()
                .map(PhysicalSortExpr::from)
                .collect();
            match LexOrdering::new(ordering) {
                Some(ordering) => Arc::new(SortExec::new(ordering, scan)),
                None => scan,
            }
        }
        None => scan,
    };
    let stream = execute_stream(rows, Arc::clone(context))?;
    let (written, rows) = write_data_files(planner.table(), stream).await?;
    let added = without_empty(planner.table(), written).await;
    report.rows = rows;
    report.added_data_files = added.len() as u64;
    report.added_bytes = added.iter().map(|f| f.file_size_in_bytes()).sum();

    let changes = FileChanges {
        removed_data_files: removed,
        removed_delete_files,
        added_data_files: added,
        rewrite: true,
        ..FileChanges::default()
    };
    commit_on_appends(
        catalog.as_ref(),
        planner.table(),
        &changes,
        "optimize",
        REBASES,
    )
    .await?;
    Ok(report)
}

/// The tasks to rewrite (module docs): per (partition spec, partition), the files under
/// `threshold` bytes or with a delete file, when there are two of them or one has deletes.
fn choose(
    tasks: Vec<FileScanTask>,
    threshold: u64,
    spec_of: impl Fn(&FileScanTask) -> Option<i32>,
) -> Vec<FileScanTask> {
    let mut groups: BTreeMap<(Option<i32>, String), Vec<FileScanTask>> = BTreeMap::new();
    for task in tasks {
        if task.file_size_in_bytes >= threshold && task.deletes.is_empty() {
            continue;
        }
        let partition = task
            .partition
            .as_ref()
            .map(|p| format!("{p:?}"))
            .unwrap_or_default();
        groups
            .entry((spec_of(&task), partition))
            .or_default()
            .push(task);
    }
    groups
        .into_values()
        .filter(|g| g.len() >= 2 || g.iter().any(|t| !t.deletes.is_empty()))
        .flatten()
        .collect()
}

/// `columns` ascending, NULLs last, as a sort requirement over `schema`.
fn by_columns(
    columns: &[String],
    schema: &arrow::datatypes::SchemaRef,
) -> Result<Option<datafusion::physical_expr::LexRequirement>> {
    let requirements = columns
        .iter()
        .map(|name| {
            Ok(datafusion::physical_expr::PhysicalSortRequirement::new(
                Arc::new(datafusion::physical_expr::expressions::Column::new(
                    name,
                    schema.index_of(name)?,
                )),
                Some(arrow::compute::SortOptions {
                    descending: false,
                    nulls_first: false,
                }),
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(datafusion::physical_expr::LexRequirement::new(requirements))
}

/// The Z-order key of `columns` over `schema`, each scaled by its range over the table's live
/// data files (`write/zorder.rs`).
fn zorder_key(
    columns: &[String],
    schema: &arrow::datatypes::SchemaRef,
    planner: &ScanPlanner,
    index: &crate::plan::metrics_index::FileMetricsIndex,
    context: &Arc<TaskContext>,
) -> Result<Arc<dyn datafusion::physical_expr::PhysicalExpr>> {
    let table_schema = planner.table().metadata().current_schema();
    let mut scales = vec![];
    let mut args: Vec<Arc<dyn datafusion::physical_expr::PhysicalExpr>> = vec![];
    for name in columns {
        let at = schema.index_of(name)?;
        let data_type = schema.field(at).data_type();
        let bounds = table_schema
            .field_by_name(name)
            .and_then(|f| index.column_range(f.id, data_type));
        scales.push(ZScale::of(data_type, bounds));
        args.push(Arc::new(
            datafusion::physical_expr::expressions::Column::new(name, at),
        ));
    }
    let udf = datafusion::logical_expr::ScalarUDF::new_from_impl(ZOrderKey::new(scales));
    Ok(Arc::new(
        datafusion::physical_expr::ScalarFunctionExpr::try_new(
            Arc::new(udf),
            args,
            schema,
            Arc::clone(context.session_config().options()),
        )?,
    ))
}

/// Errors unless every column `filters` reference is the source of an identity field of the
/// table's default partition spec (Trino's rule for `optimize … WHERE`).
fn check_partition_filters(table: &iceberg::table::Table, filters: &[Expr]) -> Result<()> {
    let metadata = table.metadata();
    let schema = metadata.current_schema();
    let partition_columns: HashSet<String> = metadata
        .default_partition_spec()
        .fields()
        .iter()
        .filter(|f| f.transform == iceberg::spec::Transform::Identity)
        .filter_map(|f| schema.field_by_id(f.source_id).map(|c| c.name.clone()))
        .collect();
    for filter in filters {
        for column in filter.column_refs() {
            if !partition_columns.contains(&column.name) {
                let mut names: Vec<&String> = partition_columns.iter().collect();
                names.sort();
                return plan_err!(
                    "optimize's WHERE may name only identity-partition columns of {} ({}); \
                     {} is not one",
                    table.identifier(),
                    match names.is_empty() {
                        true => "it has none".to_string(),
                        false => names
                            .iter()
                            .map(|n| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    },
                    column.name
                );
            }
        }
    }
    Ok(())
}
