//! `--role worker`: serves datafusion-distributed's worker service for an engine (the
//! coordinator's side is `distributed/`).

use std::net::SocketAddr;
use std::sync::Arc;

use datafusion_distributed::{Worker, WorkerQueryContext};
use tonic::service::interceptor::InterceptedService;

use crate::distributed::{KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT};
use crate::serving::ServeError;
use crate::session::Engine;

/// Serves datafusion-distributed's worker service for `engine` on `addr` until `shutdown`
/// resolves (then open streams get [`crate::serving::DRAIN_TIMEOUT`] to finish); `on_ready` gets
/// the bound address once the listener is open. Under `[distributed.tls]` the listener speaks
/// TLS and requires a client certificate of the cluster's CA (reloaded on SIGHUP); with
/// `secret_file` every call must present the secret
/// ([`crate::distributed::security::Admission`]). Each task's session
/// gets the engine's caches, the scan's codec, our channels (a worker reads other workers'
/// shuffles) and the relinking of dynamic filters ([`crate::distributed::scan_tasks::relink_dynamic_filters`]); it
/// runs in the engine's runtime, so `[query] memory_limit` holds on workers too.
///
/// Errors: not a worker's engine, an address that cannot be bound, TLS files that cannot serve.
pub async fn serve(
    engine: Engine,
    addr: SocketAddr,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    on_ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let Some(cluster) = engine.cluster().cloned() else {
        return Err(ServeError::NotAWorker);
    };
    let credentials = cluster.credentials().clone();
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
    let tls = credentials.acceptor()?;
    let reloader = tls
        .as_ref()
        .map(|t| crate::tls::reload_on_sighup(Arc::clone(&t.cert)));
    let (listener, bound) = crate::serving::listen(addr, "the distributed worker").await?;
    tracing::info!(
        address = %bound,
        tls = tls.is_some(),
        secret = credentials.has_secret(),
        "datafusion-distributed worker listening"
    );
    on_ready(bound);
    // Every call passes the cluster's check first (`distributed/security.rs`).
    let service = InterceptedService::new(worker.into_worker_server(), credentials.admission());
    let router = tonic::transport::Server::builder()
        // A coordinator whose query ends closes its streams; one that vanishes is noticed here.
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .add_service(service);
    let result = match tls {
        None => {
            let incoming =
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
            crate::serving::serve_draining(shutdown, |shutdown| {
                router.serve_with_incoming_shutdown(incoming, shutdown)
            })
            .await
        }
        Some(tls) => {
            let incoming = crate::tls::incoming(listener, tls.acceptor);
            crate::serving::serve_draining(shutdown, |shutdown| {
                router.serve_with_incoming_shutdown(incoming, shutdown)
            })
            .await
        }
    };
    if let Some(r) = reloader {
        r.abort();
    }
    result
}
