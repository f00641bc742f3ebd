//! Modbus TCP links: tokio-modbus's client over a stream (a `TcpStream` in production, anything
//! `AsyncRead + AsyncWrite` in tests).
//!
//! tokio-modbus matches each answer to its request by transaction id; closedloop additionally
//! replaces the whole socket after a timeout (see [`crate::Connection`]), so a late answer can
//! never even reach the decoder of the next request.

use std::fmt;

use closedloop_driver::{Area, BoxFuture, Data, Exception};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_modbus::client::{Client, Context};
use tokio_modbus::slave::{Slave, SlaveContext};
use tokio_modbus::{Error as MbError, Request as MbRequest, Response as MbResponse};

use crate::link::{Link, LinkAnswer, LinkError, check_data, check_echo};
use crate::request::{Reply, Request};

/// One tokio-modbus client context over an open stream.
pub(crate) struct TcpLink {
    ctx: Context,
}

impl TcpLink {
    pub(crate) fn new<T>(stream: T) -> TcpLink
    where
        T: AsyncRead + AsyncWrite + Send + Unpin + fmt::Debug + 'static,
    {
        TcpLink {
            ctx: tokio_modbus::client::tcp::attach(stream),
        }
    }
}

impl Link for TcpLink {
    fn call<'a>(&'a mut self, unit: u8, req: &'a Request) -> BoxFuture<'a, LinkAnswer> {
        Box::pin(async move {
            self.ctx.set_slave(Slave(unit));
            match self.ctx.call(to_tokio(req)).await {
                Ok(Ok(resp)) => from_tokio(req, resp).map(Ok),
                Ok(Err(code)) => Ok(Err(Exception(u8::from(code)))),
                Err(MbError::Transport(e)) => Err(LinkError::Io(e.to_string())),
                Err(MbError::Protocol(e)) => Err(LinkError::Io(e.to_string())),
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

fn from_tokio(req: &Request, resp: MbResponse) -> Result<Reply, LinkError> {
    match resp {
        MbResponse::ReadCoils(b) | MbResponse::ReadDiscreteInputs(b) => {
            check_data(req, Data::Bits(b))
        }
        MbResponse::ReadHoldingRegisters(w) | MbResponse::ReadInputRegisters(w) => {
            check_data(req, Data::Words(w))
        }
        MbResponse::WriteSingleCoil(a, v) => check_echo(req, a, if v { 0xFF00 } else { 0 }),
        MbResponse::WriteSingleRegister(a, v) => check_echo(req, a, v),
        MbResponse::WriteMultipleCoils(a, n) | MbResponse::WriteMultipleRegisters(a, n) => {
            check_echo(req, a, n)
        }
        other => Err(LinkError::Io(format!("unexpected answer {other:?}"))),
    }
}
