//! The stdio transport: rmcp's line transport reads the client's messages, and every answer is
//! written as one whole line from a buffer of its own, freed once written.
//!
//! rmcp's transport encodes answers into one write buffer that keeps the capacity of the largest
//! answer for the rest of the session: after a hall's `tools/list` (18.5 MB for 8,000 relays),
//! 32 MiB stayed allocated, 2.3 KiB of every relay's share of resident memory
//! (`closedloop bench --hall 8000`, heaptrack). Here the reading half stays rmcp's (its bounded
//! lines, compatibility rules and `Invalid Request` answers); the few answers it writes itself go
//! through an in-memory pipe to [`pump`], which writes each line whole under the same lock as
//! [`StdioTransport::send`], so two answers are never interleaved on stdout.

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use std::future::Future;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::Mutex;

/// Room in the pipe for rmcp's own answers (an `Invalid Request` is a hundred bytes).
const PIPE: usize = 64 * 1024;

/// The server's side of a line-delimited JSON-RPC stream: stdio ([`StdioTransport::stdio`]), or
/// any reader and writer (tests).
pub struct StdioTransport<R: AsyncRead, W> {
    inner: AsyncRwTransport<RoleServer, R, DuplexStream>,
    out: Arc<Mutex<W>>,
    /// The task forwarding rmcp's own answers, awaited at close.
    pump: Option<tokio::task::JoinHandle<()>>,
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
    /// Reads messages from `read`, writes answers to `write`; call inside a tokio runtime (the
    /// pump is a task).
    pub fn new(read: R, write: W) -> Self {
        let (theirs, ours) = tokio::io::duplex(PIPE);
        let out = Arc::new(Mutex::new(write));
        let pump = tokio::spawn(pump(ours, Arc::clone(&out)));
        StdioTransport {
            inner: AsyncRwTransport::new_server(read, theirs),
            out,
            pump: Some(pump),
        }
    }
}

/// Writes each line rmcp's transport writes itself to `out`, whole, until that writer closes.
async fn pump<W: AsyncWrite + Unpin>(from: DuplexStream, out: Arc<Mutex<W>>) {
    let mut from = BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        match from.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if write_line(&mut *out.lock().await, &line).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// One line written and flushed (under the output's lock, which the caller holds).
async fn write_line<W: AsyncWrite + Unpin>(out: &mut W, line: &[u8]) -> std::io::Result<()> {
    out.write_all(line).await?;
    out.flush().await
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
        async move {
            // Encoded under the lock: answers go out in the order they were sent, and two big
            // answers at once never hold two buffers.
            let mut out = out.lock().await;
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            line.push(b'\n');
            let written = write_line(&mut *out, &line).await;
            drop(out);
            // Freed once the client has its answer: taking a `list_devices` page apart costs
            // half as much as writing it, and the client need not wait for it.
            drop(item);
            written
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.inner.receive()
    }

    /// Closes rmcp's writer, lets the pump write what it still holds, then shuts the output.
    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await?;
        if let Some(pump) = self.pump.take() {
            let _ = pump.await;
        }
        self.out.lock().await.shutdown().await
    }
}

#[cfg(test)]
mod tests;
