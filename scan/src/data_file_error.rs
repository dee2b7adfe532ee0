//! Typed errors of reading a data file, so that the edge can answer precisely: a file missing
//! under the table (deleted, or a path the storage does not have) and a file that is not valid
//! Parquet (a torn or corrupted footer). Recognised from the typed errors in the source chain
//! (opendal's `NotFound` under iceberg-storage-opendal's wrapper; a Parquet decoding error),
//! never from message text.

use std::error::Error as StdError;

/// What went wrong with one data file.
#[derive(Debug, thiserror::Error)]
pub enum DataFileError {
    /// The storage has no file at `path`.
    #[error("data file {path} is missing from storage (deleted under the table?)")]
    Missing { path: String },
    /// The file at `path` is not valid Parquet.
    #[error("data file {path} is not valid Parquet: {reason}")]
    Corrupt { path: String, reason: String },
}

/// `e` (an error of reading `path`) as a [`DataFileError`] when it is one of its kinds.
pub fn classify(path: &str, e: &(dyn StdError + 'static)) -> Option<DataFileError> {
    let mut at: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = at {
        if let Some(o) = err.downcast_ref::<opendal::Error>()
            && o.kind() == opendal::ErrorKind::NotFound
        {
            return Some(DataFileError::Missing {
                path: path.to_string(),
            });
        }
        at = err.source();
    }
    None
}

/// A Parquet error of decoding `path`'s footer: [`DataFileError::Missing`] when the storage
/// has no such file, [`DataFileError::Corrupt`] when the bytes are not Parquet, `None` when it
/// is another I/O failure (the storage unreachable, …).
pub fn classify_parquet(path: &str, e: &parquet::errors::ParquetError) -> Option<DataFileError> {
    use parquet::errors::ParquetError;
    match e {
        ParquetError::External(inner) => classify(path, inner.as_ref()),
        other => Some(DataFileError::Corrupt {
            path: path.to_string(),
            reason: other.to_string(),
        }),
    }
}
