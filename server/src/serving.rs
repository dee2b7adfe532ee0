//! What every server of the process shares (the Flight SQL service, a worker, `/metrics`): the
//! listener, the drain on shutdown, and the one error type they stop with.

use std::net::SocketAddr;
use std::time::Duration;

use crate::config::ConfigError;
use crate::tls;

/// Why a server (Flight SQL, a worker, `/metrics`) could not start or stopped with an error; one
/// line each.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// `server.metrics_listen` is not an address.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `[server.tls]`'s files.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// An address to listen on cannot be bound (in use, not local, no permission).
    #[error("cannot listen on {addr} for {what}: {source}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// `Flight SQL`, `metrics`, `the distributed worker`.
        what: &'static str,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The engine cannot make the anonymous session (its default catalog).
    #[error("{}", crate::message::message(.0))]
    Engine(datafusion::error::DataFusionError),
    /// `worker::serve` on an engine whose `distributed.role` is not `worker`.
    #[error("serving a worker needs an engine with distributed.role = \"worker\"")]
    NotAWorker,
    /// The server task ended before its listener was open.
    #[error("the Flight SQL server stopped before it listened")]
    Stopped,
    /// tonic's server failed while serving.
    #[error("server error: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// How long open result streams may run after a shutdown signal.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// A listener on `addr` and the address it bound (port 0 picks a free one); `what` names the
/// server in the error.
pub(crate) async fn listen(
    addr: SocketAddr,
    what: &'static str,
) -> Result<(tokio::net::TcpListener, SocketAddr), ServeError> {
    let bound = async {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        Ok((listener, bound))
    };
    bound
        .await
        .map_err(|source| ServeError::Listen { addr, what, source })
}

/// Runs the server `serve` builds with a shutdown future until `shutdown` resolves; then its
/// open streams get [`DRAIN_TIMEOUT`] to finish before it stops anyway (a client that stalls
/// its stream must not keep the process alive). Used by the Flight SQL server and by workers.
///
/// Errors: tonic's ([`ServeError::Transport`]).
pub async fn serve_draining<F>(
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    serve: impl FnOnce(std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>) -> F,
) -> Result<(), ServeError>
where
    F: std::future::Future<Output = Result<(), tonic::transport::Error>>,
{
    let (fired_tx, fired_rx) = tokio::sync::oneshot::channel::<()>();
    let shutdown = Box::pin(async move {
        shutdown.await;
        let _ = fired_tx.send(());
    });
    let server = serve(shutdown);
    let drain_deadline = async move {
        if fired_rx.await.is_ok() {
            tokio::time::sleep(DRAIN_TIMEOUT).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        r = server => r.map_err(ServeError::Transport),
        _ = drain_deadline => {
            tracing::warn!("open streams did not finish within {DRAIN_TIMEOUT:?}; stopping");
            Ok(())
        }
    }
}
