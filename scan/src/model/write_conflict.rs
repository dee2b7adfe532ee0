//! The typed error of a write that lost to another writer: carried to the Flight SQL edge as
//! `Aborted` (`server/src/flight/status.rs`), never recognised from its text.

/// Another writer changed the files a statement read or changes, so the statement's snapshot
/// was not committed and nothing of it is visible (its written files are dropped).
#[derive(Debug, thiserror::Error)]
#[error("{statement} on {table}: {reason}; nothing was changed, run the statement again")]
pub struct WriteConflict {
    /// The statement's keyword (`UPDATE`, `MERGE`, `DELETE`, `INSERT OVERWRITE`).
    pub statement: String,
    /// The table, as `namespace.table`.
    pub table: String,
    /// What the other writers did.
    pub reason: String,
}

impl WriteConflict {
    /// This conflict as a DataFusion error (`External`, so the type survives to the edge).
    pub fn into_error(self) -> datafusion::common::DataFusionError {
        datafusion::common::DataFusionError::External(Box::new(self))
    }
}
