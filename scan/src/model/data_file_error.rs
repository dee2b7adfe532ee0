//! Typed errors of reading a data file, so that the edge can answer precisely: a file missing
//! under the table (deleted, or a path the storage does not have), a file that is not valid
//! Parquet (a torn or corrupted footer), access denied, and storage that did not deliver
//! (unreachable, reset, timed out; `server/tests/fault_proxy.rs`). Recognised from the typed
//! errors in the source chain (opendal's error kind under iceberg-storage-opendal's wrapper; a
//! Parquet decoding error), never from message text.

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
    /// The storage refused access to `path` (credentials, bucket policy).
    #[error("data file {path} cannot be read: storage denied access")]
    Denied { path: String },
    /// The storage refused to store a file a write made at `path` (a bucket policy: SeaweedFS's
    /// table buckets refuse `.puffin` objects).
    #[error("{path} cannot be written: storage denied access; nothing was committed")]
    WriteDenied { path: String },
    /// The storage did not deliver `path`'s bytes after the storage layer's own retries: reset
    /// or refused connections, no answer within its I/O timeout, server errors.
    #[error("data file {path} could not be read from storage: {reason}")]
    Unreachable { path: String, reason: String },
}

/// `e` (an error of reading `path`) as a [`DataFileError`] when it is one of its kinds.
pub fn classify(path: &str, e: &(dyn StdError + 'static)) -> Option<DataFileError> {
    let mut at: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = at {
        if let Some(o) = err.downcast_ref::<opendal::Error>() {
            let path = path.to_string();
            return match o.kind() {
                opendal::ErrorKind::NotFound => Some(DataFileError::Missing { path }),
                opendal::ErrorKind::PermissionDenied => Some(DataFileError::Denied { path }),
                // A read past the end: the file is shorter than its footer says.
                opendal::ErrorKind::RangeNotSatisfied => Some(DataFileError::Corrupt {
                    path,
                    reason: "shorter than its footer says".into(),
                }),
                // What reset or refused connections, timeouts and server errors become, once
                // opendal's retries are spent. Its message only: the context names endpoints.
                opendal::ErrorKind::Unexpected | opendal::ErrorKind::RateLimited => {
                    Some(DataFileError::Unreachable {
                        path,
                        reason: one_line(&o.message()),
                    })
                }
                // Configuration and other kinds: not a fault of the file or of the network.
                _ => None,
            };
        }
        at = err.source();
    }
    None
}

/// A Parquet error of decoding `path`'s footer: [`DataFileError::Corrupt`] when the bytes are
/// not Parquet, else what [`classify`] makes of the storage's error (`None`: not a storage
/// error).
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

/// `e`'s message on one line (opendal's lists its context over several).
fn one_line(e: &dyn std::fmt::Display) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// An error of writing the file at `path` as a DataFusion error: [`DataFileError::WriteDenied`]
/// when the storage refused access (typed, from opendal's error kind in the source chain), else
/// the iceberg error as it is.
pub fn write_error(path: &str, e: iceberg::Error) -> datafusion::common::DataFusionError {
    let mut at: Option<&(dyn StdError + 'static)> = Some(&e);
    while let Some(err) = at {
        if let Some(o) = err.downcast_ref::<opendal::Error>()
            && o.kind() == opendal::ErrorKind::PermissionDenied
        {
            let denied = DataFileError::WriteDenied {
                path: path.to_string(),
            };
            return datafusion::common::DataFusionError::External(Box::new(denied));
        }
        at = err.source();
    }
    datafusion::common::DataFusionError::External(Box::new(e))
}
