//! Orphan files: files under a table's location that no snapshot, metadata file or statistics
//! file of the table references (Trino's `remove_orphan_files`). A failed or abandoned write
//! leaves them; [`crate::snapshots::expire`] leaves the ones the storage refused to delete.
//!
//! ```text
//!   referenced: every snapshot's manifest list, its manifests and every entry of them (added,
//!               existing or deleted), the current metadata file and the metadata log,
//!               statistics and partition statistics files, version-hint.text
//!   listed:     every file under `<location>/` (a [`LocationLister`]), with its last-modified
//!   orphan:     listed, not referenced, and last modified before the retention instant
//!   ──► deleted through the table's FileIO (the block cache forgets them)
//! ```
//!
//! A location holding another table's metadata file (`*.metadata.json` of another
//! `table-uuid`, or one that cannot be read) is refused before anything is deleted: a table
//! renamed or dropped with its files left, or nested inside this one, shares it.
//!
//! A file a concurrent writer has written but not yet committed is unreferenced too: only the
//! retention keeps it (the floor of `server/src/sql/procedures.rs`, 7 days by default as
//! Trino's), and a file whose last-modified time the storage does not give is never deleted.
//! Paths are compared with their scheme's aliases (`s3a://`, `s3n://` as `s3://`; `file:`
//! and plain paths alike) and repeated slashes folded, since writers spell them differently.

use std::collections::HashSet;

use async_trait::async_trait;
use iceberg::table::Table;
use iceberg::{Error, ErrorKind, Result};

/// One file a [`LocationLister`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedFile {
    /// Its full path, in the scheme of the location listed (`s3://bucket/key`, `/dir/file`).
    pub path: String,
    /// When it was last written, in milliseconds since the epoch, if the storage says.
    pub modified_ms: Option<i64>,
}

/// Lists the files under a location: what iceberg 0.10.1's `FileIO` cannot do
/// (`catalog/src/listing.rs` implements it with OpenDAL).
#[async_trait]
pub trait LocationLister: Send + Sync {
    /// Every file (not directory) whose path starts with `location` followed by `/`, at any
    /// depth.
    ///
    /// Errors: a location of a scheme the lister cannot list (`FeatureUnsupported`), the
    /// storage's failures.
    async fn list(&self, location: &str) -> Result<Vec<ListedFile>>;
}

/// What [`remove_orphan_files`] did, in Trino's metric names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrphanReport {
    /// Manifest files read to collect the referenced files.
    pub processed_manifests: u64,
    /// Files the table references.
    pub active_files: u64,
    /// Files found under the table's location.
    pub scanned_files: u64,
    /// Orphan files deleted.
    pub deleted_files: u64,
    /// Orphan files the storage refused to delete.
    pub not_deleted: u64,
}

/// Deletes the files under `table`'s location that nothing of the table references and that
/// were last modified before `older_than_ms` (ms since the epoch); module docs.
///
/// Errors: a manifest list or manifest that cannot be read, a listing failure (nothing was
/// deleted in either case).
pub async fn remove_orphan_files(
    table: &Table,
    lister: &dyn LocationLister,
    older_than_ms: i64,
) -> Result<OrphanReport> {
    let metadata = table.metadata();
    let all: Vec<i64> = metadata.snapshots().map(|s| s.snapshot_id()).collect();
    let reached = crate::snapshots::reachable_paths(table, &all).await?;
    let mut report = OrphanReport {
        processed_manifests: reached.manifests,
        ..OrphanReport::default()
    };
    let mut referenced: HashSet<String> = reached.paths.iter().map(|p| comparable(p)).collect();
    let metadata_files = table
        .metadata_location()
        .map(str::to_string)
        .into_iter()
        .chain(
            metadata
                .metadata_log()
                .iter()
                .map(|m| m.metadata_file.clone()),
        )
        .chain(
            metadata
                .statistics_iter()
                .map(|s| s.statistics_path.clone()),
        )
        .chain(
            metadata
                .partition_statistics_iter()
                .map(|s| s.statistics_path.clone()),
        );
    referenced.extend(metadata_files.map(|p| comparable(&p)));
    report.active_files = referenced.len() as u64;

    let location = metadata.location().trim_end_matches('/');
    let listed = lister.list(location).await?;
    report.scanned_files = listed.len() as u64;
    let unreferenced: Vec<_> = listed
        .into_iter()
        .filter(|file| {
            !referenced.contains(&comparable(&file.path))
                && !file.path.ends_with("/version-hint.text")
        })
        .collect();
    // Before anything is deleted: a metadata file of another table (a table renamed or dropped
    // with its files left, or one whose location is inside this one), however recent, means
    // the location is shared, and its files are that table's, not orphans.
    for file in unreferenced
        .iter()
        .filter(|f| f.path.ends_with(".metadata.json"))
    {
        let theirs = match table.file_io().new_input(&file.path)?.read().await {
            Ok(bytes) => serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v.get("table-uuid")?.as_str().map(str::to_string)),
            Err(_) => None,
        };
        if theirs.as_deref() != Some(metadata.uuid().to_string().as_str()) {
            return Err(Error::new(
                ErrorKind::DataInvalid,
                format!(
                    "remove_orphan_files: {location} holds the metadata of another table ({}); \
                     its files would be deleted, so nothing is",
                    file.path
                ),
            ));
        }
    }
    let orphans = unreferenced
        .into_iter()
        .filter(|file| file.modified_ms.is_some_and(|m| m < older_than_ms));
    for file in orphans {
        match table.file_io().delete(&file.path).await {
            Ok(()) => report.deleted_files += 1,
            Err(_) => report.not_deleted += 1,
        }
    }
    Ok(report)
}

/// `path` in one spelling per file (module docs): `file:` dropped, `s3a`/`s3n` as `s3`,
/// repeated slashes after the scheme folded.
pub fn comparable(path: &str) -> String {
    let (scheme, rest) = match path.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
        None => match path.strip_prefix("file:") {
            Some(rest) => ("file".to_string(), rest),
            None => ("file".to_string(), path),
        },
    };
    let scheme = match scheme.as_str() {
        "s3a" | "s3n" => "s3",
        other => other,
    };
    let mut folded = String::with_capacity(rest.len());
    for c in rest.chars() {
        if c == '/' && folded.ends_with('/') {
            continue;
        }
        folded.push(c);
    }
    match scheme {
        "file" => format!("/{}", folded.trim_start_matches('/')),
        other => format!("{other}://{folded}"),
    }
}

#[cfg(test)]
mod tests {
    use super::comparable;

    #[test]
    fn spellings_of_one_file_compare_equal() {
        assert_eq!(comparable("file:///w/t/a.parquet"), "/w/t/a.parquet");
        assert_eq!(comparable("file:/w/t/a.parquet"), "/w/t/a.parquet");
        assert_eq!(comparable("/w//t/a.parquet"), "/w/t/a.parquet");
        assert_eq!(comparable("s3a://b/w/t/a.parquet"), "s3://b/w/t/a.parquet");
        assert_eq!(comparable("s3://b/w//t/a.parquet"), "s3://b/w/t/a.parquet");
        assert_ne!(comparable("s3://b/w/t/a"), comparable("s3://c/w/t/a"));
    }
}
