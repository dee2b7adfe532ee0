//! How a row-level change writes: copy-on-write or merge-on-read, as the table's properties
//! say (Iceberg's table properties `write.delete.mode`, `write.update.mode`,
//! `write.merge.mode`; `copy-on-write` when unset, as in Iceberg's Java library).
//!
//! | mode | what a change writes | what later reads pay |
//! |---|---|---|
//! | copy-on-write | every data file holding a changed row, rewritten without it | nothing |
//! | merge-on-read | a position delete file (v2) or deletion vector (v3) per such file | applying it |

use datafusion::common::{Result, plan_err};
use iceberg::spec::{FormatVersion, TableMetadata};

/// The statement a mode is chosen for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowOperation {
    /// `DELETE`: property `write.delete.mode`.
    Delete,
    /// `UPDATE`: property `write.update.mode`.
    Update,
    /// `MERGE INTO`: property `write.merge.mode`.
    Merge,
}

impl RowOperation {
    /// The table property that chooses this statement's mode.
    pub fn property(self) -> &'static str {
        match self {
            RowOperation::Delete => "write.delete.mode",
            RowOperation::Update => "write.update.mode",
            RowOperation::Merge => "write.merge.mode",
        }
    }

    /// The statement's SQL keyword, for messages.
    pub fn keyword(self) -> &'static str {
        match self {
            RowOperation::Delete => "DELETE",
            RowOperation::Update => "UPDATE",
            RowOperation::Merge => "MERGE",
        }
    }
}

/// How a row-level change is written (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Rewrite the data files holding changed rows.
    CopyOnWrite,
    /// Write delete files naming the changed rows' positions.
    MergeOnRead,
}

impl WriteMode {
    /// The mode `metadata`'s properties choose for `operation`.
    ///
    /// Errors: a value other than `copy-on-write` / `merge-on-read` (the property named), or
    /// `merge-on-read` on a format version 1 table, which cannot hold delete files.
    pub fn of(metadata: &TableMetadata, operation: RowOperation) -> Result<Self> {
        let key = operation.property();
        let mode = match metadata.properties().get(key).map(|v| v.trim()) {
            None => WriteMode::CopyOnWrite,
            Some(v) if v.eq_ignore_ascii_case("copy-on-write") => WriteMode::CopyOnWrite,
            Some(v) if v.eq_ignore_ascii_case("merge-on-read") => WriteMode::MergeOnRead,
            Some(v) => {
                return plan_err!(
                    "table property {key} is '{v}'; it takes 'copy-on-write' or 'merge-on-read'"
                );
            }
        };
        if mode == WriteMode::MergeOnRead && metadata.format_version() == FormatVersion::V1 {
            return plan_err!(
                "{key} is merge-on-read, but a format version 1 table cannot hold delete files; \
                 upgrade the table to format version 2 or set {key} to copy-on-write"
            );
        }
        Ok(mode)
    }
}
