//! Iceberg's metadata columns a row-level change reads beside a table's own: `_file` (the data
//! file a row is stored in) and `_pos` (its position there, from 0), with the field ids the
//! table spec reserves for them ("Reserved Field IDs").
//!
//! A scan asked for them ([`crate::plan::planner::ScanPlanner::with_row_positions`]) gets them
//! as its last two columns; the native reader fills `_pos` from the Parquet reader's row
//! numbers (which count every row of the file, whatever row groups, pages or deleted rows
//! were skipped) and `_file` from the task.

use arrow::datatypes::{DataType, Field};
pub use iceberg::metadata_columns::{
    RESERVED_COL_NAME_FILE as FILE_PATH, RESERVED_COL_NAME_POS as ROW_POSITION,
    RESERVED_FIELD_ID_FILE as FILE_PATH_FIELD_ID, RESERVED_FIELD_ID_POS as ROW_POSITION_FIELD_ID,
};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

/// The two metadata columns, `_file` then `_pos`, each with its field id.
pub fn fields() -> [Field; 2] {
    let with_id = |name: &str, ty: DataType, id: i32| {
        Field::new(name, ty, false).with_metadata(
            [(PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string())]
                .into_iter()
                .collect(),
        )
    };
    [
        with_id(FILE_PATH, DataType::Utf8, FILE_PATH_FIELD_ID),
        with_id(ROW_POSITION, DataType::Int64, ROW_POSITION_FIELD_ID),
    ]
}

/// Whether `id` is one of the metadata columns' field ids.
pub fn is_metadata_column(id: i32) -> bool {
    id == FILE_PATH_FIELD_ID || id == ROW_POSITION_FIELD_ID
}
