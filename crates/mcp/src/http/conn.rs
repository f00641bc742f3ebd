//! Connections as a scarce resource: at most [`HttpOptions::max_connections`] open at once, none
//! held by a peer that has gone quiet, and none kept from a peer that authenticates by one that
//! never does (`admission.rs` decides who keeps a slot when they are all taken).
//!
//! Found on main: 1,500 connections that never sent a byte all stayed open after 35 s, each a
//! file descriptor, and the process's Modbus, MQTT and journal descriptors were next to run
//! out. The listener here wraps axum's: a connection beyond the cap is closed as soon as it is
//! accepted (one log line a second at most, with the count left out), and every connection is
//! closed once no byte has moved either way for [`HttpOptions::idle_timeout`] — a peer that
//! never sends its request, stops halfway through its headers or body, or keeps an idle
//! keep-alive connection. An SSE stream stays open: the server writes to it every 15 s. A peer
//! that trickles its request a byte at a time (never quiet, never done) is closed once the
//! request has been arriving for [`HttpOptions::request_timeout`] without an answer begun. A
//! connection whose first request head has not arrived within
//! [`HttpOptions::handshake_timeout`] (5 s) is closed: an outsider's silent connections give
//! their slots back in seconds, not in a minute.
//!
//! [`HttpOptions::max_connections`]: super::HttpOptions::max_connections
//! [`HttpOptions::idle_timeout`]: super::HttpOptions::idle_timeout
//! [`HttpOptions::request_timeout`]: super::HttpOptions::request_timeout
//! [`HttpOptions::handshake_timeout`]: super::HttpOptions::handshake_timeout

use super::admission::{Admission, ConnState, Refused, Slot};
use super::throttle::Throttle;
use super::tls::{Conn, Tls};
use std::future::Future as _;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::Sleep;

/// A listener that caps open connections, closes quiet ones, and (with [`Tls`]) runs each
/// TLS handshake on its own task.
pub struct Guarded {
    inner: TcpListener,
    slots: Arc<Admission>,
    limits: Limits,
    tls: Option<Tls>,
    handshakes: JoinSet<Result<(Conn, SocketAddr), (SocketAddr, String)>>,
    refused: Throttle,
    failed: Throttle,
}

/// How long a connection may be quiet, and how long a request may take to arrive.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// No byte either way for this long: closed.
    pub idle: Duration,
    /// A request still arriving this long after its first byte, with no answer begun: closed.
    /// A TLS handshake gets as long.
    pub request: Duration,
    /// No complete request head this long after the connection opened: closed.
    pub handshake: Duration,
}

impl Guarded {
    /// Wraps `inner`: at most `max` connections open (at most `per_peer` of them never
    /// authenticated, per peer address), each held to `limits`, each served over TLS when
    /// `tls` is given.
    pub fn new(
        inner: TcpListener,
        (max, per_peer): (usize, usize),
        limits: Limits,
        tls: Option<Tls>,
    ) -> Guarded {
        Guarded {
            inner,
            slots: Admission::new(max, per_peer),
            limits,
            tls,
            handshakes: JoinSet::new(),
            refused: Throttle::new_at(Instant::now()),
            failed: Throttle::new_at(Instant::now()),
        }
    }

    /// A slot for a new connection (another evicted for it when they are all taken), or
    /// `None` (the connection dropped, so closed) when none may be had.
    fn admit(&mut self, stream: TcpStream, addr: SocketAddr) -> Option<Watched> {
        match self.slots.admit(addr.ip()) {
            Ok((state, slot)) => Some(Watched::new(stream, (state, slot), self.limits)),
            Err(why) => {
                drop(stream);
                let reason = match why {
                    Refused::Full => "full",
                    Refused::PerPeer => "per_peer",
                };
                metrics::counter!("closedloop_http_connections_refused_total", "reason" => reason)
                    .increment(1);
                if let Some(left_out) = self.refused.allow() {
                    let why = match why {
                        Refused::Full => "every slot is held by a connection that authenticated",
                        Refused::PerPeer => {
                            "this address holds its share of connections that never authenticated"
                        }
                    };
                    tracing::warn!(%addr, left_out, "HTTP connection refused: {why}");
                }
                None
            }
        }
    }

    /// Starts the handshake of an admitted connection; it ends in `handshakes`.
    fn handshake(&mut self, tls: Tls, watched: Watched, addr: SocketAddr) {
        let limit = self.limits.request;
        self.handshakes.spawn(async move {
            match tokio::time::timeout(limit, tls.accept(watched)).await {
                Ok(Ok(conn)) => Ok((conn, addr)),
                Ok(Err(e)) => Err((addr, e.to_string())),
                Err(_) => Err((addr, format!("handshake unfinished after {limit:?}"))),
            }
        });
    }
}

impl axum::serve::Listener for Guarded {
    type Io = Conn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Conn, SocketAddr) {
        loop {
            tokio::select! {
                Some(done) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    match done {
                        Ok(Ok(served)) => return served,
                        Ok(Err((addr, why))) => {
                            if let Some(left_out) = self.failed.allow() {
                                tracing::warn!(%addr, left_out, "TLS handshake failed: {why}");
                            }
                        }
                        Err(e) => tracing::error!("TLS handshake task ended: {e}"),
                    }
                }
                (stream, addr) = axum::serve::Listener::accept(&mut self.inner) => {
                    let Some(watched) = self.admit(stream, addr) else { continue };
                    match self.tls.clone() {
                        None => return (Conn::Plain(watched), addr),
                        Some(tls) => self.handshake(tls, watched, addr),
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// An accepted connection: its slot is given back when it closes, and it fails with
/// `TimedOut` once no byte has moved for the idle timeout, once its first request head has not
/// arrived within the handshake window, and with `ConnectionAborted` once another connection
/// evicted it.
pub struct Watched {
    stream: TcpStream,
    state: Arc<ConnState>,
    /// Given back to the table when the connection closes.
    _slot: Slot,
    limits: Limits,
    quiet: Pin<Box<Sleep>>,
    /// Ends the handshake window.
    handshake: Pin<Box<Sleep>>,
    /// When the peer began sending what the server has not answered yet.
    sending_since: Option<Instant>,
}

impl Watched {
    fn new(stream: TcpStream, (state, slot): (Arc<ConnState>, Slot), limits: Limits) -> Watched {
        metrics::gauge!("closedloop_http_connections").increment(1.0);
        Watched {
            stream,
            state,
            _slot: slot,
            quiet: Box::pin(tokio::time::sleep(limits.idle)),
            handshake: Box::pin(tokio::time::sleep(limits.handshake)),
            limits,
            sending_since: None,
        }
    }

    /// The peer sent bytes: an error when its request has been arriving for too long.
    fn received(&mut self) -> io::Result<()> {
        self.moved();
        let since = *self.sending_since.get_or_insert_with(Instant::now);
        if since.elapsed() > self.limits.request {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("a request still arriving after {:?}", self.limits.request),
            ));
        }
        Ok(())
    }

    /// The address this connection arrived on.
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.stream.local_addr()
    }

    /// What this connection has shown of itself, for the requests on it.
    pub fn state(&self) -> &Arc<ConnState> {
        &self.state
    }

    /// An error once another connection took this one's slot.
    fn check_evicted(&self) -> io::Result<()> {
        match self.state.is_evicted() {
            true => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "evicted for a newer connection: this one never authenticated",
            )),
            false => Ok(()),
        }
    }

    /// Bytes moved: the quiet period starts again.
    fn moved(&mut self) {
        let next = tokio::time::Instant::now() + self.limits.idle;
        self.quiet.as_mut().reset(next);
    }

    /// Called when the stream has nothing now: an error once the quiet period or the handshake
    /// window is over, or once evicted (the eviction wakes this task).
    fn check_quiet(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        self.state.park(cx.waker());
        self.check_evicted()?;
        if !self.state.is_headed() && self.handshake.as_mut().poll(cx).is_ready() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no request head within {:?}", self.limits.handshake),
            ));
        }
        match self.quiet.as_mut().poll(cx) {
            Poll::Ready(()) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no byte either way for {:?}", self.limits.idle),
            )),
            Poll::Pending => Ok(()),
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        metrics::gauge!("closedloop_http_connections").decrement(1.0);
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check_evicted()?;
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if buf.filled().len() > before => Poll::Ready(self.received()),
            Poll::Ready(r) => Poll::Ready(r),
            Poll::Pending => {
                self.check_quiet(cx)?;
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.check_evicted()?;
        match Pin::new(&mut self.stream).poll_write(cx, data) {
            Poll::Ready(r) => {
                if matches!(r, Ok(n) if n > 0) {
                    // An answer has begun: the request it answers arrived.
                    self.sending_since = None;
                    self.moved();
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                self.check_quiet(cx)?;
                Poll::Pending
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
