//! The native read path: one data file read with parquet's async reader
//! (`ParquetRecordBatchStreamBuilder`) from the engine's cached footer, Iceberg semantics done
//! here instead of by iceberg's `ArrowReader`.
//!
//! ```text
//!   cached footer (with page index) ──► FilePlan::new: field id → Parquet root column
//!       present  → decoded, then aligned to the current type (struct_evolution::align:
//!                  int→long, float→double, decimal widening, struct children by id)
//!       missing  → identity-partition constant from the manifest (c05), else the field's
//!                  initial default, else NULL (c06); renamed / reordered columns match by id (c03)
//!   row group rg ──► builder(rg, RowSelection = pages ∩ positional deletes) ──► batches
//!                ──► FilePlan::assemble ──► columns in read order, current types
//! ```
//!
//! [`Fallback`] names what this path does not read (files without field ids, which need
//! iceberg's name mapping; INT96 timestamps; a default it cannot build); those files go to
//! iceberg's reader. Bytes come through the table's `FileIO` (and so through the block cache).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use std::time::Instant;

use arrow::array::{
    ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, RecordBatchOptions, new_null_array,
};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use arrow::error::ArrowError;
use bytes::Bytes;
use datafusion::common::{Result, ScalarValue};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::utils::{collect_columns, reassign_expr_columns};
use datafusion::physical_plan::metrics::Count;
use futures::FutureExt;
use futures::future::BoxFuture;
use iceberg::io::FileRead;
use iceberg::scan::FileScanTask;
use iceberg::spec::Literal;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowPredicate, ArrowPredicateFn, ArrowReaderMetadata, ArrowReaderOptions, RowFilter,
    RowSelection,
};
use parquet::arrow::async_reader::{
    AsyncFileReader, ParquetRecordBatchStream, ParquetRecordBatchStreamBuilder,
};
use parquet::basic::Type as PhysicalType;
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;

use crate::model::literal::{identity_partition_value, literal_scalar};
use crate::model::metadata_columns::{self, FileLineage};
use crate::pushdown::row_filter::{self, ConjunctKey, ScanRowFilter};
use crate::read::struct_evolution::align;

/// Why a data file is read by iceberg's `ArrowReader` instead of the native path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// No root column of the file carries a field id (iceberg resolves it by name mapping).
    NoFieldIds,
    /// A projected column holds INT96 values (legacy timestamps, iceberg coerces them).
    Int96 { field_id: i32 },
    /// A missing column's partition constant or initial default does not convert to its type.
    Default { field_id: i32 },
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoFieldIds => write!(f, "no field ids"),
            Self::Int96 { field_id } => write!(f, "INT96 column (field id {field_id})"),
            Self::Default { field_id } => write!(f, "default of field id {field_id}"),
        }
    }
}

/// Options every native open uses: the file's own Parquet types (no embedded Arrow schema, so
/// strings decode as `Utf8`, the scan's output type), page index from the cached footer.
pub fn reader_options() -> ArrowReaderOptions {
    ArrowReaderOptions::new().with_skip_arrow_metadata(true)
}

/// [`reader_options`] with the Parquet reader's row number appended to every batch as its last
/// column (`_pos`: the position in the file, counting rows skipped by row group, page and
/// delete selections).
pub fn row_position_options() -> Result<ArrowReaderOptions> {
    let row_number = Field::new(metadata_columns::ROW_POSITION, DataType::Int64, false)
        .with_extension_type(parquet::arrow::RowNumber);
    Ok(reader_options().with_virtual_columns(vec![Arc::new(row_number)])?)
}

/// Where one read column comes from in one file.
#[derive(Debug, Clone)]
enum Source {
    /// Position in the reader's output (file order of the projected roots).
    Column(usize),
    /// The same value in every row (identity-partition constant or initial default).
    Constant(ScalarValue),
    /// Not in the file and no default: NULL.
    Null,
    /// `_pos`: the Parquet reader's row number, its last output column.
    RowPosition,
    /// `_row_id`: the file's own value (reader output position) where not NULL, else the
    /// file's first row id + `_pos` (NULL without one: no row lineage).
    RowId {
        column: Option<usize>,
        first_row_id: Option<i64>,
    },
    /// `_last_updated_sequence_number`: the file's own value where not NULL, else its data
    /// sequence number.
    LastUpdated {
        column: Option<usize>,
        sequence_number: Option<i64>,
    },
}

/// A lineage column: the file's own values where it stores them and they are not NULL,
/// else `inherited` (`model/metadata_columns.rs`).
fn own_or(own: Option<&ArrayRef>, inherited: ArrayRef) -> Result<ArrayRef> {
    match own {
        Some(own) if own.null_count() > 0 => {
            let own = arrow::compute::cast(own, &DataType::Int64)?;
            Ok(arrow::compute::kernels::zip::zip(
                &arrow::compute::is_not_null(&own)?,
                &own,
                &inherited,
            )?)
        }
        Some(own) => Ok(arrow::compute::cast(own, &DataType::Int64)?),
        None => Ok(inherited),
    }
}

/// How the native path reads one data file's columns.
#[derive(Debug, Clone)]
pub struct FilePlan {
    /// Parquet root columns to decode.
    pub mask: ProjectionMask,
    /// Root column indices decoded, ascending.
    pub roots: Vec<usize>,
    sources: Vec<Source>,
    /// One field per read column (its current type), in read order.
    schema: SchemaRef,
}

/// The type string columns are read as when their dictionaries are kept: `Dictionary(Int32,
/// Utf8)`, the dictionary page's values and one key per row.
pub(crate) fn string_dictionary() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

impl FilePlan {
    /// Plans reading the columns `read_ids` (field ids, with current types in `schema`, same
    /// order) of `task`'s file, whose footer is `arrow`. `Err(Fallback)` when this path cannot.
    /// `lineage` is what the file's rows inherit for `_row_id` and
    /// `_last_updated_sequence_number` (`model/metadata_columns.rs`).
    pub fn new(
        arrow: &ArrowReaderMetadata,
        read_ids: &[i32],
        schema: SchemaRef,
        task: &FileScanTask,
        lineage: FileLineage,
    ) -> std::result::Result<Self, Fallback> {
        let descr = arrow.parquet_schema();
        let root_fields = descr.root_schema().get_fields();
        let root_id = |i: usize| {
            let info = root_fields[i].get_basic_info();
            info.has_id().then(|| info.id())
        };
        if !(0..root_fields.len()).any(|i| root_id(i).is_some()) {
            return Err(Fallback::NoFieldIds);
        }
        let found: Vec<Option<usize>> = read_ids
            .iter()
            .map(|id| (0..root_fields.len()).find(|&i| root_id(i) == Some(*id)))
            .collect();
        let mut roots: Vec<usize> = found.iter().flatten().copied().collect();
        roots.sort_unstable();
        roots.dedup();
        for (leaf, column) in descr.columns().iter().enumerate() {
            if column.physical_type() == PhysicalType::INT96
                && roots.contains(&descr.get_column_root_idx(leaf))
            {
                let root = descr.get_column_root_idx(leaf);
                return Err(Fallback::Int96 {
                    field_id: root_id(root).unwrap_or(-1),
                });
            }
        }
        let mut sources = Vec::with_capacity(read_ids.len());
        for ((id, at), field) in read_ids.iter().zip(&found).zip(schema.fields()) {
            if *id == metadata_columns::ROW_POSITION_FIELD_ID {
                sources.push(Source::RowPosition);
                continue;
            }
            if *id == metadata_columns::FILE_PATH_FIELD_ID {
                let path = ScalarValue::Utf8(Some(task.data_file_path.clone()));
                sources.push(Source::Constant(path));
                continue;
            }
            let column = at.map(|root| roots.binary_search(&root).expect("root projected"));
            if *id == metadata_columns::ROW_ID_FIELD_ID {
                let first_row_id = lineage.first_row_id;
                sources.push(Source::RowId {
                    column,
                    first_row_id,
                });
                continue;
            }
            if *id == metadata_columns::LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID {
                let sequence_number = lineage.sequence_number;
                sources.push(Source::LastUpdated {
                    column,
                    sequence_number,
                });
                continue;
            }
            sources.push(match at {
                Some(root) => Source::Column(roots.binary_search(root).expect("root projected")),
                None => match missing_value(task, *id) {
                    Some(lit) => Source::Constant(
                        literal_scalar(&lit, field.data_type())
                            .ok_or(Fallback::Default { field_id: *id })?,
                    ),
                    None => Source::Null,
                },
            });
        }
        Ok(Self {
            mask: ProjectionMask::roots(descr, roots.iter().copied()),
            roots,
            sources,
            schema,
        })
    }

    /// Whether the plan reads `_pos`: the file must then be read with
    /// [`row_position_options`].
    pub fn reads_row_positions(&self) -> bool {
        self.sources.iter().any(|s| {
            matches!(
                s,
                Source::RowPosition
                    | Source::RowId {
                        first_row_id: Some(_),
                        ..
                    }
            )
        })
    }

    /// Reads the string columns among `columns` (read-column positions) that every row group
    /// of the file stores dictionary-encoded as `Dictionary(Int32, Utf8)`: the Parquet reader
    /// then keeps the dictionary page's values and the rows' keys instead of copying every
    /// string (`OffsetBuffer::extend_from_dictionary`), the row filter evaluates a conjunct once
    /// per distinct value (`row_filter::evaluate`), and only the rows it keeps are turned into
    /// strings (`opener.rs`, `to_output`). Returns the reader metadata to read the file with
    /// (`arrow` with those columns' types changed), `None` when no column qualifies.
    ///
    /// Errors: the reader refuses the changed schema (not expected: Arrow reads any string
    /// column as a dictionary).
    pub fn keep_dictionaries(
        &mut self,
        arrow: &ArrowReaderMetadata,
        columns: &[usize],
    ) -> Result<Option<ArrowReaderMetadata>> {
        let metadata = arrow.metadata();
        let descr = arrow.parquet_schema();
        let file_schema = arrow.schema();
        let mut file_fields: Vec<Field> = file_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let mut read_fields: Vec<Field> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let mut any = false;
        for &c in columns {
            let (Some(Source::Column(at)), Some(field)) = (self.sources.get(c), read_fields.get(c))
            else {
                continue;
            };
            let root = self.roots[*at];
            if field.data_type() != &DataType::Utf8
                || file_fields.get(root).map(|f| f.data_type()) != Some(&DataType::Utf8)
            {
                continue;
            }
            // The root's one leaf, dictionary-encoded in every row group (every data page).
            let leaves: Vec<usize> = (0..descr.num_columns())
                .filter(|&l| descr.get_column_root_idx(l) == root)
                .collect();
            let [leaf] = leaves.as_slice() else { continue };
            let all_dictionary = metadata
                .row_groups()
                .iter()
                .all(|rg| all_pages_dictionary(rg.column(*leaf)));
            if !all_dictionary {
                continue;
            }
            file_fields[root] = file_fields[root]
                .clone()
                .with_data_type(string_dictionary());
            read_fields[c] = field.clone().with_data_type(string_dictionary());
            any = true;
        }
        if !any {
            return Ok(None);
        }
        self.schema = Arc::new(Schema::new_with_metadata(
            read_fields,
            self.schema.metadata().clone(),
        ));
        let options = reader_options().with_schema(Arc::new(Schema::new_with_metadata(
            file_fields,
            file_schema.metadata().clone(),
        )));
        Ok(Some(ArrowReaderMetadata::try_new(
            Arc::clone(metadata),
            options,
        )?))
    }

    /// The decoded `batch` (columns of `roots`, file order) as the read columns in read order
    /// and their current types.
    ///
    /// Errors: a cast Arrow refuses (a promotion the Iceberg spec does not allow).
    pub fn assemble(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let rows = batch.num_rows();
        let columns = self
            .sources
            .iter()
            .zip(self.schema.fields())
            .map(|(source, field)| match source {
                Source::Column(i) => align(batch.column(*i), field.data_type()),
                Source::Constant(v) => Ok(v.to_array_of_size(rows)?),
                Source::Null => Ok(new_null_array(field.data_type(), rows)),
                Source::RowPosition => Ok(Arc::clone(batch.column(batch.num_columns() - 1))),
                Source::RowId {
                    column,
                    first_row_id,
                } => {
                    let inherited = match first_row_id {
                        Some(first) => {
                            let positions = batch.column(batch.num_columns() - 1);
                            let positions = positions.as_primitive::<Int64Type>();
                            Arc::new(arrow::compute::kernels::numeric::add(
                                positions,
                                &Int64Array::new_scalar(*first),
                            )?) as ArrayRef
                        }
                        None => new_null_array(&DataType::Int64, rows),
                    };
                    own_or(column.map(|i| batch.column(i)), inherited)
                }
                Source::LastUpdated {
                    column,
                    sequence_number,
                } => {
                    let inherited = ScalarValue::Int64(*sequence_number).to_array_of_size(rows)?;
                    own_or(column.map(|i| batch.column(i)), inherited)
                }
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &options,
        )?)
    }

    /// The `conjuncts` (over the read columns, by index, in the order to run them) whose
    /// columns this file holds, as a Parquet `RowFilter`: each decodes only its own columns for
    /// the rows the ones before it kept, then the reader decodes the other columns for the rows
    /// all of them kept (late materialization). Lowered only when the other columns include a
    /// variable-width one (strings, binary). Each evaluation is recorded in
    /// `filter`. Returns the filter (`None`: no conjunct lowered) and the lowered conjuncts.
    ///
    /// Errors: a conjunct's columns do not map onto its sub-schema (not expected).
    pub fn row_filter(
        &self,
        arrow: &ArrowReaderMetadata,
        conjuncts: Vec<(ConjunctKey, Arc<dyn PhysicalExpr>)>,
        filter: &Arc<ScanRowFilter>,
    ) -> Result<(Option<RowFilter>, Vec<ConjunctKey>)> {
        // Each conjunct's columns, by the Parquet root each is decoded from.
        let mut lowerable = vec![];
        for (key, expr) in conjuncts {
            let mut by_root: Vec<(usize, usize)> = vec![];
            let mut mapped = true;
            for column in collect_columns(&expr) {
                match self.sources.get(column.index()) {
                    Some(Source::Column(at)) => by_root.push((self.roots[*at], column.index())),
                    _ => mapped = false,
                }
            }
            by_root.sort_unstable();
            by_root.dedup();
            if !mapped || by_root.is_empty() || by_root.windows(2).any(|w| w[0].0 == w[1].0) {
                continue;
            }
            lowerable.push((key, expr, by_root));
        }
        // Late materialization pays where it skips decoding variable-width values (TPC-H
        // q19: −46 %); over fixed-width columns alone the two-pass decode cost more than it
        // saved (SSB q3.3, q3.4: +17–22 %, `bench/reports/native-reader-20261201.md`).
        let descr = arrow.parquet_schema();
        let skips_variable_width = (0..descr.num_columns()).any(|leaf| {
            let root = descr.get_column_root_idx(leaf);
            self.roots.contains(&root)
                && !lowerable
                    .iter()
                    .any(|(_, _, by_root)| by_root.iter().any(|(r, _)| *r == root))
                && descr.column(leaf).physical_type() == PhysicalType::BYTE_ARRAY
        });
        if !skips_variable_width {
            return Ok((None, vec![]));
        }
        let mut predicates: Vec<Box<dyn ArrowPredicate>> = vec![];
        let mut lowered = vec![];
        for (key, expr, by_root) in lowerable {
            let schema = Arc::new(Schema::new(
                by_root
                    .iter()
                    .map(|(_, i)| self.schema.field(*i).clone())
                    .collect::<Vec<_>>(),
            ));
            let expr = reassign_expr_columns(expr, &schema)?;
            let mask =
                ProjectionMask::roots(arrow.parquet_schema(), by_root.iter().map(|(r, _)| *r));
            let filter = Arc::clone(filter);
            let first = predicates.is_empty();
            predicates.push(Box::new(ArrowPredicateFn::new(
                mask,
                move |batch: RecordBatch| {
                    let started = Instant::now();
                    let rows = batch.num_rows();
                    let run = || -> Result<BooleanArray> {
                        let columns = batch
                            .columns()
                            .iter()
                            .zip(schema.fields())
                            .map(|(c, f)| align(c, f.data_type()))
                            .collect::<Result<Vec<ArrayRef>>>()?;
                        let options = RecordBatchOptions::new().with_row_count(Some(rows));
                        let batch = RecordBatch::try_new_with_options(
                            Arc::clone(&schema),
                            columns,
                            &options,
                        )?;
                        Ok(row_filter::evaluate(&expr, &batch)?
                            .unwrap_or_else(|| BooleanArray::from(vec![true; rows])))
                    };
                    let mask = run().map_err(|e| ArrowError::ExternalError(Box::new(e)))?;
                    if first {
                        filter.record_late_rows(rows);
                    }
                    filter.record(
                        key,
                        rows,
                        mask.true_count(),
                        started.elapsed().as_nanos() as f64,
                    );
                    Ok(mask)
                },
            )));
            lowered.push(key);
        }
        Ok((
            (!predicates.is_empty()).then(|| RowFilter::new(predicates)),
            lowered,
        ))
    }

    /// Byte ranges of the projected column chunks of row group `rg` (what reading it fetches).
    pub fn chunk_ranges(&self, metadata: &ParquetMetaData, rg: usize) -> Vec<Range<u64>> {
        let descr = metadata.file_metadata().schema_descr();
        let group = metadata.row_group(rg);
        (0..descr.num_columns())
            .filter(|&leaf| self.roots.contains(&descr.get_column_root_idx(leaf)))
            .map(|leaf| {
                let (start, len) = group.column(leaf).byte_range();
                start..start + len
            })
            .collect()
    }
}

/// The value of a column the file lacks: its identity-partition value from the manifest entry
/// (the Iceberg spec: identity partition columns may be omitted from data files; case c05),
/// else the field's `initial-default`.
fn missing_value(task: &FileScanTask, id: i32) -> Option<Literal> {
    if let Some(value) = identity_partition_value(task, id) {
        return value;
    }
    task.schema.field_by_id(id)?.initial_default.clone()
}

/// Whether every data page of `chunk` is dictionary-encoded (the test the Parquet format's page
/// encoding statistics exist for), from the encoding mask arrow-rs keeps by default or the full
/// statistics; `false` when the writer recorded neither.
fn all_pages_dictionary(chunk: &parquet::file::metadata::ColumnChunkMetaData) -> bool {
    use parquet::basic::{Encoding, PageType};
    let dictionary =
        |e: Encoding| matches!(e, Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY);
    chunk.dictionary_page_offset().is_some()
        && match (
            chunk.page_encoding_stats_mask(),
            chunk.page_encoding_stats(),
        ) {
            (Some(mask), _) => {
                mask.is_only(Encoding::RLE_DICTIONARY) || mask.is_only(Encoding::PLAIN_DICTIONARY)
            }
            (None, Some(stats)) => stats.iter().all(|s| {
                !matches!(s.page_type, PageType::DATA_PAGE | PageType::DATA_PAGE_V2)
                    || dictionary(s.encoding)
            }),
            (None, None) => false,
        }
}

/// One data file as parquet's `AsyncFileReader`: bytes through the table's `FileIO`, the
/// footer from the engine's cache, bytes fetched counted.
#[derive(Clone)]
pub struct FileSource {
    path: Arc<str>,
    reader: Arc<dyn FileRead>,
    metadata: Arc<ParquetMetaData>,
    bytes_read: Count,
}

impl FileSource {
    /// `reader` over the file at `path` whose footer is `metadata`, adding what it fetches to
    /// `bytes_read`. Its read errors name `path` ([`crate::model::data_file_error`]).
    pub fn new(
        path: &str,
        reader: Box<dyn FileRead>,
        metadata: Arc<ParquetMetaData>,
        bytes_read: Count,
    ) -> Self {
        Self {
            path: Arc::from(path),
            reader: Arc::from(reader),
            metadata,
            bytes_read,
        }
    }

    /// Fetches `ranges` and drops them: called for the next row group while the current one
    /// decodes, so the block cache holds (or is already fetching) its bytes when it is read.
    pub async fn prefetch(&self, ranges: Vec<Range<u64>>) {
        let reads = ranges.into_iter().map(|r| self.reader.read(r));
        let _ = futures::future::join_all(reads).await;
    }

    /// A storage error of reading this file, typed where it is one of
    /// [`DataFileError`](crate::model::data_file_error::DataFileError)'s kinds.
    fn read_error(&self, e: iceberg::Error) -> ParquetError {
        match crate::model::data_file_error::classify(&self.path, &e) {
            Some(typed) => ParquetError::External(Box::new(typed)),
            None => ParquetError::External(Box::new(e)),
        }
    }
}

impl AsyncFileReader for FileSource {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            let bytes = self
                .reader
                .read(range)
                .await
                .map_err(|e| self.read_error(e))?;
            self.bytes_read.add(bytes.len());
            Ok(bytes)
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        async move {
            let reads = ranges.into_iter().map(|r| self.reader.read(r));
            let parts = futures::future::try_join_all(reads)
                .await
                .map_err(|e| self.read_error(e))?;
            self.bytes_read.add(parts.iter().map(Bytes::len).sum());
            Ok(parts)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        let metadata = Arc::clone(&self.metadata);
        async move { Ok(metadata) }.boxed()
    }
}

/// A stream of row group `rg` of `source`'s file: the plan's columns, `selection`'s rows that
/// pass `row_filter`, `batch_size` rows per batch.
///
/// Errors: the reader refuses the projection or selection (not expected for a planned file).
pub fn open_row_group(
    source: &FileSource,
    arrow: &ArrowReaderMetadata,
    plan: &FilePlan,
    rg: usize,
    selection: Option<RowSelection>,
    row_filter: Option<RowFilter>,
    batch_size: usize,
) -> Result<ParquetRecordBatchStream<FileSource>> {
    let mut builder =
        ParquetRecordBatchStreamBuilder::new_with_metadata(source.clone(), arrow.clone())
            .with_projection(plan.mask.clone())
            .with_row_groups(vec![rg])
            .with_batch_size(batch_size);
    if let Some(selection) = selection {
        builder = builder.with_row_selection(selection);
    }
    if let Some(row_filter) = row_filter {
        builder = builder.with_row_filter(row_filter);
    }
    Ok(builder.build()?)
}
