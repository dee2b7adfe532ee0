//! Maps engine errors to gRPC statuses with readable messages.
//!
//! | error | status |
//! |---|---|
//! | SQL parse / plan / schema error | `InvalidArgument` (parser message kept) |
//! | unknown catalog, schema or table (typed by `sql::plan_statement` and the catalogs) | `NotFound` |
//! | catalog unreachable | `Unavailable` |
//! | a worker or other peer unreachable (a connection error, `distributed/channels.rs`) | `Unavailable` |
//! | a table or catalog a worker does not have (an I/O `NotFound`, `catalog/src/lib.rs`) | `NotFound` |
//! | catalog refused our credentials | `Unauthenticated` |
//! | a statement or form not supported yet (`RENAME COLUMN`, `MERGE … NOT MATCHED BY SOURCE`) | `Unimplemented` |
//! | a write that lost to another writer (`WriteConflict`, `scan/src/model/write_conflict.rs`) | `Aborted` |
//! | memory limit, too many queries, `query.max_result_bytes` | `ResourceExhausted` |
//! | `query.timeout` | `DeadlineExceeded` |
//! | a query killed (`kill_query`, `query_control.rs`) | `Cancelled` |
//! | `kill_query` of an unknown query / of another user's query by a non-admin | `NotFound` / `PermissionDenied` |
//! | a privilege, file root or setting the user lacks (`AccessDenied`, `access/`) | `PermissionDenied` |
//! | a data file missing from storage / not valid Parquet | `NotFound` / `DataLoss`, naming it |
//! | anything else | `Internal`, with a log id also written to the server log |

use datafusion::common::DataFusionError;
use iceflight_catalog::CatalogError;
use tonic::Status;

use iceflight_scan::model::data_file_error::DataFileError;
use iceflight_scan::model::write_conflict::WriteConflict;

use crate::access::AccessDenied;
use crate::message::{LimitExceeded, data_file_error, message};
use crate::query_control::{QueryControlError, QueryKilled};

/// Converts a DataFusion error (possibly wrapping catalog errors) to a status whose message is
/// [`message`]'s one line.
pub fn to_status(e: DataFusionError) -> Status {
    let root = e.find_root();
    if let DataFusionError::External(inner) = root
        && let Some(c) = inner.downcast_ref::<CatalogError>()
    {
        return match c {
            CatalogError::NotFound(_) => Status::not_found(message(&e)),
            CatalogError::Unavailable { .. } => Status::unavailable(message(&e)),
            CatalogError::Unauthenticated { .. } => Status::unauthenticated(message(&e)),
            CatalogError::AlreadyExists(_) => Status::already_exists(message(&e)),
            CatalogError::Config(_) => Status::invalid_argument(message(&e)),
            other => internal(other),
        };
    }

    if let DataFusionError::External(inner) = root
        && inner.downcast_ref::<WriteConflict>().is_some()
    {
        return Status::aborted(message(&e));
    }
    if let DataFusionError::External(inner) = root
        && inner.downcast_ref::<AccessDenied>().is_some()
    {
        return Status::permission_denied(message(&e));
    }
    if let DataFusionError::External(inner) = root {
        if inner.downcast_ref::<QueryKilled>().is_some() {
            return Status::cancelled(message(&e));
        }
        match inner.downcast_ref::<QueryControlError>() {
            Some(QueryControlError::NotFound(_)) => return Status::not_found(message(&e)),
            Some(QueryControlError::NotOwner { .. }) => {
                return Status::permission_denied(message(&e));
            }
            None => {}
        }
    }

    if let Some(file) = data_file_error(&e) {
        return match file {
            DataFileError::Missing { .. } => Status::not_found(message(&e)),
            DataFileError::Corrupt { .. } => Status::data_loss(message(&e)),
            DataFileError::Denied { .. } | DataFileError::WriteDenied { .. } => {
                Status::permission_denied(message(&e))
            }
            DataFileError::Unreachable { .. } => Status::unavailable(message(&e)),
        };
    }
    if let DataFusionError::External(inner) = root
        && let Some(limit) = inner.downcast_ref::<LimitExceeded>()
    {
        return match limit {
            LimitExceeded::Timeout(_) => Status::deadline_exceeded(message(&e)),
            LimitExceeded::ResultSize(_) => Status::resource_exhausted(message(&e)),
        };
    }

    match root {
        DataFusionError::SQL(..) | DataFusionError::SchemaError(..) => {
            Status::invalid_argument(message(&e))
        }
        // A missing table arrives as a typed `CatalogError::NotFound` (`sql::plan_statement`).
        DataFusionError::Plan(_) | DataFusionError::Configuration(_) => {
            Status::invalid_argument(message(&e))
        }
        // A statement or form iceflight understands and does not run (`RENAME COLUMN`,
        // `MERGE … WHEN NOT MATCHED BY SOURCE`).
        DataFusionError::NotImplemented(_) => Status::unimplemented(message(&e)),
        DataFusionError::ResourcesExhausted(_) => Status::resource_exhausted(message(&e)),
        DataFusionError::IoError(io) if is_connection(io.kind()) => {
            Status::unavailable(message(&e))
        }
        DataFusionError::IoError(io) if io.kind() == std::io::ErrorKind::NotFound => {
            Status::not_found(message(&e))
        }
        // Errors the statement itself causes while running: division by zero, a failed cast,
        // a value out of range, a read-only table.
        DataFusionError::Execution(_) => Status::invalid_argument(message(&e)),
        DataFusionError::ArrowError(a, _)
            if !matches!(
                a.as_ref(),
                arrow::error::ArrowError::IoError(..) | arrow::error::ArrowError::ExternalError(_)
            ) =>
        {
            Status::invalid_argument(message(&e))
        }
        _ => internal(&message(&e)),
    }
}

/// Kinds of a peer that cannot be reached or went away (a worker, an object store).
fn is_connection(kind: std::io::ErrorKind) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        kind,
        ConnectionRefused
            | ConnectionReset
            | ConnectionAborted
            | NotConnected
            | BrokenPipe
            | TimedOut
            | HostUnreachable
            | NetworkUnreachable
            | NetworkDown
    )
}

/// An `Internal` status whose message carries an id that is also logged with the full error.
pub fn internal(e: &dyn std::fmt::Display) -> Status {
    let id = uuid::Uuid::new_v4().simple().to_string();
    tracing::error!(log_id = %id, error = %e, "internal error");
    Status::internal(format!("internal error (log id {id})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_kinds() {
        // A message never decides: DataFusion's own "not found" text is a plan error like any
        // other; the missing table comes typed.
        let e = DataFusionError::Plan("table 'local.t.x' not found".into());
        assert_eq!(to_status(e).code(), tonic::Code::InvalidArgument);
        let e = DataFusionError::External(Box::new(CatalogError::NotFound(
            "table local.t.x does not exist".into(),
        )));
        assert_eq!(to_status(e).code(), tonic::Code::NotFound);
        let e = DataFusionError::Plan("Invalid function 'foo'".into());
        assert_eq!(to_status(e).code(), tonic::Code::InvalidArgument);
        let e = DataFusionError::ResourcesExhausted("Failed to allocate".into());
        assert_eq!(to_status(e).code(), tonic::Code::ResourceExhausted);
        let e = DataFusionError::External(Box::new(CatalogError::Unavailable {
            catalog: "lake".into(),
            uri: "http://x".into(),
            message: "refused".into(),
        }));
        let s = to_status(DataFusionError::Context("ctx".into(), Box::new(e)));
        assert_eq!(s.code(), tonic::Code::Unavailable);
        assert!(s.message().contains("lake"), "{}", s.message());
        let s = to_status(DataFusionError::ArrowError(
            Box::new(arrow::error::ArrowError::DivideByZero),
            None,
        ));
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        let s = to_status(DataFusionError::IoError(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "worker http://127.0.0.1:50061/ failed: connection reset",
        )));
        assert_eq!(s.code(), tonic::Code::Unavailable);
        assert!(
            s.message().contains("http://127.0.0.1:50061/"),
            "{}",
            s.message()
        );
        let s = to_status(DataFusionError::Internal("boom".into()));
        assert_eq!(s.code(), tonic::Code::Internal);
        assert!(s.message().contains("log id"));
    }
}
