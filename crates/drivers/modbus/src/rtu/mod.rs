//! Modbus RTU transports over any byte stream: a serial port in production (feature `rtu`), a
//! `tokio::io::duplex` or pty in tests.
//!
//! RTU has no transaction id: an answer is matched to its request only by unit, function code
//! and length. Before each request the transport therefore throws away whatever input is already
//! waiting (the tail of a garbled frame, a late answer), and after a timeout
//! [`crate::Connection`] reopens the port, so a late answer is not read as the next one's.

pub mod frame;

use std::io;

use closedloop_contract::BoxFuture;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::request::Request;
use crate::transport::{ExchangeError, Transport, TransportAnswer};

/// One serial line (or a stand-in) carrying RTU frames.
pub(crate) struct RtuTransport<T> {
    stream: T,
    buf: Vec<u8>,
}

impl<T> RtuTransport<T>
where
    T: AsyncRead + AsyncWrite + Unpin + Send,
{
    pub(crate) fn new(stream: T) -> RtuTransport<T> {
        RtuTransport {
            stream,
            buf: Vec::with_capacity(frame::MAX_FRAME),
        }
    }

    /// Reads and discards everything already waiting, without waiting for more.
    async fn discard_pending(&mut self) -> io::Result<()> {
        let mut scratch = [0u8; frame::MAX_FRAME];
        loop {
            // A zero timeout polls the read once: bytes already buffered are taken, an empty
            // line ends the loop at once.
            match tokio::time::timeout(std::time::Duration::ZERO, self.stream.read(&mut scratch))
                .await
            {
                Ok(Ok(0)) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(Ok(_)) => continue,
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(()),
            }
        }
    }

    async fn exchange(&mut self, unit: u8, req: &Request) -> TransportAnswer {
        let io = |e: io::Error| ExchangeError::Io(e.to_string());
        self.discard_pending().await.map_err(io)?;
        self.stream
            .write_all(&frame::encode_request(unit, req))
            .await
            .map_err(io)?;
        self.stream.flush().await.map_err(io)?;
        self.buf.clear();
        let mut chunk = [0u8; frame::MAX_FRAME];
        loop {
            if let Some(len) = frame::answer_len(&self.buf)? {
                if len > frame::MAX_FRAME {
                    return Err(ExchangeError::Io(format!(
                        "an answer announced {len} bytes, more than an RTU frame holds"
                    )));
                }
                if self.buf.len() >= len {
                    // Anything after the frame is noise; the next request discards it.
                    return frame::decode_answer(&self.buf[..len], unit, req);
                }
            }
            let n = self.stream.read(&mut chunk).await.map_err(io)?;
            if n == 0 {
                return Err(ExchangeError::Io("the serial line closed".into()));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

impl<T> Transport for RtuTransport<T>
where
    T: AsyncRead + AsyncWrite + Unpin + Send,
{
    fn call<'a>(&'a mut self, unit: u8, req: &'a Request) -> BoxFuture<'a, TransportAnswer> {
        Box::pin(self.exchange(unit, req))
    }
}

/// Serial line parity of a `modbus-rtu` driver table (the plant's typed value).
pub use closedloop_contract::Parity;

/// Opens a serial port as 8 data bits, the given parity and one stop bit. (The serial line
/// specification asks for two stop bits without parity, but 8N1 is what devices ship with, and
/// the plant file has no key for it yet.)
#[cfg(feature = "rtu")]
pub(crate) fn open_serial(
    port: &str,
    baud: u32,
    parity: Parity,
) -> io::Result<tokio_serial::SerialStream> {
    use tokio_serial::SerialPortBuilderExt;
    let p = match parity {
        Parity::None => tokio_serial::Parity::None,
        Parity::Even => tokio_serial::Parity::Even,
        Parity::Odd => tokio_serial::Parity::Odd,
    };
    tokio_serial::new(port, baud)
        .data_bits(tokio_serial::DataBits::Eight)
        .parity(p)
        .stop_bits(tokio_serial::StopBits::One)
        .open_native_async()
        .map_err(io::Error::from)
}
