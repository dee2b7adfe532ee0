//! Opening one task: the per-file narrative of the scan.
//!
//! ```text
//!   task ──► 1. bounds: may the file hold a passing row (manifest bounds, live domains)?
//!        ──► 2. footer (engine cache, page index included; parsed once per file)
//!        ──► 3. plan: columns by field id, deletes; what the native path cannot read goes to
//!               iceberg's reader (native_reader::Fallback, or `iceflight.scan.reader=iceberg`)
//!        ──► 4. row groups: footer statistics against the domains
//!        ──► 5. per kept row group, in order: domains re-checked if a dynamic filter changed,
//!               pages pruned, positional deletes, the next row group's bytes prefetched,
//!               decoded ──► current types ──► equality deletes ──► output ──► live row filter
//! ```
//!
//! One `TaskOpener` per output partition holds what its tasks share.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::{DataFusionError, Result, exec_err, not_impl_err};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::DynamicFilterPhysicalExpr;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt, stream};
use iceberg::expr::Bind;
use iceberg::scan::FileScanTask;
use iceberg::spec::DataContentType;
use iceberg::table::Table;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, RowSelection};
use parquet::file::metadata::ParquetMetaData;

use crate::model::iceberg_error::external;
use crate::model::metadata_columns;
use crate::plan::metrics_index::FileMetricsIndex;
use crate::pushdown::domain::Domains;
use crate::pushdown::domain_cache::DomainCache;
use crate::pushdown::gate::Gate;
use crate::pushdown::page_index;
use crate::pushdown::prune::{BoundsByFile, FileBounds, may_match};
use crate::pushdown::row_filter::{ConjunctKey, ScanRowFilter};
use crate::pushdown::row_groups;
use crate::read::access_plan::{FileAccessPlan, RowGroupAccess};
use crate::read::caches::ScanCaches;
use crate::read::deletes::equality_deletes::{self, DeleteKeys, DeleteKeysCache};
use crate::read::deletes::positional_deletes::{self, PositionalDeletes};
use crate::read::metrics::ScanMetrics;
use crate::read::native_reader::{self, FilePlan, FileSource};
use crate::read::struct_evolution;
use iceflight_options::ScanReader;

/// Opens one task at a time: the state shared by the tasks of one partition.
pub(crate) struct TaskOpener {
    pub table: Table,
    /// Manifest metrics of the scanned snapshot (row lineage of its data files).
    pub index: Arc<FileMetricsIndex>,
    pub schema: SchemaRef,
    pub field_ids: Vec<i32>,
    pub field_types: Arc<Vec<(i32, DataType)>>,
    pub batch_size: usize,
    pub delete_keys: Arc<DeleteKeysCache>,
    /// Dynamic domains, `None` when pruning is off or there is no dynamic filter.
    pub dynamic: Option<Arc<DomainCache>>,
    /// The dynamic filters themselves (for the bounded wait).
    pub dynamic_filters: Vec<Arc<dyn PhysicalExpr>>,
    pub wait: Duration,
    pub static_domains: Arc<Domains>,
    pub gate: Arc<Gate>,
    pub file_bounds: Arc<BoundsByFile>,
    pub metrics: ScanMetrics,
    /// The engine's footer and block caches.
    pub caches: Arc<ScanCaches>,
    /// The table's store, before each path in those caches' keys.
    pub store_prefix: String,
    /// `iceflight.scan.reader`.
    pub reader: ScanReader,
    /// Positional delete files of the scan, each read once.
    pub positional: Arc<PositionalDeletes>,
    /// Live dynamic filters on rows (`None`: off, or no filter the plan proves usable).
    pub row_filter: Option<Arc<ScanRowFilter>>,
    /// `iceflight.scan.late_materialization`: paying conjuncts run inside the Parquet reader.
    pub late_materialization: bool,
    /// `iceflight.scan.dictionary_strings`: string columns the row filter reads stay
    /// dictionaries until it has run.
    pub dictionary_strings: bool,
    /// The output: `schema`, but for the string columns of `dictionary_columns`, which leave
    /// the scan as `Dictionary(Int32, Utf8)` (`IcebergScanExec::with_dictionary_columns`).
    pub output_schema: SchemaRef,
    /// Output positions of the columns output as dictionaries.
    pub dictionary_columns: Arc<Vec<usize>>,
}

/// What the gate made of one task.
enum Opened {
    /// Nothing in the task can pass.
    Skip,
    /// Byte-range pieces of the task to read, with the reader's predicate set.
    Read(Vec<FileScanTask>),
}

impl TaskOpener {
    /// Waits up to `wait` for the incomplete dynamic filters to complete (a join's build side
    /// finishing). Filters that only complete when this scan ends (TopK, aggregates) cost the
    /// full wait, hence a bound.
    pub async fn wait_for_dynamic_filters(&self) {
        if self.dynamic.is_none() || self.wait.is_zero() {
            return;
        }
        let waits: Vec<_> = self
            .dynamic_filters
            .iter()
            .filter(|f| f.is::<DynamicFilterPhysicalExpr>())
            .map(|f| {
                let f = Arc::clone(f);
                async move {
                    if let Some(d) = f.downcast_ref::<DynamicFilterPhysicalExpr>() {
                        d.wait_complete().await;
                    }
                }
            })
            .collect();
        if waits.is_empty() {
            return;
        }
        let _timer = self.metrics.dynamic_filter_wait_time.timer();
        let _ = tokio::time::timeout(self.wait, futures::future::join_all(waits)).await;
    }

    /// The static domains AND the dynamic ones at their current generation.
    fn domains(&self) -> Arc<Domains> {
        let Some(dynamic) = self.dynamic.as_ref().map(|c| c.current()) else {
            return Arc::clone(&self.static_domains);
        };
        match &self.static_domains.columns {
            Some(c) if c.is_empty() => dynamic,
            _ => Arc::new((*self.static_domains).clone().and((*dynamic).clone())),
        }
    }

    /// The key of `path` in the engine's caches.
    fn cache_key(&self, path: &str) -> String {
        format!("{}{path}", self.store_prefix)
    }

    /// The footer of `task`'s data file (cached), counting what reading it cost.
    async fn footer(&self, task: &FileScanTask) -> Result<Arc<ParquetMetaData>> {
        let footer = self
            .caches
            .footers
            .load(
                self.table.file_io(),
                &self.cache_key(&task.data_file_path),
                &task.data_file_path,
                task.file_size_in_bytes,
            )
            .await
            .map_err(external)?;
        self.metrics
            .footer_bytes_read
            .add(footer.bytes_read as usize);
        if footer.parsed {
            self.metrics.metadata_parses.add(1);
        }
        Ok(footer.metadata)
    }

    /// Applies the gate to `task`: skip it, or the pieces to read with their reader predicate.
    async fn gate(&self, task: FileScanTask) -> Result<Opened> {
        let started = Instant::now();
        let domains = self.domains();
        let no_bounds = FileBounds::new();
        let bounds = self.file_bounds.get(&task.data_file_path);
        if !self.may_hold(&task, &domains) {
            // Static domains alone were applied at planning: what rules the file out now is a
            // dynamic filter.
            self.metrics.files_pruned_dynamic.add(1);
            self.metrics.predicate_build_time.add_elapsed(started);
            return Ok(Opened::Skip);
        }
        let unconstrained = domains.columns.as_ref().is_some_and(|c| c.is_empty());
        if unconstrained {
            return Ok(Opened::Read(vec![task]));
        }
        let mut pieces = None;
        let mut row_group_layouts = vec![];
        let mut row_groups_selected = false;
        // Row groups from the footer; not for files with deletes (positions span the file).
        if self.gate.wants_footer(&domains) && task.deletes.is_empty() {
            let metadata = self.footer(&task).await?;
            let access = FileAccessPlan::from_footer(
                &metadata,
                &task,
                None,
                &domains,
                self.gate.gate_columns(),
            );
            self.metrics.row_groups_pruned.add(access.pruned());
            self.metrics.row_groups_matched.add(access.matched());
            if access.prunes() {
                // iceberg's reader reads whole row groups: those whose midpoint the task holds.
                let ranges = access.byte_ranges(&task, &metadata);
                if ranges.is_empty() {
                    self.metrics.predicate_build_time.add_elapsed(started);
                    return Ok(Opened::Skip);
                }
                pieces = Some(ranges);
            }
            row_group_layouts = access.layouts().to_vec();
            row_groups_selected = true;
        }
        let decisions = self.gate.decide(
            &domains,
            Some(bounds.unwrap_or(&no_bounds)),
            &row_group_layouts,
            row_groups_selected,
        );
        let predicate = match self.gate.reader_predicate(&domains, &decisions) {
            Some(p) => Some(
                p.bind(Arc::clone(&task.schema), task.case_sensitive)
                    .map_err(external)?,
            ),
            None => None,
        };
        let mut pieces = pieces.unwrap_or_else(|| vec![task]);
        for piece in &mut pieces {
            piece.predicate.clone_from(&predicate);
        }
        self.metrics.predicate_build_time.add_elapsed(started);
        Ok(Opened::Read(pieces))
    }

    /// Opens `task`: the native path, or iceberg's reader when it is chosen or the native path
    /// does not cover the file.
    pub async fn open(self: &Arc<Self>, task: FileScanTask) -> Result<Batches> {
        if let Some(blocks) = &self.caches.blocks {
            // The manifest knows the size: the cache need not ask the object store.
            blocks.note_size(
                &self.cache_key(&task.data_file_path),
                task.file_size_in_bytes,
            );
        }
        if self.reader == ScanReader::Native
            && let Some(batches) = self.open_native(task.clone()).await?
        {
            return Ok(batches);
        }
        self.open_iceberg(task).await
    }

    /// Whether `task`'s file may hold a row passing `domains`, from its manifest bounds.
    fn may_hold(&self, task: &FileScanTask, domains: &Domains) -> bool {
        let bounds = self.file_bounds.get(&task.data_file_path);
        domains.columns.is_some() && bounds.is_none_or(|b| may_match(domains, b))
    }

    /// The dynamic domains at their current generation (`None` without dynamic pruning).
    fn dynamic_now(&self) -> Option<Arc<Domains>> {
        self.dynamic.as_ref().map(|c| c.current())
    }

    /// The columns to read for the output and `equality` deletes: the output columns' field ids,
    /// then any key column not among them; with each delete file's keys and where its key
    /// columns sit in that list.
    ///
    /// Errors: an equality delete on a field that is not a top-level column; an unreadable
    /// delete file.
    async fn delete_plan(
        &self,
        equality: &[iceberg::scan::FileScanTaskDeleteFile],
    ) -> Result<(Vec<i32>, EqualityDeletes)> {
        let mut read_ids = self.field_ids.clone();
        let mut deletes = Vec::with_capacity(equality.len());
        for d in equality {
            let ids = d.equality_ids.clone().unwrap_or_default();
            let mut types = Vec::with_capacity(ids.len());
            let mut positions = Vec::with_capacity(ids.len());
            for id in &ids {
                let Some((_, ty)) = self.field_types.iter().find(|(fid, _)| fid == id) else {
                    return not_impl_err!(
                        "equality delete on field id {id}, which is not a top-level column of the current schema"
                    );
                };
                types.push(ty.clone());
                positions.push(match read_ids.iter().position(|r| r == id) {
                    Some(p) => p,
                    None => {
                        read_ids.push(*id);
                        read_ids.len() - 1
                    }
                });
            }
            let keys = self
                .delete_keys
                .get(self.table.file_io(), &d.file_path, &ids, &types)
                .await?;
            deletes.push((keys, positions));
        }
        Ok((read_ids, Arc::new(deletes)))
    }

    /// One field per read column: the output fields, then the extra delete key columns.
    fn read_schema(&self, read_ids: &[i32]) -> SchemaRef {
        let mut fields: Vec<Field> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        for id in &read_ids[fields.len()..] {
            let ty = self
                .field_types
                .iter()
                .find(|(fid, _)| fid == id)
                .map(|(_, t)| t.clone())
                .unwrap_or(DataType::Null);
            fields.push(Field::new(format!("__delete_key_{id}"), ty, true));
        }
        Arc::new(Schema::new(fields))
    }

    /// Steps 1–4 of the module docs for the native path; `None` when iceberg's reader must read
    /// the file (`native_reader::Fallback`).
    async fn open_native(self: &Arc<Self>, mut task: FileScanTask) -> Result<Option<Batches>> {
        let started = Instant::now();
        // 1. Bounds.
        let domains = self.domains();
        if !self.may_hold(&task, &domains) {
            self.metrics.files_pruned_dynamic.add(1);
            self.metrics.predicate_build_time.add_elapsed(started);
            return Ok(Some(stream::empty().boxed()));
        }
        let dynamic_at_open = self.dynamic_now();
        // 2. Footer.
        let metadata = self.footer(&task).await?;
        let arrow =
            ArrowReaderMetadata::try_new(Arc::clone(&metadata), native_reader::reader_options())?;
        // 3. Plan.
        let (equality, positional): (Vec<_>, Vec<_>) = std::mem::take(&mut task.deletes)
            .into_iter()
            .partition(|d| d.file_type == DataContentType::EqualityDeletes);
        if positional.iter().any(|d| {
            !d.file_path.to_ascii_lowercase().ends_with(".parquet")
                && !positional_deletes::is_puffin(&d.file_path)
        }) {
            // Avro/ORC position delete files: iceberg's reader's job.
            self.metrics.files_fallback.add(1);
            return Ok(None);
        }
        let (read_ids, deletes) = self.delete_plan(&equality).await?;
        let reads_struct = self
            .field_types
            .iter()
            .any(|(id, ty)| matches!(ty, DataType::Struct(_)) && read_ids.contains(id));
        if reads_struct {
            // Refuses struct children added with an initial default, as the iceberg path does.
            let present = struct_evolution::file_field_ids(&metadata);
            struct_evolution::schema_for_file(&task.schema, &read_ids, &present)?;
        }
        let lineage = self.index.lineage(&task.data_file_path);
        let read_schema = self.read_schema(&read_ids);
        let mut plan = match FilePlan::new(&arrow, &read_ids, read_schema, &task, lineage) {
            Ok(plan) => plan,
            Err(why)
                if read_ids
                    .iter()
                    .any(|id| metadata_columns::is_metadata_column(*id)) =>
            {
                // Only this reader fills metadata columns.
                return exec_err!(
                    "cannot read the metadata columns (_file, _pos, _row_id, …) of {}: {why}",
                    task.data_file_path
                );
            }
            Err(why) => {
                tracing::debug!(file = %task.data_file_path, %why, "read by iceberg's reader");
                self.metrics.files_fallback.add(1);
                return Ok(None);
            }
        };
        // String columns a row filter reads stay dictionaries until it has run (no equality
        // deletes: their keys compare values as read).
        // So do the columns output as dictionaries.
        let mut dictionaries: Vec<usize> = self.dictionary_columns.to_vec();
        if let Some(f) = &self.row_filter
            && self.dictionary_strings
        {
            dictionaries.extend(f.columns());
        }
        let positions = plan.reads_row_positions();
        let arrow = match positions {
            true => ArrowReaderMetadata::try_new(
                Arc::clone(&metadata),
                native_reader::row_position_options()?,
            )?,
            false => arrow,
        };
        let read_arrow = if deletes.is_empty() && !dictionaries.is_empty() && !positions {
            plan.keep_dictionaries(&arrow, &dictionaries)?
        } else {
            None
        };
        if read_arrow.is_some() {
            self.metrics.dictionary_files.add(1);
        }
        let read_arrow = read_arrow.unwrap_or_else(|| arrow.clone());
        // 4. Row groups.
        let access = FileAccessPlan::from_footer(
            &metadata,
            &task,
            Some(arrow.schema()),
            &domains,
            self.gate.gate_columns(),
        );
        self.metrics.row_groups_pruned.add(access.pruned());
        self.metrics.predicate_build_time.add_elapsed(started);
        if access.kept().is_empty() {
            return Ok(Some(stream::empty().boxed()));
        }
        let positions = if positional.is_empty() {
            vec![]
        } else {
            let paths: Vec<&str> = positional.iter().map(|d| d.file_path.as_str()).collect();
            self.positional
                .positions(self.table.file_io(), &paths, &task.data_file_path)
                .await?
        };
        self.metrics.files_opened.add(1);
        let reader = self
            .table
            .file_io()
            .new_input(&task.data_file_path)
            .map_err(external)?
            .reader()
            .await
            .map_err(external)?;
        let mut first_rows = Vec::with_capacity(metadata.num_row_groups());
        let mut at = 0u64;
        for rg in metadata.row_groups() {
            first_rows.push(at);
            at += rg.num_rows() as u64;
        }
        let order: Arc<Vec<usize>> = Arc::new(access.kept().to_vec());
        let file = Arc::new(NativeFile {
            source: FileSource::new(
                &task.data_file_path,
                reader,
                Arc::clone(&metadata),
                self.metrics.bytes_scanned.clone(),
            ),
            arrow,
            read_arrow,
            plan,
            metadata,
            first_rows,
            positions,
            access,
            deletes,
            dynamic_at_open,
            prefetch: self.caches.holds(&task.data_file_path),
        });
        let opener = Arc::clone(self);

        let batches = stream::iter(0..order.len())
            .then(move |k| {
                let opener = Arc::clone(&opener);
                let file = Arc::clone(&file);
                let order = Arc::clone(&order);
                async move { opener.read_row_group(&file, order[k], order.get(k + 1).copied()) }
            })
            .try_flatten();
        Ok(Some(batches.boxed()))
    }

    /// Step 5 of the module docs for row group `rg` of `file`; `next` is the row group read
    /// after it (prefetched now).
    fn read_row_group(&self, file: &NativeFile, rg: usize, next: Option<usize>) -> Result<Batches> {
        let started = Instant::now();
        let domains = self.domains();
        // A row group cut between tasks is counted by the one holding its midpoint.
        let counts = file.access.counts(rg);
        let changed = match (&file.dynamic_at_open, self.dynamic_now()) {
            (Some(then), Some(now)) => !Arc::ptr_eq(then, &now),
            _ => false,
        };
        if changed {
            // A dynamic filter completed or tightened after the file was opened.
            let (kept, _) = row_groups::keep(
                &file.metadata,
                Some(file.arrow.schema()),
                &[rg],
                &domains,
                self.gate.gate_columns(),
            );
            if kept.is_empty() {
                if counts {
                    self.metrics.row_groups_pruned.add(1);
                }
                self.metrics.predicate_build_time.add_elapsed(started);
                return Ok(stream::empty().boxed());
            }
        }
        // Reached and not ruled out (the other half of `row_groups_pruned`).
        if counts {
            self.metrics.row_groups_matched.add(1);
        }
        let pages = page_index::select(
            &file.metadata,
            file.arrow.schema(),
            rg,
            &domains,
            self.gate.gate_columns(),
        );
        let rows = file.metadata.row_group(rg).num_rows() as usize;
        let first = file.first_rows[rg];
        let (deleted, deleted_rows) = positional_deletes::selection(&file.positions, first, rows);
        if counts {
            self.metrics.pages_pruned.add(pages.pages_pruned);
            self.metrics.pages_matched.add(pages.pages_matched);
            self.metrics.positional_deleted_rows.add(deleted_rows);
        }
        self.metrics.predicate_build_time.add_elapsed(started);
        let selection: Option<RowSelection> =
            match file.access.row_group(rg, pages.selection, deleted) {
                RowGroupAccess::Skip => return Ok(stream::empty().boxed()),
                RowGroupAccess::Scan => None,
                RowGroupAccess::Select(selection) => Some(selection),
            };
        if file.prefetch
            && let Some(next) = next
        {
            let source = file.source.clone();
            let ranges = file.plan.chunk_ranges(&file.metadata, next);
            let io = iceflight_cache::io_scope::current();
            tokio::spawn(iceflight_cache::io_scope::within(io, async move {
                source.prefetch(ranges).await
            }));
        }
        // Conjuncts measured to pay run inside the reader, before the other columns decode.
        let (reader_filter, lowered) = match &self.row_filter {
            Some(f) if self.late_materialization => {
                file.plan.row_filter(&file.arrow, f.paying()?, f)?
            }
            _ => (None, vec![]),
        };
        let decoded = native_reader::open_row_group(
            &file.source,
            &file.read_arrow,
            &file.plan,
            rg,
            selection,
            reader_filter,
            self.batch_size,
        )?;
        let plan = file.plan.clone();
        let deletes = Arc::clone(&file.deletes);
        let schema = Arc::clone(&self.output_schema);
        let rows_decoded = self.metrics.rows_decoded.clone();
        let deleted = self.metrics.equality_deleted_rows.clone();
        let row_filter = self.row_filter.clone();
        let batches = decoded
            .map_err(DataFusionError::from)
            .and_then(move |batch| {
                rows_decoded.add(batch.num_rows());
                let out = plan.assemble(&batch).and_then(|batch| {
                    finish(
                        batch,
                        &deletes,
                        &deleted,
                        &schema,
                        row_filter.as_deref(),
                        &lowered,
                        true,
                    )
                });
                futures::future::ready(out)
            })
            .try_filter_map(|b| async move { Ok(b) });
        Ok(batches.boxed())
    }

    /// iceberg's `ArrowReader` on `task`: byte-range pieces per run of kept row groups.
    async fn open_iceberg(&self, task: FileScanTask) -> Result<Batches> {
        if self
            .field_ids
            .iter()
            .any(|id| metadata_columns::is_metadata_column(*id))
        {
            // Only the native reader fills metadata columns (UPDATE, MERGE, merge-on-read
            // DELETE; a query naming `_row_id`).
            return exec_err!(
                "cannot read the metadata columns (_file, _pos, _row_id, …) of {} with \
                 iceberg's reader (its position deletes are not Parquet, or \
                 iceflight.scan.reader is 'iceberg')",
                task.data_file_path
            );
        }
        let mut pieces = match self.gate(task).await? {
            Opened::Skip => return Ok(stream::empty().boxed()),
            Opened::Read(pieces) => pieces,
        };
        let mut task = pieces.remove(0);
        // Equality deletes are ours (null-safe); iceberg keeps the positional ones.
        let (equality, positional): (Vec<_>, Vec<_>) = std::mem::take(&mut task.deletes)
            .into_iter()
            .partition(|d| d.file_type == DataContentType::EqualityDeletes);
        if let Some(dv) = positional
            .iter()
            .find(|d| positional_deletes::is_puffin(&d.file_path))
        {
            // iceberg 0.10.1's reader has no deletion-vector loader: it would read the Puffin
            // file as Parquet and fail obscurely.
            return datafusion::common::exec_err!(
                "{} has a deletion vector ({}), which only the native reader applies; it \
                 could not read this file (see the log) or iceflight.scan.reader is 'iceberg'",
                task.data_file_path,
                dv.file_path
            );
        }
        task.deletes = positional;

        // Read the output columns, then any key column of an equality delete not among them.
        // With no output column (e.g. `count(*)`), read one column for the row count.
        let (mut read_ids, deletes) = self.delete_plan(&equality).await?;
        if read_ids.is_empty()
            && let Some((id, _)) = self.field_types.first()
        {
            read_ids.push(*id);
        }
        task.project_field_ids = read_ids.clone();
        for piece in &mut pieces {
            piece.project_field_ids = read_ids.clone();
        }
        // A struct child added after the file was written: read the file's own shape of the
        // struct and let `to_output` add the child as NULL (struct_evolution.rs).
        let reads_struct = self
            .field_types
            .iter()
            .any(|(id, ty)| matches!(ty, DataType::Struct(_)) && read_ids.contains(id));
        if reads_struct {
            let present = struct_evolution::file_field_ids(&*self.footer(&task).await?);
            if let Some(schema) =
                struct_evolution::schema_for_file(&task.schema, &read_ids, &present)?
            {
                let schema = Arc::new(schema);
                task.schema = Arc::clone(&schema);
                for piece in &mut pieces {
                    piece.schema = Arc::clone(&schema);
                }
            }
        }

        self.metrics.files_opened.add(1);
        let mut builder = self
            .table
            .reader_builder()
            .with_batch_size(self.batch_size)
            .with_data_file_concurrency_limit(1);
        // With our footer in hand, iceberg's reader fetches exactly the footer's bytes.
        if let Some(tail_len) = self
            .caches
            .footers
            .tail_len(&self.cache_key(&task.data_file_path))
        {
            builder = builder.with_metadata_size_hint(tail_len);
        }
        let reader = builder.build();
        let all = std::iter::once(task).chain(pieces).map(Ok);
        let task_stream = Box::pin(stream::iter(all.collect::<Vec<_>>()));
        let result = reader.read(task_stream).map_err(external)?;
        let scan_metrics = result.metrics().clone();
        let bytes_scanned = self.metrics.bytes_scanned.clone();
        let deleted = self.metrics.equality_deleted_rows.clone();
        let schema = Arc::clone(&self.output_schema);
        let rows_decoded = self.metrics.rows_decoded.clone();
        let row_filter = self.row_filter.clone();
        let batches = result
            .stream()
            .map_err(external)
            .and_then(move |batch| {
                rows_decoded.add(batch.num_rows());
                futures::future::ready(finish(
                    batch,
                    &deletes,
                    &deleted,
                    &schema,
                    row_filter.as_deref(),
                    &[],
                    false,
                ))
            })
            .chain(stream::once(async move {
                bytes_scanned.add(scan_metrics.bytes_read() as usize);
                Ok(None)
            }))
            .try_filter_map(|b| async move { Ok(b) });
        Ok(batches.boxed())
    }
}

/// A decoded batch of the read columns as output: equality deletes applied (counted in
/// `deleted`), the row filter but for the conjuncts `lowered` into the Parquet reader, the
/// output columns kept; `None` when no row is left. `filter_first` (the native path, whose
/// columns already have their current types but for dictionaries kept for the filter) runs the
/// row filter before the output types, so strings are built only for the rows it keeps;
/// iceberg's reader's batches get their output types first.
fn finish(
    batch: RecordBatch,
    deletes: &EqualityDeletes,
    deleted: &datafusion::physical_plan::metrics::Count,
    schema: &SchemaRef,
    row_filter: Option<&ScanRowFilter>,
    lowered: &[ConjunctKey],
    filter_first: bool,
) -> Result<Option<RecordBatch>> {
    let before = batch.num_rows();
    let mut batch = equality_deletes::apply(batch, deletes)?;
    deleted.add(before - batch.num_rows());
    if !filter_first {
        let Some(output) = to_output(batch, schema)? else {
            return Ok(None);
        };
        batch = output;
    }
    if let Some(f) = row_filter {
        batch = f.apply(batch, lowered)?;
    }
    if batch.num_rows() == 0 {
        return Ok(None);
    }
    if filter_first {
        return to_output(batch, schema);
    }
    Ok(Some(batch))
}

/// The batches of one task.
pub(crate) type Batches = BoxStream<'static, Result<RecordBatch>>;

/// Equality delete files' keys with the positions of their key columns among the read columns.
type EqualityDeletes = Arc<Vec<(Arc<DeleteKeys>, Vec<usize>)>>;

/// One data file opened by the native path, shared by its row groups' reads.
struct NativeFile {
    source: FileSource,
    /// The footer with the file's own Arrow types (pruning, page index).
    arrow: ArrowReaderMetadata,
    /// What the reader decodes with: `arrow`, or with string columns as dictionaries
    /// (`FilePlan::keep_dictionaries`).
    read_arrow: ArrowReaderMetadata,
    plan: FilePlan,
    metadata: Arc<ParquetMetaData>,
    /// First row (in the file) of every row group.
    first_rows: Vec<u64>,
    /// Positions deleted by positional delete files, sorted.
    positions: Vec<u64>,
    /// Which row groups are read, and how (`access_plan.rs`).
    access: FileAccessPlan,
    deletes: EqualityDeletes,
    /// The dynamic domains the file was opened with (a change re-checks the row groups).
    dynamic_at_open: Option<Arc<Domains>>,
    /// Whether the next row group is prefetched (the block cache holds this file's reads).
    prefetch: bool,
}

/// Keeps the first `schema.fields().len()` columns (extra ones were read for delete keys) under
/// the output schema, casting where the reader's Arrow type differs (e.g. a promoted type).
fn to_output(batch: RecordBatch, schema: &SchemaRef) -> Result<Option<RecordBatch>> {
    let columns = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, col)| struct_evolution::align(col, field.data_type()))
        .collect::<Result<Vec<ArrayRef>>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(Some(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        columns,
        &options,
    )?))
}
