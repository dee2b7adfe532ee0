//! The scan's one conversion of an iceberg error into DataFusion's.

use datafusion::common::DataFusionError;

/// `e` as DataFusion's `External` error: the iceberg error travels whole (kind, message and
/// source), so the edge finds it by type, never by text (`server/src/flight/status.rs`).
pub fn external(e: iceberg::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
