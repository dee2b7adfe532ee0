//! The scan's vocabulary: the columns a filter can constrain, column layouts, the schema and
//! batches DataFusion sees, and typed data-file errors. Imports no other folder (`README.md`).

pub(crate) mod columns;
pub mod data_file_error;
pub mod iceberg_error;
pub(crate) mod layout;
pub mod literal;
pub mod metadata_columns;
pub mod output;
pub mod write_conflict;
