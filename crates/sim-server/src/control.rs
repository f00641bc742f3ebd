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

use crate::Simulated;
use closedloop_sim::{FaultConfig, FaultKind};
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

/// One control request, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum ControlCommand {
    /// Inject (or replace) a fault.
    Fault {
        /// Device id.
        device: String,
        /// The fault as a plant file would write it; validated when injected.
        fault: FaultConfig,
    },
    /// Clear one fault kind, or every fault.
    Clear {
        /// Device id.
        device: String,
        /// `None`: every fault.
        kind: Option<FaultKind>,
    },
}

impl ControlCommand {
    /// Parses the words of a request (`["fault", "slide", "nak"]`). Errors name the wrong word.
    pub fn from_words<S: AsRef<str>>(words: &[S]) -> Result<ControlCommand, String> {
        let words: Vec<&str> = words.iter().map(AsRef::as_ref).collect();
        if let Some(w) = words
            .iter()
            .find(|w| w.is_empty() || w.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Err(format!(
                "{w:?} is not one word: devices, kinds and key=value options contain no spaces"
            ));
        }
        match words.as_slice() {
            ["fault", device, kind, options @ ..] => {
                let mut fault = FaultConfig {
                    kind: (*kind).to_string(),
                    ..FaultConfig::default()
                };
                for option in options {
                    set_option(&mut fault, option)?;
                }
                Ok(ControlCommand::Fault {
                    device: (*device).to_string(),
                    fault,
                })
            }
            ["clear", device] => Ok(ControlCommand::Clear {
                device: (*device).to_string(),
                kind: None,
            }),
            ["clear", device, kind] => Ok(ControlCommand::Clear {
                device: (*device).to_string(),
                kind: Some(kind.parse().map_err(|e| format!("{e}"))?),
            }),
            ["fault", ..] => Err("usage: fault DEVICE KIND [KEY=VALUE ...]".into()),
            ["clear", ..] => Err("usage: clear DEVICE [KIND]".into()),
            [other, ..] => Err(format!(
                "unknown request {other:?}: use `fault DEVICE KIND [KEY=VALUE ...]` or `clear DEVICE [KIND]`"
            )),
            [] => Err("empty request: use `fault DEVICE KIND ...` or `clear DEVICE [KIND]`".into()),
        }
    }

    /// Parses one request line.
    pub fn parse(line: &str) -> Result<ControlCommand, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        ControlCommand::from_words(&words)
    }

    /// The request line (without its newline); [`ControlCommand::parse`] reads it back.
    pub fn to_line(&self) -> String {
        match self {
            ControlCommand::Fault { device, fault } => {
                let mut line = format!("fault {device} {}", fault.kind);
                let options = [
                    ("after_ms", fault.after_ms.map(|v| v.to_string())),
                    ("at_mm", fault.at_mm.map(|v| v.to_string())),
                    ("down_ms", fault.down_ms.map(|v| v.to_string())),
                    ("ms", fault.ms.map(|v| v.to_string())),
                    ("p", fault.p.map(|v| v.to_string())),
                ];
                for (key, value) in options {
                    if let Some(v) = value {
                        line.push_str(&format!(" {key}={v}"));
                    }
                }
                line
            }
            ControlCommand::Clear { device, kind: None } => format!("clear {device}"),
            ControlCommand::Clear {
                device,
                kind: Some(k),
            } => format!("clear {device} {k}"),
        }
    }

    /// Carries the request out on `devices`.
    pub fn execute(&self, devices: &BTreeMap<String, Simulated>) -> Result<(), String> {
        let device_id = match self {
            ControlCommand::Fault { device, .. } | ControlCommand::Clear { device, .. } => device,
        };
        let Some(device) = devices.get(device_id) else {
            let known: Vec<&str> = devices.keys().map(String::as_str).collect();
            return Err(format!(
                "unknown device {device_id:?}: this simulator runs {}",
                if known.is_empty() {
                    "no device".to_string()
                } else {
                    known.join(", ")
                }
            ));
        };
        match self {
            ControlCommand::Fault { fault, .. } => device
                .inject_config(fault)
                .map_err(|e| format!("device {device_id:?}: {e}")),
            ControlCommand::Clear { kind: Some(k), .. } => {
                device.clear(*k);
                Ok(())
            }
            ControlCommand::Clear { kind: None, .. } => {
                device.clear_all();
                Ok(())
            }
        }
    }
}

/// Sets one `key=value` option of a fault entry.
fn set_option(fault: &mut FaultConfig, option: &str) -> Result<(), String> {
    let Some((key, value)) = option.split_once('=') else {
        return Err(format!(
            "{option:?} is not key=value: write e.g. ms=200 or p=0.5"
        ));
    };
    let whole = |v: &str| {
        v.parse::<u64>()
            .map_err(|_| format!("{key}={v}: {key} must be a whole number of milliseconds"))
    };
    let number = |v: &str| {
        v.parse::<f64>()
            .map_err(|_| format!("{key}={v}: {key} must be a number"))
    };
    let fresh = match key {
        "after_ms" => fault.after_ms.replace(whole(value)?).is_none(),
        "down_ms" => fault.down_ms.replace(whole(value)?).is_none(),
        "ms" => fault.ms.replace(whole(value)?).is_none(),
        "at_mm" => fault.at_mm.replace(number(value)?).is_none(),
        "p" => fault.p.replace(number(value)?).is_none(),
        _ => {
            return Err(format!(
                "unknown fault option {key:?}: use after_ms, at_mm, down_ms, ms or p"
            ));
        }
    };
    if fresh {
        Ok(())
    } else {
        Err(format!("{key} is given twice: give it once"))
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use closedloop_sim::{Fault, FaultSpec, SimConfig, SimDevice};

    fn devices() -> BTreeMap<String, Simulated> {
        let relay = SimConfig {
            model: "relay".into(),
            ..SimConfig::default()
        };
        BTreeMap::from([(
            "lamp".to_string(),
            SimDevice::from_config(&relay).unwrap().into(),
        )])
    }

    #[test]
    fn lines_round_trip() {
        for line in [
            "fault slide stall at_mm=70 after_ms=200",
            "fault lamp nak",
            "clear lamp",
            "clear lamp latency_ms",
        ] {
            let cmd = ControlCommand::parse(line).unwrap();
            let again = ControlCommand::parse(&cmd.to_line()).unwrap();
            assert_eq!(cmd, again, "{line}");
        }
    }

    #[test]
    fn bad_requests_name_the_wrong_word() {
        let e = ControlCommand::parse("fault lamp latency_ms ms=soon").unwrap_err();
        assert!(e.contains("ms=soon") && e.contains("whole number"), "{e}");
        let e = ControlCommand::parse("fault lamp latency_ms speed=2").unwrap_err();
        assert!(e.contains("speed"), "{e}");
        let e = ControlCommand::parse("clear lamp nope").unwrap_err();
        assert!(e.contains("nope"), "{e}");
        let e = ControlCommand::parse("reset lamp").unwrap_err();
        assert!(e.contains("reset"), "{e}");
        let e = ControlCommand::from_words(&["fault", "lamp x", "nak"]).unwrap_err();
        assert!(e.contains("lamp x"), "{e}");
    }

    #[test]
    fn requests_are_checked_like_the_plant_file() {
        let devices = devices();
        let nak = ControlCommand::parse("fault lamp nak").unwrap();
        assert_eq!(nak.execute(&devices), Ok(()));
        assert_eq!(devices["lamp"].faults(), vec![FaultSpec::now(Fault::Nak)]);
        let e = ControlCommand::parse("fault lamp stall at_mm=3")
            .unwrap()
            .execute(&devices)
            .unwrap_err();
        assert!(e.contains("lamp") && e.contains("stall"), "{e}");
        let e = ControlCommand::parse("fault lamp latency_ms")
            .unwrap()
            .execute(&devices)
            .unwrap_err();
        assert!(e.contains("ms"), "{e}");
        let e = ControlCommand::parse("fault oven nak")
            .unwrap()
            .execute(&devices)
            .unwrap_err();
        assert!(e.contains("oven") && e.contains("lamp"), "{e}");
        ControlCommand::parse("clear lamp")
            .unwrap()
            .execute(&devices)
            .unwrap();
        assert!(devices["lamp"].faults().is_empty());
    }
}
