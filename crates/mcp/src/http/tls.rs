//! TLS in the server itself, for a gateway that has no reverse proxy in front of it.
//!
//! A bearer token sent over plain HTTP beyond this machine can be read by anyone on the path, and
//! so can every command. `closedloop serve --http ADDR --tls-cert FILE --tls-key FILE` serves
//! HTTPS with rustls (the ring provider, TLS 1.2 and 1.3, no client certificates). The handshake
//! runs on its own task, so a client that opens a connection and stalls mid-handshake holds a
//! connection slot until the idle or request timeout closes it, never the accept loop.

use super::HttpError;
use super::conn::Watched;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A certificate chain and its private key, loaded and checked against each other.
#[derive(Clone)]
pub struct Tls {
    acceptor: TlsAcceptor,
    cert: PathBuf,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key: only where the certificate came from.
        f.debug_struct("Tls").field("cert", &self.cert).finish()
    }
}

impl PartialEq for Tls {
    fn eq(&self, other: &Tls) -> bool {
        self.cert == other.cert
    }
}

impl Eq for Tls {}

impl Tls {
    /// Loads a PEM certificate chain (leaf first) and a PEM private key (PKCS#8, PKCS#1 or
    /// SEC1). Fails naming the file and what was wrong with it, or when the key does not belong
    /// to the certificate.
    pub fn load(cert: &Path, key: &Path) -> Result<Tls, HttpError> {
        let bad = |path: &Path, why: String| HttpError::Tls(format!("{}: {why}", path.display()));
        let pem = std::fs::read(cert).map_err(|e| bad(cert, e.to_string()))?;
        let chain = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(cert, format!("not a PEM certificate chain ({e})")))?;
        if chain.is_empty() {
            return Err(bad(
                cert,
                "no `-----BEGIN CERTIFICATE-----` block: give the server's certificate chain, \
                 leaf first, in PEM"
                    .into(),
            ));
        }
        let pem = std::fs::read(key).map_err(|e| bad(key, e.to_string()))?;
        let private = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
            bad(
                key,
                format!("no PEM private key (PKCS#8, PKCS#1 or SEC1) in it ({e})"),
            )
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| HttpError::Tls(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(|e| {
                HttpError::Tls(format!(
                    "{} and {} do not make a usable pair: {e}",
                    cert.display(),
                    key.display()
                ))
            })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            cert: cert.to_path_buf(),
        })
    }

    /// Runs the server side of the handshake on an accepted connection.
    pub(crate) async fn accept(&self, stream: Watched) -> io::Result<Conn> {
        let tls = self.acceptor.accept(stream).await?;
        Ok(Conn::Tls(Box::new(tls)))
    }
}

/// One served connection: plain HTTP, or HTTPS over the same watched socket (so the idle and
/// request timeouts count the encrypted bytes, handshake included).
pub enum Conn {
    /// Plain HTTP.
    Plain(Watched),
    /// HTTPS, after a completed handshake.
    Tls(Box<TlsStream<Watched>>),
}

impl Conn {
    /// The address this connection arrived on.
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.watched().local_addr()
    }

    /// The watched socket under it.
    pub fn watched(&self) -> &Watched {
        match self {
            Conn::Plain(w) => w,
            Conn::Tls(t) => t.get_ref().0,
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(w) => Pin::new(w).poll_read(cx, buf),
            Conn::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(w) => Pin::new(w).poll_write(cx, data),
            Conn::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(w) => Pin::new(w).poll_flush(cx),
            Conn::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(w) => Pin::new(w).poll_shutdown(cx),
            Conn::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }
}
