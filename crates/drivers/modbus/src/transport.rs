//! A [`Transport`] is one open transport (a TCP socket, a serial port) that can carry one request
//! at a time to any unit behind it. [`crate::Connection`] owns at most one and replaces it when it
//! breaks; the transport itself never reconnects.

use closedloop_contract::{BoxFuture, Data, Exception};

use crate::pdu::Payload;
use crate::request::{Reply, Request};

/// What came back over a transport: an answer (possibly an exception), or a failure of the
/// transport.
pub(crate) type TransportAnswer = Result<Result<Reply, Exception>, ExchangeError>;

/// A request/answer exchange over one open transport.
pub(crate) trait Transport: Send {
    /// Sends `req` to `unit` and waits for its answer. Dropping the future mid-way leaves the
    /// transport in an unknown state; the caller then drops the transport too.
    fn call<'a>(&'a mut self, unit: u8, req: &'a Request) -> BoxFuture<'a, TransportAnswer>;
}

/// Why an exchange produced no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExchangeError {
    /// An RTU frame arrived whose CRC did not verify. The transport stays usable: its input is
    /// discarded before the next request.
    Crc,
    /// The transport failed or the answer made no sense for the request; the transport is
    /// dropped, because what it will deliver next can no longer be trusted to belong to the next
    /// request.
    Io(String),
}

/// Checks a successful answer's payload against the request, whichever transport decoded it.
pub(crate) fn check_payload(req: &Request, payload: Payload) -> Result<Reply, ExchangeError> {
    match payload {
        Payload::Bits(b) => check_data(req, Data::Bits(b)),
        Payload::Words(w) => check_data(req, Data::Words(w)),
        Payload::Echo { addr, value } => check_echo(req, addr, value),
    }
}

/// A read must carry exactly the items asked for (bit answers are padded to whole bytes on the
/// wire and are cut here).
fn check_data(req: &Request, data: Data) -> Result<Reply, ExchangeError> {
    let Request::Read { count, .. } = req else {
        return Err(ExchangeError::Io(format!(
            "function {:#04x} answered with data",
            req.function()
        )));
    };
    let count = usize::from(*count);
    match data {
        Data::Bits(mut b) if b.len() >= count && b.len() < count + 8 => {
            b.truncate(count);
            Ok(Reply::Data(Data::Bits(b)))
        }
        Data::Words(w) if w.len() == count => Ok(Reply::Data(Data::Words(w))),
        other => Err(ExchangeError::Io(format!(
            "asked for {count} items, the answer carried {}",
            other.len()
        ))),
    }
}

/// A write's echo must repeat what was written (FC05/06: address and value; FC15/16: address
/// and quantity).
fn check_echo(req: &Request, addr: u16, value: u16) -> Result<Reply, ExchangeError> {
    let Some(expected) = req.echo() else {
        return Err(ExchangeError::Io(
            "a read was answered with a write echo".into(),
        ));
    };
    if expected == (addr, value) {
        Ok(Reply::Written)
    } else {
        Err(ExchangeError::Io(format!(
            "the write echo ({addr}, {value:#06x}) does not match the request ({}, {:#06x})",
            expected.0, expected.1
        )))
    }
}
