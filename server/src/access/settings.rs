//! Which session settings a user who is not an admin may change (`SET`, Flight SQL's
//! `SetSessionOptions`). Settings that shape one session's answers and plans are theirs;
//! settings that change the process or step around a server bound are the admins':
//!
//! | settings | why only admins |
//! |---|---|
//! | `datafusion.runtime.*` | a session's own memory pool outside `[query] memory_limit`, its spill directory (a place to write files), the process's caches |
//! | `datafusion.catalog.*` but `default_catalog`, `default_schema` | where and in what format DataFusion's own tables live, whether `information_schema` exists |
//! | `datafusion.sql_parser.recursion_limit` | how deep the parser recurses: a deep statement would overflow the stack |
//!
//! And some are the user's only within a bound, since operators size buffers from them outside
//! the memory pool: `datafusion.execution.batch_size` and `iceflight.scan.batch_size` up to
//! 1 048 576 rows, `datafusion.execution.target_partitions` up to 256.

use super::denied::AccessDenied;
use super::session::Access;

/// The largest value a user who is not an admin may give each bounded setting (module docs).
const BOUNDED: [(&str, u64); 3] = [
    ("datafusion.execution.batch_size", 1 << 20),
    ("iceflight.scan.batch_size", 1 << 20),
    ("datafusion.execution.target_partitions", 256),
];

/// Refuses setting `key` (to `value`; `None`: back to its default) unless `access` may
/// (module docs).
///
/// Errors: [`AccessDenied`] naming the setting (and the bound, for a bounded one).
pub fn check(access: &Access, key: &str, value: Option<&str>) -> Result<(), AccessDenied> {
    if access.is_admin() {
        return Ok(());
    }
    if admins_only(key) {
        return access.require_admin(&format!("change {key}"));
    }
    let bound = BOUNDED
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, max)| *max);
    match (
        bound,
        value.map(|v| v.trim().trim_matches('\'').parse::<u64>()),
    ) {
        (Some(max), Some(Ok(n))) if n > max => {
            access.require_admin(&format!("set {key} above {max} (asked: {n})"))
        }
        _ => Ok(()),
    }
}

/// Whether only admins may change `key` (case-insensitive, as DataFusion reads keys).
pub fn admins_only(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    let free_catalog = [
        "datafusion.catalog.default_catalog",
        "datafusion.catalog.default_schema",
    ];
    key.starts_with("datafusion.runtime.")
        || (key.starts_with("datafusion.catalog.") && !free_catalog.contains(&key.as_str()))
        || key == "datafusion.sql_parser.recursion_limit"
}

#[cfg(test)]
mod tests {
    use super::admins_only;

    /// Bounded settings: up to the bound anyone's, past it an admin's.
    #[test]
    fn bounded_settings_stop_at_their_bound() {
        use crate::access::{FileRoots, Identity, RulesSource};
        use std::sync::Arc;
        let who = |admin| {
            super::Access::new(
                Identity {
                    user: "u".into(),
                    groups: vec![],
                },
                admin,
                Arc::new(RulesSource::allow_all()),
                Arc::new(FileRoots::none("query.file_roots")),
            )
        };
        let key = "datafusion.execution.batch_size";
        super::check(&who(false), key, Some("1048576")).unwrap();
        let e = super::check(&who(false), key, Some("2000000000")).unwrap_err();
        assert!(e.to_string().contains("above 1048576"), "{e}");
        super::check(&who(true), key, Some("2000000000")).unwrap();
        super::check(
            &who(false),
            "DATAFUSION.EXECUTION.TARGET_PARTITIONS",
            Some("'1000'"),
        )
        .unwrap_err();
    }

    #[test]
    fn process_settings_are_the_admins() {
        for key in [
            "datafusion.runtime.memory_limit",
            "DATAFUSION.RUNTIME.temp_directory",
            "datafusion.catalog.location",
            "datafusion.catalog.information_schema",
            "datafusion.sql_parser.recursion_limit",
        ] {
            assert!(admins_only(key), "{key}");
        }
        for key in [
            "datafusion.catalog.default_schema",
            "datafusion.execution.batch_size",
            "datafusion.optimizer.prefer_hash_join",
            "iceflight.query.timeout",
            "iceflight.scan.reader",
        ] {
            assert!(!admins_only(key), "{key}");
        }
    }
}
