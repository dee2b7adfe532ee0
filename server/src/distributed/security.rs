//! Who may call a worker: the cluster's shared secret and mutual TLS (`[distributed]
//! secret_file`, `[distributed.tls]`).
//!
//! ```text
//!   caller (coordinator, or a worker reading another's shuffle)      worker
//!     ClusterCredentials::endpoint(url) ── https: the CA's roots, ──► tls::incoming: a client
//!                                          our certificate              certificate the CA signed,
//!                                                                       else no handshake (logged)
//!     ClusterCredentials::client(channel) ── every call carries ───► Admission: the same secret
//!                                          `authorization: Bearer`      (constant time), else
//!                                          + the secret                 Unauthenticated (logged
//!                                                                       with the caller's address)
//! ```
//!
//! Either is enough to admit only the cluster's members; both together keep the secret off the
//! wire. A worker listening beyond loopback with neither refuses to start unless
//! `allow_unauthenticated` is set (`cli.rs`), since it runs whatever plan reaches it with its
//! catalogs' credentials.

use std::path::Path;
use std::sync::Arc;

use datafusion_distributed::WorkerChannel;
use datafusion_distributed::grpc::{BoxCloneSyncChannel, create_worker_client};
use std::task::{Context, Poll};
use subtle::ConstantTimeEq;
use tonic::body::Body;
use tonic::codegen::Service;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use url::Url;

use crate::config::{ConfigError, DistributedConfig, TlsConfig};
use crate::tls::{Tls, TlsError};

/// Shortest secret accepted, in characters (a hex string of 16 random bytes).
pub const MIN_SECRET_LEN: usize = 32;

/// The header a caller presents the secret in, as `Bearer <secret>`.
const AUTHORIZATION: &str = "authorization";

/// What this process presents to workers and what its worker service admits (module docs).
/// Cheap to clone.
#[derive(Clone, Default)]
pub struct ClusterCredentials {
    secret: Option<Arc<str>>,
    tls: Option<Arc<ClusterTls>>,
}

/// `[distributed.tls]`'s files, read once.
struct ClusterTls {
    /// The paths, for a worker's listener (it reads them itself, and again on SIGHUP).
    files: TlsConfig,
    /// The same files' text, for callers.
    ca: String,
    cert: String,
    key: String,
}

impl std::fmt::Debug for ClusterCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCredentials")
            .field("secret", &self.secret.as_ref().map(|_| "…"))
            .field("tls", &self.tls.as_ref().map(|t| &t.files))
            .finish()
    }
}

impl ClusterCredentials {
    /// Reads `config.secret_file` and `config.tls`'s files.
    ///
    /// Errors: a file that cannot be read, a secret shorter than [`MIN_SECRET_LEN`] characters
    /// (trailing whitespace trimmed), each one line naming the setting and the file.
    pub fn from_config(config: &DistributedConfig) -> Result<Self, ConfigError> {
        let secret = match &config.secret_file {
            None => None,
            Some(path) => {
                let text = read("distributed.secret_file", path)?;
                let secret = text.trim_end();
                if secret.chars().count() < MIN_SECRET_LEN {
                    return Err(ConfigError::Invalid(format!(
                        "distributed.secret_file {}: the secret has {} characters, at least \
                         {MIN_SECRET_LEN} are needed (e.g. `openssl rand -hex 32`)",
                        path.display(),
                        secret.chars().count()
                    )));
                }
                if MetadataValue::try_from(format!("Bearer {secret}")).is_err() {
                    return Err(ConfigError::Invalid(format!(
                        "distributed.secret_file {}: the secret must be printable ASCII",
                        path.display()
                    )));
                }
                Some(Arc::from(secret))
            }
        };
        let tls = match &config.tls {
            None => None,
            Some(t) => Some(Arc::new(ClusterTls {
                ca: read("distributed.tls.ca", &t.ca)?,
                cert: read("distributed.tls.cert", &t.cert)?,
                key: read("distributed.tls.key", &t.key)?,
                files: TlsConfig {
                    cert: t.cert.clone(),
                    key: t.key.clone(),
                    client_ca: Some(t.ca.clone()),
                },
            })),
        };
        Ok(Self { secret, tls })
    }

    /// Whether a worker with these credentials admits only callers that present them.
    pub fn authenticates(&self) -> bool {
        self.secret.is_some() || self.tls.is_some()
    }

    /// Whether callers speak TLS to workers (their URLs are `https://`).
    pub fn uses_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether a secret is presented.
    pub fn has_secret(&self) -> bool {
        self.secret.is_some()
    }

    /// A lazily connecting endpoint for worker `url`: with the CA's roots and this process's
    /// certificate under `[distributed.tls]`.
    ///
    /// Errors: a URL tonic refuses, or certificate files tonic's TLS cannot use.
    pub fn endpoint(&self, url: &Url) -> Result<Endpoint, ConfigError> {
        let endpoint = Endpoint::from_shared(url.to_string())
            .map_err(|e| ConfigError::Invalid(format!("distributed.workers: {url}: {e}")))?;
        let Some(tls) = &self.tls else {
            return Ok(endpoint);
        };
        let config = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&tls.ca))
            .identity(Identity::from_pem(&tls.cert, &tls.key));
        endpoint.tls_config(config).map_err(|e| {
            // tonic's error says only "transport error"; its sources say why.
            let mut why = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                why = format!("{why}: {s}");
                source = s.source();
            }
            ConfigError::Invalid(format!(
                "distributed.tls ({}, {}): {why}",
                tls.files.cert.display(),
                tls.files.key.display()
            ))
        })
    }

    /// A worker client over `channel` that presents the secret on every call.
    pub fn client(&self, channel: Channel) -> Box<dyn WorkerChannel> {
        let Some(secret) = &self.secret else {
            return create_worker_client(BoxCloneSyncChannel::new(channel));
        };
        let mut value = http::HeaderValue::try_from(format!("Bearer {secret}"))
            .expect("checked printable in from_config");
        // Never indexed by HTTP/2 header compression, hidden from Debug.
        value.set_sensitive(true);
        create_worker_client(BoxCloneSyncChannel::new(WithSecret {
            inner: channel,
            value,
        }))
    }

    /// The worker listener's TLS (server certificate, client certificates the CA signed
    /// required), or `None` without `[distributed.tls]`.
    ///
    /// Errors: as [`Tls::from_config`].
    pub fn acceptor(&self) -> Result<Option<Tls>, TlsError> {
        self.tls
            .as_ref()
            .map(|t| Tls::from_config(&t.files))
            .transpose()
    }

    /// The check a worker runs on every call (module docs).
    pub fn admission(&self) -> Admission {
        Admission {
            secret: self.secret.clone(),
        }
    }
}

/// A channel that adds `authorization: Bearer <secret>` to every request.
#[derive(Clone)]
struct WithSecret {
    inner: Channel,
    value: http::HeaderValue,
}

impl Service<http::Request<Body>> for WithSecret {
    type Response = http::Response<Body>;
    type Error = tonic::transport::Error;
    type Future = <Channel as Service<http::Request<Body>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        request
            .headers_mut()
            .insert(AUTHORIZATION, self.value.clone());
        self.inner.call(request)
    }
}

/// Reads the text of `path`, the file of setting `key`.
fn read(key: &str, path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path)
        .map_err(|e| ConfigError::Invalid(format!("{key} {}: {e}", path.display())))
}

/// A worker's check of every call (a tonic interceptor): without a secret configured, every
/// call passes (TLS, if set, has already checked the caller's certificate); with one, a call
/// that does not present it gets `Unauthenticated` and is logged at warn with the caller's
/// address.
#[derive(Clone)]
pub struct Admission {
    secret: Option<Arc<str>>,
}

impl tonic::service::Interceptor for Admission {
    fn call(&mut self, request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let Some(secret) = &self.secret else {
            return Ok(request);
        };
        let presented = request
            .metadata()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if let Some(p) = presented
            && bool::from(p.as_bytes().ct_eq(secret.as_bytes()))
        {
            return Ok(request);
        }
        let peer = request
            .remote_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|| "unknown".into());
        tracing::warn!(
            %peer,
            presented = if presented.is_some() { "a wrong secret" } else { "no secret" },
            "refused a call to the worker service: the caller is not a member of this cluster"
        );
        Err(tonic::Status::unauthenticated(
            "this worker admits only its cluster's coordinators and workers: present the secret \
             of [distributed] secret_file",
        ))
    }
}
