//! One shared transport per TCP address or serial port, carrying one request at a time for every
//! unit behind it, connecting lazily and reconnecting with backoff.

use std::future::Future;
use std::io;
use std::time::Duration;

use closedloop_contract::{Answer, BoxFuture, TransportError};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Mutex;
use tokio::time::{Instant, sleep_until, timeout_at};

use crate::request::{Reply, Request};
use crate::rtu::RtuTransport;
use crate::tcp::TcpTransport;
use crate::transport::{ExchangeError, Transport};

/// The first wait before reconnecting after a failure; it doubles with each further failure.
pub const BACKOFF_INITIAL: Duration = Duration::from_millis(100);
/// The longest wait between reconnection attempts.
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Opens a fresh transport (a TCP connect, a serial port open).
type Opener = Box<dyn Fn() -> BoxFuture<'static, io::Result<Box<dyn Transport>>> + Send + Sync>;

/// One transport shared by every unit behind an address or serial port.
///
/// # Invariants
/// - At most one request is in flight: the transport lives inside an async mutex and is *taken
///   out* of it for the length of an exchange. Serial lines and most TCP gateways cannot handle
///   pipelined requests, and one-at-a-time keeps every answer attributable.
/// - A transport that failed, or whose request timed out, is dropped and never used again: after
///   a timeout the answer may still arrive, and on a transport without transaction ids (RTU) — or
///   a device that reuses them — it would be taken for the *next* request's answer. A new socket
///   cannot receive the old one's bytes. The same holds when the caller drops the future
///   mid-request (the engine's own timeout): the transport was moved into that future and goes
///   with it.
/// - After a transport failure the next connection attempt waits for a backoff (100 ms, doubling
///   to 5 s, reset by any answer). A request that would have to wait past its own timeout fails
///   at once with `Disconnected` instead of waiting.
pub struct Connection {
    /// What logs and `describe()` call it: `modbus-tcp 127.0.0.1:502`.
    label: String,
    open: Opener,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The open transport between requests; `None` before the first request and after a failure.
    transport: Option<Box<dyn Transport>>,
    /// Consecutive failures since the last answer.
    failures: u32,
    /// No connection attempt before this instant.
    retry_at: Option<Instant>,
    /// Why the last attempt failed, for the `Disconnected` detail during backoff.
    last_error: String,
}

impl State {
    fn failed(&mut self, why: String) {
        let wait = BACKOFF_INITIAL
            .saturating_mul(1u32 << self.failures.min(16))
            .min(BACKOFF_MAX);
        self.failures = self.failures.saturating_add(1);
        self.retry_at = Some(Instant::now() + wait);
        self.last_error = why;
    }

    fn answered(&mut self) {
        self.failures = 0;
        self.retry_at = None;
    }
}

impl Connection {
    fn with_opener(label: String, open: Opener) -> Connection {
        Connection {
            label,
            open,
            state: Mutex::new(State::default()),
        }
    }

    /// A Modbus TCP connection to `address` (`host:port`), opened on the first request.
    pub fn tcp(address: &str) -> Connection {
        let addr = address.to_owned();
        Connection::tcp_over(format!("modbus-tcp {address}"), move || {
            let addr = addr.clone();
            async move {
                let s = tokio::net::TcpStream::connect(addr.as_str()).await?;
                // Requests are tiny and latency is what the engine measures.
                s.set_nodelay(true)?;
                Ok(s)
            }
        })
    }

    /// Modbus TCP framing over streams that `open` returns (a TLS stream, a test's duplex).
    pub fn tcp_over<F, Fut, T>(label: String, open: F) -> Connection
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = io::Result<T>> + Send + 'static,
        T: AsyncRead + AsyncWrite + Send + Unpin + std::fmt::Debug + 'static,
    {
        let open = std::sync::Arc::new(open);
        Connection::with_opener(
            label,
            Box::new(move || {
                let open = open.clone();
                Box::pin(async move {
                    let s = open().await?;
                    Ok(Box::new(TcpTransport::new(s)) as Box<dyn Transport>)
                })
            }),
        )
    }

    /// Modbus RTU framing over streams that `open` returns (a serial port, a pty, a duplex).
    pub fn rtu_over<F, Fut, T>(label: String, open: F) -> Connection
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = io::Result<T>> + Send + 'static,
        T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let open = std::sync::Arc::new(open);
        Connection::with_opener(
            label,
            Box::new(move || {
                let open = open.clone();
                Box::pin(async move {
                    let s = open().await?;
                    Ok(Box::new(RtuTransport::new(s)) as Box<dyn Transport>)
                })
            }),
        )
    }

    /// A Modbus RTU serial line, opened on the first request.
    #[cfg(feature = "rtu")]
    pub fn serial(port: &str, baud: u32, parity: crate::Parity) -> Connection {
        let p = port.to_owned();
        Connection::rtu_over(format!("modbus-rtu {port}"), move || {
            let opened = crate::rtu::open_serial(&p, baud, parity);
            async move { opened }
        })
    }

    /// What this connection is called in logs and details.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Sends one request to `unit` and waits for its answer, all within `timeout_ms` (waiting
    /// for the connection's turn, connecting, and the exchange itself).
    ///
    /// Errors: nothing could be sent (connect refused or timed out, backoff) →
    /// `Disconnected`; sent but no answer in time → `Timeout`; the transport failed mid-exchange
    /// (reset, closed, nonsense answer) → `Io` — the request may have taken effect; a garbled
    /// RTU answer → `Crc`.
    pub(crate) async fn request(&self, unit: u8, req: &Request, timeout_ms: u64) -> Answer<Reply> {
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        let timed_out = TransportError::Timeout(timeout_ms);
        // Waiting for our turn behind another unit's request counts against our timeout, but
        // running out here says nothing about the transport: it is someone else's exchange.
        let Ok(mut state) = timeout_at(deadline, self.state.lock()).await else {
            return Err(timed_out);
        };
        let mut transport = match state.transport.take() {
            Some(transport) => transport,
            None => {
                if let Some(at) = state.retry_at {
                    if at > deadline {
                        let left = at.saturating_duration_since(Instant::now()).as_millis();
                        return Err(TransportError::Disconnected(format!(
                            "{}: next attempt in {left} ms; last failure: {}",
                            self.label, state.last_error
                        )));
                    }
                    sleep_until(at).await;
                }
                match timeout_at(deadline, (self.open)()).await {
                    Ok(Ok(transport)) => transport,
                    Ok(Err(e)) => {
                        let why = format!("{}: {e}", self.label);
                        state.failed(why.clone());
                        return Err(TransportError::Disconnected(why));
                    }
                    Err(_) => {
                        let why =
                            format!("{}: could not connect within {timeout_ms} ms", self.label);
                        state.failed(why.clone());
                        return Err(TransportError::Disconnected(why));
                    }
                }
            }
        };
        match timeout_at(deadline, transport.call(unit, req)).await {
            Ok(Ok(answer)) => {
                state.transport = Some(transport);
                state.answered();
                Ok(answer)
            }
            Ok(Err(ExchangeError::Crc)) => {
                // The line is fine, the frame was not; the next request discards what is left.
                state.transport = Some(transport);
                state.answered();
                Err(TransportError::Crc)
            }
            Ok(Err(ExchangeError::Io(e))) => {
                drop(transport);
                let why = format!("{}: {e}", self.label);
                state.failed(why.clone());
                Err(TransportError::Io(why))
            }
            Err(_) => {
                // See the type's invariants: the answer may still come, on this transport only.
                drop(transport);
                state.failed(format!("{}: no answer within {timeout_ms} ms", self.label));
                Err(timed_out)
            }
        }
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_ceiling_and_resets_on_an_answer() {
        let mut s = State::default();
        let mut waits = Vec::new();
        for _ in 0..10 {
            let before = Instant::now();
            s.failed("x".into());
            let at = s.retry_at.unwrap_or(before);
            waits.push((at - before).as_millis() / 100 * 100);
        }
        assert_eq!(waits[..7], [100, 200, 400, 800, 1600, 3200, 5000]);
        assert_eq!(waits[9], 5000);
        s.answered();
        assert_eq!((s.failures, s.retry_at), (0, None));
    }
}
