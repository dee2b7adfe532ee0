//! Storage whose vended credentials are renewed before they expire, so a statement that runs
//! longer than the credentials a REST catalog vended at table load keeps reading and writing.
//!
//! ```text
//!   FileIO ──► RenewingStorage ──► credentials due? ── no ──► current storage (block cache, OpenDAL)
//!                                    │ yes: 90 % of min(expiry − receipt, credential_lifetime),
//!                                    │      at least 1 s after receipt
//!                                    ├─ still valid: renew in the background, read on with the
//!                                    │  current credentials
//!                                    └─ expired: wait for the renewal
//!                                    ▼
//!                      CredentialSource::renew (the REST catalog loads the table again,
//!                      with its own token refresh) ──► new storage from the new properties
//!                                    │
//!                      readers opened before reopen on their next read; a failed renewal is
//!                      tried again after 1, 2, 4 … 60 s, and fails reads once the credentials
//!                      have expired
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

/// Credentials are renewed at the earliest this long after they were received: a catalog that
/// vends credentials about to expire cannot make every read load the table again.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// After the n-th failed renewal in a row, the next is tried `RETRY_AFTER · 2ⁿ⁻¹` later, at
/// most [`MAX_RETRY_AFTER`].
const RETRY_AFTER: Duration = Duration::from_secs(1);
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

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
    source: Arc<dyn CredentialSource>,
    lifetime: Option<Duration>,
    renewed: Arc<AtomicU64>,
    /// When the first credentials were received (the table load), monotonic and wall clock.
    received: (Instant, SystemTime),
}

impl Renewal {
    /// Credentials received now, renewed from `source`, each set used at most `lifetime`
    /// (`credential_lifetime`); `renewed` counts the renewals (shared by a catalog's tables).
    pub fn new(
        source: Arc<dyn CredentialSource>,
        lifetime: Option<Duration>,
        renewed: Arc<AtomicU64>,
    ) -> Self {
        Self {
            source,
            lifetime,
            renewed,
            received: (Instant::now(), SystemTime::now()),
        }
    }
}

/// When credentials received at `received` (monotonic and wall clock) with storage properties
/// `props` are due for renewal: at 90 % of the shorter of their lifetime left at receipt and
/// `lifetime`, and at least [`MIN_INTERVAL`] after receipt; `None` when `props` carry no
/// expiry.
fn renewal_due(
    props: &HashMap<String, String>,
    received: (Instant, SystemTime),
    lifetime: Option<Duration>,
) -> Option<Instant> {
    let remaining = expiry(props)?
        .duration_since(received.1)
        .unwrap_or(Duration::ZERO);
    let used = lifetime.map_or(remaining, |l| l.min(remaining));
    Some(received.0 + used.mul_f64(RENEW_AT).max(MIN_INTERVAL))
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
        Ok(match self.renewing(config)? {
            Some(renewing) => Arc::new(renewing),
            None => self.inner.build(config)?,
        })
    }
}

impl RenewingStorageFactory {
    /// The renewing storage for `config`; `None` without a renewal or an expiry (plain storage).
    fn renewing(&self, config: &StorageConfig) -> Result<Option<RenewingStorage>> {
        let Some(renewal) = &self.renewal else {
            return Ok(None);
        };
        let Some(due) = renewal_due(config.props(), renewal.received, renewal.lifetime) else {
            return Ok(None);
        };
        Ok(Some(RenewingStorage(Arc::new(Shared {
            factory: self.inner.clone(),
            renewal: renewal.clone(),
            current: RwLock::new(Current {
                storage: self.inner.build(config)?,
                due: Some(due),
                expires: expiry(config.props()),
                generation: 0,
                failures: 0,
            }),
            renewing: Arc::new(tokio::sync::Mutex::new(())),
        }))))
    }
}

/// Whether storage built from `props` renews its credentials: they carry a readable expiry.
pub fn expires(props: &HashMap<String, String>) -> bool {
    expiry(props).is_some()
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
    renewing: Arc<tokio::sync::Mutex<()>>,
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
    /// Failed renewals since the last one that succeeded.
    failures: u32,
}

impl RenewingStorage {
    fn snapshot(&self) -> Current {
        self.0
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The storage to use now. Credentials that are due are renewed in the background while
    /// they are still valid. Expired ones are renewed before the caller goes on; after a failed
    /// renewal they fail the caller at once until the next attempt is due.
    async fn current(&self) -> Result<Current> {
        let now = self.snapshot();
        if valid(&now) {
            if !fresh(&now)
                && let Ok(guard) = Arc::clone(&self.0.renewing).try_lock_owned()
            {
                let this = self.clone();
                tokio::spawn(async move {
                    let _renewing = guard;
                    // A failure is logged and tried again later; reads go on meanwhile.
                    let _ = this.renew().await;
                });
            }
            return Ok(now);
        }
        let guard = Arc::clone(&self.0.renewing).lock_owned().await;
        let now = self.snapshot();
        if valid(&now) {
            return Ok(now);
        }
        if fresh(&now) && now.failures > 0 {
            return Err(Error::new(
                ErrorKind::Unexpected,
                format!(
                    "the vended storage credentials expired; renewing them failed {} time(s)",
                    now.failures
                ),
            ));
        }
        // In a task of its own: a read cancelled meanwhile does not cancel the renewal.
        let this = self.clone();
        tokio::spawn(async move {
            let _renewing = guard;
            this.renew().await
        })
        .await
        .map_err(|e| Error::new(ErrorKind::Unexpected, format!("renewing credentials: {e}")))?
    }

    /// Renews the credentials unless another renewal just did (the caller holds `renewing`).
    async fn renew(&self) -> Result<Current> {
        let now = self.snapshot();
        if fresh(&now) && valid(&now) {
            return Ok(now);
        }
        let renewed = async {
            let config = StorageConfig::from_props(self.0.renewal.source.renew().await?);
            let received = (Instant::now(), SystemTime::now());
            if expiry(config.props()).is_some_and(|x| x <= received.1 + MIN_INTERVAL) {
                return Err(Error::new(
                    ErrorKind::Unexpected,
                    "the catalog vended storage credentials that are about to expire",
                ));
            }
            let storage = self.0.factory.build(&config)?;
            Ok::<_, Error>((storage, config, received))
        }
        .await;
        let mut slot = self.0.current.write().unwrap_or_else(|p| p.into_inner());
        match renewed {
            Ok((storage, config, received)) => {
                *slot = Current {
                    storage,
                    // Renewed properties without an expiry are used until the table is loaded
                    // again.
                    due: renewal_due(config.props(), received, self.0.renewal.lifetime),
                    expires: expiry(config.props()),
                    generation: slot.generation + 1,
                    failures: 0,
                };
                self.0.renewal.renewed.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("renewed vended storage credentials");
                Ok(slot.clone())
            }
            Err(e) => {
                slot.failures = slot.failures.saturating_add(1);
                let wait = RETRY_AFTER
                    .saturating_mul(1 << (slot.failures - 1).min(16))
                    .min(MAX_RETRY_AFTER);
                slot.due = Some(Instant::now() + wait);
                if valid(&slot) {
                    tracing::warn!(error = %e, retry_in = ?wait, "renewing vended storage credentials failed; using the current ones until they expire");
                    Ok(slot.clone())
                } else {
                    Err(Error::new(
                        ErrorKind::Unexpected,
                        "the vended storage credentials expired and could not be renewed",
                    )
                    .with_source(e))
                }
            }
        }
    }
}

/// Whether `c` need no renewal now.
fn fresh(c: &Current) -> bool {
    c.due.is_none_or(|due| Instant::now() < due)
}

/// Whether the credentials of `c` still work (unknown expiry: assumed).
fn valid(c: &Current) -> bool {
    c.expires.is_none_or(|x| SystemTime::now() < x)
}

impl RenewingStorage {
    /// A reader of `path` that follows the renewals.
    async fn open(&self, path: &str) -> Result<RenewingReader> {
        let now = self.current().await?;
        let opened: Arc<dyn FileRead> = Arc::from(now.storage.reader(path).await?);
        Ok(RenewingReader {
            storage: self.clone(),
            path: path.to_string(),
            opened: Mutex::new((now.generation, opened)),
        })
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
        Ok(Box::new(self.open(path).await?))
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
            (opened.0 >= now.generation).then(|| Arc::clone(&opened.1))
        };
        let reader = match held {
            Some(r) => r,
            None => {
                let reopened: Arc<dyn FileRead> = Arc::from(now.storage.reader(&self.path).await?);
                let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
                // A concurrent read may have reopened on a newer generation meanwhile.
                if opened.0 < now.generation {
                    *opened = (now.generation, Arc::clone(&reopened));
                }
                reopened
            }
        };
        reader.read(range).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// Storage properties whose credentials expire `valid_for` from now.
    fn expiring(valid_for: Duration) -> HashMap<String, String> {
        let at = (SystemTime::now() + valid_for)
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis();
        [(EXPIRES_AT_MS.to_string(), at.to_string())].into()
    }

    #[test]
    fn renewal_is_due_at_ninety_percent_of_the_shorter_lifetime_and_not_at_once() {
        let received = (Instant::now(), SystemTime::now());
        let after = |props: &HashMap<String, String>, lifetime| {
            renewal_due(props, received, lifetime).map(|due| due - received.0)
        };
        let hour = expiring(Duration::from_secs(3600));
        // About 3600 s left: due after about 3240 s.
        let due = after(&hour, None).unwrap();
        assert!(
            due.abs_diff(Duration::from_secs(3240)) < Duration::from_secs(1),
            "{due:?}"
        );
        // Capped at 10 s: due after 9 s.
        assert_eq!(
            after(&hour, Some(Duration::from_secs(10))),
            Some(Duration::from_secs(9))
        );
        // Already expired, or a zero cap: not before MIN_INTERVAL.
        assert_eq!(after(&expiring(Duration::ZERO), None), Some(MIN_INTERVAL));
        assert_eq!(after(&hour, Some(Duration::ZERO)), Some(MIN_INTERVAL));
        // No expiry, or an unreadable one: never renewed.
        assert_eq!(after(&HashMap::new(), None), None);
        let bad: HashMap<String, String> = [(EXPIRES_AT_MS.to_string(), "soon".to_string())].into();
        assert_eq!(after(&bad, None), None);
    }

    /// A catalog's renewals: answers `answer` after `delay`, counting the calls.
    #[derive(Debug)]
    struct Catalog {
        calls: AtomicUsize,
        answer: Mutex<std::result::Result<HashMap<String, String>, String>>,
        delay: Duration,
    }

    impl Catalog {
        fn answering(valid_for: Duration, delay: Duration) -> Arc<Self> {
            Arc::new(Self {
                calls: AtomicUsize::new(0),
                answer: Mutex::new(Ok(expiring(valid_for))),
                delay,
            })
        }

        fn calls(&self) -> usize {
            self.calls.load(Ordering::SeqCst)
        }
    }

    impl CredentialSource for Catalog {
        fn renew(&self) -> BoxFuture<'static, Result<HashMap<String, String>>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let answer = self.answer.lock().unwrap().clone();
            let delay = self.delay;
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                answer.map_err(|m| Error::new(ErrorKind::Unexpected, m))
            })
        }
    }

    /// Local-file storage with credentials expiring `valid_for` from now, renewed from
    /// `catalog` after at most `lifetime`; and its renewal count.
    fn storage(
        catalog: &Arc<Catalog>,
        valid_for: Duration,
        lifetime: Option<Duration>,
    ) -> (RenewingStorage, Arc<AtomicU64>) {
        let renewed = Arc::new(AtomicU64::new(0));
        let renewal = Renewal::new(
            Arc::clone(catalog) as Arc<dyn CredentialSource>,
            lifetime,
            Arc::clone(&renewed),
        );
        let factory = RenewingStorageFactory::new(CachingStorageFactory::new(None), renewal);
        let config = StorageConfig::from_props(expiring(valid_for));
        (factory.renewing(&config).unwrap().unwrap(), renewed)
    }

    /// A temporary directory and the `file://` path of a file in it.
    fn local_file() -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = format!("file://{}/data.bin", dir.path().display());
        (dir, path)
    }

    fn generation(s: &RenewingStorage) -> u64 {
        s.snapshot().generation
    }

    #[tokio::test]
    async fn due_credentials_are_renewed_once_in_the_background_and_open_readers_follow() {
        let (_dir, path) = local_file();
        // The catalog takes 2 s to answer: a read that waited for it would show.
        let catalog = Catalog::answering(Duration::from_secs(3600), Duration::from_secs(2));
        let (storage, renewed) = storage(&catalog, Duration::from_secs(3600), Some(Duration::ZERO));
        storage
            .write(&path, Bytes::from_static(b"abcdef"))
            .await
            .unwrap();
        let reader = storage.open(&path).await.unwrap();
        tokio::time::sleep(MIN_INTERVAL + Duration::from_millis(200)).await;
        // Due but valid: eight concurrent reads go on at once, one renewal starts.
        let reads = (0..8).map(|_| storage.read(&path));
        let started = Instant::now();
        for read in futures::future::join_all(reads).await {
            assert_eq!(read.unwrap(), Bytes::from_static(b"abcdef"));
        }
        assert!(started.elapsed() < Duration::from_secs(1), "reads waited");
        let deadline = Instant::now() + Duration::from_secs(10);
        while generation(&storage) == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(catalog.calls(), 1);
        assert_eq!(renewed.load(Ordering::SeqCst), 1);
        assert_eq!(generation(&storage), 1);
        // The reader opened before reopens on the renewed storage.
        assert_eq!(reader.opened.lock().unwrap().0, 0);
        assert_eq!(reader.read(1..3).await.unwrap(), Bytes::from_static(b"bc"));
        assert_eq!(reader.opened.lock().unwrap().0, 1);
    }

    #[tokio::test]
    async fn a_failed_renewal_keeps_valid_credentials_and_fails_expired_ones_until_it_succeeds() {
        let (_dir, path) = local_file();
        let catalog = Catalog::answering(Duration::from_secs(3600), Duration::ZERO);
        *catalog.answer.lock().unwrap() = Err("catalog down".into());
        // Valid for 4 s, used for 1.5 s: due after 1.35 s. Times below are since the start.
        let start = Instant::now();
        let at = |ms: u64| tokio::time::sleep_until((start + Duration::from_millis(ms)).into());
        let (storage, renewed) = storage(
            &catalog,
            Duration::from_secs(4),
            Some(Duration::from_millis(1500)),
        );
        storage
            .write(&path, Bytes::from_static(b"abc"))
            .await
            .unwrap();
        // 1.6 s, due and valid: the background renewal fails (next at about 2.6 s), reads go on.
        at(1600).await;
        storage.read(&path).await.unwrap();
        at(1800).await;
        assert_eq!((catalog.calls(), generation(&storage)), (1, 0));
        // 2.9 s: the second fails too (next at about 4.9 s).
        at(2900).await;
        storage.read(&path).await.unwrap();
        at(3100).await;
        assert_eq!((catalog.calls(), generation(&storage)), (2, 0));
        // 4.3 s, expired, the next attempt not due: refused at once, the catalog not asked.
        at(4300).await;
        let refused = storage.read(&path).await.unwrap_err();
        assert!(
            refused.to_string().contains("failed 2 time(s)"),
            "{refused}"
        );
        assert_eq!(catalog.calls(), 2);
        // 5.3 s: the attempt is due and fails; the read fails with the cause (next at 9.3 s).
        at(5300).await;
        let refused = storage.read(&path).await.unwrap_err();
        assert!(
            refused.to_string().contains("could not be renewed"),
            "{refused}"
        );
        assert_eq!(catalog.calls(), 3);
        // 9.6 s, the catalog answering again: the read renews first and goes on.
        *catalog.answer.lock().unwrap() = Ok(expiring(Duration::from_secs(3600)));
        at(9600).await;
        assert_eq!(
            storage.read(&path).await.unwrap(),
            Bytes::from_static(b"abc")
        );
        assert_eq!((catalog.calls(), renewed.load(Ordering::SeqCst)), (4, 1));
    }

    #[tokio::test]
    async fn credentials_that_arrive_expired_are_renewed_before_the_first_read() {
        let (_dir, path) = local_file();
        let catalog = Catalog::answering(Duration::from_secs(3600), Duration::ZERO);
        let (storage, renewed) = storage(&catalog, Duration::ZERO, None);
        storage
            .write(&path, Bytes::from_static(b"abc"))
            .await
            .unwrap();
        assert_eq!((catalog.calls(), renewed.load(Ordering::SeqCst)), (1, 1));
        assert_eq!(
            storage.read(&path).await.unwrap(),
            Bytes::from_static(b"abc")
        );
        assert_eq!(catalog.calls(), 1);
    }
}
