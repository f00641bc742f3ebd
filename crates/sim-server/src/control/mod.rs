//! The simulator's control endpoint: faults injected and cleared at run time, over loopback.
//!
//! # Protocol
//! A TCP connection to `127.0.0.1` carries UTF-8 lines; each request line gets one reply line.
//!
//! ```text
//! fault DEVICE KIND [KEY=VALUE ...]   e.g. fault slide stall at_mm=70 after_ms=200
//! clear DEVICE [KIND]                 without KIND: every fault of DEVICE
//! ```
//!
//! Keys are those of a plant file's fault entry (`after_ms`, `at_mm`, `down_ms`, `ms`, `p`); the
//! fault is checked exactly like one written in the plant file for that device
//! ([`Simulated::inject_config`]): Modbus units, MQTT relays, CAN nodes and OPC UA devices alike,
//! so a fault an `mqtt-relay` cannot honour (`nak`, `crc_error`, `stall`), a CAN node cannot
//! (`nak`, `crc_error`) or a device served over OPC UA cannot (`crc_error`), is refused with the
//! reason. The reply is `ok`, or
//! `error ` and a message that names what was wrong (the device, the kind, the key). Words are
//! separated by spaces; nothing is quoted.
//!
//! # Bounds
//! Lines longer than [`MAX_LINE`] bytes are answered with an error and the connection is closed.
//! At most [`MAX_CONTROL_CONNECTIONS`] connections at once: one more is closed at once.
//! The endpoint binds loopback addresses only: anyone who can reach it can break every device.

mod command;

pub use command::ControlCommand;

use crate::Simulated;
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use thiserror::Error;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Longest request line accepted, in bytes.
pub const MAX_LINE: usize = 1024;
/// Control connections served at once.
pub const MAX_CONTROL_CONNECTIONS: usize = 8;

/// Why the control endpoint could not be started or reached.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ControlError {
    /// The endpoint may only bind loopback.
    #[error("the control endpoint binds loopback only; {0} is not: use 127.0.0.1:PORT")]
    NotLoopback(SocketAddr),
    /// Binding, connecting, reading or writing failed.
    #[error("control endpoint {addr}: {source}")]
    Io {
        /// The endpoint.
        addr: SocketAddr,
        /// What failed.
        source: io::Error,
    },
    /// The request could not be formed.
    #[error("{0}")]
    Usage(String),
    /// The simulator answered with an error.
    #[error("{0}")]
    Refused(String),
}

/// The bound control endpoint and the devices it controls. Nothing is served until [`run`].
///
/// [`run`]: ControlServer::run
#[derive(Debug)]
pub struct ControlServer {
    listener: TcpListener,
    devices: Arc<BTreeMap<String, Simulated>>,
}

impl ControlServer {
    /// Binds a loopback address (port 0 picks a free port).
    pub async fn bind(
        addr: SocketAddr,
        devices: BTreeMap<String, Simulated>,
    ) -> Result<ControlServer, ControlError> {
        if !addr.ip().is_loopback() {
            return Err(ControlError::NotLoopback(addr));
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ControlError::Io { addr, source })?;
        Ok(ControlServer {
            listener,
            devices: Arc::new(devices),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves requests until dropped.
    pub async fn run(self) {
        let slots = Arc::new(Semaphore::new(MAX_CONTROL_CONNECTIONS));
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                            continue;
                        };
                        let devices = Arc::clone(&self.devices);
                        connections.spawn(async move {
                            let _ = serve_control(stream, &devices).await;
                            drop(permit);
                        });
                    }
                    Err(e) => {
                        tracing::warn!("control accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
    }
}

async fn serve_control(stream: TcpStream, devices: &BTreeMap<String, Simulated>) -> io::Result<()> {
    let (rd, mut wr) = stream.into_split();
    // One byte past the limit tells an over-long line from one that is exactly MAX_LINE.
    let mut rd = BufReader::new(rd).take(MAX_LINE as u64 + 1);
    let mut line = Vec::new();
    loop {
        line.clear();
        rd.set_limit(MAX_LINE as u64 + 1);
        if rd.read_until(b'\n', &mut line).await? == 0 {
            return Ok(());
        }
        if line.last() != Some(&b'\n') && line.len() > MAX_LINE {
            let msg = format!("error request longer than {MAX_LINE} bytes\n");
            return wr.write_all(msg.as_bytes()).await;
        }
        let reply = match std::str::from_utf8(&line) {
            Err(_) => Err("the request is not UTF-8".to_string()),
            Ok(text) => ControlCommand::parse(text.trim_end()).and_then(|cmd| {
                let result = cmd.execute(devices);
                match &result {
                    Ok(()) => tracing::info!("control: {}", cmd.to_line()),
                    Err(e) => tracing::info!("control: {} refused: {e}", cmd.to_line()),
                }
                result
            }),
        };
        let out = match reply {
            Ok(()) => "ok\n".to_string(),
            Err(e) => format!("error {}\n", e.replace('\n', " ")),
        };
        wr.write_all(out.as_bytes()).await?;
    }
}

/// Sends one request to the control endpoint at `addr` and waits for its reply.
pub async fn send(addr: SocketAddr, command: &ControlCommand) -> Result<(), ControlError> {
    let io = |source| ControlError::Io { addr, source };
    let stream = TcpStream::connect(addr).await.map_err(io)?;
    let (rd, mut wr) = stream.into_split();
    let line = format!("{}\n", command.to_line());
    wr.write_all(line.as_bytes()).await.map_err(io)?;
    let mut reply = String::new();
    BufReader::new(rd)
        .take(MAX_LINE as u64 * 4)
        .read_line(&mut reply)
        .await
        .map_err(io)?;
    match reply.trim_end() {
        "ok" => Ok(()),
        r => match r.strip_prefix("error ") {
            Some(msg) => Err(ControlError::Refused(msg.to_string())),
            None if r.is_empty() => Err(ControlError::Refused(
                "the control endpoint closed the connection without an answer".into(),
            )),
            None => Err(ControlError::Refused(format!("unexpected reply {r:?}"))),
        },
    }
}
