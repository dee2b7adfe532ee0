//! TLS for the Flight SQL listener (`[server.tls]`) and a worker's (`[distributed.tls]`,
//! `distributed/security.rs`): rustls through tokio-rustls, the certificate reloaded on SIGHUP,
//! client certificates required when `client_ca` is set (mTLS; always for a worker).
//!
//! ```text
//!   TCP accept ──► TLS handshake (its own task, at most HANDSHAKE_TIMEOUT) ──► tonic (h2 by ALPN)
//!                    certificate: ReloadableCert (swapped whole on reload; open connections keep
//!                    the one they started with)
//! ```
//!
//! A plaintext client gets no answer it can read: its first bytes fail the handshake, which
//! closes the connection. Certificate and key are PEM files; the key is PKCS#8, PKCS#1 or SEC1.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::Stream;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::config::TlsConfig;

/// A handshake that has not finished by then is dropped (a client that connects and sends
/// nothing must not hold a task).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the TLS files of `[server.tls]` cannot serve: each names the file and the reason, in one
/// line.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file cannot be read or is not PEM.
    #[error("TLS certificate {}: {source}", path.display())]
    Certificate {
        /// `server.tls.cert`.
        path: PathBuf,
        /// rustls-pki-types' PEM reader error.
        source: rustls::pki_types::pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("TLS certificate {}: no certificate in the file", path.display())]
    NoCertificate {
        /// `server.tls.cert`.
        path: PathBuf,
    },
    /// The key file cannot be read or holds no PKCS#8, PKCS#1 or SEC1 key.
    #[error("TLS key {}: {source}", path.display())]
    Key {
        /// `server.tls.key`.
        path: PathBuf,
        /// rustls-pki-types' PEM reader error.
        source: rustls::pki_types::pem::Error,
    },
    /// The key is not the certificate's.
    #[error("TLS key {} does not fit certificate {}: {source}", key.display(), cert.display())]
    KeyMismatch {
        /// `server.tls.key`.
        key: PathBuf,
        /// `server.tls.cert`.
        cert: PathBuf,
        /// rustls's reason.
        source: rustls::Error,
    },
    /// The client CA file cannot be read, holds a certificate rustls refuses as a root, or no
    /// usable root at all.
    #[error("TLS client CA {}: {source}", path.display())]
    ClientCa {
        /// `server.tls.client_ca`.
        path: PathBuf,
        /// The PEM reader's, rustls's or the client verifier builder's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// rustls refuses its own default protocol versions with this provider.
    #[error("TLS: {0}")]
    Protocols(rustls::Error),
}

/// The server certificate and key, read from their files again by [`Self::reload`].
#[derive(Debug)]
pub struct ReloadableCert {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

impl ReloadableCert {
    fn load(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
        let chain = CertificateDer::pem_file_iter(cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|source| TlsError::Certificate {
                path: cert.to_path_buf(),
                source,
            })?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate {
                path: cert.to_path_buf(),
            });
        }
        let private = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::Key {
            path: key.to_path_buf(),
            source,
        })?;
        CertifiedKey::from_der(chain, private, provider).map_err(|source| TlsError::KeyMismatch {
            key: key.to_path_buf(),
            cert: cert.to_path_buf(),
            source,
        })
    }

    /// Reads the certificate and key files again; new connections use them. On error the
    /// current pair stays.
    ///
    /// Errors: a file that cannot be read or parsed, or a key that does not fit the
    /// certificate ([`TlsError`]).
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = Self::load(&self.cert, &self.key, &self.provider)?;
        *self.current.write().expect("certificate lock") = Arc::new(fresh);
        Ok(())
    }
}

impl ResolvesServerCert for ReloadableCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.current.read().expect("certificate lock")))
    }
}

/// The TLS side of a listener: the acceptor and the certificate it serves (to reload).
pub struct Tls {
    pub acceptor: TlsAcceptor,
    pub cert: Arc<ReloadableCert>,
}

impl Tls {
    /// Reads `config`'s files and builds the acceptor: TLS 1.2 and 1.3 (rustls's safe
    /// defaults, aws-lc-rs), ALPN `h2`, client certificates signed by `client_ca` required when
    /// it is set.
    ///
    /// Errors: a file that cannot be read or parsed ([`TlsError`]).
    pub fn from_config(config: &TlsConfig) -> Result<Self, TlsError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let cert = Arc::new(ReloadableCert {
            current: RwLock::new(Arc::new(ReloadableCert::load(
                &config.cert,
                &config.key,
                &provider,
            )?)),
            cert: config.cert.clone(),
            key: config.key.clone(),
            provider: Arc::clone(&provider),
        });
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Protocols)?;
        let builder = match &config.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let client_ca =
                    |source: Box<dyn std::error::Error + Send + Sync>| TlsError::ClientCa {
                        path: ca.clone(),
                        source,
                    };
                let mut roots = rustls::RootCertStore::empty();
                let certs = CertificateDer::pem_file_iter(ca)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| client_ca(e.into()))?;
                for c in certs {
                    roots.add(c).map_err(|e| client_ca(e.into()))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|e| client_ca(e.into()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut server = builder.with_cert_resolver(Arc::clone(&cert) as _);
        server.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Self {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            cert,
        })
    }
}

/// The TLS connections of `listener`: each accepted TCP connection (TCP_NODELAY) shaken hands
/// on a task of its own, so that a slow or silent client delays no other. A failed handshake
/// (a plaintext client, an untrusted client certificate) is logged and dropped.
pub fn incoming(
    listener: TcpListener,
    acceptor: TlsAcceptor,
) -> impl Stream<Item = std::io::Result<TlsStream<TcpStream>>> {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let (handshake, out) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake.accept(tcp)).await {
                    Ok(Ok(stream)) => {
                        let _ = out.send(Ok(stream)).await;
                    }
                    // At warn: a refused client certificate must show under the default filter.
                    Ok(Err(e)) => tracing::warn!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => tracing::info!(%peer, "TLS handshake timed out"),
                }
            });
            if tx.is_closed() {
                return;
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// Reads the TLS certificate and key again on every SIGHUP, logging the outcome (a failed
/// reload keeps the current pair).
pub fn reload_on_sighup(cert: Arc<ReloadableCert>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Ok(mut hangups) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            tracing::warn!("cannot listen for SIGHUP: the TLS certificate is not reloaded");
            return;
        };
        while hangups.recv().await.is_some() {
            match cert.reload() {
                Ok(()) => tracing::info!("SIGHUP: TLS certificate reloaded"),
                Err(e) => tracing::error!(error = %e, "SIGHUP: TLS certificate not reloaded"),
            }
        }
    })
}
