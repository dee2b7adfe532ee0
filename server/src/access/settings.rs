//! Which session settings a user who is not an admin may change (`SET`, Flight SQL's
//! `SetSessionOptions`). Settings that shape one session's answers and plans are theirs;
//! settings that change the process or step around a server bound are the admins':
//!
//! | settings | why only admins |
//! |---|---|
//! | `datafusion.runtime.*` | a session's own memory pool outside `[query] memory_limit`, its spill directory (a place to write files), the process's caches |
//! | `datafusion.catalog.*` but `default_catalog`, `default_schema` | where and in what format DataFusion's own tables live, whether `information_schema` exists |
//! | `datafusion.sql_parser.recursion_limit` | how deep the parser recurses: a deep statement would overflow the stack |

use super::denied::AccessDenied;
use super::session::Access;

/// Refuses `key` unless `access` may change it (module docs).
///
/// Errors: [`AccessDenied`] naming the setting.
pub fn check(access: &Access, key: &str) -> Result<(), AccessDenied> {
    if access.is_admin() || !admins_only(key) {
        return Ok(());
    }
    access.require_admin(&format!("change {key}"))
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
