//! [`WorkerChannels`]: gRPC channels to workers, with timeouts, keepalive and errors that name
//! the worker.
//!
//! ```text
//!   datafusion-distributed ──► get_worker_client_for_url(url) ──► NamedChannel(url, client)
//!       one lazily connecting channel per URL (connect timeout, HTTP/2 keepalive)
//!   a transport failure on any call or stream (the worker died, the connection reset, a
//!   keepalive went unanswered) ──► io::Error ConnectionAborted "worker <url> …"
//!                                 ──► WorkerList::mark_down(url) (coordinator)
//!                                 ──► WorkerFailures of the query (coordinator): its result
//!                                     stream ends with that error at once (fail_fast)
//! ```
//!
//! datafusion-distributed 3.0's default resolver sets no connect timeout and no keepalive, and
//! its errors carry no URL (a `tonic::Status` as an external error). Here a status that is not
//! an encoded engine error — those the library decodes into their own `DataFusionError` — is a
//! transport failure; it becomes an `io::Error` because that variant keeps its kind when a
//! worker forwards the error to the coordinator (the library encodes it field by field, while
//! an external error would arrive as text). The Flight SQL layer maps connection kinds to
//! `Unavailable` (`flight/status.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow::array::RecordBatch;
use async_trait::async_trait;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion_distributed::{
    ChannelResolver, CoordinatorToWorkerMsg, ExecuteTaskRequest, GetWorkerInfoRequest,
    GetWorkerInfoResponse, WorkerChannel, WorkerToCoordinatorMsg,
};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use http::HeaderMap;
use url::Url;

use super::security::ClusterCredentials;
use super::workers::WorkerList;

/// Time to open a TCP connection to a worker.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Channels to workers by URL (module docs). Cheap to clone; clones share the channels.
#[derive(Debug, Clone)]
pub struct WorkerChannels {
    channels: Arc<Mutex<HashMap<Url, tonic::transport::Channel>>>,
    /// What every call presents (`security.rs`).
    credentials: ClusterCredentials,
    /// On a coordinator: where unreachable workers are reported.
    workers: Option<WorkerList>,
}

impl WorkerChannels {
    /// Channels presenting `credentials`, reporting unreachable workers to `workers` (a
    /// coordinator's list).
    pub fn new(workers: Option<WorkerList>, credentials: ClusterCredentials) -> Self {
        Self {
            channels: Default::default(),
            credentials,
            workers,
        }
    }

    fn channel(&self, url: &Url) -> Result<tonic::transport::Channel> {
        let mut channels = self.channels.lock().expect("channel map lock");
        if let Some(c) = channels.get(url) {
            return Ok(c.clone());
        }
        let endpoint = self
            .credentials
            .endpoint(url)
            .map_err(|e| DataFusionError::Configuration(e.to_string()))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true);
        // Lazy: connects on first use and reconnects after the worker restarts.
        let channel = endpoint.connect_lazy();
        channels.insert(url.clone(), channel.clone());
        Ok(channel)
    }
}

#[async_trait]
impl ChannelResolver for WorkerChannels {
    async fn get_worker_client_for_url(&self, url: &Url) -> Result<Box<dyn WorkerChannel>> {
        let channel = self.channel(url)?;
        Ok(Box::new(NamedChannel {
            url: url.clone(),
            inner: self.credentials.client(channel),
            workers: self.workers.clone(),
        }))
    }
}

/// A worker client whose transport failures name the worker (module docs).
struct NamedChannel {
    url: Url,
    inner: Box<dyn WorkerChannel>,
    workers: Option<WorkerList>,
}

impl NamedChannel {
    /// Maps an error of this channel (module docs); `failures`: the query's, when known.
    fn lost(
        &self,
        failures: Option<Arc<WorkerFailures>>,
    ) -> impl Fn(DataFusionError) -> DataFusionError + Send + Sync + 'static {
        let url = self.url.clone();
        let workers = self.workers.clone();
        move |e| worker_lost(&url, workers.as_ref(), failures.as_deref(), e)
    }
}

/// The first worker failure of one query on the coordinator, registered in the query's
/// session configuration by the Flight SQL execution (`flight/execution.rs`): a worker's stream
/// may fail while other workers' batches are still queued ahead of its error, and a client
/// that reads slowly would stream them all before it learns the query failed.
#[derive(Debug, Default)]
pub struct WorkerFailures {
    first: Mutex<Option<(Url, String)>>,
    notify: tokio::sync::Notify,
}

impl WorkerFailures {
    fn record(&self, url: &Url, reason: &str) {
        let mut first = self.first.lock().expect("worker failures lock");
        if first.is_none() {
            *first = Some((url.clone(), reason.to_string()));
            self.notify.notify_one();
        }
    }

    /// The first failure recorded, as the error the query fails with.
    pub fn error(&self) -> Option<DataFusionError> {
        let first = self.first.lock().expect("worker failures lock");
        first.as_ref().map(|(url, reason)| lost_error(url, reason))
    }

    /// Resolves with the first failure once one is recorded.
    pub async fn failed(&self) -> DataFusionError {
        loop {
            if let Some(e) = self.error() {
                return e;
            }
            self.notify.notified().await;
        }
    }
}

/// `input` ending with the query's first worker failure as soon as one is recorded, ahead of
/// the batches still queued (see [`WorkerFailures`]).
pub fn fail_fast(
    input: BoxStream<'static, Result<RecordBatch>>,
    failures: Arc<WorkerFailures>,
) -> BoxStream<'static, Result<RecordBatch>> {
    futures::stream::unfold(Some((input, failures)), |state| async move {
        let (mut input, failures) = state?;
        tokio::select! {
            biased;
            e = failures.failed() => Some((Err(e), None)),
            item = input.next() => item.map(|i| (i, Some((input, failures)))),
        }
    })
    .boxed()
}

#[async_trait]
impl WorkerChannel for NamedChannel {
    async fn coordinator_channel(
        &mut self,
        headers: HeaderMap,
        c2w_stream: BoxStream<'static, CoordinatorToWorkerMsg>,
    ) -> Result<BoxStream<'static, Result<WorkerToCoordinatorMsg>>> {
        let lost = self.lost(None);
        let stream = self
            .inner
            .coordinator_channel(headers, c2w_stream)
            .await
            .map_err(&lost)?;
        Ok(stream.map_err(lost).boxed())
    }

    async fn execute_task(
        &mut self,
        headers: HeaderMap,
        request: ExecuteTaskRequest,
        metrics: ExecutionPlanMetricsSet,
        task_ctx: &Arc<TaskContext>,
    ) -> Result<Vec<BoxStream<'static, Result<RecordBatch>>>> {
        let failures = task_ctx.session_config().get_extension::<WorkerFailures>();
        let lost = Arc::new(self.lost(failures));
        let streams = self
            .inner
            .execute_task(headers, request, metrics, task_ctx)
            .await
            .map_err(lost.as_ref())?;
        Ok(streams
            .into_iter()
            .map(|s| {
                let lost = Arc::clone(&lost);
                s.map_err(move |e| lost(e)).boxed()
            })
            .collect())
    }

    async fn get_worker_info(
        &mut self,
        request: GetWorkerInfoRequest,
    ) -> Result<GetWorkerInfoResponse> {
        let lost = self.lost(None);
        self.inner.get_worker_info(request).await.map_err(lost)
    }
}

/// `e` as a connection error naming `url` when it is a transport failure (a gRPC status that
/// is not an encoded engine error); `e` itself otherwise. Reports the worker down, and the
/// failure to the query's `failures`.
fn worker_lost(
    url: &Url,
    workers: Option<&WorkerList>,
    failures: Option<&WorkerFailures>,
    e: DataFusionError,
) -> DataFusionError {
    let Some(status) = transport_status(&e) else {
        return e;
    };
    if let Some(w) = workers {
        w.mark_down(url);
    }
    let reason = format!(
        "{} ({})",
        status.message().lines().next().unwrap_or_default(),
        status.code()
    );
    if let Some(f) = failures {
        f.record(url, &reason);
    }
    lost_error(url, &reason)
}

/// The error of a query that lost worker `url`.
fn lost_error(url: &Url, reason: &str) -> DataFusionError {
    DataFusionError::IoError(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        format!("worker {url} failed: {reason}"),
    ))
}

/// The transport status inside `e`, looking through context and shared wrappers.
fn transport_status(e: &DataFusionError) -> Option<&tonic::Status> {
    match e {
        DataFusionError::External(inner) => inner.downcast_ref::<tonic::Status>(),
        DataFusionError::Context(_, inner) => transport_status(inner),
        DataFusionError::Shared(inner) => transport_status(inner),
        _ => None,
    }
}

/// HTTP/2 keepalive pings between coordinator and workers: a peer that stops answering (a
/// machine gone, a network cut, where no connection reset arrives) fails the streams within
/// `KEEPALIVE_INTERVAL + KEEPALIVE_TIMEOUT`.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// See [`KEEPALIVE_INTERVAL`].
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    /// A transport status becomes a connection error naming the worker, marks it down and
    /// records the query's failure; an engine error passes unchanged.
    #[tokio::test]
    async fn transport_failures_name_the_worker() {
        let url = Url::parse("http://127.0.0.1:50061").unwrap();
        let workers = WorkerList::new(&[url.to_string()], &ClusterCredentials::default()).unwrap();
        let failures = WorkerFailures::default();
        let e = DataFusionError::External(Box::new(tonic::Status::unknown(
            "h2 protocol error: error reading a body from connection",
        )));
        let mapped = worker_lost(&url, Some(&workers), Some(&failures), e);
        let DataFusionError::IoError(io) = &mapped else {
            panic!("{mapped}")
        };
        assert_eq!(io.kind(), std::io::ErrorKind::ConnectionAborted);
        assert!(
            mapped
                .to_string()
                .contains("worker http://127.0.0.1:50061/ failed"),
            "{mapped}"
        );
        assert!(workers.live().is_empty());
        assert_eq!(
            failures.error().map(|e| e.to_string()),
            Some(mapped.to_string())
        );

        let e = DataFusionError::Execution("division by zero".into());
        let kept = worker_lost(&url, None, None, e);
        assert!(matches!(kept, DataFusionError::Execution(_)), "{kept}");
    }

    /// A recorded failure ends the stream at once, ahead of batches still queued.
    #[tokio::test]
    async fn a_worker_failure_ends_the_stream_ahead_of_queued_batches() {
        let batch = RecordBatch::new_empty(Arc::new(arrow::datatypes::Schema::empty()));
        let queued: Vec<Result<RecordBatch>> = (0..100).map(|_| Ok(batch.clone())).collect();
        let failures = Arc::new(WorkerFailures::default());
        let mut stream = fail_fast(futures::stream::iter(queued).boxed(), Arc::clone(&failures));
        assert!(stream.next().await.unwrap().is_ok());
        failures.record(&Url::parse("http://127.0.0.1:1").unwrap(), "reset");
        let e = stream.next().await.unwrap().unwrap_err();
        assert!(
            e.to_string()
                .contains("worker http://127.0.0.1:1/ failed: reset"),
            "{e}"
        );
        assert!(stream.next().await.is_none());
    }
}
