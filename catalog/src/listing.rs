//! Listing a table's location, which iceberg 0.10.1's `FileIO` cannot: an OpenDAL operator built
//! from the same storage properties the table's `FileIO` has (iceberg's typed `S3Config`), for
//! `remove_orphan_files` (`iceberg/src/orphan_files.rs`).
//!
//! | location | operator | listed path → full path |
//! |---|---|---|
//! | `/dir`, `file:///dir` | OpenDAL `fs`, root `/` | `dir/f` → `/dir/f`, `file:///dir/f` |
//! | `s3://bucket/key` (`s3a`, `s3n`) | OpenDAL `s3` on the bucket: endpoint, region, keys, session token, path style | `key/f` → `s3://bucket/key/f` |
//!
//! Other schemes (`memory://`, `gs://`, …) are refused with `FeatureUnsupported`.

use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use iceberg::io::{FileIO, S3Config};
use iceberg::{Error, ErrorKind, Result};
use iceflight_iceberg::orphan_files::{ListedFile, LocationLister};
use opendal::{EntryMode, Operator};

/// Lists locations on the storage a table's `FileIO` reaches (module docs).
#[derive(Debug, Clone)]
pub struct StorageLister {
    file_io: FileIO,
}

impl StorageLister {
    /// A lister with the storage properties (endpoint, credentials) of `file_io`.
    pub fn new(file_io: &FileIO) -> Self {
        Self {
            file_io: file_io.clone(),
        }
    }

    /// The operator for `location`, the path prefix to list on it (ending in `/`) and what to
    /// put before a listed path to make it full again.
    fn operator(&self, location: &str) -> Result<(Operator, String, String)> {
        let (scheme, rest) = match location.split_once("://") {
            Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
            None => (
                "file".to_string(),
                location.strip_prefix("file:").unwrap_or(location),
            ),
        };
        match scheme.as_str() {
            "file" => {
                let builder = opendal::services::Fs::default().root("/");
                let op = Operator::new(builder).map_err(storage)?.finish();
                let dir = format!("{}/", rest.trim_matches('/'));
                // Full paths in the location's own spelling, which the FileIO resolves.
                let base = match location.starts_with("file:") {
                    true => "file:///",
                    false => "/",
                };
                Ok((op, dir, base.to_string()))
            }
            "s3" | "s3a" | "s3n" => {
                let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
                let config = S3Config::try_from(self.file_io.config())?;
                let mut builder = opendal::services::S3::default().bucket(bucket);
                if let Some(endpoint) = &config.endpoint {
                    builder = builder.endpoint(endpoint);
                }
                if let Some(region) = &config.region {
                    builder = builder.region(region);
                }
                if let Some(key) = &config.access_key_id {
                    builder = builder.access_key_id(key);
                }
                if let Some(secret) = &config.secret_access_key {
                    builder = builder.secret_access_key(secret);
                }
                if let Some(token) = &config.session_token {
                    builder = builder.session_token(token);
                }
                if config.enable_virtual_host_style {
                    builder = builder.enable_virtual_host_style();
                }
                if config.allow_anonymous {
                    builder = builder.skip_signature();
                }
                if config.disable_config_load {
                    builder = builder.disable_config_load();
                }
                let op = Operator::new(builder).map_err(storage)?.finish();
                let dir = format!("{}/", key.trim_matches('/'));
                Ok((op, dir, format!("{scheme}://{bucket}/")))
            }
            other => Err(Error::new(
                ErrorKind::FeatureUnsupported,
                format!("iceflight cannot list {other}:// locations (only local paths and s3://)"),
            )),
        }
    }
}

#[async_trait]
impl LocationLister for StorageLister {
    async fn list(&self, location: &str) -> Result<Vec<ListedFile>> {
        let (op, dir, base) = self.operator(location)?;
        let entries = match op.list_with(&dir).recursive(true).await {
            Ok(entries) => entries,
            Err(e) if e.kind() == opendal::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(storage(e)),
        };
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries {
            if entry.metadata().mode() != EntryMode::FILE {
                continue;
            }
            let modified = match entry.metadata().last_modified() {
                Some(t) => Some(t),
                // Local listings leave it out: ask for it.
                None => op
                    .stat(entry.path())
                    .await
                    .ok()
                    .and_then(|m| m.last_modified()),
            };
            let modified_ms = modified.and_then(|t| {
                SystemTime::from(t)
                    .duration_since(UNIX_EPOCH)
                    .ok()
                    .map(|d| d.as_millis() as i64)
            });
            out.push(ListedFile {
                path: format!("{base}{}", entry.path().trim_start_matches('/')),
                modified_ms,
            });
        }
        Ok(out)
    }
}

fn storage(e: opendal::Error) -> Error {
    Error::new(ErrorKind::Unexpected, format!("listing failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lists_files_under_a_local_location_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("t");
        std::fs::create_dir_all(root.join("data/p=1")).unwrap();
        std::fs::write(root.join("data/p=1/a.parquet"), b"x").unwrap();
        std::fs::write(root.join("b.json"), b"x").unwrap();
        // A sibling whose name starts with the location's is not under it.
        std::fs::create_dir_all(dir.path().join("t2")).unwrap();
        std::fs::write(dir.path().join("t2/c.parquet"), b"x").unwrap();
        let lister = StorageLister::new(&FileIO::new_with_fs());
        let location = format!("file://{}", root.display());
        let mut listed = lister.list(&location).await.unwrap();
        listed.sort_by(|a, b| a.path.cmp(&b.path));
        let paths: Vec<&str> = listed.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                format!("file://{}/b.json", root.display()),
                format!("file://{}/data/p=1/a.parquet", root.display())
            ]
        );
        assert!(listed.iter().all(|f| f.modified_ms.is_some()));
        let plain = lister.list(&root.display().to_string()).await.unwrap();
        assert!(plain.iter().all(|f| f.path.starts_with('/')), "{plain:?}");
        let missing = format!("{}/none", root.display());
        assert!(lister.list(&missing).await.unwrap().is_empty());
        let refused = lister.list("memory://x").await.unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::FeatureUnsupported);
    }
}
