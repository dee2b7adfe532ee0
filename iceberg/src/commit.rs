//! Snapshots iceberg 0.10.1's transactions cannot produce: a row-level change that removes
//! data files, adds data files and adds position delete files or deletion vectors (replacing
//! earlier vectors) in one snapshot — copy-on-write and merge-on-read `DELETE`, `UPDATE`,
//! `MERGE` and `INSERT OVERWRITE` (`scan/src/write/`).
//!
//! iceberg 0.10.1 commits only fast appends: its snapshot producer, its transaction actions
//! and the constructor of `TableCommit` (which `Catalog::update_table` takes) are all
//! crate-private. So this module writes the snapshot with iceberg's public manifest and
//! manifest-list writers, and hands its updates and requirements to the catalog through
//! [`CommitCatalog`], which every catalog of `catalog/` implements (`catalog/src/commit.rs`).
//!
//! ```text
//!  the current snapshot's manifest list
//!    ├─ manifest without a removed file ──► listed again as is
//!    └─ manifest with one ──► rewritten: the removed file DELETED, the others EXISTING
//!                             (their snapshot ids and sequence numbers kept)
//!  added data files ──► one new data manifest, ADDED
//!  added delete files ──► one new delete manifest per partition spec, ADDED
//!  ──► manifest list (v3: with the first row id of the rows added) ──► AddSnapshot +
//!      SetSnapshotRef(main); requirements: the table's uuid, main still at the snapshot the
//!      files were read at
//! ```
//!
//! A removed data file takes with it the position delete files and deletion vectors that name
//! it alone (`referenced_data_file`; the spec requires it of deletion vectors). Other delete
//! files that applied to it stay listed: a position delete file names data files by path, so
//! it matches no live file any more; an equality delete file applies only to data files of a
//! lower sequence number, which the added files are not. Both are correct because the added
//! files were written from rows read with those deletes applied. A removed deletion vector is
//! named by its Puffin file and the data file it references: one Puffin file may hold the
//! vectors of several data files, and only the one replaced goes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, MAIN_BRANCH, Manifest, ManifestContentType,
    ManifestEntryRef, ManifestFile, ManifestListWriter, ManifestWriter, ManifestWriterBuilder,
    Operation, PartitionSpecRef, Snapshot, SnapshotReference, SnapshotRetention,
    SnapshotSummaryCollector, Summary, TableMetadata,
};
use iceberg::table::Table;
use iceberg::{Catalog, Error, ErrorKind, Result, TableIdent, TableRequirement, TableUpdate};

use crate::row_lineage;

/// A catalog that commits a list of updates under a list of requirements, as the Iceberg REST
/// protocol's `CommitTableRequest` does: what `Catalog::update_table` does, for updates built
/// outside iceberg's transactions (module docs).
#[async_trait]
pub trait CommitCatalog: Catalog {
    /// Applies `updates` to `table` if every one of `requirements` holds for its current
    /// metadata, atomically.
    ///
    /// Errors: `ErrorKind::CatalogCommitConflicts` (retryable) when a requirement does not
    /// hold (another commit came first), `TableNotFound`, or the catalog's own failures.
    async fn commit_updates(
        &self,
        table: &TableIdent,
        requirements: Vec<TableRequirement>,
        updates: Vec<TableUpdate>,
    ) -> Result<()>;
}

/// What one statement changes in a table's files: one snapshot (module docs).
#[derive(Debug, Clone, Default)]
pub struct FileChanges {
    /// Paths of live data files the snapshot removes (copy-on-write, overwrite).
    pub removed_data_files: HashSet<String>,
    /// Data files it adds.
    pub added_data_files: Vec<DataFile>,
    /// Position delete files and deletion vectors it adds, each with the partition spec id of
    /// the data file it deletes from (its manifest is written under that spec).
    pub added_delete_files: Vec<(i32, DataFile)>,
    /// Deletion vectors it removes (replaced by one of `added_delete_files`): `(Puffin file
    /// path, referenced data file path)`.
    pub removed_deletion_vectors: HashSet<(String, String)>,
    /// Paths of live delete files the snapshot removes (whole Parquet delete files; not
    /// deletion vectors, named in `removed_deletion_vectors`): a compaction removing every data
    /// file they could apply to (`scan/src/write/optimize.rs`).
    pub removed_delete_files: HashSet<String>,
    /// The changes rewrite files without changing the table's rows (compaction): the snapshot's
    /// operation is `replace`.
    pub rewrite: bool,
    /// Table properties the same commit sets (`add_files.rs`: the name mapping its files are
    /// read by).
    pub properties: HashMap<String, String>,
}

impl FileChanges {
    /// Whether committing these changes would change nothing.
    pub fn is_empty(&self) -> bool {
        self.removed_data_files.is_empty()
            && self.removed_delete_files.is_empty()
            && self.added_data_files.is_empty()
            && self.added_delete_files.is_empty()
            && self.removed_deletion_vectors.is_empty()
    }

    /// The snapshot operation that names these changes (table spec, "Snapshots"): `replace`
    /// for a rewrite, `append` when it only adds data, `delete` when it adds none, else
    /// `overwrite`.
    pub fn operation(&self) -> Operation {
        if self.rewrite {
            return Operation::Replace;
        }
        let adds_data = !self.added_data_files.is_empty();
        let deletes = !self.removed_data_files.is_empty() || !self.added_delete_files.is_empty();
        match (adds_data, deletes) {
            (true, false) => Operation::Append,
            (false, _) => Operation::Delete,
            (true, true) => Operation::Overwrite,
        }
    }

    /// Every file these changes wrote (added data and delete files), for a caller that drops
    /// them after a commit that did not happen.
    pub fn written_paths(&self) -> HashSet<String> {
        self.added_data_files
            .iter()
            .chain(self.added_delete_files.iter().map(|(_, f)| f))
            .map(|f| f.file_path().to_string())
            .collect()
    }
}

/// Commits a snapshot of `table` that removes the data files at the paths `removed` and adds
/// `added` (module docs), through `catalog`: [`commit_changes`] with only those changes.
pub async fn overwrite(
    catalog: &dyn CommitCatalog,
    table: &Table,
    removed: &HashSet<String>,
    added: Vec<DataFile>,
) -> Result<()> {
    let changes = FileChanges {
        removed_data_files: removed.clone(),
        added_data_files: added,
        ..FileChanges::default()
    };
    commit_changes(catalog, table, &changes).await
}

/// Commits one snapshot of `table` applying `changes` (module docs), through `catalog`. Its
/// operation is [`FileChanges::operation`]; its summary carries the added, deleted and total
/// counts.
///
/// Errors: `DataInvalid` when `table` has no snapshot but files are to be removed, or a path of
/// `removed_data_files` / `removed_deletion_vectors` is not live in its current snapshot;
/// `FeatureUnsupported` for position deletes in a format version 1 table;
/// `CatalogCommitConflicts` when the table moved on since `table` was loaded (the caller
/// re-reads and retries); write and catalog failures.
pub async fn commit_changes(
    catalog: &dyn CommitCatalog,
    table: &Table,
    changes: &FileChanges,
) -> Result<()> {
    let metadata = table.metadata();
    let parent = metadata.current_snapshot();
    let removes = !changes.removed_data_files.is_empty()
        || !changes.removed_deletion_vectors.is_empty()
        || !changes.removed_delete_files.is_empty();
    if parent.is_none() && removes {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            "the table has no snapshot to remove files from",
        ));
    }
    let version = metadata.format_version();
    if version == FormatVersion::V1 && !changes.added_delete_files.is_empty() {
        return Err(Error::new(
            ErrorKind::FeatureUnsupported,
            "a format version 1 table cannot hold delete files",
        ));
    }
    let snapshot_id = unique_snapshot_id(metadata);
    let sequence_number = metadata.next_sequence_number();
    let commit_id = uuid::Uuid::new_v4();
    let mut files = NewFiles {
        table,
        snapshot_id,
        commit_id,
        count: 0,
    };
    let mut summary = SnapshotSummaryCollector::default();
    let mut manifests: Vec<ManifestFile> = Vec::new();
    let mut found_data: HashSet<String> = HashSet::new();
    let mut found_vectors: HashSet<(String, String)> = HashSet::new();
    let mut found_deletes: HashSet<String> = HashSet::new();
    // A position delete file or deletion vector that names one data file goes with it
    // (table spec: "when removing a data file, writers must also remove any deletion vector
    // that applies to it").
    let removed = |file: &DataFile| match file.content_type() {
        DataContentType::Data => changes.removed_data_files.contains(file.file_path()),
        DataContentType::PositionDeletes => {
            changes.removed_delete_files.contains(file.file_path())
                || file.referenced_data_file().is_some_and(|r| {
                    changes.removed_data_files.contains(&r)
                        || changes
                            .removed_deletion_vectors
                            .contains(&(file.file_path().to_string(), r))
                })
        }
        DataContentType::EqualityDeletes => changes.removed_delete_files.contains(file.file_path()),
    };
    if let Some(parent) = parent {
        let list = table.manifest_list_reader(parent).load().await?;
        let listed: Vec<ManifestFile> = list.consume_entries().into_iter().collect();
        for manifest_file in listed {
            let hits_data = manifest_file.content == ManifestContentType::Data
                && !changes.removed_data_files.is_empty();
            let hits_deletes = manifest_file.content == ManifestContentType::Deletes
                && (!changes.removed_deletion_vectors.is_empty()
                    || !changes.removed_data_files.is_empty()
                    || !changes.removed_delete_files.is_empty());
            if !hits_data && !hits_deletes {
                manifests.push(manifest_file);
                continue;
            }
            let manifest = manifest_file.load_manifest(table.file_io()).await?;
            let hit = manifest
                .entries()
                .iter()
                .any(|e| e.is_alive() && removed(e.data_file()));
            if !hit {
                manifests.push(manifest_file);
                continue;
            }
            let spec = Arc::new(manifest.metadata().partition_spec().clone());
            let schema = Arc::clone(manifest.metadata().schema());
            let mut writer = files.manifest_writer(&schema, &spec, manifest_file.content)?;
            for (entry, file) in live_files(&manifest_file, &manifest)? {
                let seq = entry.sequence_number.unwrap_or(0);
                if removed(&file) {
                    match file.content_type() {
                        DataContentType::Data => found_data.insert(file.file_path().to_string()),
                        _ if changes.removed_delete_files.contains(file.file_path()) => {
                            found_deletes.insert(file.file_path().to_string())
                        }
                        _ => found_vectors.insert((
                            file.file_path().to_string(),
                            file.referenced_data_file().unwrap_or_default(),
                        )),
                    };
                    summary.remove_file(&file, Arc::clone(&schema), Arc::clone(&spec));
                    writer.add_delete_file(file, seq, entry.file_sequence_number)?;
                } else {
                    let added_by = entry.snapshot_id.unwrap_or(manifest_file.added_snapshot_id);
                    writer.add_existing_file(file, added_by, seq, entry.file_sequence_number)?;
                }
            }
            manifests.push(writer.write_manifest_file().await?);
        }
    }
    if let Some(missing) = changes
        .removed_data_files
        .iter()
        .find(|p| !found_data.contains(*p))
    {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            format!("{missing} is not a live data file of the current snapshot"),
        ));
    }
    if let Some(missing) = changes
        .removed_delete_files
        .iter()
        .find(|p| !found_deletes.contains(*p))
    {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            format!("{missing} is not a live delete file of the current snapshot"),
        ));
    }
    if let Some((puffin, data)) = changes
        .removed_deletion_vectors
        .iter()
        .find(|k| !found_vectors.contains(*k))
    {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            format!("{puffin} holds no live deletion vector of {data}"),
        ));
    }
    let schema = Arc::clone(metadata.current_schema());
    if !changes.added_data_files.is_empty() {
        let spec = Arc::clone(metadata.default_partition_spec());
        let mut writer = files.manifest_writer(&schema, &spec, ManifestContentType::Data)?;
        for file in &changes.added_data_files {
            summary.add_file(file, Arc::clone(&schema), Arc::clone(&spec));
            writer.add_file(file.clone(), sequence_number)?;
        }
        manifests.push(writer.write_manifest_file().await?);
    }
    // Delete files, one manifest per partition spec of the data files they delete from.
    let mut by_spec: HashMap<i32, Vec<&DataFile>> = HashMap::new();
    for (spec_id, file) in &changes.added_delete_files {
        by_spec.entry(*spec_id).or_default().push(file);
    }
    let mut spec_ids: Vec<i32> = by_spec.keys().copied().collect();
    spec_ids.sort_unstable();
    for spec_id in spec_ids {
        let Some(spec) = metadata.partition_spec_by_id(spec_id) else {
            return Err(Error::new(
                ErrorKind::DataInvalid,
                format!("the table has no partition spec {spec_id}"),
            ));
        };
        let spec = Arc::clone(spec);
        let mut writer = files.manifest_writer(&schema, &spec, ManifestContentType::Deletes)?;
        for file in &by_spec[&spec_id] {
            summary.add_file(file, Arc::clone(&schema), Arc::clone(&spec));
            writer.add_file((*file).clone(), sequence_number)?;
        }
        manifests.push(writer.write_manifest_file().await?);
    }

    commit_snapshot(
        catalog,
        &files,
        manifests,
        summary.build(),
        changes.operation(),
        sequence_number,
        changes.properties.clone(),
    )
    .await
}

/// What [`rewrite_manifests`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestsReport {
    /// Manifests replaced.
    pub rewritten_manifests: u64,
    /// Manifests written in their place.
    pub added_manifests: u64,
    /// Live entries carried over.
    pub entries: u64,
}

/// Iceberg's default `commit.manifest.target-size-bytes` (8 MiB).
pub const MANIFEST_TARGET_SIZE_BYTES: u64 = 8 * 1024 * 1024;

/// Rewrites the manifests of `table`'s current snapshot into as few as fit `target_bytes` each,
/// per content (data, deletes) and partition spec, their live entries sorted by partition, in one
/// `replace` snapshot (Iceberg's `RewriteManifests`; Trino's `optimize_manifests`). Entries keep
/// their snapshot ids, sequence numbers and row ids; the table's rows and files do not change.
/// A group already in one manifest under the target is listed as is; nothing to merge: no
/// commit, an empty report.
///
/// Errors: `CatalogCommitConflicts` when `main` moved since `table` was loaded (the caller
/// reloads and retries); read, write and catalog failures.
pub async fn rewrite_manifests(
    catalog: &dyn CommitCatalog,
    table: &Table,
    target_bytes: u64,
) -> Result<ManifestsReport> {
    let metadata = table.metadata();
    let Some(parent) = metadata.current_snapshot() else {
        return Ok(ManifestsReport::default());
    };
    let listed: Vec<ManifestFile> = table
        .manifest_list_reader(parent)
        .load()
        .await?
        .consume_entries()
        .into_iter()
        .collect();
    let mut groups: std::collections::BTreeMap<(bool, i32), Vec<ManifestFile>> = Default::default();
    for manifest in listed {
        let key = (
            manifest.content == ManifestContentType::Deletes,
            manifest.partition_spec_id,
        );
        groups.entry(key).or_default().push(manifest);
    }
    let merges = |g: &Vec<ManifestFile>| {
        g.len() > 1 || g.iter().any(|m| m.manifest_length as u64 > target_bytes)
    };
    if !groups.values().any(merges) {
        return Ok(ManifestsReport::default());
    }
    let mut files = NewFiles {
        table,
        snapshot_id: unique_snapshot_id(metadata),
        commit_id: uuid::Uuid::new_v4(),
        count: 0,
    };
    let mut report = ManifestsReport::default();
    let mut manifests = vec![];
    for ((_, _), group) in groups {
        if !merges(&group) {
            manifests.extend(group);
            continue;
        }
        report.rewritten_manifests += group.len() as u64;
        let bytes: u64 = group.iter().map(|m| m.manifest_length as u64).sum();
        let content = group[0].content;
        let mut entries = vec![];
        let mut bound = None;
        for manifest_file in &group {
            let manifest = manifest_file.load_manifest(table.file_io()).await?;
            for (entry, file) in live_files(manifest_file, &manifest)? {
                let added_by = entry.snapshot_id.unwrap_or(manifest_file.added_snapshot_id);
                let seq = entry.sequence_number.unwrap_or(0);
                entries.push((
                    format!("{:?}", file.partition()),
                    file,
                    added_by,
                    seq,
                    entry.file_sequence_number,
                ));
            }
            if bound.is_none() {
                bound = Some((
                    Arc::clone(manifest.metadata().schema()),
                    Arc::new(manifest.metadata().partition_spec().clone()),
                ));
            }
        }
        let Some((schema, spec)) = bound else {
            continue;
        };
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        report.entries += entries.len() as u64;
        let chunks = bytes.div_ceil(target_bytes.max(1)).max(1) as usize;
        let per_chunk = entries.len().div_ceil(chunks).max(1);
        let mut entries = entries.into_iter().peekable();
        while entries.peek().is_some() {
            let mut writer = files.manifest_writer(&schema, &spec, content)?;
            for (_, file, added_by, seq, file_seq) in entries.by_ref().take(per_chunk) {
                writer.add_existing_file(file, added_by, seq, file_seq)?;
            }
            manifests.push(writer.write_manifest_file().await?);
            report.added_manifests += 1;
        }
    }
    let summary = HashMap::from([
        (
            "manifests-created".to_string(),
            report.added_manifests.to_string(),
        ),
        (
            "manifests-replaced".to_string(),
            report.rewritten_manifests.to_string(),
        ),
        ("entries-processed".to_string(), report.entries.to_string()),
    ]);
    commit_snapshot(
        catalog,
        &files,
        manifests,
        summary,
        Operation::Replace,
        metadata.next_sequence_number(),
        HashMap::new(),
    )
    .await?;
    Ok(report)
}

/// Writes the manifest list of `manifests` for the snapshot `files` names and commits that
/// snapshot on `main` (its parent: the table's current snapshot, a requirement), with
/// `summary` (added and removed counts; totals carried from the parent) and `operation`,
/// setting the table `properties` in the same commit.
async fn commit_snapshot(
    catalog: &dyn CommitCatalog,
    files: &NewFiles<'_>,
    manifests: Vec<ManifestFile>,
    summary: HashMap<String, String>,
    operation: Operation,
    sequence_number: i64,
    properties: HashMap<String, String>,
) -> Result<()> {
    let (table, snapshot_id, commit_id) = (files.table, files.snapshot_id, files.commit_id);
    let metadata = table.metadata();
    let version = metadata.format_version();
    let parent = metadata.current_snapshot();
    let list_path = format!(
        "{}/metadata/snap-{snapshot_id}-0-{commit_id}.avro",
        metadata.location()
    );
    let out = table.file_io().new_output(&list_path)?.writer().await?;
    let parent_id = parent.map(|p| p.snapshot_id());
    let first_row_id = metadata.next_row_id();
    let mut list_writer = match version {
        FormatVersion::V1 => ManifestListWriter::v1(out, snapshot_id, parent_id),
        FormatVersion::V2 => ManifestListWriter::v2(out, snapshot_id, parent_id, sequence_number),
        FormatVersion::V3 => ManifestListWriter::v3(
            out,
            snapshot_id,
            parent_id,
            sequence_number,
            Some(first_row_id),
        ),
    };
    list_writer.add_manifests(manifests.into_iter())?;
    let next_row_id = list_writer.next_row_id();
    list_writer.close().await?;

    let parent_summary = parent
        .map(|p| p.summary().additional_properties.clone())
        .unwrap_or_default();
    let snapshot = Snapshot::builder()
        .with_snapshot_id(snapshot_id)
        .with_parent_snapshot_id(parent_id)
        .with_sequence_number(sequence_number)
        .with_timestamp_ms(chrono::Utc::now().timestamp_millis())
        .with_manifest_list(list_path)
        .with_summary(Summary {
            operation,
            additional_properties: with_totals(summary, &parent_summary),
        })
        .with_schema_id(metadata.current_schema_id());
    // v3: the rows of manifests without a first row id got ids from `first_row_id` on.
    let snapshot = match next_row_id {
        Some(next) => snapshot
            .with_row_range(first_row_id, next - first_row_id)
            .build(),
        None => snapshot.build(),
    };
    let mut updates = vec![
        TableUpdate::AddSnapshot { snapshot },
        TableUpdate::SetSnapshotRef {
            ref_name: MAIN_BRANCH.to_string(),
            reference: SnapshotReference::new(
                snapshot_id,
                SnapshotRetention::branch(None, None, None),
            ),
        },
    ];
    if !properties.is_empty() {
        updates.push(TableUpdate::SetProperties {
            updates: properties,
        });
    }
    let requirements = vec![
        TableRequirement::UuidMatch {
            uuid: metadata.uuid(),
        },
        TableRequirement::RefSnapshotIdMatch {
            r#ref: MAIN_BRANCH.to_string(),
            snapshot_id: parent_id,
        },
    ];
    catalog
        .commit_updates(table.identifier(), requirements, updates)
        .await
}

/// The live entries of `manifest` (read from `manifest_file`), each with its data file; a
/// first row id the file inherits is written out, so rows keep their ids when the entry is
/// written again (`row_lineage.rs`).
fn live_files<'a>(
    manifest_file: &ManifestFile,
    manifest: &'a Manifest,
) -> Result<Vec<(&'a ManifestEntryRef, DataFile)>> {
    let first_row_ids = row_lineage::first_row_ids(manifest_file, manifest);
    let mut live = vec![];
    for (entry, first_row_id) in manifest.entries().iter().zip(first_row_ids) {
        if !entry.is_alive() {
            continue;
        }
        let file = match first_row_id {
            Some(id) if entry.data_file().first_row_id().is_none() => {
                row_lineage::with_first_row_id(entry.data_file(), id)?
            }
            _ => entry.data_file().clone(),
        };
        live.push((entry, file));
    }
    Ok(live)
}

/// Names and writers of the manifests one commit writes (`<location>/metadata/<commit>-m<n>.avro`,
/// as iceberg's own snapshot producer names them).
struct NewFiles<'a> {
    table: &'a Table,
    snapshot_id: i64,
    commit_id: uuid::Uuid,
    count: usize,
}

impl NewFiles<'_> {
    fn manifest_writer(
        &mut self,
        schema: &iceberg::spec::SchemaRef,
        spec: &PartitionSpecRef,
        content: ManifestContentType,
    ) -> Result<ManifestWriter> {
        let path = format!(
            "{}/metadata/{}-m{}.avro",
            self.table.metadata().location(),
            self.commit_id,
            self.count
        );
        self.count += 1;
        let builder = ManifestWriterBuilder::new(
            self.table.file_io().new_output(path)?,
            Some(self.snapshot_id),
            Arc::clone(schema),
            spec.as_ref().clone(),
        );
        Ok(match (self.table.metadata().format_version(), content) {
            (FormatVersion::V1, _) => builder.build_v1(),
            (FormatVersion::V2, ManifestContentType::Data) => builder.build_v2_data(),
            (FormatVersion::V2, ManifestContentType::Deletes) => builder.build_v2_deletes(),
            (FormatVersion::V3, ManifestContentType::Data) => builder.build_v3_data(),
            (FormatVersion::V3, ManifestContentType::Deletes) => builder.build_v3_deletes(),
        })
    }
}

/// The summary properties `this` (the added-/deleted- counts of one snapshot) with the
/// `total-*` counts carried over from the parent snapshot's summary `parent`, as the Iceberg
/// spec's snapshot summary defines them (total = parent's total + added − deleted). A total
/// the parent does not carry is left out (it is unknown).
fn with_totals(
    mut this: HashMap<String, String>,
    parent: &HashMap<String, String>,
) -> HashMap<String, String> {
    const TOTALS: [(&str, &str, &str); 6] = [
        ("total-records", "added-records", "deleted-records"),
        ("total-files-size", "added-files-size", "removed-files-size"),
        ("total-data-files", "added-data-files", "deleted-data-files"),
        (
            "total-delete-files",
            "added-delete-files",
            "removed-delete-files",
        ),
        (
            "total-position-deletes",
            "added-position-deletes",
            "removed-position-deletes",
        ),
        (
            "total-equality-deletes",
            "added-equality-deletes",
            "removed-equality-deletes",
        ),
    ];
    let num = |m: &HashMap<String, String>, k: &str| -> Option<i64> {
        m.get(k).and_then(|v| v.parse().ok())
    };
    for (total, add, sub) in TOTALS {
        if let Some(before) = num(parent, total) {
            let after = before + num(&this, add).unwrap_or(0) - num(&this, sub).unwrap_or(0);
            this.insert(total.to_string(), after.max(0).to_string());
        }
    }
    this
}

/// A positive snapshot id no snapshot of `metadata` has (from a random UUID, as iceberg's
/// snapshot producer draws them).
fn unique_snapshot_id(metadata: &TableMetadata) -> i64 {
    loop {
        let (a, b) = uuid::Uuid::new_v4().as_u64_pair();
        let id = ((a ^ b) as i64).checked_abs().unwrap_or(1);
        if metadata.snapshots().all(|s| s.snapshot_id() != id) {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_follow_the_parent() {
        let this = HashMap::from([
            ("added-records".to_string(), "5".to_string()),
            ("deleted-records".to_string(), "20".to_string()),
            ("deleted-data-files".to_string(), "2".to_string()),
            ("added-data-files".to_string(), "1".to_string()),
        ]);
        let parent = HashMap::from([
            ("total-records".to_string(), "100".to_string()),
            ("total-data-files".to_string(), "4".to_string()),
        ]);
        let out = with_totals(this, &parent);
        assert_eq!(out["total-records"], "85");
        assert_eq!(out["total-data-files"], "3");
        assert!(!out.contains_key("total-files-size"));
    }
}
