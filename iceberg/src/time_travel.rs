//! Time travel: a table read at another snapshot than its current one.
//!
//! ```text
//!   TableVersion (snapshot id | branch or tag | timestamp) ──► resolve ──► (snapshot id, schema id)
//!   table + (snapshot id, schema id) ──► at_snapshot ──► the same table whose current snapshot
//!                                                        and schema are those (metadata in memory)
//! ```
//!
//! The scan plans, prunes and reads "the current snapshot with the current schema" everywhere
//! (provider, codec, manifest metrics); a table at another snapshot is therefore the same
//! table with its metadata rewritten in memory, so every path reads that snapshot alike. The
//! metadata file location stays the table's: a worker that loads it applies the same rewrite
//! from the snapshot and schema ids its plan carries (`codec.rs`).
//!
//! **Which schema.** As in Trino, Spark and the Iceberg spec's "snapshot schema": a snapshot
//! id, a tag or a timestamp reads with the schema the snapshot was written with (a column
//! added later does not exist, a dropped one does); a branch reads with the table's current
//! schema (branches are written with it). A v1 snapshot that records no schema reads with the
//! current schema.

use std::sync::Arc;

use iceberg::spec::{
    MAIN_BRANCH, SchemaRef, SnapshotReference, SnapshotRetention, SortOrder, TableMetadataBuilder,
};
use iceberg::table::Table;
use iceberg::{Error, ErrorKind, Result};

/// Which snapshot of a table a query reads (`FOR VERSION AS OF`, `FOR TIMESTAMP AS OF`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableVersion {
    /// A snapshot by id.
    Snapshot(i64),
    /// A branch or tag by name.
    Ref(String),
    /// The snapshot current at this instant: milliseconds since the Unix epoch, UTC.
    Timestamp(i64),
}

impl std::fmt::Display for TableVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Snapshot(id) => write!(f, "snapshot {id}"),
            Self::Ref(name) => write!(f, "reference '{name}'"),
            Self::Timestamp(ms) => match chrono::DateTime::from_timestamp_millis(*ms) {
                Some(t) => write!(f, "timestamp {}", t.format("%Y-%m-%d %H:%M:%S%.3f UTC")),
                None => write!(f, "timestamp {ms} ms"),
            },
        }
    }
}

/// The snapshot id and schema id `version` names in `table` (module docs: which schema).
///
/// Errors: `DataInvalid` naming the table when the snapshot or reference does not exist, or
/// no snapshot was current at or before the timestamp.
pub fn resolve(table: &Table, version: &TableVersion) -> Result<(i64, i32)> {
    let metadata = table.metadata();
    let missing = |what: String| {
        Error::new(
            ErrorKind::DataInvalid,
            format!("table {} has no {what}", table.identifier()),
        )
    };
    let snapshot = match version {
        TableVersion::Snapshot(id) => metadata
            .snapshot_by_id(*id)
            .ok_or_else(|| missing(version.to_string()))?,
        TableVersion::Ref(name) => {
            let reference = refs(table)?
                .into_iter()
                .find(|(n, _)| n == name)
                .map(|(_, r)| r)
                .ok_or_else(|| missing(format!("branch or tag '{name}'")))?;
            let snapshot = metadata
                .snapshot_by_id(reference.snapshot_id)
                .ok_or_else(|| missing(version.to_string()))?;
            if reference.is_branch() {
                return Ok((snapshot.snapshot_id(), metadata.current_schema_id()));
            }
            snapshot
        }
        // The snapshot log of the main branch, as Iceberg's `SnapshotUtil.snapshotIdAsOfTime`:
        // the last snapshot made current at or before the instant.
        TableVersion::Timestamp(ms) => {
            // As Trino: an instant still to come names no snapshot yet.
            if *ms > chrono::Utc::now().timestamp_millis() {
                return Err(Error::new(
                    ErrorKind::DataInvalid,
                    format!("{version} is in the future"),
                ));
            }
            let id = metadata
                .history()
                .iter()
                .filter(|entry| entry.timestamp_ms <= *ms)
                .max_by_key(|entry| entry.timestamp_ms)
                .map(|entry| entry.snapshot_id)
                .ok_or_else(|| missing(format!("snapshot at or before {version}")))?;
            metadata
                .snapshot_by_id(id)
                .ok_or_else(|| missing(format!("snapshot {id} (named in its snapshot log)")))?
        }
    };
    let schema_id = snapshot
        .schema_id()
        .filter(|id| metadata.schema_by_id(*id).is_some())
        .unwrap_or_else(|| metadata.current_schema_id());
    Ok((snapshot.snapshot_id(), schema_id))
}

/// `table` with snapshot `snapshot_id` current and schema `schema_id` as its schema (module
/// docs); `table` itself when both are already current. The metadata location is unchanged.
///
/// The default partition spec and sort order (used only by writers) fall back to the newest
/// that bind to the older schema, so that a spec over a column added later does not make the
/// metadata invalid.
///
/// Errors: `DataInvalid` when the snapshot or schema does not exist, or when called outside a
/// tokio runtime (the table's tasks run on the caller's).
pub fn at_snapshot(table: &Table, snapshot_id: i64, schema_id: i32) -> Result<Table> {
    let metadata = table.metadata();
    if metadata.current_snapshot_id() == Some(snapshot_id)
        && metadata.current_schema_id() == schema_id
    {
        return Ok(table.clone());
    }
    let schema = metadata.schema_by_id(schema_id).cloned().ok_or_else(|| {
        Error::new(
            ErrorKind::DataInvalid,
            format!("table {} has no schema {schema_id}", table.identifier()),
        )
    })?;
    let reference =
        SnapshotReference::new(snapshot_id, SnapshotRetention::branch(None, None, None));
    let mut builder = TableMetadataBuilder::new_from_metadata(metadata.clone(), None)
        .set_ref(MAIN_BRANCH, reference)?;
    if schema_id != metadata.current_schema_id() {
        builder = builder.set_current_schema(schema_id)?;
        if !binds(metadata.default_partition_spec(), &schema) {
            let spec = metadata
                .partition_specs_iter()
                .filter(|spec| binds(spec, &schema))
                .max_by_key(|spec| spec.spec_id());
            if let Some(spec) = spec {
                builder = builder.set_default_partition_spec(spec.spec_id())?;
            }
        }
        let order = metadata.default_sort_order();
        if SortOrder::builder()
            .with_fields(order.fields.clone())
            .build(&schema)
            .is_err()
        {
            let unsorted = metadata
                .sort_orders_iter()
                .find(|o| o.fields.is_empty())
                .map(|o| o.order_id);
            if let Some(id) = unsorted {
                builder = builder.set_default_sort_order(id)?;
            }
        }
    }
    let rewritten = builder.build()?.metadata;
    let mut out = Table::builder()
        .metadata(Arc::new(rewritten))
        .identifier(table.identifier().clone())
        .file_io(table.file_io().clone())
        .runtime(iceberg::Runtime::try_current()?)
        .readonly(true);
    if let Some(location) = table.metadata_location() {
        out = out.metadata_location(location);
    }
    out.build()
}

/// The table's branches and tags, by name. (iceberg 0.10.1 keeps them private to its metadata
/// type; they are read back from its JSON form, the table-metadata format of the Iceberg spec.)
///
/// Errors: the metadata does not serialize (not expected).
pub fn refs(table: &Table) -> Result<Vec<(String, SnapshotReference)>> {
    let invalid = |e: serde_json::Error| {
        Error::new(
            ErrorKind::DataInvalid,
            "table metadata refs do not serialize",
        )
        .with_source(e)
    };
    let json = serde_json::to_value(table.metadata()).map_err(invalid)?;
    let Some(refs) = json.get("refs") else {
        return Ok(vec![]);
    };
    let refs: std::collections::BTreeMap<String, SnapshotReference> =
        serde_json::from_value(refs.clone()).map_err(invalid)?;
    Ok(refs.into_iter().collect())
}

/// Whether every source column of `spec` is in `schema`.
fn binds(spec: &iceberg::spec::PartitionSpec, schema: &SchemaRef) -> bool {
    spec.fields()
        .iter()
        .all(|f| schema.field_by_id(f.source_id).is_some())
}
