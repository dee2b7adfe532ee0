//! `--role worker`: serves datafusion-distributed's worker service for an engine (the
//! coordinator's side is `distributed/`).

use std::net::SocketAddr;
use std::sync::Arc;

use datafusion_distributed::{Worker, WorkerQueryContext};

use crate::distributed::{KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT};
use crate::serving::ServeError;
use crate::session::Engine;

/// Serves datafusion-distributed's worker service for `engine` on `addr` until `shutdown`
/// resolves (then open streams get [`crate::serving::DRAIN_TIMEOUT`] to finish); `on_ready` gets the bound address once the listener is open. Each task's session
/// gets the engine's caches, the scan's codec, our channels (a worker reads other workers'
/// shuffles) and the relinking of dynamic filters ([`crate::distributed::scan_tasks::relink_dynamic_filters`]); it
/// runs in the engine's runtime, so `[query] memory_limit` holds on workers too.
pub async fn serve(
    engine: Engine,
    addr: SocketAddr,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    on_ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let Some(cluster) = engine.cluster().cloned() else {
        return Err(ServeError::NotAWorker);
    };
    let caches = Arc::clone(engine.caches());
    let worker = Worker::from_session_builder(move |ctx: WorkerQueryContext| {
        let cluster = cluster.clone();
        let caches = Arc::clone(&caches);
        async move {
            let mut builder = cluster.worker_session(ctx.builder);
            if let Some(config) = builder.config().as_mut() {
                config.set_extension(caches);
            }
            // The functions of the coordinator's plans (`canonical_float`) resolve by name.
            Ok(crate::session::with_engine_semantics(builder).build())
        }
    })
    .with_runtime_env(engine.runtime());
    let (listener, bound) = crate::serving::listen(addr, "the distributed worker").await?;
    tracing::info!(address = %bound, "datafusion-distributed worker listening");
    on_ready(bound);
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    crate::serving::serve_draining(shutdown, |shutdown| {
        tonic::transport::Server::builder()
            // A coordinator whose query ends closes its streams; one that vanishes is noticed
            // here.
            .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
            .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
            .add_service(worker.into_worker_server())
            .serve_with_incoming_shutdown(incoming, shutdown)
    })
    .await
}
