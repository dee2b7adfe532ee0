//! [`WorkerList`]: the configured workers a coordinator sends tasks to, and which of them are up.
//!
//! ```text
//!   [distributed] workers / --worker URL ──► WorkerList ──► get_urls(): the live ones
//!        every health_interval: TCP connect to each (1 s timeout) ──► up / down
//!        a channel error (channels.rs) ──► down at once, until a probe reaches it again
//! ```
//!
//! datafusion-distributed asks for the URLs when it plans a query and again when it runs it, so
//! a worker that died stops getting tasks once it is found down, and a restarted worker gets
//! them again after its first successful probe. Discovery beyond a static list (DNS, a
//! registry) can come behind the same [`WorkerResolver`] trait.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use datafusion::common::{DataFusionError, Result};
use datafusion_distributed::WorkerResolver;
use url::Url;

use crate::config::ConfigError;

/// Time a health probe may take to connect.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The configured workers and their last known state (module docs). Cheap to clone.
#[derive(Debug, Clone)]
pub struct WorkerList {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// In configuration order.
    configured: Vec<Url>,
    down: Mutex<HashSet<Url>>,
}

/// A worker found unreachable: the message the coordinator's error names it with.
#[derive(Debug, thiserror::Error)]
#[error("no worker is reachable (configured: {configured})")]
pub struct NoWorkers {
    configured: String,
}

impl WorkerList {
    /// Parses `urls` and starts probing them every `interval` (a background task on the current
    /// tokio runtime that ends with the list). Every worker counts as up until a probe or a
    /// query finds it down.
    ///
    /// Errors: no workers, or a URL that does not parse as `http://host:port`.
    pub fn start(urls: &[String], interval: Duration) -> Result<Self, ConfigError> {
        let list = Self::new(urls)?;
        let weak = Arc::downgrade(&list.inner);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                WorkerList { inner }.probe().await;
            }
        });
        Ok(list)
    }

    /// The list without probing (tests).
    pub fn new(urls: &[String]) -> Result<Self, ConfigError> {
        if urls.is_empty() {
            return Err(ConfigError::Invalid(
                "role = \"coordinator\" needs workers: [distributed] workers = [\"http://host:port\", …] \
                 or --worker URL"
                    .into(),
            ));
        }
        let configured = urls
            .iter()
            .map(|u| {
                let url = Url::parse(u).map_err(|e| {
                    ConfigError::Invalid(format!("distributed.workers: {u} is not a URL: {e}"))
                })?;
                if url.scheme() != "http" || url.host().is_none() || url.port().is_none() {
                    return Err(ConfigError::Invalid(format!(
                        "distributed.workers: {u} must be http://host:port"
                    )));
                }
                Ok(url)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            inner: Arc::new(Inner {
                configured,
                down: Mutex::new(HashSet::new()),
            }),
        })
    }

    /// The configured workers, in configuration order.
    pub fn configured(&self) -> &[Url] {
        &self.inner.configured
    }

    /// The workers not known to be down.
    pub fn live(&self) -> Vec<Url> {
        let down = self.inner.down.lock().expect("worker list lock");
        self.inner
            .configured
            .iter()
            .filter(|u| !down.contains(*u))
            .cloned()
            .collect()
    }

    /// Marks `url` down until a probe reaches it again (a query could not reach it).
    pub fn mark_down(&self, url: &Url) {
        let mut down = self.inner.down.lock().expect("worker list lock");
        if self.inner.configured.contains(url) && down.insert(url.clone()) {
            tracing::warn!(worker = %url, "worker down");
        }
    }

    /// Connects to every worker once and records which answered.
    pub async fn probe(&self) {
        let probes = self.inner.configured.iter().map(|url| async move {
            let host = url.host_str().unwrap_or_default().to_string();
            let port = url.port().unwrap_or_default();
            let up = matches!(
                tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect((host, port)))
                    .await,
                Ok(Ok(_))
            );
            (url, up)
        });
        for (url, up) in futures::future::join_all(probes).await {
            let mut down = self.inner.down.lock().expect("worker list lock");
            if up {
                if down.remove(url) {
                    tracing::info!(worker = %url, "worker up");
                }
            } else if down.insert(url.clone()) {
                tracing::warn!(worker = %url, "worker down");
            }
        }
    }
}

impl WorkerResolver for WorkerList {
    /// The live workers. Errors when none is: the query fails with `Unavailable` rather than
    /// waiting.
    fn get_urls(&self) -> Result<Vec<Url>> {
        let live = self.live();
        if live.is_empty() {
            let configured = self
                .inner
                .configured
                .iter()
                .map(Url::as_str)
                .collect::<Vec<_>>()
                .join(", ");
            return Err(DataFusionError::IoError(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                NoWorkers { configured },
            )));
        }
        Ok(live)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker marked down is left out until a probe reaches it; with none left the resolver
    /// fails with a connection error naming the configured workers.
    #[tokio::test]
    async fn down_workers_are_left_out_until_probed() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let up = format!("http://{}", listener.local_addr().unwrap());
        let list = WorkerList::new(std::slice::from_ref(&up)).unwrap();
        let url = Url::parse(&up).unwrap();
        list.mark_down(&url);
        let err = list.get_urls().unwrap_err();
        assert!(
            matches!(&err, DataFusionError::IoError(e) if e.kind() == std::io::ErrorKind::NotConnected),
            "{err}"
        );
        assert!(err.to_string().contains(&up), "{err}");
        list.probe().await;
        assert_eq!(list.get_urls().unwrap(), vec![url.clone()]);
        drop(listener);
        list.probe().await;
        assert!(list.get_urls().is_err());
    }

    /// Worker URLs must be `http://host:port`.
    #[test]
    fn urls_are_checked() {
        assert!(WorkerList::new(&[]).is_err());
        assert!(WorkerList::new(&["localhost:1".into()]).is_err());
        assert!(WorkerList::new(&["http://localhost".into()]).is_err());
        assert!(WorkerList::new(&["http://localhost:50061".into()]).is_ok());
    }
}
