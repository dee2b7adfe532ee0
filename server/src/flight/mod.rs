//! The Arrow Flight SQL server.
//!
//! ```text
//!   client ──gRPC──► tonic Server ──► FlightServiceServer<IceflightService>
//!                        service.rs: authorize (auth.rs, login_throttle.rs, sessions.rs), one
//!                        method per command
//!                        planner.rs: SQL → Planned (GetFlightInfo); execution.rs: runs it (DoGet)
//!                        binding.rs: prepared statements' parameters, one row or many
//!                        metadata.rs / sql_info.rs: metadata commands; results.rs: Arrow → Flight
//!                        ingest.rs: bulk ingest (DoPut CommandStatementIngest) into Iceberg tables
//!   ([server.tls]: TCP ──► tls.rs handshake ──► tonic; SIGHUP reloads the certificate)
//!   connections.rs: each connection's close parks the sessions it was the last one of
//! ```

pub mod auth;
pub mod binding;
pub mod connections;
pub mod execution;
pub mod ingest;
pub mod jwt;
pub mod login_throttle;
pub mod metadata;
pub(crate) mod metrics;
pub mod planner;
pub mod results;
pub mod service;
pub use iceflight_input::session_options;
pub mod sessions;
pub mod sql_info;
pub mod status;

pub use crate::serving::{DRAIN_TIMEOUT, ServeError, serve_draining};

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arrow_flight::flight_service_server::FlightServiceServer;

use crate::config::{ConfigError, ServerConfig};
use crate::session::Engine;
use crate::tls;
use auth::{UserError, Users};
use service::{IceflightService, ServiceOptions};
use sessions::Sessions;

/// Builds the user list from the configuration and `--user NAME:PASSWORD` flags.
///
/// Errors: a hash that does not parse, a flag that is not `NAME:PASSWORD`, or no user at all
/// while login is required.
pub fn users(config: &ServerConfig, quick: &[String]) -> Result<Users, UserError> {
    let mut users = Users::default();
    for u in &config.users {
        users.add_hash(&u.name, &u.password_hash)?;
        users.set_groups(&u.name, u.groups.clone());
    }
    for spec in quick {
        users.add_plain(spec)?;
    }
    if config.auth_required() && users.is_empty() && config.jwt.is_none() {
        return Err(UserError::NoUsers);
    }
    Ok(users)
}

/// Serves `engine` with `users` on a free loopback port, in a task of the current runtime that
/// runs until the runtime ends (tests, benchmarks); its address once it listens.
///
/// Errors: [`serve`]'s, or [`ServeError::Stopped`] when the server task ended without one.
pub async fn serve_on_loopback(engine: Engine, users: Users) -> Result<SocketAddr, ServeError> {
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(serve(
        engine,
        users,
        SocketAddr::from(([127, 0, 0, 1], 0)),
        std::future::pending(),
        move |a| {
            let _ = ready_tx.send(a);
        },
    ));
    match ready_rx.await {
        Ok(addr) => Ok(addr),
        Err(_) => Err(match server.await {
            Ok(Err(e)) => e,
            _ => ServeError::Stopped,
        }),
    }
}

/// Serves Flight SQL on `addr` until `shutdown` resolves (SIGINT/SIGTERM in the CLI).
/// `on_ready` is called with the bound address once the listener is open.
///
/// Errors: [`ServeError`]: `server.metrics_listen`, the metrics or Flight SQL address
/// that cannot be bound, the engine's default catalog, the TLS files, tonic while serving.
pub async fn serve(
    engine: Engine,
    users: Users,
    addr: SocketAddr,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    on_ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let server = engine.config().server.clone();
    let sessions = Arc::new(
        Sessions::new(
            server.session_ttl.max(Duration::from_secs(1)),
            server.prepared_statement_ttl.max(Duration::from_secs(1)),
        )
        .with_max_per_user(server.max_sessions_per_user),
    );
    let options = ServiceOptions {
        auth_required: server.auth_required(),
        limits: execution::Limits {
            max_concurrent_queries: server.max_concurrent_queries.max(1),
            max_queries_per_user: server.max_queries_per_user,
            queue_timeout: server.queue_timeout,
            // Checked by `Config::validate` when the engine connected.
            timeout: engine.config().query.timeout,
            max_result_bytes: engine.config().query.max_result_bytes(),
            stream_idle_timeout: (!server.stream_idle_timeout.is_zero())
                .then_some(server.stream_idle_timeout),
        },
        max_failed_logins: server.max_failed_logins,
        login_lockout: server.login_lockout,
        max_sessions: server.max_sessions,
        admins: server.admins.clone(),
        rules: Arc::new(match &server.access_rules {
            Some(path) => crate::access::RulesSource::load(&crate::config::absolute(path))
                .map_err(|e| ConfigError::Invalid(e.to_string()))?,
            None => crate::access::RulesSource::allow_all(),
        }),
        files: Arc::new(
            crate::access::FileRoots::new("query.file_roots", &engine.config().query.file_roots)
                .map_err(ConfigError::Invalid)?,
        ),
        session_limits: sessions::SessionLimits {
            max_prepared: server.max_prepared_statements.max(1),
            max_bound_bytes: server.max_pending_parameter_bytes.bytes(),
        },
        jwt: match &server.jwt {
            Some(config) => Some(Arc::new(
                jwt::JwtLogin::load(config)
                    .await
                    .map_err(ConfigError::Invalid)?,
            )),
            None => None,
        },
    };
    if server.auth_required() && server.access_rules.is_none() {
        tracing::info!("no [server] access_rules: every user may read and change every table");
    }
    engine.attach_sessions(Arc::clone(&sessions) as Arc<dyn crate::system::SessionDirectory>);
    if let Some(listen) = &server.metrics_listen {
        let addr: SocketAddr = listen
            .parse()
            .map_err(|e| ConfigError::Invalid(format!("server.metrics_listen {listen}: {e}")))?;
        let registry = metrics::registry(&engine, Arc::clone(&sessions));
        let bound = metrics::serve(addr, registry).await?;
        tracing::info!(address = %bound, "metrics listening on /metrics");
    }
    let service = IceflightService::try_new(engine, users, Arc::clone(&sessions), options)
        .map_err(ServeError::Engine)?;
    let (listener, bound) = crate::serving::listen(addr, "Flight SQL").await?;
    // Expire idle sessions and prepared statements in the background.
    let sweeper = tokio::spawn({
        let service = service.clone();
        async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let (s, p) = service.expire();
                if s + p > 0 {
                    tracing::debug!(
                        sessions = s,
                        prepared_statements = p,
                        "expired idle handles"
                    );
                }
            }
        }
    });
    let tls = server.tls.as_ref().map(tls::Tls::from_config).transpose()?;
    let reloader = tls
        .as_ref()
        .map(|t| tls::reload_on_sighup(Arc::clone(&t.cert)));
    tracing::info!(address = %bound, tls = tls.is_some(), "Flight SQL server listening");
    on_ready(bound);
    // grpc.health.v1 beside Flight SQL: SERVING while the server runs.
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<FlightServiceServer<IceflightService>>()
        .await;
    let router = tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(
            FlightServiceServer::new(service)
                .max_decoding_message_size(64 * 1024 * 1024)
                .max_encoding_message_size(64 * 1024 * 1024),
        );
    let result = match tls {
        // TCP_NODELAY: small responses (SELECT 1, metadata) must not wait for delayed ACKs.
        None => {
            let incoming =
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
            let incoming = connections::tracked(incoming, Arc::clone(&sessions));
            serve_draining(shutdown, |shutdown| {
                router.serve_with_incoming_shutdown(incoming, shutdown)
            })
            .await
        }
        Some(tls) => {
            let incoming = tls::incoming(listener, tls.acceptor);
            let incoming = connections::tracked(incoming, Arc::clone(&sessions));
            serve_draining(shutdown, |shutdown| {
                router.serve_with_incoming_shutdown(incoming, shutdown)
            })
            .await
        }
    };
    sweeper.abort();
    if let Some(r) = reloader {
        r.abort();
    }
    result
}
