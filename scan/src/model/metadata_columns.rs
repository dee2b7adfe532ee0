//! Iceberg's metadata columns, read beside a table's own columns with the field ids the table
//! spec reserves for them ("Reserved Field IDs"; names as Spark's):
//!
//! ```text
//!   _file                           string  the data file a row is stored in
//!   _pos                            long    its position there, from 0
//!   _row_id                         long    v3 row lineage: the row's id, kept across updates
//!   _last_updated_sequence_number   long    v3 row lineage: the sequence number of the
//!                                           snapshot that last added or changed the row
//! ```
//!
//! A row-level change reads `_file` and `_pos` to name the rows it deletes
//! ([`crate::plan::planner::ScanPlanner::with_row_positions`]); a query that names any of them
//! reads all four ([`crate::plan::planner::ScanPlanner::with_metadata_columns`]). The native
//! reader fills `_pos` from the Parquet reader's row numbers (which count every row of the file,
//! whatever row groups, pages or deleted rows were skipped) and `_file` from the task.
//!
//! Row lineage (spec, "Row Lineage"): a data file that stores `_row_id` or
//! `_last_updated_sequence_number` (a writer that moved rows between files) gives each row its
//! own value; a NULL or a missing column is inherited: `_row_id` = the file's `first_row_id`
//! (its own, or assigned from its manifest's first row id, `plan/metrics_index.rs`) + `_pos`,
//! `_last_updated_sequence_number` = the file's data sequence number. Both are NULL on a table
//! older than v3 (no first row id).

use arrow::datatypes::{DataType, Field};
pub use iceberg::metadata_columns::{
    RESERVED_COL_NAME_FILE as FILE_PATH,
    RESERVED_COL_NAME_LAST_UPDATED_SEQUENCE_NUMBER as LAST_UPDATED_SEQUENCE_NUMBER,
    RESERVED_COL_NAME_POS as ROW_POSITION, RESERVED_COL_NAME_ROW_ID as ROW_ID,
    RESERVED_FIELD_ID_FILE as FILE_PATH_FIELD_ID,
    RESERVED_FIELD_ID_LAST_UPDATED_SEQUENCE_NUMBER as LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID,
    RESERVED_FIELD_ID_POS as ROW_POSITION_FIELD_ID, RESERVED_FIELD_ID_ROW_ID as ROW_ID_FIELD_ID,
};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

/// Names of the metadata columns, in the order a scan appends them.
pub const NAMES: [&str; 4] = [
    FILE_PATH,
    ROW_POSITION,
    ROW_ID,
    LAST_UPDATED_SEQUENCE_NUMBER,
];

/// Which metadata columns a scan appends after the table's columns; each variant's columns
/// include the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum MetadataColumns {
    /// None: the table's columns only.
    #[default]
    None,
    /// `_file`, `_pos` (a row-level change's scan).
    RowPositions,
    /// `_file`, `_pos`, `_row_id`, `_last_updated_sequence_number` (a query naming one).
    All,
}

impl MetadataColumns {
    /// The appended fields, each with its field id: a prefix of [`all_fields`].
    pub fn fields(self) -> Vec<Field> {
        let n = match self {
            Self::None => 0,
            Self::RowPositions => 2,
            Self::All => 4,
        };
        all_fields().into_iter().take(n).collect()
    }
}

/// The four metadata columns in [`NAMES`] order, each with its field id. `_file` and `_pos` are
/// never NULL; the lineage columns are NULL on tables before v3.
pub fn all_fields() -> [Field; 4] {
    let with_id = |name: &str, ty: DataType, nullable: bool, id: i32| {
        Field::new(name, ty, nullable).with_metadata(
            [(PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string())]
                .into_iter()
                .collect(),
        )
    };
    [
        with_id(FILE_PATH, DataType::Utf8, false, FILE_PATH_FIELD_ID),
        with_id(ROW_POSITION, DataType::Int64, false, ROW_POSITION_FIELD_ID),
        with_id(ROW_ID, DataType::Int64, true, ROW_ID_FIELD_ID),
        with_id(
            LAST_UPDATED_SEQUENCE_NUMBER,
            DataType::Int64,
            true,
            LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID,
        ),
    ]
}

/// Whether `id` is one of the metadata columns' field ids.
pub fn is_metadata_column(id: i32) -> bool {
    [
        FILE_PATH_FIELD_ID,
        ROW_POSITION_FIELD_ID,
        ROW_ID_FIELD_ID,
        LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID,
    ]
    .contains(&id)
}

/// Whether `name` is one of the metadata columns' names.
pub fn is_metadata_column_name(name: &str) -> bool {
    NAMES.contains(&name)
}

/// The row lineage a data file's rows inherit (module docs), from its manifest entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileLineage {
    /// `_row_id` of the file's first row (`None` before v3).
    pub first_row_id: Option<i64>,
    /// The data sequence number of the file.
    pub sequence_number: Option<i64>,
}
