//! The reading half of the stdio transport: bounded lines, each parsed as rmcp parses it, with a
//! shorter way for the two requests a client sends most.
//!
//! rmcp reads a client message as an untagged enum of four shapes, and a request as an untagged
//! enum of twenty-two: a `tools/call` is tried against the thirteen requests before it, each
//! failure buffering the message and formatting an error (about 28,000 instructions under
//! callgrind, a tenth of what a `get_device_state` costs). Here a line whose keys say it is a
//! `tools/call` or `tools/list` request is parsed straight into that variant with rmcp's own
//! types; any other line, or one that does not parse that way, goes through rmcp's codec (its
//! compatibility rules included) exactly as before.

use bytes::BytesMut;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequest, ClientRequest, JsonRpcMessage, JsonRpcRequest, ListToolsRequest,
};
use rmcp::service::RxJsonRpcMessage;
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError};
use serde::de::{Deserializer, IgnoredAny};
use serde::{Deserialize, de::DeserializeOwned};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio_util::codec::Decoder;

/// What reading the next line gave.
pub(super) enum Read {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// JSON that is no JSON-RPC message: the client is owed an `Invalid Request` answer.
    Invalid,
    /// The input ended or failed.
    Closed,
}

/// The client's lines, read one at a time, at most `max` bytes each.
pub(super) struct Reader<R> {
    read: BufReader<R>,
    line: BytesMut,
    max: usize,
    /// Inside a line longer than `max`: skipped up to its end.
    discarding: bool,
    /// `line` holds a whole line already handed on, to be cleared before the next is read. A
    /// part of a line stays across calls: rmcp drops a `receive` future whenever another event
    /// wins its select, and the bytes read so far must still begin the next one's line.
    handed: bool,
    codec: JsonRpcMessageCodec<RxJsonRpcMessage<RoleServer>>,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    pub(super) fn new(read: R, max: usize) -> Self {
        Reader {
            read: BufReader::new(read),
            line: BytesMut::new(),
            max,
            discarding: false,
            handed: false,
            codec: JsonRpcMessageCodec::default(),
        }
    }

    /// The next message, skipping empty lines, lines too long, lines that are not JSON and
    /// notifications rmcp ignores.
    pub(super) async fn next(&mut self) -> Read {
        loop {
            match self.next_line().await {
                Some(true) => {}
                Some(false) => {
                    tracing::error!(max = self.max, "a message longer than the limit, skipped");
                    continue;
                }
                None => return Read::Closed,
            }
            let line = trimmed(&self.line);
            if line.is_empty() {
                continue;
            }
            if let Some(message) = known_request(line) {
                self.line.clear();
                return Read::Message(Box::new(message));
            }
            // rmcp's codec: the line and its newline, consumed whole.
            match self.codec.decode(&mut self.line) {
                Ok(Some(message)) => return Read::Message(Box::new(message)),
                Ok(None) => continue,
                Err(JsonRpcMessageCodecError::Serde(e)) if e.is_syntax() || e.is_eof() => {
                    tracing::debug!("ignoring a line that is not JSON: {e}");
                }
                Err(JsonRpcMessageCodecError::Serde(e)) => {
                    tracing::debug!("a line that is no JSON-RPC message: {e}");
                    return Read::Invalid;
                }
                Err(e) => {
                    tracing::error!("reading stdin: {e}");
                    return Read::Closed;
                }
            }
        }
    }

    /// Reads the next line, newline included, into `self.line`: `Some(true)` when it fits,
    /// `Some(false)` at the end of one longer than `max` (not kept), `None` at the input's end
    /// or an error (a last line without a newline is dropped, as rmcp drops it). Cancel-safe:
    /// dropped while waiting for input, it keeps what it read for the next call.
    async fn next_line(&mut self) -> Option<bool> {
        if std::mem::take(&mut self.handed) {
            self.line.clear();
        }
        loop {
            let available = match self.read.fill_buf().await {
                Ok([]) => return None,
                Ok(available) => available,
                Err(e) => {
                    tracing::error!("reading stdin: {e}");
                    return None;
                }
            };
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            if !self.discarding && self.line.len() + take > self.max {
                self.line.clear();
                self.discarding = true;
            }
            if !self.discarding {
                self.line.extend_from_slice(&available[..take]);
            }
            self.read.consume(take);
            if newline.is_some() {
                self.handed = true;
                let fitted = !std::mem::take(&mut self.discarding);
                return Some(fitted);
            }
        }
    }
}

/// The line without its newline and carriage return.
fn trimmed(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Which of the keys that decide a message's shape a line has (a key counts with any value,
/// `null` too, as rmcp counts it), and its method when that is a plain string.
#[derive(Deserialize)]
struct Shape<'a> {
    #[serde(default, borrow)]
    method: Option<&'a str>,
    #[serde(default, deserialize_with = "present")]
    id: bool,
    #[serde(default, deserialize_with = "present")]
    result: bool,
    #[serde(default, deserialize_with = "present")]
    error: bool,
}

fn present<'de, D: Deserializer<'de>>(value: D) -> Result<bool, D::Error> {
    IgnoredAny::deserialize(value).map(|_| true)
}

/// A `tools/call` or `tools/list` request parsed straight into its variant; `None` for
/// anything else, and for any line whose shape or content rmcp's own parse could read
/// otherwise (which then reads it).
pub(super) fn known_request(line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    if line.first() != Some(&b'{') {
        return None;
    }
    let shape: Shape = serde_json::from_slice(line).ok()?;
    if !shape.id || shape.result || shape.error {
        return None;
    }
    let request = match shape.method? {
        "tools/call" => typed::<CallToolRequest>(line)?.map(ClientRequest::CallToolRequest),
        "tools/list" => typed::<ListToolsRequest>(line)?.map(ClientRequest::ListToolsRequest),
        _ => return None,
    };
    Some(JsonRpcMessage::Request(request))
}

/// The line as a request of type `T`.
fn typed<T: DeserializeOwned>(line: &[u8]) -> Option<Typed<T>> {
    serde_json::from_slice::<JsonRpcRequest<T>>(line)
        .ok()
        .map(Typed)
}

/// A parsed request, before it becomes a `ClientRequest`.
struct Typed<T>(JsonRpcRequest<T>);

impl<T> Typed<T> {
    fn map(self, variant: fn(T) -> ClientRequest) -> JsonRpcRequest<ClientRequest> {
        let JsonRpcRequest {
            jsonrpc,
            id,
            request,
        } = self.0;
        JsonRpcRequest {
            jsonrpc,
            id,
            request: variant(request),
        }
    }
}

#[cfg(test)]
mod tests;
