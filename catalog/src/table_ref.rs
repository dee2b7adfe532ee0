//! Table names that address more than a table's current state: a version (`orders@…`, time
//! travel) or a metadata table (`orders$snapshots`).
//!
//! ```text
//!   "orders@8954597067493422955"   snapshot by id
//!   "orders@audit"                 branch or tag (`@ref:2024` for a name of digits)
//!   "orders@ts:1733000000000"      the snapshot current at that instant (ms since the epoch, UTC)
//!   "orders$files"                 metadata table (metadata_tables.rs)
//! ```
//!
//! The SQL front end rewrites `FOR VERSION AS OF …` and `FOR TIMESTAMP AS OF …` into these
//! names ([`versioned_name`]); they can also be written directly, quoted (`"orders@audit"`), as
//! Trino's Iceberg connector once accepted `"orders@<snapshot id>"`. A table whose own name
//! contains `@` or `$` is found by that name first: a suffix is only split off when no table
//! of the whole name exists. The first `@` starts a version, so a branch or tag name may hold
//! `@` and `$`.

use iceflight_iceberg::time_travel::TableVersion;

use crate::metadata_tables::MetadataTable;

/// What a table name asks for beside its base table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableSuffix {
    /// `name@version`: the table at another snapshot.
    Version(TableVersion),
    /// `name$kind`: a metadata table.
    Metadata(MetadataTable),
}

/// Why a suffixed name is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableRefError {
    /// `$` followed by a name that is no metadata table.
    #[error(
        "table {base} has no metadata table ${kind}; there are {}",
        MetadataTable::ALL.map(|k| format!("${}", k.name())).join(", ")
    )]
    UnknownMetadataTable {
        /// The base table's name.
        base: String,
        /// What followed the `$`.
        kind: String,
    },
    /// `@` followed by nothing, or by `ts:` without milliseconds.
    #[error(
        "malformed version in table name {0} (expected @<snapshot id>, @<branch or tag> or @ts:<epoch ms>)"
    )]
    MalformedVersion(String),
}

/// Splits `name` into its base table and suffix, at the last `@` or `$`; `None` when it has
/// neither.
///
/// Errors: [`TableRefError`] for an unknown metadata table or an empty version.
pub fn split(name: &str) -> Option<Result<(&str, TableSuffix), TableRefError>> {
    // The first `@` starts a version (whose branch or tag name may hold `@` or `$`); else the
    // last `$` starts a metadata table.
    let at = name
        .find('@')
        .or_else(|| name.rfind('$'))
        .filter(|&i| i > 0)?;
    let (base, rest) = (&name[..at], &name[at + 1..]);
    Some(if name[at..].starts_with('$') {
        MetadataTable::parse(rest)
            .map(|kind| (base, TableSuffix::Metadata(kind)))
            .ok_or_else(|| TableRefError::UnknownMetadataTable {
                base: base.to_string(),
                kind: rest.to_string(),
            })
    } else {
        parse_version(rest)
            .map(|v| (base, TableSuffix::Version(v)))
            .ok_or_else(|| TableRefError::MalformedVersion(name.to_string()))
    })
}

fn parse_version(text: &str) -> Option<TableVersion> {
    if let Some(ms) = text.strip_prefix("ts:") {
        return ms.parse().ok().map(TableVersion::Timestamp);
    }
    if let Some(name) = text.strip_prefix("ref:") {
        return (!name.is_empty()).then(|| TableVersion::Ref(name.to_string()));
    }
    if text.is_empty() {
        return None;
    }
    Some(match text.parse::<i64>() {
        Ok(id) => TableVersion::Snapshot(id),
        Err(_) => TableVersion::Ref(text.to_string()),
    })
}

/// The table name addressing `base` at `version` (the inverse of [`split`]).
pub fn versioned_name(base: &str, version: &TableVersion) -> String {
    match version {
        TableVersion::Snapshot(id) => format!("{base}@{id}"),
        TableVersion::Ref(name)
            if name.parse::<i64>().is_ok()
                || name.starts_with("ts:")
                || name.starts_with("ref:") =>
        {
            format!("{base}@ref:{name}")
        }
        TableVersion::Ref(name) => format!("{base}@{name}"),
        TableVersion::Timestamp(ms) => format!("{base}@ts:{ms}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every version round-trips through its name, refs of digits included.
    #[test]
    fn versions_round_trip() {
        for v in [
            TableVersion::Snapshot(8954597067493422955),
            TableVersion::Snapshot(-3),
            TableVersion::Ref("audit".into()),
            TableVersion::Ref("2024".into()),
            TableVersion::Ref("ts:x".into()),
            TableVersion::Ref("ref:x".into()),
            TableVersion::Ref("a@b$c".into()),
            TableVersion::Timestamp(1_796_119_200_000),
        ] {
            let name = versioned_name("orders", &v);
            assert_eq!(split(&name), Some(Ok(("orders", TableSuffix::Version(v)))));
        }
    }

    /// Metadata tables by Trino's names; an unknown one is an error listing them.
    #[test]
    fn metadata_tables_by_name() {
        assert_eq!(
            split("orders$snapshots"),
            Some(Ok((
                "orders",
                TableSuffix::Metadata(MetadataTable::Snapshots)
            )))
        );
        let err = split("orders$nope").unwrap().unwrap_err().to_string();
        assert!(err.starts_with("table orders has no metadata table $nope; there are $snapshots"));
        assert_eq!(split("orders"), None);
        assert_eq!(split("$files"), None);
        assert!(matches!(
            split("orders@"),
            Some(Err(TableRefError::MalformedVersion(_)))
        ));
    }
}
