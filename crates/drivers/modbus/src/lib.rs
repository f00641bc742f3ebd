//! Modbus TCP and RTU devices behind closedloop's [`Driver`] trait.
//!
//! Layers, as in tokio-modbus: [`pdu`] (the PDU codec of both directions, shared with
//! `closedloop sim`'s server), [`request`] (which function code a read or write becomes),
//! `rtu::frame` (pure RTU framing and CRC16), `transport` (one open transport: tokio-modbus's
//! TCP client, or closedloop's RTU framing over any byte stream), [`Connection`] (one shared,
//! self-healing transport per address or port), and [`ModbusDevice`] (one unit on it).
//!
//! A [`Connection`] carries one request at a time, connects lazily, reconnects with backoff from
//! 100 ms to 5 s, and discards its transport after a request that timed out or was dropped, so a
//! late answer can never be read as the next one's. The RTU framing and CRC16 are written here
//! rather than taken from tokio-modbus, whose RTU codec drops a frame with a bad CRC silently:
//! closedloop must see a garbled answer to report `CRC_MISMATCH`.
//!
//! Answers keep the two layers of the `Driver` trait: an exception is `Ok(Err(Exception))` — the
//! device answered — and only a missing or unusable answer is a [`TransportError`].
//!
//! Build devices through a [`Connections`] registry, so that devices declared with the same
//! address (or serial port) share one connection:
//!
//! ```no_run
//! use closedloop_modbus::{Connections, modbus_tcp};
//! let registry = Connections::new();
//! let pump = modbus_tcp(&registry, "192.168.1.20:502", 1, 500)?;
//! let valve = modbus_tcp(&registry, "192.168.1.20:502", 2, 500)?; // same TCP connection
//! # Ok::<(), closedloop_modbus::ModbusError>(())
//! ```

mod connection;
mod device;
pub mod pdu;
pub mod request;
pub mod rtu;
mod tcp;
mod transport;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

pub use closedloop_contract::{Driver, TransportError};
pub use connection::{BACKOFF_INITIAL, BACKOFF_MAX, Connection};
pub use device::ModbusDevice;
pub use rtu::Parity;
use thiserror::Error;

/// A driver table that cannot become a device. Each variant names the key to fix.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ModbusError {
    /// `address` is not `host:port`.
    #[error("address \"{address}\" is not host:port ({reason}); write e.g. \"192.168.1.20:502\"")]
    BadAddress {
        address: String,
        reason: &'static str,
    },
    /// RTU unit 0 is the broadcast address, which never answers.
    #[error("unit {0} cannot be polled over RTU; use 1 to 247")]
    BadUnit(u8),
    /// `timeout_ms` is 0.
    #[error("timeout_ms must be above 0")]
    BadTimeout,
    /// Two devices name the same serial port with different line settings.
    #[error(
        "serial port {port} is already used at {existing}; every device on a port must use the same baud and parity"
    )]
    SerialConflict { port: String, existing: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Tcp(String),
    #[cfg(feature = "rtu")]
    Serial(String),
}

/// The connections of one running engine, keyed by TCP address or serial port.
///
/// Connections are created on first request and kept for the registry's life (the plant's
/// devices are fixed while it runs), so the map is bounded by the plant file.
#[derive(Debug, Default)]
pub struct Connections {
    map: Mutex<HashMap<Key, (Arc<Connection>, String)>>,
}

impl Connections {
    /// An empty registry.
    pub fn new() -> Connections {
        Connections::default()
    }

    /// The shared connection to a Modbus TCP `address` (validated `host:port`). Nothing is
    /// connected yet: the first request connects.
    pub fn get_or_connect(&self, address: &str) -> Result<Arc<Connection>, ModbusError> {
        let address = parse_address(address)?;
        Ok(
            self.get_or_insert(Key::Tcp(address.clone()), String::new(), || {
                Connection::tcp(&address)
            }),
        )
    }

    /// The shared connection on a serial `port`; every device on it must use the same line
    /// settings.
    #[cfg(feature = "rtu")]
    pub fn get_or_open_serial(
        &self,
        port: &str,
        baud: u32,
        parity: Parity,
    ) -> Result<Arc<Connection>, ModbusError> {
        let settings = format!("{baud} baud, parity {parity:?}");
        let key = Key::Serial(port.to_owned());
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((conn, existing)) = map.get(&key) {
            if *existing != settings {
                return Err(ModbusError::SerialConflict {
                    port: port.to_owned(),
                    existing: existing.clone(),
                });
            }
            return Ok(conn.clone());
        }
        let conn = Arc::new(Connection::serial(port, baud, parity));
        map.insert(key, (conn.clone(), settings));
        Ok(conn)
    }

    fn get_or_insert(
        &self,
        key: Key,
        settings: String,
        make: impl FnOnce() -> Connection,
    ) -> Arc<Connection> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(key)
            .or_insert_with(|| (Arc::new(make()), settings))
            .0
            .clone()
    }

    /// How many distinct connections the registry holds.
    pub fn len(&self) -> usize {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether the registry holds no connection.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A `modbus-tcp` device: `driver = { kind = "modbus-tcp", address, unit, timeout_ms }`.
pub fn modbus_tcp(
    registry: &Connections,
    address: &str,
    unit: u8,
    timeout_ms: u64,
) -> Result<ModbusDevice, ModbusError> {
    if timeout_ms == 0 {
        return Err(ModbusError::BadTimeout);
    }
    Ok(ModbusDevice {
        conn: registry.get_or_connect(address)?,
        unit,
        timeout_ms,
    })
}

/// A `modbus-rtu` device: `driver = { kind = "modbus-rtu", port, baud, parity, unit,
/// timeout_ms }`. The port is opened on the first request.
#[cfg(feature = "rtu")]
pub fn modbus_rtu(
    registry: &Connections,
    port: &str,
    baud: u32,
    parity: Parity,
    unit: u8,
    timeout_ms: u64,
) -> Result<ModbusDevice, ModbusError> {
    if timeout_ms == 0 {
        return Err(ModbusError::BadTimeout);
    }
    if unit == 0 || unit > 247 {
        return Err(ModbusError::BadUnit(unit));
    }
    Ok(ModbusDevice {
        conn: registry.get_or_open_serial(port, baud, parity)?,
        unit,
        timeout_ms,
    })
}

/// Validates `host:port` (a name, an IPv4 address, or a bracketed IPv6 address) and returns it
/// trimmed. Names are resolved at each connect, so a device that moves is found again.
pub fn parse_address(address: &str) -> Result<String, ModbusError> {
    let address = address.trim();
    let bad = |reason| ModbusError::BadAddress {
        address: address.to_owned(),
        reason,
    };
    let (host, port) = address.rsplit_once(':').ok_or(bad("no :port"))?;
    match port.parse::<u16>() {
        Ok(0) => return Err(bad("port 0")),
        Ok(_) => {}
        Err(_) => return Err(bad("the port is not a number from 1 to 65535")),
    }
    let plain = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    match plain {
        Some(v6) if v6.parse::<std::net::Ipv6Addr>().is_err() => {
            Err(bad("the bracketed host is not an IPv6 address"))
        }
        Some(_) => Ok(address.to_owned()),
        None if host.is_empty() => Err(bad("no host")),
        None if host.contains(':') => Err(bad("an IPv6 host must be in brackets")),
        None if host.contains(char::is_whitespace) => Err(bad("the host contains a space")),
        None => Ok(address.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_validated() {
        assert_eq!(parse_address(" 10.0.0.5:502 "), Ok("10.0.0.5:502".into()));
        assert!(parse_address("plc.local:1502").is_ok());
        assert!(parse_address("[::1]:502").is_ok());
        for bad in [
            "10.0.0.5",
            ":502",
            "host:0",
            "host:70000",
            "::1:502",
            "[x]:5",
            "a b:1",
        ] {
            assert!(parse_address(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn devices_at_one_address_share_one_connection() {
        let reg = Connections::new();
        let a = modbus_tcp(&reg, "127.0.0.1:1502", 1, 100).unwrap();
        let b = modbus_tcp(&reg, "127.0.0.1:1502 ", 2, 100).unwrap();
        let c = modbus_tcp(&reg, "127.0.0.1:1503", 1, 100).unwrap();
        assert!(Arc::ptr_eq(&a.conn, &b.conn));
        assert!(!Arc::ptr_eq(&a.conn, &c.conn));
        assert_eq!(reg.len(), 2);
        assert_eq!(a.describe(), "modbus-tcp 127.0.0.1:1502 unit 1");
        assert_eq!(
            modbus_tcp(&reg, "x:1", 1, 0).unwrap_err(),
            ModbusError::BadTimeout
        );
    }

    #[cfg(feature = "rtu")]
    #[test]
    fn a_serial_port_keeps_one_setting() {
        let reg = Connections::new();
        let a = modbus_rtu(&reg, "/dev/ttyX", 19200, Parity::None, 1, 100).unwrap();
        let b = modbus_rtu(&reg, "/dev/ttyX", 19200, Parity::None, 2, 100).unwrap();
        assert!(Arc::ptr_eq(&a.conn, &b.conn));
        assert!(matches!(
            modbus_rtu(&reg, "/dev/ttyX", 9600, Parity::None, 3, 100),
            Err(ModbusError::SerialConflict { .. })
        ));
        assert_eq!(
            modbus_rtu(&reg, "/dev/ttyY", 9600, Parity::None, 0, 100).unwrap_err(),
            ModbusError::BadUnit(0)
        );
    }
}
