//! Configuration keys renamed since an earlier release, still read under their old names.
//!
//! Every duration is now text (`"30s"`, `"5m"`) and every key snake_case:
//!
//! | old key | new key |
//! |---|---|
//! | `[server] queue_timeout_secs = 30` | `queue_timeout = "30s"` |
//! | `[server] prepared_statement_ttl_secs` | `prepared_statement_ttl` |
//! | `[server] session_ttl_secs` | `session_ttl` |
//! | `[server] login_lockout_secs` | `login_lockout` |
//! | `[server] stream_idle_timeout_secs` | `stream_idle_timeout` |
//! | `[[catalog]] token-lifetime` | `token_lifetime` |
//! | `[[catalog]] metadata-cache-ttl` | `metadata_cache_ttl` |
//! | `[[catalog]] listing-cache-ttl` | `listing_cache_ttl` |
//! | `[query] read_local_files` | `file_roots` (directories, not a switch: `false` is dropped with a warning, `true` refused) |
//!
//! [`migrate`] rewrites the parsed TOML before it is deserialised: an old key becomes its new
//! one (whole seconds become `"Ns"`) and leaves one warning, which the server logs at start.

use toml::{Table, Value};

/// `[server]` keys that held whole seconds: (old, new).
const SERVER_SECONDS: [(&str, &str); 5] = [
    ("queue_timeout_secs", "queue_timeout"),
    ("prepared_statement_ttl_secs", "prepared_statement_ttl"),
    ("session_ttl_secs", "session_ttl"),
    ("login_lockout_secs", "login_lockout"),
    ("stream_idle_timeout_secs", "stream_idle_timeout"),
];

/// `[[catalog]]` keys that were kebab-case: (old, new).
const CATALOG_KEBAB: [(&str, &str); 3] = [
    ("token-lifetime", "token_lifetime"),
    ("metadata-cache-ttl", "metadata_cache_ttl"),
    ("listing-cache-ttl", "listing_cache_ttl"),
];

/// Renames the old keys of `config` (a whole parsed config file) in place; one warning per key
/// renamed, naming its section and both names.
///
/// Errors: an old key given together with its new one, or a `*_secs` key that is not a whole
/// number of seconds; one line naming the key.
pub fn migrate(config: &mut Table) -> Result<Vec<String>, String> {
    let mut warnings = vec![];
    if let Some(Value::Table(server)) = config.get_mut("server") {
        for (old, new) in SERVER_SECONDS {
            rename(server, "server", old, new, &mut warnings, |v| match v {
                Value::Integer(n) if n >= 0 => Ok(Value::String(format!("{n}s"))),
                other => Err(format!(
                    "server.{old} must be a whole number of seconds, got {other}; write \
                     {new} = \"30s\" instead"
                )),
            })?;
        }
    }
    if let Some(Value::Table(query)) = config.get_mut("query") {
        match query.remove("read_local_files") {
            None => {}
            Some(Value::Boolean(false)) => warnings.push(
                "query.read_local_files is gone: Flight SQL sessions read files only under \
                 query.file_roots (none by default); remove the key"
                    .to_string(),
            ),
            Some(_) => {
                return Err(
                    "query.read_local_files = true is replaced by query.file_roots = \
                            [\"/dir\", …]: the directories Flight SQL statements may read and \
                            write files in"
                        .to_string(),
                );
            }
        }
    }
    if let Some(Value::Array(catalogs)) = config.get_mut("catalog") {
        for catalog in catalogs.iter_mut() {
            let Value::Table(catalog) = catalog else {
                continue;
            };
            for (old, new) in CATALOG_KEBAB {
                rename(catalog, "catalog", old, new, &mut warnings, Ok)?;
            }
        }
    }
    Ok(warnings)
}

fn rename(
    section: &mut Table,
    name: &str,
    old: &str,
    new: &str,
    warnings: &mut Vec<String>,
    convert: impl Fn(Value) -> Result<Value, String>,
) -> Result<(), String> {
    let Some(value) = section.remove(old) else {
        return Ok(());
    };
    if section.contains_key(new) {
        return Err(format!(
            "{name}.{old} and {name}.{new} are both given: {old} is the old name of {new}; \
             keep {new}"
        ));
    }
    let value = convert(value)?;
    warnings.push(format!(
        "config key {name}.{old} is deprecated: read as {new} = {value}; rename it"
    ));
    section.insert(new.to_string(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::time::Duration;

    #[test]
    fn old_keys_are_read_under_their_new_names_with_a_warning() {
        let c = Config::from_toml(
            "[server]\nqueue_timeout_secs = 7\nsession_ttl_secs = 0\n\
             [[catalog]]\nname = \"lake\"\ntype = \"rest\"\nuri = \"http://x\"\n\
             metadata-cache-ttl = \"5m\"\n",
        )
        .unwrap();
        assert_eq!(c.server.queue_timeout, Duration::from_secs(7));
        assert_eq!(c.server.session_ttl, Duration::ZERO);
        assert_eq!(
            c.catalogs[0].metadata_cache_ttl,
            Some(Duration::from_secs(300))
        );
        assert_eq!(
            c.deprecated_keys,
            [
                "config key server.queue_timeout_secs is deprecated: read as queue_timeout = \"7s\"; rename it",
                "config key server.session_ttl_secs is deprecated: read as session_ttl = \"0s\"; rename it",
                "config key catalog.metadata-cache-ttl is deprecated: read as metadata_cache_ttl = \"5m\"; rename it",
            ]
        );
    }

    #[test]
    fn new_keys_leave_no_warning_and_errors_keep_their_line() {
        let c = Config::from_toml("[server]\nqueue_timeout = \"2m\"\n").unwrap();
        assert_eq!(c.server.queue_timeout, Duration::from_secs(120));
        assert!(c.deprecated_keys.is_empty());
        let err = Config::from_toml("[server]\n\nqueue_timeout = \"soon\"\n").unwrap_err();
        assert_eq!(
            err,
            "invalid duration \"soon\" (e.g. 250ms, 30s, 5m) (line 3)"
        );
    }

    #[test]
    fn an_old_key_with_its_new_one_or_a_bad_value_is_refused() {
        let err = Config::from_toml("[server]\nlogin_lockout_secs = 5\nlogin_lockout = \"5s\"\n")
            .unwrap_err();
        assert_eq!(
            err,
            "server.login_lockout_secs and server.login_lockout are both given: \
             login_lockout_secs is the old name of login_lockout; keep login_lockout"
        );
        let err = Config::from_toml("[server]\nqueue_timeout_secs = \"30s\"\n").unwrap_err();
        assert_eq!(
            err,
            "server.queue_timeout_secs must be a whole number of seconds, got \"30s\"; write \
             queue_timeout = \"30s\" instead"
        );
    }

    /// `read_local_files` was a switch; its successor names directories, so only `false` can be
    /// read on (dropped, with a warning).
    #[test]
    fn read_local_files_gives_way_to_file_roots() {
        let c = Config::from_toml("[query]\nread_local_files = false\n").unwrap();
        assert!(c.query.file_roots.is_empty());
        assert_eq!(c.deprecated_keys.len(), 1);
        assert!(
            c.deprecated_keys[0].contains("query.file_roots"),
            "{:?}",
            c.deprecated_keys
        );
        let err = Config::from_toml("[query]\nread_local_files = true\n").unwrap_err();
        assert!(err.contains("replaced by query.file_roots"), "{err}");
    }
}
