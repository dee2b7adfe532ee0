//! A refusal of `access/`: one line, carried typed to the edge (`flight/status.rs` →
//! `PermissionDenied`).

use datafusion::common::DataFusionError;

/// A refusal: one line naming the user, what they lack and on what (→ `PermissionDenied`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("access denied: {0}")]
pub struct AccessDenied(pub String);

impl AccessDenied {
    /// As the engine carries typed errors to the edge.
    pub fn into_error(self) -> DataFusionError {
        DataFusionError::External(Box::new(self))
    }
}

impl From<AccessDenied> for DataFusionError {
    fn from(denied: AccessDenied) -> Self {
        denied.into_error()
    }
}
