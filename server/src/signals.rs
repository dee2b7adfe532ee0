//! SIGINT and SIGTERM: what stops a server, and what interrupts a load so it can remove what it
//! wrote before the process ends.
//!
//! ```text
//!   signal ──► shutdown_signal() ──► serve drains and returns           (serve, demo)
//!   signal ──► LoadInterrupt ──► CancellationToken ──► load cleans up   (load, demo's first start)
//!              second signal ──► exit now (130)
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use tokio_util::sync::CancellationToken;

/// Exit status of a process ended by SIGINT (128 + 2), the shell's convention.
pub const EXIT_SIGINT: i32 = 130;
/// Exit status of a process ended by SIGTERM (128 + 15).
pub const EXIT_SIGTERM: i32 = 143;

/// Registers SIGINT and SIGTERM now and returns a future that resolves on the first of them
/// with the exit status it stands for ([`EXIT_SIGINT`], [`EXIT_SIGTERM`]). Registering at the
/// call, not at the first poll, means a signal that arrives while a server is still starting
/// (after it printed that it listens, before it polls this future) stops it cleanly instead of
/// killing the process.
pub fn shutdown_signal() -> impl std::future::Future<Output = i32> + Send + 'static {
    let mut signals = Signals::register();
    async move {
        let code = signals.next().await;
        tracing::info!("shutting down");
        code
    }
}

/// Listens for SIGINT and SIGTERM while a load runs: the first cancels [`Self::token`] (the
/// load then removes what it wrote), a second ends the process at once with status 130.
pub struct LoadInterrupt {
    token: CancellationToken,
    code: Arc<AtomicI32>,
    task: tokio::task::JoinHandle<()>,
}

impl LoadInterrupt {
    /// Starts listening. Signals are registered before this returns, so none is missed.
    pub fn listen() -> Self {
        let token = CancellationToken::new();
        let code = Arc::new(AtomicI32::new(0));
        let mut signals = Signals::register();
        let task = tokio::spawn({
            let (token, code) = (token.clone(), Arc::clone(&code));
            async move {
                code.store(signals.next().await, Ordering::SeqCst);
                eprintln!(
                    "interrupted: removing what the load wrote (press Ctrl-C again to quit at once)"
                );
                token.cancel();
                signals.next().await;
                eprintln!(
                    "error: stopped at once; the load's tables may remain (`iceflight demo` \
                     reloads incomplete demo data, `load --replace` overwrites a namespace)"
                );
                std::process::exit(EXIT_SIGINT);
            }
        });
        Self { token, code, task }
    }

    /// The token a load watches ([`iceflight_datagen::load::LoadOptions::cancel`]).
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Stops listening; returns the exit status of the signal that cancelled the load, if one
    /// did.
    pub fn finish(self) -> Option<i32> {
        match self.code.load(Ordering::SeqCst) {
            0 => None,
            code => Some(code),
        }
    }
}

impl Drop for LoadInterrupt {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// SIGINT and SIGTERM streams, registered when made (a future of `tokio::signal` registers
/// only when first polled, and a signal before that would kill the process).
struct Signals {
    #[cfg(unix)]
    streams: [Option<tokio::signal::unix::Signal>; 2],
}

impl Signals {
    fn register() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Self {
                streams: [SignalKind::interrupt(), SignalKind::terminate()].map(|k| signal(k).ok()),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// The next signal's exit status.
    async fn next(&mut self) -> i32 {
        #[cfg(unix)]
        {
            let [int, term] = &mut self.streams;
            tokio::select! {
                Some(_) = async { int.as_mut()?.recv().await } => EXIT_SIGINT,
                Some(_) = async { term.as_mut()?.recv().await } => EXIT_SIGTERM,
                else => std::future::pending().await,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            EXIT_SIGINT
        }
    }
}
