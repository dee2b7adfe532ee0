//! The client connections of the Flight SQL listener, each of which tells the sessions when it
//! closes (`sessions.rs`, "Clients that go").
//!
//! ```text
//!   accepted TCP (or TLS) stream ──► Sessions::connected(peer), Tracked { stream, peer } ──► tonic
//!   dropped by tonic (the client closed it, or it failed) ──► Sessions::disconnected(peer)
//! ```
//!
//! A connection is named by its peer address (IP and port), which is unique among open TCP
//! connections and which tonic gives every request (`Request::remote_addr`): `Tracked` keeps
//! the stream's own connect info, so requests see the same address it reports.

use std::io::IoSlice;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tonic::transport::server::Connected;

use super::sessions::Sessions;

/// A stream whose peer address can be read: plain TCP, or TLS over it.
pub trait Peer {
    /// The client's address, if the socket still knows it.
    fn peer(&self) -> Option<SocketAddr>;
}

impl Peer for TcpStream {
    fn peer(&self) -> Option<SocketAddr> {
        self.peer_addr().ok()
    }
}

impl Peer for tokio_rustls::server::TlsStream<TcpStream> {
    fn peer(&self) -> Option<SocketAddr> {
        self.get_ref().0.peer_addr().ok()
    }
}

/// An accepted client connection that reports its end to the sessions when dropped.
pub struct Tracked<S> {
    stream: S,
    peer: Option<SocketAddr>,
    sessions: Arc<Sessions>,
}

impl<S> Drop for Tracked<S> {
    fn drop(&mut self) {
        if let Some(peer) = self.peer {
            let parked = self.sessions.disconnected(peer);
            if parked > 0 {
                tracing::debug!(%peer, sessions = parked, "client connection closed; sessions parked");
            }
        }
    }
}

/// `incoming` with each connection [`Tracked`] for `sessions`.
pub fn tracked<S, E>(
    incoming: impl Stream<Item = Result<S, E>> + Send + 'static,
    sessions: Arc<Sessions>,
) -> impl Stream<Item = Result<Tracked<S>, E>> + Send + 'static
where
    S: Peer + Send + 'static,
    E: Send + 'static,
{
    incoming.map(move |accepted| {
        accepted.map(|stream| {
            let peer = stream.peer();
            if let Some(peer) = peer {
                sessions.connected(peer);
            }
            Tracked {
                peer,
                stream,
                sessions: Arc::clone(&sessions),
            }
        })
    })
}

impl<S: Connected> Connected for Tracked<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
