//! Snapshots iceberg 0.10.1's transactions cannot produce: an overwrite that removes data
//! files and adds others, for copy-on-write `DELETE` (`delete.rs`).
//!
//! iceberg 0.10.1 commits only fast appends: its snapshot producer, its transaction actions
//! and the constructor of `TableCommit` (which `Catalog::update_table` takes) are all
//! crate-private. So this module writes the snapshot with iceberg's public manifest and
//! manifest-list writers, and hands its updates and requirements to the catalog through
//! [`CommitCatalog`], which every catalog of `catalog/` implements (`catalog/src/commit.rs`).
//!
//! ```text
//!  the current snapshot's manifest list
//!    ├─ data manifest without a removed file ──► listed again as is
//!    ├─ data manifest with one ──► rewritten: the removed file DELETED, the others EXISTING
//!    │                             (their snapshot ids and sequence numbers kept)
//!    └─ delete manifest ─────────────────────► listed again as is
//!  added data files ──► one new manifest, ADDED
//!  ──► manifest list ──► AddSnapshot + SetSnapshotRef(main)
//!      requirements: the table's uuid, main still at the snapshot the files were read at
//! ```
//!
//! Delete files that applied to a removed data file stay listed: a position delete file names
//! data files by path, so it matches no live file any more; an equality delete file applies
//! only to data files of a lower sequence number, which the added files are not. Both are
//! correct because the added files were written from rows read with those deletes applied.
//! (Iceberg's Java writer drops such delete files in the same commit; readers need not.)

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use iceberg::spec::{
    DataFile, FormatVersion, MAIN_BRANCH, ManifestContentType, ManifestFile, ManifestListWriter,
    ManifestWriter, ManifestWriterBuilder, Operation, PartitionSpecRef, Snapshot,
    SnapshotReference, SnapshotRetention, SnapshotSummaryCollector, Summary, TableMetadata,
};
use iceberg::table::Table;
use iceberg::{Catalog, Error, ErrorKind, Result, TableIdent, TableRequirement, TableUpdate};

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

/// Commits a snapshot of `table` that removes the data files at the paths `removed` and adds
/// `added` (module docs), through `catalog`. The snapshot's operation is `delete` when nothing
/// is added, else `overwrite`; its summary carries the added, deleted and total counts.
///
/// Errors: `DataInvalid` when `table` has no snapshot or a path of `removed` is not a live data
/// file of its current snapshot; `FeatureUnsupported` for format version 3 (row lineage is
/// not written here); `CatalogCommitConflicts` when the table moved on since `table` was loaded
/// (the caller re-reads and retries); write and catalog failures.
pub async fn overwrite(
    catalog: &dyn CommitCatalog,
    table: &Table,
    removed: &HashSet<String>,
    added: Vec<DataFile>,
) -> Result<()> {
    let metadata = table.metadata();
    let Some(parent) = metadata.current_snapshot() else {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            "the table has no snapshot to remove data files from",
        ));
    };
    let version = metadata.format_version();
    if version == FormatVersion::V3 {
        return Err(Error::new(
            ErrorKind::FeatureUnsupported,
            "removing data files from a format version 3 table is not supported",
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
    let mut found: HashSet<String> = HashSet::new();
    let list = table.manifest_list_reader(parent).load().await?;
    let listed: Vec<ManifestFile> = list.consume_entries().into_iter().collect();
    for manifest_file in listed {
        if manifest_file.content != ManifestContentType::Data {
            manifests.push(manifest_file);
            continue;
        }
        let manifest = manifest_file.load_manifest(table.file_io()).await?;
        let hit = manifest
            .entries()
            .iter()
            .any(|e| e.is_alive() && removed.contains(e.data_file().file_path()));
        if !hit {
            manifests.push(manifest_file);
            continue;
        }
        let spec = Arc::new(manifest.metadata().partition_spec().clone());
        let schema = Arc::clone(manifest.metadata().schema());
        let mut writer = files.manifest_writer(&schema, &spec)?;
        for entry in manifest.entries().iter().filter(|e| e.is_alive()) {
            let file = entry.data_file().clone();
            let seq = entry.sequence_number.unwrap_or(0);
            if removed.contains(file.file_path()) {
                found.insert(file.file_path().to_string());
                summary.remove_file(&file, Arc::clone(&schema), Arc::clone(&spec));
                writer.add_delete_file(file, seq, entry.file_sequence_number)?;
            } else {
                let added_by = entry.snapshot_id.unwrap_or(manifest_file.added_snapshot_id);
                writer.add_existing_file(file, added_by, seq, entry.file_sequence_number)?;
            }
        }
        manifests.push(writer.write_manifest_file().await?);
    }
    if let Some(missing) = removed.iter().find(|p| !found.contains(*p)) {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            format!("{missing} is not a live data file of the current snapshot"),
        ));
    }
    let adds_files = !added.is_empty();
    if adds_files {
        let schema = Arc::clone(metadata.current_schema());
        let spec = Arc::clone(metadata.default_partition_spec());
        let mut writer = files.manifest_writer(&schema, &spec)?;
        for file in added {
            summary.add_file(&file, Arc::clone(&schema), Arc::clone(&spec));
            writer.add_file(file, sequence_number)?;
        }
        manifests.push(writer.write_manifest_file().await?);
    }

    let list_path = format!(
        "{}/metadata/snap-{snapshot_id}-0-{commit_id}.avro",
        metadata.location()
    );
    let out = table.file_io().new_output(&list_path)?.writer().await?;
    let parent_id = Some(parent.snapshot_id());
    let mut list_writer = match version {
        FormatVersion::V1 => ManifestListWriter::v1(out, snapshot_id, parent_id),
        _ => ManifestListWriter::v2(out, snapshot_id, parent_id, sequence_number),
    };
    list_writer.add_manifests(manifests.into_iter())?;
    list_writer.close().await?;

    let operation = match adds_files {
        true => Operation::Overwrite,
        false => Operation::Delete,
    };
    let snapshot = Snapshot::builder()
        .with_snapshot_id(snapshot_id)
        .with_parent_snapshot_id(parent_id)
        .with_sequence_number(sequence_number)
        .with_timestamp_ms(chrono::Utc::now().timestamp_millis())
        .with_manifest_list(list_path)
        .with_summary(Summary {
            operation,
            additional_properties: with_totals(
                summary.build(),
                &parent.summary().additional_properties,
            ),
        })
        .with_schema_id(metadata.current_schema_id())
        .build();
    let updates = vec![
        TableUpdate::AddSnapshot { snapshot },
        TableUpdate::SetSnapshotRef {
            ref_name: MAIN_BRANCH.to_string(),
            reference: SnapshotReference::new(
                snapshot_id,
                SnapshotRetention::branch(None, None, None),
            ),
        },
    ];
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
        Ok(match self.table.metadata().format_version() {
            FormatVersion::V1 => builder.build_v1(),
            _ => builder.build_v2_data(),
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
