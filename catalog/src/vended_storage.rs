//! Storage whose vended credentials are renewed before they expire, so a statement that runs
//! longer than the credentials a REST catalog vended at table load keeps reading and writing.
//!
//! ```text
//!   FileIO ──► RenewingStorage ──► credentials due? ── no ──► current storage (block cache, OpenDAL)
//!                                    │ yes: 90 % of min(expiry − receipt, credential_lifetime)
//!                                    ▼
//!                      CredentialSource::renew (the REST catalog loads the table again,
//!                      with its own token refresh) ──► new storage from the new properties
//!                                    │
//!                      readers opened before reopen on their next read; a failed renewal keeps
//!                      the current credentials until they expire, then fails the read
//! ```
//!
//! The expiry is the REST spec's `s3.session-token-expires-at-ms` (milliseconds since the Unix
//! epoch) among a table's storage properties. Properties without it build the plain storage:
//! nothing is renewed. A writer opened before a renewal keeps the credentials it was opened with
//! until it closes. A factory shipped to another process (serde) builds plain storage there.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage, StorageConfig,
    StorageFactory,
};
use iceberg::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};

use crate::cached_storage::CachingStorageFactory;

/// The storage property holding when vended credentials expire, in milliseconds since the Unix
/// epoch (Iceberg REST spec, `LoadTableResult.config`).
pub const EXPIRES_AT_MS: &str = "s3.session-token-expires-at-ms";

/// Share of a credential's lifetime after which it is renewed, as for OAuth2 tokens in
/// `rest.rs`: a renewal finishes well before the credential expires.
const RENEW_AT: f64 = 0.9;

/// After a failed renewal of still-valid credentials, the next attempt waits this long.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Where fresh credentials for one table come from.
pub trait CredentialSource: std::fmt::Debug + Send + Sync {
    /// The table's storage properties with fresh credentials (the whole `FileIO` property map,
    /// as a table load returns it).
    ///
    /// Errors: whatever the catalog call fails with (typed catalog errors in `rest.rs`).
    fn renew(&self) -> BoxFuture<'static, Result<HashMap<String, String>>>;
}

/// How to renew the credentials of one table's storage.
#[derive(Debug, Clone)]
pub struct Renewal {
    /// The catalog call that returns fresh credentials.
    pub source: Arc<dyn CredentialSource>,
    /// Upper bound on how long one set of credentials is used (`credential_lifetime`).
    pub lifetime: Option<Duration>,
    /// Renewals done, added to by every storage of the catalog.
    pub renewed: Arc<AtomicU64>,
}

/// When credentials received `now` (wall clock `wall`) with storage properties `props` are due
/// for renewal: at 90 % of the shorter of their remaining lifetime and `lifetime`; `None` when
/// `props` carry no expiry. An expiry already past is due at once.
pub fn renewal_due(
    props: &HashMap<String, String>,
    now: Instant,
    wall: SystemTime,
    lifetime: Option<Duration>,
) -> Option<Instant> {
    let expires_ms: u64 = props.get(EXPIRES_AT_MS)?.trim().parse().ok()?;
    let expires = UNIX_EPOCH + Duration::from_millis(expires_ms);
    let remaining = expires.duration_since(wall).unwrap_or(Duration::ZERO);
    let used = lifetime.map_or(remaining, |l| l.min(remaining));
    Some(now + used.mul_f64(RENEW_AT))
}

/// A [`StorageFactory`] whose storage renews expiring vended credentials (module docs); plain
/// [`CachingStorageFactory`] storage for properties without an expiry.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RenewingStorageFactory {
    inner: CachingStorageFactory,
    #[serde(skip)]
    renewal: Option<Renewal>,
}

impl RenewingStorageFactory {
    /// Storage of `inner`, renewed through `renewal`.
    pub fn new(inner: CachingStorageFactory, renewal: Renewal) -> Self {
        Self {
            inner,
            renewal: Some(renewal),
        }
    }
}

#[typetag::serde]
impl StorageFactory for RenewingStorageFactory {
    fn build(&self, config: &StorageConfig) -> Result<Arc<dyn Storage>> {
        let storage = self.inner.build(config)?;
        let Some(renewal) = &self.renewal else {
            return Ok(storage);
        };
        let Some(due) = renewal_due(
            config.props(),
            Instant::now(),
            SystemTime::now(),
            renewal.lifetime,
        ) else {
            return Ok(storage);
        };
        Ok(Arc::new(RenewingStorage(Arc::new(Shared {
            factory: self.inner.clone(),
            renewal: renewal.clone(),
            current: RwLock::new(Current {
                storage,
                due: Some(due),
                expires: expiry(config.props()),
                generation: 0,
            }),
            renewing: tokio::sync::Mutex::new(()),
        }))))
    }
}

/// When the credentials of `props` stop working (`None`: unknown).
fn expiry(props: &HashMap<String, String>) -> Option<SystemTime> {
    let ms: u64 = props.get(EXPIRES_AT_MS)?.trim().parse().ok()?;
    Some(UNIX_EPOCH + Duration::from_millis(ms))
}

/// Storage with renewed credentials (module docs). Cheap to clone: the state is shared.
#[derive(Debug, Clone)]
pub struct RenewingStorage(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    factory: CachingStorageFactory,
    renewal: Renewal,
    current: RwLock<Current>,
    /// Held while renewing: concurrent reads that find the credentials due renew once.
    renewing: tokio::sync::Mutex<()>,
}

/// The storage built from the newest credentials.
#[derive(Debug, Clone)]
struct Current {
    storage: Arc<dyn Storage>,
    /// When to renew (`None`: never, the renewed properties carry no expiry).
    due: Option<Instant>,
    /// When the credentials stop working, if known.
    expires: Option<SystemTime>,
    /// Renewals of this storage so far; a reader reopens when it changes.
    generation: u64,
}

impl RenewingStorage {
    fn snapshot(&self) -> Current {
        self.0
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The storage to use now, renewed first when its credentials are due.
    async fn current(&self) -> Result<Current> {
        let fresh = |c: &Current| c.due.is_none_or(|due| Instant::now() < due);
        let now = self.snapshot();
        if fresh(&now) {
            return Ok(now);
        }
        let _renewing = self.0.renewing.lock().await;
        let now = self.snapshot();
        if fresh(&now) {
            return Ok(now);
        }
        let renewed = async {
            let props = self.0.renewal.source.renew().await?;
            let config = StorageConfig::from_props(props);
            let storage = self.0.factory.build(&config)?;
            Ok::<_, Error>((storage, config))
        }
        .await;
        let mut slot = self.0.current.write().unwrap_or_else(|p| p.into_inner());
        match renewed {
            Ok((storage, config)) => {
                // Renewed properties without an expiry are used until the table is loaded again.
                let due = renewal_due(
                    config.props(),
                    Instant::now(),
                    SystemTime::now(),
                    self.0.renewal.lifetime,
                );
                *slot = Current {
                    storage,
                    due,
                    expires: expiry(config.props()),
                    generation: slot.generation + 1,
                };
                self.0.renewal.renewed.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("renewed vended storage credentials");
                Ok(slot.clone())
            }
            Err(e) if slot.expires.is_some_and(|x| SystemTime::now() < x) => {
                tracing::warn!(error = %e, "renewing vended storage credentials failed; using the current ones until they expire");
                slot.due = Some(Instant::now() + RETRY_AFTER);
                Ok(slot.clone())
            }
            Err(e) => Err(Error::new(
                ErrorKind::Unexpected,
                "the vended storage credentials expired and could not be renewed",
            )
            .with_source(e)),
        }
    }
}

impl Serialize for RenewingStorage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_unit()
    }
}

impl<'de> Deserialize<'de> for RenewingStorage {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> std::result::Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "a RenewingStorage is not shipped; ship its RenewingStorageFactory",
        ))
    }
}

#[typetag::serde]
#[async_trait]
impl Storage for RenewingStorage {
    async fn exists(&self, path: &str) -> Result<bool> {
        self.current().await?.storage.exists(path).await
    }

    async fn metadata(&self, path: &str) -> Result<FileMetadata> {
        self.current().await?.storage.metadata(path).await
    }

    async fn read(&self, path: &str) -> Result<Bytes> {
        self.current().await?.storage.read(path).await
    }

    async fn reader(&self, path: &str) -> Result<Box<dyn FileRead>> {
        let now = self.current().await?;
        let opened: Arc<dyn FileRead> = Arc::from(now.storage.reader(path).await?);
        Ok(Box::new(RenewingReader {
            storage: self.clone(),
            path: path.to_string(),
            opened: Mutex::new((now.generation, opened)),
        }))
    }

    async fn write(&self, path: &str, bs: Bytes) -> Result<()> {
        self.current().await?.storage.write(path, bs).await
    }

    async fn writer(&self, path: &str) -> Result<Box<dyn FileWrite>> {
        self.current().await?.storage.writer(path).await
    }

    async fn delete(&self, path: &str) -> Result<()> {
        self.current().await?.storage.delete(path).await
    }

    async fn delete_prefix(&self, path: &str) -> Result<()> {
        self.current().await?.storage.delete_prefix(path).await
    }

    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> Result<()> {
        self.current().await?.storage.delete_stream(paths).await
    }

    fn new_input(&self, path: &str) -> Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

/// A file's reader that reopens on the renewed storage when the credentials were renewed
/// since it was opened.
struct RenewingReader {
    storage: RenewingStorage,
    path: String,
    /// The storage generation the reader was opened on, and the reader.
    opened: Mutex<(u64, Arc<dyn FileRead>)>,
}

#[async_trait]
impl FileRead for RenewingReader {
    async fn read(&self, range: Range<u64>) -> Result<Bytes> {
        let now = self.storage.current().await?;
        let held = {
            let opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
            (opened.0 == now.generation).then(|| Arc::clone(&opened.1))
        };
        let reader = match held {
            Some(r) => r,
            None => {
                let fresh: Arc<dyn FileRead> = Arc::from(now.storage.reader(&self.path).await?);
                *self.opened.lock().unwrap_or_else(|p| p.into_inner()) =
                    (now.generation, Arc::clone(&fresh));
                fresh
            }
        };
        reader.read(range).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(expires_ms: u128) -> HashMap<String, String> {
        [(EXPIRES_AT_MS.to_string(), expires_ms.to_string())].into()
    }

    #[test]
    fn renewal_is_due_at_ninety_percent_of_the_shorter_lifetime() {
        let wall = SystemTime::now();
        let now = Instant::now();
        let ms = wall.duration_since(UNIX_EPOCH).unwrap().as_millis();
        // 1000 s left: due after 900 s.
        let due = renewal_due(&props(ms + 1_000_000), now, wall, None).unwrap();
        assert_eq!(due - now, Duration::from_secs(900));
        // Capped at 10 s: due after 9 s.
        let due = renewal_due(
            &props(ms + 1_000_000),
            now,
            wall,
            Some(Duration::from_secs(10)),
        )
        .unwrap();
        assert_eq!(due - now, Duration::from_secs(9));
        // Already expired: due at once.
        assert_eq!(renewal_due(&props(ms - 5_000), now, wall, None), Some(now));
        // No expiry, or an unreadable one: never renewed.
        assert_eq!(renewal_due(&HashMap::new(), now, wall, None), None);
        let bad: HashMap<String, String> = [(EXPIRES_AT_MS.to_string(), "soon".to_string())].into();
        assert_eq!(renewal_due(&bad, now, wall, None), None);
    }
}
