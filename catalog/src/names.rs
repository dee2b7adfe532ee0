//! What a namespace or table may be called, and where a table's files may go: a table's
//! location belongs to that table alone, since maintenance (`remove_orphan_files`) deletes what
//! lies under it unreferenced, and a table's name becomes part of its location.
//!
//! ```text
//!   name part: not empty, not `.` or `..`, no `/`, `\`, control character, ≤ 255 bytes
//!   write.data.path, write.metadata.path, write.object-storage.path, write.folder-storage.path:
//!     only inside the table's own location (set after the table exists)
//! ```
//!
//! The embedded catalog also gives a new table a location no other table uses
//! (`commit.rs`, as Trino's `iceberg.unique-table-location`); a REST catalog chooses locations
//! itself (Polaris refuses overlapping ones).

use datafusion::common::{Result, plan_err};
use iceberg::{NamespaceIdent, TableIdent};

/// The longest name part, in bytes (a file name's limit on common file systems).
const MAX_NAME_BYTES: usize = 255;

/// Table properties whose value is a location files are written under.
pub const LOCATION_PROPERTIES: [&str; 4] = [
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
];

/// Refuses a name part (module docs); `kind` names it in the message (`table`, `schema`).
///
/// Errors: a plan error naming the part and why.
pub fn check_part(kind: &str, name: &str) -> Result<()> {
    let why = if name.is_empty() {
        Some("is empty")
    } else if name == "." || name == ".." {
        Some("is a relative path")
    } else if name.contains('/') || name.contains('\\') {
        Some("contains a path separator")
    } else if name.chars().any(char::is_control) {
        Some("contains a control character")
    } else if name.len() > MAX_NAME_BYTES {
        Some("is longer than 255 bytes")
    } else {
        None
    };
    match why {
        Some(why) => plan_err!("{kind} name {name:?} {why}: it would become part of a file path"),
        None => Ok(()),
    }
}

/// Refuses a namespace with a bad part ([`check_part`]).
///
/// Errors: as [`check_part`].
pub fn check_namespace(namespace: &NamespaceIdent) -> Result<()> {
    namespace
        .iter()
        .try_for_each(|part| check_part("schema", part))
}

/// Refuses a table identifier with a bad namespace or table name ([`check_part`]).
///
/// Errors: as [`check_part`].
pub fn check_table(ident: &TableIdent) -> Result<()> {
    check_namespace(ident.namespace())?;
    check_part("table", ident.name())
}

/// Refuses a location property (`LOCATION_PROPERTIES`) whose value is not inside
/// `table_location`, the table's own location.
///
/// Errors: a plan error naming the property, its value and the table's location.
pub fn check_location_property(table_location: &str, key: &str, value: &str) -> Result<()> {
    if !LOCATION_PROPERTIES.contains(&key) {
        return Ok(());
    }
    match inside(table_location, value) {
        true => Ok(()),
        false => plan_err!(
            "table property {key} = '{value}' must lie inside the table's location \
             {table_location}: a table writes only under its own location"
        ),
    }
}

/// Whether `path` is `location` or under it, compared as written after folding repeated
/// slashes and a trailing one (`file:/x` as `file:///x`); a path with a `.` or `..` segment
/// never is.
pub fn inside(location: &str, path: &str) -> bool {
    let (location, path) = (normal(location), normal(path));
    if path.split('/').any(|s| s == "." || s == "..") {
        return false;
    }
    path == location || path.starts_with(&format!("{location}/"))
}

/// `path` with its scheme's slashes and repeated slashes folded, and no trailing slash; an
/// absolute path without a scheme is a `file:` one.
fn normal(path: &str) -> String {
    let (scheme, rest) = match path.split_once(':') {
        Some((s, rest)) if !s.contains('/') => (Some(s), rest),
        _ if path.starts_with('/') => (Some("file"), path),
        _ => (None, path),
    };
    let mut out = String::new();
    let mut slash = false;
    for c in rest.chars() {
        if c == '/' {
            if !slash {
                out.push(c);
            }
            slash = true;
        } else {
            out.push(c);
            slash = false;
        }
    }
    let out = out.trim_end_matches('/').to_string();
    match scheme {
        Some(s) => format!("{s}:{out}"),
        None => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_be_paths_are_refused() {
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a\\b",
            "a\0b",
            "a\nb",
            &"x".repeat(256),
        ] {
            assert!(check_part("table", bad).is_err(), "{bad:?}");
        }
        for good in ["orders", "Orders 2024", "t$1", "a.b", "naïve", "x-y_z"] {
            check_part("table", good).unwrap();
        }
        let e = check_part("table", "..").unwrap_err().to_string();
        assert!(e.contains("table name \"..\" is a relative path"), "{e}");
        let ns = NamespaceIdent::from_strs(["ok", ".."]).unwrap();
        assert!(check_namespace(&ns).is_err());
    }

    #[test]
    fn location_properties_stay_inside_the_table() {
        let loc = "file:///w/ns/t-1";
        check_location_property(loc, "write.data.path", "file:///w/ns/t-1/data2").unwrap();
        check_location_property(loc, "write.data.path", "file:/w/ns/t-1/").unwrap();
        check_location_property(loc, "write.data.path", "/w/ns/t-1/d").unwrap();
        check_location_property(loc, "write.delete.mode", "/anywhere").unwrap();
        for bad in [
            "file:///w/ns/t-10/data",
            "file:///elsewhere",
            "file:///w/ns/t-1/../t-2",
            "s3://bucket/w/ns/t-1/data",
        ] {
            assert!(
                check_location_property(loc, "write.data.path", bad).is_err(),
                "{bad}"
            );
        }
        assert!(inside("s3://b/w/t", "s3://b/w/t/data"));
        assert!(!inside("s3://b/w/t", "s3://b/w/tt"));
    }
}
