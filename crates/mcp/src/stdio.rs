//! The stdio transport: the client's messages read one line at a time (`reading.rs`), and every
//! answer written as one whole line from a buffer of its own, freed once written.
//!
//! rmcp's own line transport encodes answers into one write buffer that keeps the capacity of
//! the largest answer for the rest of the session: after a hall's `tools/list` (18.5 MB for
//! 8,000 relays), 32 MiB stayed allocated, 2.3 KiB of every relay's share of resident memory
//! (`closedloop bench --hall 8000`, heaptrack). Here the `Invalid Request` answers owed for
//! lines that are JSON but no JSON-RPC message are written under the same lock as
//! [`StdioTransport::send`]'s, so two answers are never interleaved on stdout. A `tools/list`
//! answer is written from bytes serialised once (`listing.rs`).

use rmcp::RoleServer;
use rmcp::model::ErrorData;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;
use std::future::Future;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

mod listing;
mod reading;

use reading::{Read, Reader};

/// The server's side of a line-delimited JSON-RPC stream: stdio ([`StdioTransport::stdio`]), or
/// any reader and writer (tests).
pub struct StdioTransport<R, W> {
    read: Reader<R>,
    out: Arc<Mutex<Output<W>>>,
}

/// The output and what answers written to it keep: one lock, so answers go out whole and in
/// order.
struct Output<W> {
    writer: W,
    listings: listing::Listings,
}

impl StdioTransport<tokio::io::Stdin, tokio::io::Stdout> {
    /// The transport over this process's standard input and output.
    pub fn stdio() -> Self {
        StdioTransport::new(tokio::io::stdin(), tokio::io::stdout())
    }
}

impl<R, W> StdioTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    /// Reads messages from `read` (lines up to rmcp's 16 MiB), writes answers to `write`.
    pub fn new(read: R, write: W) -> Self {
        StdioTransport::with_max_line(read, write, DEFAULT_MAX_LINE_LENGTH)
    }

    /// As [`StdioTransport::new`], skipping lines longer than `max` bytes.
    pub fn with_max_line(read: R, write: W, max: usize) -> Self {
        StdioTransport {
            read: Reader::new(read, max),
            out: Arc::new(Mutex::new(Output {
                writer: write,
                listings: listing::Listings::default(),
            })),
        }
    }
}

/// `item` written as one line and flushed, under the output's lock.
async fn write<W: AsyncWrite + Unpin>(
    out: &Mutex<Output<W>>,
    item: TxJsonRpcMessage<RoleServer>,
) -> std::io::Result<()> {
    // Encoded under the lock: answers go out in the order they were sent, and two big answers
    // at once never hold two buffers.
    let mut out = out.lock().await;
    let line = out.listings.line(&item).map_err(std::io::Error::other)?;
    out.writer.write_all(&line).await?;
    let written = out.writer.flush().await;
    drop(out);
    // Freed once the client has its answer: taking a `list_devices` page apart costs half as
    // much as writing it, and the client need not wait for it.
    drop(item);
    written
}

impl<R, W> Transport<RoleServer> for StdioTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = Arc::clone(&self.out);
        async move { write(&out, item).await }
    }

    /// The next message; a line of JSON that is no JSON-RPC message is answered `Invalid
    /// Request` (with a null id, as rmcp answers it) before the next line is read. Cancel-safe,
    /// as rmcp's serve loop needs: dropped at any await, no byte read and no answer owed is
    /// lost.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read.next().await {
                Read::Message(message) => return Some(*message),
                Read::Closed => return None,
                Read::Invalid => {
                    let error = ErrorData::invalid_request("Invalid request", None);
                    let answer = TxJsonRpcMessage::<RoleServer>::error(error, None);
                    // Its own task: rmcp drops this future whenever another event wins its
                    // select, and an answer owed still goes out, whole.
                    let out = Arc::clone(&self.out);
                    let writing = tokio::spawn(async move { write(&out, answer).await });
                    if !matches!(writing.await, Ok(Ok(()))) {
                        return None;
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.out.lock().await.writer.shutdown().await
    }
}

#[cfg(test)]
mod tests;
