//! `INSERT OVERWRITE t SELECT …`: dynamic partition overwrite, as Spark's and Trino's
//! (`insert_existing_partitions_behavior = OVERWRITE`) — the partitions the query writes are
//! replaced, the others kept.
//!
//! ```text
//!   rows ──► new data files (sink.rs's writer, the table's default partition spec)
//!        ──► partitions written = the new files' partition tuples
//!   live data files of the current snapshot in the default spec whose tuple is written
//!        ──► removed                     (unpartitioned table: every live data file)
//!   ──► one `overwrite` snapshot (iceflight_iceberg::commit::commit_changes)
//! ```
//!
//! A query that writes no row replaces nothing. Data files written under an earlier partition
//! spec are kept (their tuples are not comparable to the new ones). Delete files of a removed
//! data file stay listed and match nothing (`iceberg/src/commit.rs`). When other writers only
//! appended meanwhile, the snapshot is committed on top of them (their rows stay: the statement
//! is serialized before them); any other change fails the statement with `WriteConflict` and
//! drops its files.

use std::collections::HashSet;

use datafusion::common::Result;
use datafusion::execution::SendableRecordBatchStream;
use iceberg::ErrorKind;
use iceberg::spec::Struct;
use iceberg::table::Table;
use iceflight_iceberg::commit::{CommitCatalog, FileChanges, commit_changes};

use crate::model::iceberg_error::external;
use crate::model::write_conflict::WriteConflict;
use crate::plan::metrics_index::FileMetricsIndex;
use crate::write::data_files::write_data_files;
use crate::write::row_change::{drop_files, only_appended, without_empty};

/// Commits on top of other writers' appends before the statement gives up.
const REBASES: usize = 32;

/// Writes `data` as data files of `table` (as planned) and commits them replacing the
/// partitions they fall in (module docs); returns the rows written.
///
/// Errors: a row that does not fit the table (sink.rs's writer); [`WriteConflict`] when
/// another writer changed more than appending; the catalog's.
pub async fn overwrite_partitions(
    catalog: &dyn CommitCatalog,
    table: &Table,
    data: SendableRecordBatchStream,
) -> Result<u64> {
    let (written, rows) = write_data_files(table, data).await?;
    let added = without_empty(table, written).await;
    if added.is_empty() {
        return Ok(0);
    }
    // The files replaced are those of the snapshot the statement was planned on: files
    // appended since stay (the statement is serialized before those appends).
    let changes = FileChanges {
        removed_data_files: replaced(table, &added).await?,
        added_data_files: added.clone(),
        ..FileChanges::default()
    };
    commit_on_appends(catalog, table, &changes, "INSERT OVERWRITE", REBASES).await?;
    Ok(rows)
}

/// Commits `changes` on `table`'s snapshot, or on top of appends committed since (at most
/// `rebases` times, a short pause after each to let a burst of appends pass). Nothing else
/// may have happened: a rewrite or delete since fails with [`WriteConflict`] naming
/// `statement`, and the written files are dropped; so are they after too many rebases. A
/// commit whose outcome is unknown (a timeout) keeps them: they may be the table's now.
///
/// Errors: [`WriteConflict`]; the catalog's.
pub(crate) async fn commit_on_appends(
    catalog: &dyn CommitCatalog,
    table: &Table,
    changes: &FileChanges,
    statement: &str,
    rebases: usize,
) -> Result<()> {
    let ident = table.identifier().clone();
    let mut base = table.clone();
    for attempt in 1..=rebases {
        let e = match commit_changes(catalog, &base, changes).await {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::CatalogCommitConflicts => e,
            // The outcome may be unknown (a timeout): the files stay.
            Err(e) => return Err(external(e)),
        };
        let now = catalog.load_table(&ident).await.map_err(external)?;
        if !only_appended(&base, &now) {
            drop_files(table, &changes.written_paths()).await;
            return Err(WriteConflict {
                statement: statement.to_string(),
                table: ident.to_string(),
                reason: format!("another writer changed the table first ({})", e.message()),
            }
            .into_error());
        }
        base = now;
        tokio::time::sleep(std::time::Duration::from_millis(20 * attempt as u64)).await;
    }
    drop_files(table, &changes.written_paths()).await;
    Err(WriteConflict {
        statement: statement.to_string(),
        table: ident.to_string(),
        reason: format!("other writers committed {rebases} times in a row first"),
    }
    .into_error())
}

/// The live data files of `table`'s current snapshot that `added` replaces (module docs).
async fn replaced(table: &Table, added: &[iceberg::spec::DataFile]) -> Result<HashSet<String>> {
    let metadata = table.metadata();
    let spec_id = metadata.default_partition_spec_id();
    let unpartitioned = metadata.default_partition_spec().is_unpartitioned();
    let written: HashSet<&Struct> = added.iter().map(|f| f.partition()).collect();
    let index = FileMetricsIndex::load(table).await.map_err(external)?;
    Ok(index
        .paths()
        .filter(|path| {
            unpartitioned
                || (index.spec_id(path) == Some(spec_id)
                    && index
                        .get(path)
                        .is_some_and(|f| written.contains(f.partition())))
        })
        .map(str::to_string)
        .collect())
}
