//! Merge-on-read's output: the rows a statement deletes, as position delete files (format
//! version 2) or deletion vectors (format version 3).
//!
//! ```text
//!   DeletedRows: data file path ──► positions (roaring bitmap), from the rows' `_file`, `_pos`
//!   v2 ──► one Parquet position delete file per data file (file_path id 2147483546, pos id
//!          2147483545, sorted by position; referenced_data_file set, as DuckDB and Spark
//!          write them): earlier delete files of that data file stay and still apply
//!   v3 ──► one Puffin file, one deletion vector per data file; a file's earlier deletes
//!          (its vector and any Parquet position deletes) merged into it, its earlier vector
//!          removed in the same commit (table spec: at most one vector per data file)
//! ```
//!
//! Each delete file carries its data file's partition tuple and spec id, so partition pruning
//! finds it with its data file.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::{Result, exec_err, internal_datafusion_err};
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, FormatVersion, NestedField,
    PrimitiveType, Type,
};
use iceberg::table::Table;
use iceberg::writer::file_writer::location_generator::{
    DefaultLocationGenerator, LocationGenerator,
};
use iceberg::writer::file_writer::{FileWriter, FileWriterBuilder, ParquetWriterBuilder};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use roaring::RoaringTreemap;

use crate::model::data_file_error::write_error;
use crate::model::iceberg_error::external;
use crate::plan::metrics_index::FileMetricsIndex;
use crate::read::deletes::positional_deletes::{
    FILE_PATH_ID, POS_ID, PositionalDeletes, is_puffin,
};

/// Positions a statement deletes, by data file path.
#[derive(Debug, Default, Clone)]
pub struct DeletedRows {
    by_file: BTreeMap<String, RoaringTreemap>,
}

impl DeletedRows {
    /// Records position `pos` of `file`; `false` when it was recorded before (a row changed
    /// twice by one statement).
    pub fn insert(&mut self, file: &str, pos: u64) -> bool {
        match self.by_file.get_mut(file) {
            Some(positions) => positions.insert(pos),
            None => {
                self.by_file
                    .insert(file.to_string(), std::iter::once(pos).collect());
                true
            }
        }
    }

    /// Rows recorded.
    pub fn len(&self) -> u64 {
        self.by_file.values().map(|p| p.len()).sum()
    }

    /// Whether no row is recorded.
    pub fn is_empty(&self) -> bool {
        self.by_file.is_empty()
    }

    /// The data files with a recorded row.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.by_file.keys().map(String::as_str)
    }

    /// The recorded positions of `file`.
    pub fn of(&self, file: &str) -> Option<&RoaringTreemap> {
        self.by_file.get(file)
    }
}

/// What [`write_delete_files`] wrote: delete files to add and deletion vectors they replace
/// (`(Puffin path, data file path)`).
#[derive(Debug, Default)]
pub struct WrittenDeletes {
    /// The new delete files' manifest entries, each with the partition spec id of its data
    /// file.
    pub files: Vec<(i32, DataFile)>,
    /// Earlier deletion vectors merged into a new one.
    pub replaced_vectors: HashSet<(String, String)>,
}

/// Writes `deleted` as delete files of `table` (module docs). `index` holds the manifests of
/// the snapshot the rows were read at (the data files' partitions, their deletion vectors);
/// `current_deletes` the position delete files that apply to each data file there (v3
/// merges them into the new vector).
///
/// Errors: a data file the snapshot does not hold, a format version 1 table, a write failure.
pub async fn write_delete_files(
    table: &Table,
    index: &Arc<FileMetricsIndex>,
    current_deletes: &HashMap<String, Vec<String>>,
    deleted: &DeletedRows,
) -> Result<WrittenDeletes> {
    let metadata = table.metadata();
    let locations = DefaultLocationGenerator::new(metadata).map_err(external)?;
    let commit = uuid::Uuid::new_v4();
    let mut out = WrittenDeletes::default();
    match metadata.format_version() {
        FormatVersion::V1 => {
            return exec_err!(
                "{}: a format version 1 table cannot hold delete files",
                table.identifier()
            );
        }
        FormatVersion::V2 => {
            for (n, (data_path, positions)) in deleted.by_file.iter().enumerate() {
                let (spec_id, data_file) = data_file(index, data_path)?;
                let path =
                    locations.generate_location(None, &format!("{commit}-{n}-deletes.parquet"));
                let written = write_parquet(table, &path, spec_id, data_file, positions).await?;
                out.files.push((spec_id, written));
            }
        }
        FormatVersion::V3 => {
            let earlier = PositionalDeletes::new(Arc::clone(index));
            let mut vectors = Vec::with_capacity(deleted.by_file.len());
            for (data_path, positions) in &deleted.by_file {
                let mut merged = positions.clone();
                let paths: Vec<&str> = current_deletes
                    .get(data_path)
                    .map(|v| v.iter().map(String::as_str).collect())
                    .unwrap_or_default();
                if !paths.is_empty() {
                    merged.extend(
                        earlier
                            .positions(table.file_io(), &paths, data_path)
                            .await?,
                    );
                }
                for p in paths.iter().filter(|p| is_puffin(p)) {
                    if index.deletion_vector(p, data_path).is_some() {
                        out.replaced_vectors
                            .insert((p.to_string(), data_path.clone()));
                    }
                }
                vectors.push((data_path.clone(), merged));
            }
            let path = locations.generate_location(None, &format!("{commit}-deletes.puffin"));
            let (written, size) =
                iceflight_iceberg::deletion_vector::write_puffin(table.file_io(), &path, vectors)
                    .await
                    .map_err(|e| write_error(&path, e))?;
            for vector in written {
                let (spec_id, data_file) = data_file(index, &vector.referenced_data_file)?;
                out.files.push((
                    spec_id,
                    DataFileBuilder::default()
                        .content(DataContentType::PositionDeletes)
                        .file_path(path.clone())
                        .file_format(DataFileFormat::Puffin)
                        .partition(data_file.partition().clone())
                        .partition_spec_id(spec_id)
                        .record_count(vector.cardinality)
                        .file_size_in_bytes(size)
                        .referenced_data_file(Some(vector.referenced_data_file))
                        .content_offset(Some(vector.content_offset as i64))
                        .content_size_in_bytes(Some(vector.content_size_in_bytes as i64))
                        .build()
                        .map_err(|e| internal_datafusion_err!("deletion vector entry: {e}"))?,
                ));
            }
        }
    }
    Ok(out)
}

/// The live data file at `path` in `index`'s snapshot, with its partition spec id.
fn data_file<'a>(index: &'a FileMetricsIndex, path: &str) -> Result<(i32, &'a DataFile)> {
    match (index.spec_id(path), index.get(path)) {
        (Some(spec_id), Some(file)) => Ok((spec_id, file)),
        _ => Err(internal_datafusion_err!(
            "{path} is not a data file of the snapshot read"
        )),
    }
}

/// Writes one Parquet position delete file at `path` deleting `positions` of `data_file`
/// (sorted, as the spec asks) with iceberg's Parquet writer; returns its manifest entry.
async fn write_parquet(
    table: &Table,
    path: &str,
    spec_id: i32,
    data_file: &DataFile,
    positions: &RoaringTreemap,
) -> Result<DataFile> {
    let schema = iceberg::spec::Schema::builder()
        .with_fields(vec![
            Arc::new(NestedField::required(
                FILE_PATH_ID,
                "file_path",
                Type::Primitive(PrimitiveType::String),
            )),
            Arc::new(NestedField::required(
                POS_ID,
                "pos",
                Type::Primitive(PrimitiveType::Long),
            )),
        ])
        .build()
        .map_err(external)?;
    let with_id = |name: &str, ty: DataType, id: i32| {
        Field::new(name, ty, false).with_metadata(HashMap::from([(
            PARQUET_FIELD_ID_META_KEY.to_string(),
            id.to_string(),
        )]))
    };
    let arrow_schema = Arc::new(Schema::new(vec![
        with_id("file_path", DataType::Utf8, FILE_PATH_ID),
        with_id("pos", DataType::Int64, POS_ID),
    ]));
    // Positions ascend: delta-encoded they take a few bits each; the one path repeats and is a
    // dictionary of one value. ZSTD as the data files.
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_column_encoding(ColumnPath::from("pos"), Encoding::DELTA_BINARY_PACKED)
        .set_column_dictionary_enabled(ColumnPath::from("pos"), false)
        .build();
    let builder = ParquetWriterBuilder::new(props, Arc::new(schema));
    let output = table.file_io().new_output(path).map_err(external)?;
    let mut writer = builder
        .build(output)
        .await
        .map_err(|e| write_error(path, e))?;
    let all: Vec<i64> = positions.iter().map(|p| p as i64).collect();
    for chunk in all.chunks(64 * 1024) {
        let batch = RecordBatch::try_new(
            Arc::clone(&arrow_schema),
            vec![
                Arc::new(StringArray::from(vec![data_file.file_path(); chunk.len()])),
                Arc::new(Int64Array::from(chunk.to_vec())),
            ],
        )?;
        writer
            .write(&batch)
            .await
            .map_err(|e| write_error(path, e))?;
    }
    let mut built = writer.close().await.map_err(|e| write_error(path, e))?;
    let Some(mut builder) = built.pop() else {
        return exec_err!("the position delete file {path} was not written");
    };
    builder
        .content(DataContentType::PositionDeletes)
        .partition(data_file.partition().clone())
        .partition_spec_id(spec_id)
        .referenced_data_file(Some(data_file.file_path().to_string()))
        .build()
        .map_err(|e| internal_datafusion_err!("position delete file entry: {e}"))
}
