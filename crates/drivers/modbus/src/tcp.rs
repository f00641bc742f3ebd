//! Modbus TCP transports: tokio-modbus's client over a stream (a `TcpStream` in production,
//! anything `AsyncRead + AsyncWrite` in tests).
//!
//! tokio-modbus matches each answer to its request by transaction id; closedloop additionally
//! replaces the whole socket after a timeout (see [`crate::Connection`]), so a late answer can
//! never even reach the decoder of the next request.

use std::fmt;

use closedloop_contract::{Area, BoxFuture, Exception};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_modbus::client::{Client, Context};
use tokio_modbus::slave::{Slave, SlaveContext};
use tokio_modbus::{Error as MbError, Request as MbRequest, Response as MbResponse};

use crate::pdu::{COIL_ON, Payload};
use crate::request::{Reply, Request};
use crate::transport::{ExchangeError, Transport, TransportAnswer, check_payload};

/// One tokio-modbus client context over an open stream.
pub(crate) struct TcpTransport {
    ctx: Context,
}

impl TcpTransport {
    pub(crate) fn new<T>(stream: T) -> TcpTransport
    where
        T: AsyncRead + AsyncWrite + Send + Unpin + fmt::Debug + 'static,
    {
        TcpTransport {
            ctx: tokio_modbus::client::tcp::attach(stream),
        }
    }
}

impl Transport for TcpTransport {
    fn call<'a>(&'a mut self, unit: u8, req: &'a Request) -> BoxFuture<'a, TransportAnswer> {
        Box::pin(async move {
            self.ctx.set_slave(Slave(unit));
            match self.ctx.call(to_tokio(req)).await {
                Ok(Ok(resp)) => from_tokio(req, resp).map(Ok),
                Ok(Err(code)) => Ok(Err(Exception(u8::from(code)))),
                Err(MbError::Transport(e)) => Err(ExchangeError::Io(e.to_string())),
                Err(MbError::Protocol(e)) => Err(ExchangeError::Io(e.to_string())),
            }
        })
    }
}

fn to_tokio(req: &Request) -> MbRequest<'static> {
    match req {
        Request::Read { area, start, count } => match area {
            Area::Coil => MbRequest::ReadCoils(*start, *count),
            Area::DiscreteInput => MbRequest::ReadDiscreteInputs(*start, *count),
            Area::Holding => MbRequest::ReadHoldingRegisters(*start, *count),
            Area::Input => MbRequest::ReadInputRegisters(*start, *count),
        },
        Request::WriteCoil { addr, value } => MbRequest::WriteSingleCoil(*addr, *value),
        Request::WriteCoils { start, values } => {
            MbRequest::WriteMultipleCoils(*start, values.clone().into())
        }
        Request::WriteRegister { addr, value } => MbRequest::WriteSingleRegister(*addr, *value),
        Request::WriteRegisters { start, values } => {
            MbRequest::WriteMultipleRegisters(*start, values.clone().into())
        }
    }
}

fn from_tokio(req: &Request, resp: MbResponse) -> Result<Reply, ExchangeError> {
    let payload = match resp {
        MbResponse::ReadCoils(b) | MbResponse::ReadDiscreteInputs(b) => Payload::Bits(b),
        MbResponse::ReadHoldingRegisters(w) | MbResponse::ReadInputRegisters(w) => {
            Payload::Words(w)
        }
        MbResponse::WriteSingleCoil(addr, v) => Payload::Echo {
            addr,
            value: if v { COIL_ON } else { 0 },
        },
        MbResponse::WriteSingleRegister(addr, value)
        | MbResponse::WriteMultipleCoils(addr, value)
        | MbResponse::WriteMultipleRegisters(addr, value) => Payload::Echo { addr, value },
        other => return Err(ExchangeError::Io(format!("unexpected answer {other:?}"))),
    };
    check_payload(req, payload)
}
