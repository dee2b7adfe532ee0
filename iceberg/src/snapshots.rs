//! Snapshot maintenance: rolling `main` back to an earlier snapshot, and expiring old snapshots
//! with the files only they reference (Trino's `rollback_to_snapshot` and `expire_snapshots`).
//!
//! ```text
//!   rollback_to(id)      main ──► id (an ancestor of main's snapshot), one metadata commit
//!   expire(older_than)   snapshots older than the instant, not the head of a branch or tag
//!                          ──► RemoveSnapshots (one metadata commit, requirements: every
//!                              branch and tag still where it was read)
//!                          ──► then the files only they reached are deleted: manifest lists,
//!                              manifests, data and delete files no kept snapshot reaches
//! ```
//!
//! Files are deleted only after the commit succeeded, and only those no kept snapshot reaches:
//! a concurrent writer commits on a branch head, which is kept, so what it reads stays. A
//! writer whose snapshot is older than the retention could still reach a deleted file: the
//! retention floor (`server/src/sql/procedures.rs`, 7 days by default as Trino's) is what rules
//! that out. A file that cannot be deleted is counted as kept and left for
//! `remove_orphan_files`; the commit stands.

use std::collections::HashSet;

use futures::future::try_join_all;
use iceberg::spec::{ManifestContentType, SnapshotReference, SnapshotRetention, TableMetadata};
use iceberg::table::Table;
use iceberg::{Error, ErrorKind, Result, TableRequirement, TableUpdate};

use crate::commit::CommitCatalog;

/// Points `table`'s `main` branch at `snapshot_id`, one of the ancestors of its current
/// snapshot (Iceberg's `rollbackTo`), in one commit that requires `main` to be unchanged.
///
/// Errors: `DataInvalid` for an unknown snapshot or one that is not an ancestor of `main`
/// (naming it); `CatalogCommitConflicts` when `main` moved meanwhile; the catalog's.
pub async fn rollback_to(
    catalog: &dyn CommitCatalog,
    table: &Table,
    snapshot_id: i64,
) -> Result<()> {
    let metadata = table.metadata();
    let Some(current) = metadata.current_snapshot() else {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            format!(
                "table {} has no snapshot to roll back from",
                table.identifier()
            ),
        ));
    };
    if metadata.snapshot_by_id(snapshot_id).is_none() {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            format!(
                "table {} has no snapshot {snapshot_id} (see its $snapshots)",
                table.identifier()
            ),
        ));
    }
    if !ancestors(metadata, current.snapshot_id()).contains(&snapshot_id) {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            format!(
                "snapshot {snapshot_id} is not an ancestor of the current snapshot {} of table {}",
                current.snapshot_id(),
                table.identifier()
            ),
        ));
    }
    let reference = SnapshotReference::new(
        snapshot_id,
        SnapshotRetention::Branch {
            min_snapshots_to_keep: None,
            max_snapshot_age_ms: None,
            max_ref_age_ms: None,
        },
    );
    let requirements = vec![
        TableRequirement::UuidMatch {
            uuid: metadata.uuid(),
        },
        TableRequirement::RefSnapshotIdMatch {
            r#ref: iceberg::spec::MAIN_BRANCH.to_string(),
            snapshot_id: Some(current.snapshot_id()),
        },
    ];
    let updates = vec![TableUpdate::SetSnapshotRef {
        ref_name: iceberg::spec::MAIN_BRANCH.to_string(),
        reference,
    }];
    catalog
        .commit_updates(table.identifier(), requirements, updates)
        .await
}

/// `snapshot_id` and its ancestors (parent chain while known), newest first.
pub fn ancestors(metadata: &TableMetadata, snapshot_id: i64) -> Vec<i64> {
    let mut out = vec![];
    let mut next = Some(snapshot_id);
    while let Some(id) = next {
        let Some(snapshot) = metadata.snapshot_by_id(id) else {
            break;
        };
        out.push(id);
        next = snapshot.parent_snapshot_id();
    }
    out
}

/// What [`expire`] removed: counts as Trino's `expire_snapshots` reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpireReport {
    /// Snapshots removed from the metadata.
    pub snapshots: u64,
    /// Files deleted, by kind.
    pub manifest_lists: u64,
    /// Manifest files deleted.
    pub manifests: u64,
    /// Data files deleted.
    pub data_files: u64,
    /// Position delete files (Parquet and Puffin deletion-vector files) deleted.
    pub position_delete_files: u64,
    /// Equality delete files deleted.
    pub equality_delete_files: u64,
    /// Files the storage refused to delete (left for `remove_orphan_files`).
    pub not_deleted: u64,
}

/// Removes the snapshots of `table` committed before `older_than_ms` (ms since the epoch)
/// that are no branch's or tag's head, then deletes the files only they reached (module docs).
/// Nothing to expire: no commit, an empty report.
///
/// Errors: `CatalogCommitConflicts` when a branch or tag moved meanwhile (nothing was removed);
/// a manifest list or manifest that cannot be read (nothing was removed); the catalog's.
pub async fn expire(
    catalog: &dyn CommitCatalog,
    table: &Table,
    older_than_ms: i64,
) -> Result<ExpireReport> {
    let metadata = table.metadata();
    let refs = crate::time_travel::refs(table)?;
    let heads: HashSet<i64> = refs.iter().map(|(_, r)| r.snapshot_id).collect();
    let expired: Vec<i64> = metadata
        .snapshots()
        .filter(|s| s.timestamp_ms() < older_than_ms && !heads.contains(&s.snapshot_id()))
        .map(|s| s.snapshot_id())
        .collect();
    if expired.is_empty() {
        return Ok(ExpireReport::default());
    }
    let kept: Vec<i64> = metadata
        .snapshots()
        .map(|s| s.snapshot_id())
        .filter(|id| !expired.contains(id))
        .collect();
    // Read both sides before committing: a failure leaves everything as it was.
    let kept_files = reachable(table, &kept, true).await?;
    let expired_files = reachable(table, &expired, false).await?;

    let mut requirements = vec![TableRequirement::UuidMatch {
        uuid: metadata.uuid(),
    }];
    for (name, reference) in &refs {
        requirements.push(TableRequirement::RefSnapshotIdMatch {
            r#ref: name.clone(),
            snapshot_id: Some(reference.snapshot_id),
        });
    }
    let updates = vec![TableUpdate::RemoveSnapshots {
        snapshot_ids: expired.clone(),
    }];
    catalog
        .commit_updates(table.identifier(), requirements, updates)
        .await?;

    let mut report = ExpireReport {
        snapshots: expired.len() as u64,
        ..ExpireReport::default()
    };
    for (path, kind) in expired_files.files {
        if kept_files.paths.contains(&path) {
            continue;
        }
        if table.file_io().delete(&path).await.is_err() {
            report.not_deleted += 1;
            continue;
        }
        match kind {
            FileKind::ManifestList => report.manifest_lists += 1,
            FileKind::Manifest => report.manifests += 1,
            FileKind::Data => report.data_files += 1,
            FileKind::PositionDeletes => report.position_delete_files += 1,
            FileKind::EqualityDeletes => report.equality_delete_files += 1,
        }
    }
    Ok(report)
}

/// What a file reached from a snapshot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    ManifestList,
    Manifest,
    Data,
    PositionDeletes,
    EqualityDeletes,
}

/// Every file the snapshots `ids` reach, each once, with its kind.
struct Reachable {
    files: Vec<(String, FileKind)>,
    paths: HashSet<String>,
}

impl Reachable {
    fn add(&mut self, path: &str, kind: FileKind) -> bool {
        if !self.paths.insert(path.to_string()) {
            return false;
        }
        self.files.push((path.to_string(), kind));
        true
    }
}

/// Every path the snapshots `ids` of `table` reach (manifest lists, manifests, and the files of
/// every manifest entry, deleted ones included) and how many manifests were read: what
/// [`crate::orphan_files`] must keep.
///
/// Errors: a manifest list or manifest that cannot be read.
pub async fn reachable_paths(table: &Table, ids: &[i64]) -> Result<ReachedPaths> {
    let reached = reachable(table, ids, false).await?;
    let manifests = reached
        .files
        .iter()
        .filter(|(_, kind)| *kind == FileKind::Manifest)
        .count() as u64;
    Ok(ReachedPaths {
        paths: reached.paths,
        manifests,
    })
}

/// What [`reachable_paths`] found.
#[derive(Debug, Clone, Default)]
pub struct ReachedPaths {
    /// The paths, as the metadata spells them.
    pub paths: HashSet<String>,
    /// Manifest files read.
    pub manifests: u64,
}

/// The manifest lists, manifests, data and delete files of the snapshots `ids` of `table`.
/// `live_only`: only the files the snapshots read (a manifest's added and existing entries; a
/// deleted entry names a file they no longer read), for the snapshots kept; else every entry
/// (a file an expired snapshot removed was read by an older one), for the expired.
async fn reachable(table: &Table, ids: &[i64], live_only: bool) -> Result<Reachable> {
    let metadata = table.metadata();
    let mut out = Reachable {
        files: vec![],
        paths: HashSet::new(),
    };
    let mut manifests = vec![];
    for id in ids {
        let Some(snapshot) = metadata.snapshot_by_id(*id) else {
            continue;
        };
        out.add(snapshot.manifest_list(), FileKind::ManifestList);
        let list = table.manifest_list_reader(snapshot).load().await?;
        for manifest in list.consume_entries() {
            if out.add(&manifest.manifest_path, FileKind::Manifest) {
                manifests.push(manifest);
            }
        }
    }
    let loaded = try_join_all(manifests.iter().map(|m| m.load_manifest(table.file_io()))).await?;
    for (file, manifest) in manifests.iter().zip(loaded) {
        for entry in manifest.entries() {
            if live_only && !entry.is_alive() {
                continue;
            }
            let data_file = entry.data_file();
            let kind = match (file.content, data_file.content_type()) {
                (ManifestContentType::Data, _) => FileKind::Data,
                (_, iceberg::spec::DataContentType::EqualityDeletes) => FileKind::EqualityDeletes,
                _ => FileKind::PositionDeletes,
            };
            out.add(data_file.file_path(), kind);
        }
    }
    Ok(out)
}
