//! The server's own files as SQL may reach them: only under the directories an admin names
//! (`[query] file_roots`), after symbolic links are followed, for `read_parquet` / `read_csv` /
//! `read_json`, `COPY … TO`, `CREATE EXTERNAL TABLE` and an `INSERT` into such a table.
//!
//! ```text
//!   'path' | 'file:///path' ──► absolute, no `..` past what exists
//!      ──► the longest part that exists, symbolic links followed (canonical), + the rest
//!      ──► inside a root (itself canonical)? ──► the resolved path
//!   another scheme (s3://, http://, …), a relative path, no root ──► AccessDenied
//!   a listing URL (COPY, CREATE EXTERNAL TABLE, an external table's files) ──► first parsed as
//!   DataFusion parses it (percent escapes decoded), then the same
//! ```
//!
//! A root is read with its links followed when the server starts; a link inside a root that
//! leads out of it is followed like any path and refused. `add_files` has roots of its own
//! (`[maintenance] import_roots`, `iceberg/src/add_files.rs`).

use std::path::{Component, Path, PathBuf};

use datafusion::datasource::listing::ListingTableUrl;

use super::denied::AccessDenied;

/// Directories SQL statements may read and write files in (module docs).
#[derive(Debug, Clone, Default)]
pub struct FileRoots {
    /// Canonical paths.
    roots: Vec<PathBuf>,
    /// The configuration key that names them, for messages.
    key: &'static str,
}

impl FileRoots {
    /// No root: every file access is refused.
    pub fn none(key: &'static str) -> Self {
        Self { roots: vec![], key }
    }

    /// The directories `dirs`, named by configuration key `key` in messages.
    ///
    /// Errors: a directory that does not exist or cannot be resolved (one line naming it).
    pub fn new(key: &'static str, dirs: &[PathBuf]) -> Result<Self, String> {
        let roots = dirs
            .iter()
            .map(|d| {
                let canonical =
                    std::fs::canonicalize(d).map_err(|e| format!("{key}: {}: {e}", d.display()))?;
                match canonical.is_dir() {
                    true => Ok(canonical),
                    false => Err(format!("{key}: {} is not a directory", d.display())),
                }
            })
            .collect::<Result<_, String>>()?;
        Ok(Self { roots, key })
    }

    /// Whether no root is configured.
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// `location` (a path or a `file://` URL) resolved, when it lies inside a root; `what`
    /// names the statement in the message ("COPY … TO", "read_csv").
    ///
    /// Errors: [`AccessDenied`] for another scheme, a relative path, a `..` past the existing
    /// part, or a path outside every root (symbolic links followed).
    pub fn resolve(&self, location: &str, what: &str) -> Result<PathBuf, AccessDenied> {
        let refused = |why: String| {
            AccessDenied(format!(
                "{what} may not use {location}: {why} (the server's files are reachable only \
                 under {})",
                match self.roots.is_empty() {
                    true => format!("{} set by an admin; none is set", self.key),
                    false => self.key.to_string(),
                }
            ))
        };
        let path = match location.split_once("://") {
            Some(("file", rest)) => rest,
            Some((scheme, _)) => return Err(refused(format!("{scheme}:// is not a local path"))),
            None => location.strip_prefix("file:").unwrap_or(location),
        };
        let path = Path::new(path);
        if !path.is_absolute() {
            return Err(refused("the path is relative".into()));
        }
        let resolved =
            resolve_existing(path).ok_or_else(|| refused("it leads above what exists".into()))?;
        match self.roots.iter().any(|r| resolved.starts_with(r)) {
            true => Ok(resolved),
            false => Err(refused(format!("it is {}", resolved.display()))),
        }
    }
}

impl FileRoots {
    /// A location DataFusion reads or writes as a listing URL (`COPY … TO`, `CREATE EXTERNAL
    /// TABLE`), checked as DataFusion will use it: parsed as DataFusion parses it (percent
    /// escapes decoded, `.` and `..` segments and backslashes as the `url` crate reads a `file:`
    /// URL), then [`Self::resolve`]d. Checking the text as written would let `%2e%2e` pass as a
    /// file name and climb out once DataFusion decodes it.
    ///
    /// Errors: [`AccessDenied`] as [`Self::resolve`], or for a location that is no URL.
    pub fn resolve_listing(&self, location: &str, what: &str) -> Result<PathBuf, AccessDenied> {
        match ListingTableUrl::parse(location) {
            Ok(url) => self.resolve_url(&url, what),
            Err(e) => Err(AccessDenied(format!("{what} may not use {location}: {e}"))),
        }
    }

    /// A parsed listing URL (an external table's, a `COPY`'s), checked as its local path.
    ///
    /// Errors: [`AccessDenied`] as [`Self::resolve`], or for a URL of another scheme.
    pub fn resolve_url(&self, url: &ListingTableUrl, what: &str) -> Result<PathBuf, AccessDenied> {
        match url.get_url().to_file_path() {
            Ok(path) if url.scheme() == "file" => self.resolve(&path.to_string_lossy(), what),
            _ => self.resolve(url.as_str(), what),
        }
    }
}

/// `path` (absolute) with its longest existing prefix canonicalized (symbolic links followed)
/// and the rest appended; `None` when the rest climbs with `..`.
pub fn resolve_existing(path: &Path) -> Option<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = vec![];
    let base = loop {
        match std::fs::canonicalize(&existing) {
            Ok(c) => break c,
            Err(_) => {
                let name = existing.file_name()?.to_os_string();
                rest.push(name);
                if !existing.pop() {
                    return None;
                }
            }
        }
    };
    let mut out = base;
    for part in rest.iter().rev() {
        match Path::new(part).components().next() {
            Some(Component::Normal(_)) => out.push(part),
            _ => return None,
        }
    }
    // A `..` in the part that exists was resolved by canonicalize; one left in the rest is
    // refused above, and `file_name` is `None` for a path ending in `..`.
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inside a root: plain paths, `file://` URLs, new files under it; outside: other
    /// directories, `..`, links leading out, other schemes, relative paths, no roots at all.
    #[test]
    fn only_paths_under_a_root_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("imports");
        let outside = dir.path().join("secret");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let roots = FileRoots::new("query.file_roots", std::slice::from_ref(&root)).unwrap();
        let canonical = std::fs::canonicalize(&root).unwrap();
        let ok = |p: &str| roots.resolve(p, "COPY … TO").unwrap();
        let no = |p: &str| roots.resolve(p, "COPY … TO").unwrap_err().to_string();
        let r = root.display();
        assert_eq!(ok(&format!("{r}/sub")), canonical.join("sub"));
        assert_eq!(
            ok(&format!("file://{r}/new/x.csv")),
            canonical.join("new/x.csv")
        );
        assert_eq!(ok(&format!("{r}/sub/../sub/y")), canonical.join("sub/y"));
        assert!(
            no(&format!("{r}/../secret/x")).contains("it is"),
            "climbs out"
        );
        assert!(no(&format!("{r}/new/../../secret/x")).contains("above what exists"));
        assert!(
            no(&format!("{r}/link/x")).contains("secret"),
            "a link out is followed"
        );
        assert!(no("/etc/passwd").contains("it is /etc/passwd"));
        assert!(no("s3://bucket/x").contains("s3:// is not a local path"));
        assert!(no("http://host/x").contains("http://"));
        assert!(no("relative/x").contains("relative"));
        let none = FileRoots::none("query.file_roots");
        let e = none
            .resolve(&format!("{r}/sub"), "read_csv")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("query.file_roots set by an admin; none is set"),
            "{e}"
        );
        assert!(FileRoots::new("k", &[dir.path().join("missing")]).is_err());
    }
}
