//! [`ModbusServer`]: one TCP listener serving any number of [`SimDevice`]s as Modbus units.
//!
//! Each request is forwarded to its unit's [`Driver`] methods, so the simulator's register maps,
//! physics, latency and faults are exactly those of the in-process device:
//!
//! - an [`Exception`] becomes a Modbus exception response;
//! - a request the device never answers (`power_off`, `zombie`, a `reboot` still down, a request
//!   lost to `drop_rate`) gets no response at all, and the connection stays open;
//! - `crc_error` ([`closedloop_contract::TransportError::Crc`]): the request has taken effect but its
//!   answer is corrupt. TCP carries no Modbus CRC and its own checksum would never deliver a
//!   corrupt frame, so the closest thing a TCP client can observe is losing the connection: the
//!   server sends the answers due before it, then closes the connection. The client sees "not
//!   reached" at once, never an answer it could take for valid (and never a long silence that
//!   would look like `power_off`);
//! - a unit id nobody answers to gets exception 0x0B (gateway target device failed to respond),
//!   as a Modbus gateway answers for a unit behind it that does not respond.
//!
//! # Order and lost requests
//! Every connection runs in its own task. Each unit answers its requests on a connection in the
//! order they came; answers of different units are independent (each carries its transaction
//! id, as through a gateway), so a silent unit never holds another unit's answers back. A request
//! its unit never answers is taken as lost once a later request to the same unit on the same
//! connection has been answered, so that a device that comes back (a cleared `power_off`)
//! answers again on the connection the client kept. (Requests of one unit are polled in order,
//! so answers due at the same instant keep their order; only a `latency_ms` lowered between two
//! pipelined requests can make the first one count as lost.)
//!
//! # Who wrote
//! With a [`WriteLog`] ([`ModbusServer::log_writes`]), every write request to a unit served here
//! is logged with the client's address as it arrives, before the device answers.
//!
//! # Bounds
//! At most [`MAX_CONNECTIONS`] connections per listener: one more is accepted and closed at once.
//! At most [`MAX_IN_FLIGHT`] unanswered requests per connection: the next one makes the oldest
//! unanswered request lost (never answered), as a device's full input buffer would.

use crate::codec::{self, Adu, Header};
use crate::write_log::{Received, WriteLog};
use closedloop_contract::{BoxFuture, Driver, Exception};
use closedloop_modbus::pdu::{Operation, Request};
use closedloop_sim::SimDevice;
use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Connections one listener serves at once.
pub const MAX_CONNECTIONS: usize = 64;
/// Unanswered requests one connection may have outstanding.
pub const MAX_IN_FLIGHT: usize = 32;

/// The devices behind one listener, by unit id.
pub type Units = BTreeMap<u8, SimDevice>;

/// A bound Modbus TCP listener and the units it serves. Nothing is served until [`run`].
///
/// [`run`]: ModbusServer::run
#[derive(Debug)]
pub struct ModbusServer {
    listener: TcpListener,
    units: Units,
    /// The device behind each unit, for the write log.
    names: BTreeMap<u8, String>,
    log: Option<WriteLog>,
}

/// What every connection task of one listener shares.
struct Shared {
    units: Units,
    names: BTreeMap<u8, String>,
    log: Option<WriteLog>,
    listen: SocketAddr,
}

impl ModbusServer {
    /// Binds `addr` (port 0 picks a free port: see [`ModbusServer::local_addr`]).
    pub async fn bind(addr: SocketAddr, units: Units) -> io::Result<ModbusServer> {
        let listener = TcpListener::bind(addr).await?;
        Ok(ModbusServer {
            listener,
            units,
            names: BTreeMap::new(),
            log: None,
        })
    }

    /// Names the device behind each unit, as the write log shows it (a unit not named here is
    /// logged as `unit N`).
    pub fn name_units(&mut self, names: BTreeMap<u8, String>) {
        self.names = names;
    }

    /// Logs every write request that reaches one of the units to `log` (see [`WriteLog`]).
    pub fn log_writes(&mut self, log: WriteLog) {
        self.log = Some(log);
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts and serves connections until dropped; dropping it ends every connection too.
    pub async fn run(self) {
        let ModbusServer {
            listener,
            units,
            names,
            log,
        } = self;
        let Ok(listen) = listener.local_addr() else {
            tracing::warn!("a Modbus listener without an address: not served");
            return;
        };
        let shared = Arc::new(Shared {
            units,
            names,
            log,
            listen,
        });
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                            tracing::warn!(%peer, "Modbus connection refused: {MAX_CONNECTIONS} already open");
                            continue; // dropping the stream closes it
                        };
                        let shared = Arc::clone(&shared);
                        connections.spawn(async move {
                            serve_connection(stream, &shared).await;
                            drop(permit);
                        });
                    }
                    Err(e) => {
                        // Out of descriptors and the like: wait instead of spinning.
                        tracing::warn!("Modbus accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
    }
}

/// What one request comes to on the wire.
enum Reply {
    /// Send these bytes.
    Frame(Vec<u8>),
    /// Close the connection (the answer was corrupt: see the module doc).
    Close,
}

/// One request waiting for, or holding, its reply.
enum Slot {
    Waiting(BoxFuture<'static, Reply>),
    Ready(Reply),
}

/// The unanswered requests of one connection, one queue per unit in arrival order.
#[derive(Default)]
struct InFlight {
    queues: BTreeMap<u8, VecDeque<Slot>>,
    /// Arrival order across units (unit ids), to find the oldest request on overflow.
    arrivals: VecDeque<u8>,
}

impl InFlight {
    fn push(&mut self, unit: u8, slot: Slot) {
        if self.arrivals.len() >= MAX_IN_FLIGHT
            && let Some(oldest) = self.arrivals.pop_front()
            && let Some(queue) = self.queues.get_mut(&oldest)
        {
            queue.pop_front();
        }
        self.queues.entry(unit).or_default().push_back(slot);
        self.arrivals.push_back(unit);
    }

    /// Polls every waiting request (each unit's in order); ready when some reply can be sent.
    /// Returns the replies in sendable order and forgets the requests taken as lost.
    fn poll_replies(&mut self, cx: &mut Context<'_>) -> Poll<Vec<Reply>> {
        let mut out = Vec::new();
        for (unit, queue) in &mut self.queues {
            let mut last_ready = None;
            for (i, slot) in queue.iter_mut().enumerate() {
                if let Slot::Waiting(fut) = slot
                    && let Poll::Ready(reply) = fut.as_mut().poll(cx)
                {
                    *slot = Slot::Ready(reply);
                }
                if matches!(slot, Slot::Ready(_)) {
                    last_ready = Some(i);
                }
            }
            let Some(last) = last_ready else { continue };
            // Everything up to `last` leaves the queue: answers go out, the rest were lost.
            for slot in queue.drain(..=last) {
                if let Slot::Ready(reply) = slot {
                    out.push(reply);
                }
                remove_first(&mut self.arrivals, *unit);
            }
        }
        self.queues.retain(|_, q| !q.is_empty());
        if out.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(out)
        }
    }
}

fn remove_first(arrivals: &mut VecDeque<u8>, unit: u8) {
    if let Some(i) = arrivals.iter().position(|u| *u == unit) {
        arrivals.remove(i);
    }
}

/// Reads requests and writes answers until the client leaves, sends something that is not
/// Modbus TCP, or a `crc_error` answer closes the connection.
async fn serve_connection(stream: TcpStream, shared: &Shared) {
    let peer = stream.peer_addr().ok();
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let mut buf = Vec::with_capacity(2 * (codec::HEADER_LEN + codec::MAX_PDU_LEN));
    let mut chunk = [0u8; 512];
    let mut in_flight = InFlight::default();
    loop {
        loop {
            match codec::take_adu(&mut buf) {
                Ok(Some(adu)) => {
                    let unit = adu.header.unit;
                    in_flight.push(unit, start(shared, peer, adu));
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(?peer, "closing a Modbus connection: {e}");
                    return;
                }
            }
        }
        tokio::select! {
            read = rd.read(&mut chunk) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            },
            replies = poll_fn(|cx| in_flight.poll_replies(cx)) => {
                for reply in replies {
                    match reply {
                        Reply::Frame(bytes) => {
                            if wr.write_all(&bytes).await.is_err() {
                                return;
                            }
                        }
                        Reply::Close => {
                            tracing::debug!(?peer, "crc_error: closing the Modbus connection");
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// Starts one request: an immediate reply for an unknown unit or a malformed PDU, else the
/// device's answer to come (a write logged first, when there is a log).
fn start(shared: &Shared, peer: Option<SocketAddr>, adu: Adu) -> Slot {
    let Adu { header, pdu } = adu;
    let Some(device) = shared.units.get(&header.unit) else {
        let function = pdu.first().copied().unwrap_or(0);
        let frame = codec::encode_exception(header, function, Exception::GATEWAY_TARGET_FAILED);
        return Slot::Ready(Reply::Frame(frame));
    };
    let request = match Request::decode(&pdu) {
        Ok(r) => r,
        Err(refused) => {
            let frame = codec::encode_exception(header, refused.function, refused.exception);
            return Slot::Ready(Reply::Frame(frame));
        }
    };
    if let Some(log) = &shared.log {
        log_write(log, shared, peer, header.unit, &request);
    }
    let device = device.clone();
    Slot::Waiting(Box::pin(answer(device, header, request)))
}

/// Logs `request` when it is a write.
fn log_write(
    log: &WriteLog,
    shared: &Shared,
    peer: Option<SocketAddr>,
    unit: u8,
    request: &Request,
) {
    let Operation::Write(write) = request.operation() else {
        return;
    };
    let device = match shared.names.get(&unit) {
        Some(name) => Cow::Borrowed(name.as_str()),
        None => Cow::Owned(format!("unit {unit}")),
    };
    log.record(Received {
        peer,
        listen: shared.listen,
        unit,
        device: &device,
        write: &write,
    });
}

/// Asks the device; the future never resolves when the device stays silent.
async fn answer(device: SimDevice, header: Header, request: Request) -> Reply {
    let answer = match request.operation() {
        Operation::Read { area, start, count } => {
            device.read(area, start, count).await.map(|r| r.map(Some))
        }
        Operation::Write(write) => device.write(write).await.map(|r| r.map(|()| None)),
    };
    match answer {
        Ok(result) => Reply::Frame(codec::encode_answer(header, &request, result)),
        Err(_) => Reply::Close,
    }
}
