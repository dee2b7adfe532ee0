//! TLS for the Flight SQL listener (`[server.tls]`): rustls through tokio-rustls, the
//! certificate reloaded on SIGHUP, client certificates required when `client_ca` is set (mTLS).
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

/// The server certificate and key, read from their files again by [`Self::reload`].
#[derive(Debug)]
pub struct ReloadableCert {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

impl ReloadableCert {
    fn load(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, String> {
        let chain = CertificateDer::pem_file_iter(cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("TLS certificate {}: {e}", cert.display()))?;
        if chain.is_empty() {
            return Err(format!(
                "TLS certificate {}: no certificate in the file",
                cert.display()
            ));
        }
        let private = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| format!("TLS key {}: {e}", key.display()))?;
        CertifiedKey::from_der(chain, private, provider).map_err(|e| {
            format!(
                "TLS key {} does not fit certificate {}: {e}",
                key.display(),
                cert.display()
            )
        })
    }

    /// Reads the certificate and key files again; new connections use them. On error the
    /// current pair stays.
    ///
    /// Errors: a file that cannot be read or parsed, or a key that does not fit the
    /// certificate, as one line naming the file.
    pub fn reload(&self) -> Result<(), String> {
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
    /// Errors: a file that cannot be read or parsed, as one line naming it.
    pub fn from_config(config: &TlsConfig) -> Result<Self, String> {
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
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = match &config.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                let certs = CertificateDer::pem_file_iter(ca)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| format!("TLS client CA {}: {e}", ca.display()))?;
                for c in certs {
                    roots
                        .add(c)
                        .map_err(|e| format!("TLS client CA {}: {e}", ca.display()))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|e| format!("TLS client CA {}: {e}", ca.display()))?;
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
