//! One Modbus unit behind a shared [`Connection`], as the engine sees it.

use std::sync::Arc;

use closedloop_contract::{Answer, Area, BoxFuture, Data, Driver, TransportError, Write};

use crate::connection::Connection;
use crate::request::{Reply, Request};

/// A Modbus unit (TCP unit identifier or RTU address) behind a shared connection.
///
/// Each request gets the device's own `timeout_ms`, on top of the engine's: a device
/// configured with a shorter timeout than the engine's must not hold the shared connection —
/// and every other unit behind it — for longer than it said.
#[derive(Debug, Clone)]
pub struct ModbusDevice {
    /// Shared with every other device at the same address or port.
    pub conn: Arc<Connection>,
    /// The unit identifier (TCP) or slave address (RTU).
    pub unit: u8,
    /// Per-request timeout, from the driver table's `timeout_ms`.
    pub timeout_ms: u64,
}

impl ModbusDevice {
    async fn send(&self, req: Result<Request, String>) -> Answer<Reply> {
        let req = req.map_err(TransportError::Io)?;
        self.conn.request(self.unit, &req, self.timeout_ms).await
    }
}

impl Driver for ModbusDevice {
    fn read(&self, area: Area, start: u16, count: u16) -> BoxFuture<'_, Answer<Data>> {
        Box::pin(async move {
            match self.send(Request::read(area, start, count)).await? {
                Ok(Reply::Data(d)) => Ok(Ok(d)),
                Ok(Reply::Written) => Err(TransportError::Io(format!(
                    "{}: a read was answered as a write",
                    self.describe()
                ))),
                Err(e) => Ok(Err(e)),
            }
        })
    }

    fn write(&self, write: Write) -> BoxFuture<'_, Answer<()>> {
        Box::pin(async move {
            match self.send(Request::write(write)).await? {
                Ok(Reply::Written) => Ok(Ok(())),
                Ok(Reply::Data(_)) => Err(TransportError::Io(format!(
                    "{}: a write was answered with data",
                    self.describe()
                ))),
                Err(e) => Ok(Err(e)),
            }
        })
    }

    fn describe(&self) -> String {
        format!("{} unit {}", self.conn.label(), self.unit)
    }
}
