//! One conversion shared by the bench's modules: another library's error as DataFusion's.

use datafusion::error::DataFusionError;

/// An error of another library (object store, Flight, JSON, I/O) as DataFusion's `External`, so
/// the bench's functions return one error type.
pub(crate) fn ext(e: impl std::error::Error + Send + Sync + 'static) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
