//! Flight SQL bulk ingest (`DoPut` with `CommandStatementIngest`): what ADBC's `adbc_ingest`
//! sends, in its four modes.
//!
//! ```text
//!   DoPut(CommandStatementIngest{table, schema?, catalog?, options}) + Arrow IPC stream
//!     ──► the table by catalog, namespace (the session's defaults when not given) and name
//!     ──► exists?   append: the rows appended          replace: a new table of the upload's
//!                   fail:   AlreadyExists                        columns takes its place
//!         missing?  create: a new table of the upload's columns   fail: NotFound
//!     ──► rows streamed into iceberg's writers (bounded memory) ──► one snapshot ──► row count
//! ```
//!
//! | ADBC mode | if the table exists | if it does not |
//! |---|---|---|
//! | `create` | `AlreadyExists` | created |
//! | `append` | appended | `NotFound` |
//! | `replace` | replaced | created |
//! | `create_append` | appended | created |
//!
//! Unspecified options take the Flight SQL defaults (fail in both cases). A mismatch between the
//! upload's columns and the table's (by name, any order; types cast where Arrow casts them) is
//! `InvalidArgument` listing the columns, and commits nothing. Types map as `CREATE TABLE`'s
//! (`catalog/src/tables.rs`); reading back gives Iceberg's types (`string` as Arrow `Utf8`,
//! small integers as `Int32`). **Replace** writes the new table under a temporary name first,
//! then renames the old one aside, the new one into place and drops the old one: a failed
//! upload or rename leaves the old table under its name. A client that disconnects mid-upload
//! can leave the new (or staging) table behind, empty.
//! Temporary tables and transactions are refused (`InvalidArgument`).

use std::sync::Arc;

use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::error::FlightError;
use arrow_flight::sql::CommandStatementIngest;
use arrow_flight::sql::server::PeekableFlightDataStream;
use datafusion::common::DataFusionError;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::{StreamExt, TryStreamExt};
use iceberg::{Catalog, ErrorKind, NamespaceIdent, TableIdent};
use iceflight_catalog::tables::{TableLayout, append, create_filled};
use iceflight_catalog::to_df_error;
use iceflight_input::ipc_bounds::{MAX_DECLARED_BYTES, check_declared_lengths};
use tonic::Status;

use super::sessions::Session;
use super::status::to_status;
use crate::access::{Access, Privilege};

/// Runs one bulk ingest for `session` (module docs; logged, admitted and timed by
/// `execution.rs`); returns the rows written.
///
/// Errors: see the module docs; an upload that is not an Arrow IPC stream is `InvalidArgument`.
pub async fn ingest(
    session: &Session,
    catalogs: &iceflight_catalog::Catalogs,
    command: CommandStatementIngest,
    data: PeekableFlightDataStream,
) -> Result<i64, Status> {
    if command.temporary {
        return Err(Status::invalid_argument(
            "temporary tables are not supported: ingest into an Iceberg table",
        ));
    }
    if command.transaction_id.is_some() {
        return Err(Status::invalid_argument("transactions are not supported"));
    }
    let options = session.ctx.state().config().options().catalog.clone();
    let catalog_name = command.catalog.clone().unwrap_or(options.default_catalog);
    let schema_name = command.schema.clone().unwrap_or(options.default_schema);
    let catalog = catalogs
        .get(&catalog_name)
        .map_err(|e| to_status(DataFusionError::External(Box::new(e))))?;
    if schema_name.is_empty() {
        return Err(Status::invalid_argument(
            "ingest needs a schema: name it (ADBC: db_schema_name) or set the session's schema",
        ));
    }
    let namespace = NamespaceIdent::from_strs(schema_name.split('.'))
        .map_err(|e| Status::invalid_argument(format!("schema {schema_name:?}: {e}")))?;
    let ident = TableIdent::new(namespace, command.table.clone());
    // FlightSql.proto's `TableDefinitionOptions` values (arrow-flight 58 does not export the
    // enums): if_not_exist 1 create, 2 fail; if_exists 1 fail, 2 append, 3 replace; 0 for
    // unspecified, which fails in both cases.
    let (create_missing, on_existing) = match &command.table_definition_options {
        Some(o) => (o.if_not_exist == 1, o.if_exists),
        None => (false, 0),
    };
    let existing = match catalog.load_table(&ident).await {
        Ok(table) => Some(table),
        Err(e) if e.kind() == ErrorKind::TableNotFound => None,
        Err(e) => return Err(to_status(to_df_error(e))),
    };
    // Before the upload is read: appending needs INSERT, creating or replacing OWNERSHIP
    // (`access/`).
    if let Some(access) = Access::of_context(&session.ctx) {
        let needs = match (&existing, on_existing) {
            (Some(_), 2) => Privilege::Insert,
            _ => Privilege::Ownership,
        };
        access
            .check_table(&catalog_name, &schema_name, &command.table, &[needs])
            .map_err(|e| to_status(e.into_error()))?;
    }
    // The upload: its schema arrives first; an empty upload still has one.
    // Each message's declared sizes are checked before arrow-ipc allocates them
    // (`input/src/ipc_bounds.rs`).
    let checked =
        data.map_err(|s| FlightError::Tonic(Box::new(s)))
            .and_then(|message| async move {
                check_declared_lengths(&message, MAX_DECLARED_BYTES)
                    .map(|()| message)
                    .map_err(FlightError::ProtocolError)
            });
    let mut batches = FlightRecordBatchStream::new_from_flight_data(checked);
    let first = batches.next().await.transpose().map_err(upload_error)?;
    let Some(schema) = first
        .as_ref()
        .map(|b| b.schema())
        .or_else(|| batches.schema().cloned())
    else {
        return Err(Status::invalid_argument(
            "the upload carries no Arrow schema",
        ));
    };
    let rows = futures::stream::iter(first.map(Ok))
        .chain(batches)
        .map_err(|e| DataFusionError::External(Box::new(e)));
    let rows = Box::pin(RecordBatchStreamAdapter::new(Arc::clone(&schema), rows));
    let written = match existing {
        Some(table) if on_existing == 2 => append(catalog.as_ref(), &table, rows).await,
        Some(_) if on_existing == 3 => replace(catalog.as_ref(), &ident, &schema, rows).await,
        Some(_) => {
            return Err(Status::already_exists(format!(
                "table {ident} already exists"
            )));
        }
        None if create_missing => {
            let layout = TableLayout::default();
            create_filled(catalog.as_ref(), &ident, &schema, &layout, rows).await
        }
        None => {
            return Err(Status::not_found(format!(
                "table {ident} does not exist (ingest mode append)"
            )));
        }
    };
    let written = written.map_err(to_status)?;
    Ok(i64::try_from(written).unwrap_or(i64::MAX))
}

/// Replace (module docs): the new table is written under a temporary name, then takes the
/// old one's place.
async fn replace(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    schema: &arrow::datatypes::SchemaRef,
    rows: datafusion::execution::SendableRecordBatchStream,
) -> datafusion::common::Result<u64> {
    let staging = TableIdent::new(
        ident.namespace().clone(),
        format!("{}__ingest_{}", ident.name(), uuid::Uuid::new_v4().simple()),
    );
    let written = create_filled(catalog, &staging, schema, &TableLayout::default(), rows).await?;
    // Swap: the old table steps aside under a backup name, the new one takes its name, the
    // backup goes. A failed rename puts the old table back; the name is never without one.
    let backup = TableIdent::new(
        ident.namespace().clone(),
        format!(
            "{}__replaced_{}",
            ident.name(),
            uuid::Uuid::new_v4().simple()
        ),
    );
    catalog
        .rename_table(ident, &backup)
        .await
        .map_err(to_df_error)?;
    if let Err(e) = catalog.rename_table(&staging, ident).await {
        let _ = catalog.rename_table(&backup, ident).await;
        let _ = catalog.drop_table(&staging).await;
        return Err(to_df_error(e));
    }
    if let Err(e) = catalog.drop_table(&backup).await {
        tracing::warn!(table = %backup, error = %e, "dropping the replaced table");
    }
    Ok(written)
}

/// A broken upload (not Arrow IPC, cut off) as one line.
fn upload_error(e: FlightError) -> Status {
    match e {
        FlightError::Tonic(status) => *status,
        other => {
            Status::invalid_argument(format!("the upload is not an Arrow IPC stream: {other}"))
        }
    }
}
