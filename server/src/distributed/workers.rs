//! [`WorkerList`]: the configured workers a coordinator sends tasks to, and which of them are up.
//!
//! ```text
//!   [distributed] workers / --worker URL ──► WorkerList ──► get_urls(): the live ones
//!        every health_interval: the worker service's GetWorkerInfo (1 s timeout) ──► up / down
//!        a channel error (channels.rs) ──► down at once, until a probe reaches it again
//! ```
//!
//! datafusion-distributed asks for the URLs when it plans a query and again when it runs it, so
//! a worker that died stops getting tasks once it is found down, and a restarted worker gets
//! them again after its first successful probe. A probe is a call of the worker service, not
//! a TCP connect, so an address where something else listens (a Flight SQL server, a typo'd
//! port) is down, with a warning that says so. With no worker up, the planner gets no URL and
//! plans every query on the coordinator alone, as it does with one (a stage needs two tasks to
//! be worth a network boundary). Discovery beyond a static list (DNS, a registry) can come
//! behind the same [`WorkerResolver`] trait.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use datafusion::common::{DataFusionError, Result};
use datafusion_distributed::{GetWorkerInfoRequest, WorkerResolver};
use url::Url;

use super::security::ClusterCredentials;
use crate::config::{ConfigError, parse_worker_urls};

/// Time a health probe may take, connection included.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The configured workers and their last known state (module docs). Cheap to clone.
#[derive(Debug, Clone)]
pub struct WorkerList {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// In configuration order, with the channel each is probed on.
    configured: Vec<(Url, tonic::transport::Channel)>,
    /// What the probes present.
    credentials: ClusterCredentials,
    down: Mutex<HashSet<Url>>,
}

/// What a probe found at a worker's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Up,
    /// Nothing answered in time, or the connection failed.
    Unreachable,
    /// Something answered that is not a datafusion-distributed worker.
    NotAWorker,
    /// A worker answered that refused this process's credentials.
    Refused,
}

impl WorkerList {
    /// Parses `urls` and starts probing them every `interval` (a background task on the current
    /// tokio runtime that ends with the list), presenting `credentials`. Every worker counts as
    /// up until a probe or a query finds it down.
    ///
    /// Errors: as [`Self::new`].
    pub fn start(
        urls: &[String],
        interval: Duration,
        credentials: &ClusterCredentials,
    ) -> Result<Self, ConfigError> {
        let list = Self::new(urls, credentials)?;
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
    ///
    /// Errors: as [`parse_worker_urls`] (`https://` under `[distributed.tls]`), or TLS files
    /// tonic cannot use.
    pub fn new(urls: &[String], credentials: &ClusterCredentials) -> Result<Self, ConfigError> {
        let mut configured = vec![];
        for url in parse_worker_urls(urls, credentials.uses_tls())? {
            let channel = credentials
                .endpoint(&url)?
                .connect_timeout(PROBE_TIMEOUT)
                .timeout(PROBE_TIMEOUT)
                .connect_lazy();
            configured.push((url, channel));
        }
        Ok(Self {
            inner: Arc::new(Inner {
                configured,
                credentials: credentials.clone(),
                down: Mutex::new(HashSet::new()),
            }),
        })
    }

    /// The configured workers, in configuration order.
    pub fn configured(&self) -> Vec<Url> {
        self.inner
            .configured
            .iter()
            .map(|(u, _)| u.clone())
            .collect()
    }

    /// The workers not known to be down.
    pub fn live(&self) -> Vec<Url> {
        let down = self.inner.down.lock().expect("worker list lock");
        self.inner
            .configured
            .iter()
            .map(|(u, _)| u)
            .filter(|u| !down.contains(*u))
            .cloned()
            .collect()
    }

    /// Marks `url` down until a probe reaches it again (a query could not reach it).
    pub fn mark_down(&self, url: &Url) {
        let known = self.inner.configured.iter().any(|(u, _)| u == url);
        let mut down = self.inner.down.lock().expect("worker list lock");
        if known && down.insert(url.clone()) {
            tracing::warn!(worker = %url, "worker down");
        }
    }

    /// Asks every worker for its info once and records which answered.
    pub async fn probe(&self) {
        let credentials = &self.inner.credentials;
        let probes = self
            .inner
            .configured
            .iter()
            .map(|(url, channel)| async move {
                let mut client = credentials.client(channel.clone());
                let found = match tokio::time::timeout(
                    PROBE_TIMEOUT,
                    client.get_worker_info(GetWorkerInfoRequest {}),
                )
                .await
                {
                    Ok(Ok(_)) => Probe::Up,
                    Ok(Err(DataFusionError::External(e)))
                        if e.downcast_ref::<tonic::Status>()
                            .is_some_and(|s| s.code() == tonic::Code::Unimplemented) =>
                    {
                        Probe::NotAWorker
                    }
                    Ok(Err(DataFusionError::External(e)))
                        if e.downcast_ref::<tonic::Status>()
                            .is_some_and(|s| s.code() == tonic::Code::Unauthenticated) =>
                    {
                        Probe::Refused
                    }
                    _ => Probe::Unreachable,
                };
                (url, found)
            });
        for (url, found) in futures::future::join_all(probes).await {
            let mut down = self.inner.down.lock().expect("worker list lock");
            match found {
                Probe::Up => {
                    if down.remove(url) {
                        tracing::warn!(worker = %url, "worker up");
                    }
                }
                Probe::Unreachable => {
                    if down.insert(url.clone()) {
                        tracing::warn!(worker = %url, "worker down");
                    }
                }
                Probe::Refused => {
                    if down.insert(url.clone()) {
                        tracing::warn!(
                            worker = %url,
                            "the worker refused this coordinator's credentials: every member \
                             needs the same [distributed] secret_file"
                        );
                    }
                }
                Probe::NotAWorker => {
                    if down.insert(url.clone()) {
                        tracing::warn!(
                            worker = %url,
                            "not a worker: the service there does not answer datafusion-distributed's \
                             GetWorkerInfo (a Flight SQL port? workers run `serve --role worker`)"
                        );
                    }
                }
            }
        }
    }
}

impl WorkerResolver for WorkerList {
    /// The live workers, possibly none: the distributed planner then keeps every query on the
    /// coordinator (module docs).
    fn get_urls(&self) -> Result<Vec<Url>> {
        Ok(self.live())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker marked down is left out until a probe reaches it; an address where no worker
    /// service answers stays down.
    #[tokio::test]
    async fn down_workers_are_left_out_until_probed() {
        // The worker service on a runtime of its own: shutting it down ends its connections
        // too, as a worker process that dies does.
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        runtime.spawn(async move {
            listener.set_nonblocking(true).unwrap();
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let worker = datafusion_distributed::Worker::default().into_worker_server();
            tonic::transport::Server::builder()
                .add_service(worker)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await
        });
        let up = format!("http://{addr}");
        let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let silent = format!("http://{}", other.local_addr().unwrap());
        let list = WorkerList::new(&[up.clone(), silent], &ClusterCredentials::default()).unwrap();
        let url = Url::parse(&up).unwrap();
        list.probe().await;
        assert_eq!(list.get_urls().unwrap(), vec![url.clone()]);
        list.mark_down(&url);
        assert!(list.get_urls().unwrap().is_empty());
        list.probe().await;
        assert_eq!(list.get_urls().unwrap(), vec![url.clone()]);
        runtime.shutdown_background();
        list.probe().await;
        assert!(list.get_urls().unwrap().is_empty());
    }
}
