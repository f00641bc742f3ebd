//! The bench's HTTP client: one keep-alive HTTP/1.1 connection speaking stateless 2026-07-28 MCP
//! requests, a few lines written here (a library client's own costs would be counted as the
//! server's), and how an act-and-confirm call is followed to its end.

use anyhow::{Result, anyhow, bail};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// How a command followed to its end ended ([`Connection::act_to_end`]).
#[derive(Debug, Default)]
pub(super) struct Ended {
    /// Its final result.
    pub result: Value,
    /// `get_command_status` calls made after the call's own wait ran out.
    pub followed: u32,
    /// Calls made again after a `DEVICE_BUSY` refusal.
    pub retried: u32,
}

/// One keep-alive HTTP/1.1 connection speaking stateless MCP requests.
pub(super) struct Connection {
    addr: SocketAddr,
    stream: BufReader<TcpStream>,
    next_id: u64,
}

impl Connection {
    pub(super) async fn open(addr: SocketAddr) -> Result<Connection> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            addr,
            stream: BufReader::new(stream),
            next_id: 0,
        })
    }

    /// Calls `tool` and returns its structured content.
    pub(super) async fn tool(&mut self, tool: &str, arguments: Value) -> Result<Value> {
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        self.stream.get_mut().write_all(request.as_bytes()).await?;
        let answer = self.response().await?;
        let message = json_of(&answer)?;
        message["result"]
            .get("structuredContent")
            .cloned()
            .ok_or_else(|| anyhow!("{tool}: no result in {message}"))
    }

    /// Calls the action tool `tool` and follows its command to its end as a client would, for
    /// up to 60 s: `get_command_status` while it is not final (a command handed to another
    /// gateway may outlast the call's `wait_s` while its device's lease changes hands), and the
    /// call again after a `DEVICE_BUSY` refusal (a lease that moved while it was accepted: its
    /// hint asks for the retry, nothing was written). The final result, and how many calls it
    /// took beyond the first.
    pub(super) async fn act_to_end(&mut self, tool: &str, arguments: Value) -> Result<Ended> {
        let patience = Duration::from_secs(60);
        // Each call may itself wait up to 10 s (`wait_s`): the whole is bounded, not each step.
        match tokio::time::timeout(patience + Duration::from_secs(15), async {
            self.follow(tool, arguments, patience).await
        })
        .await
        {
            Ok(ended) => ended,
            Err(_) => bail!("{tool}: a call got no answer within 75 s"),
        }
    }

    async fn follow(&mut self, tool: &str, arguments: Value, patience: Duration) -> Result<Ended> {
        let until = Instant::now() + patience;
        let mut r = self.tool(tool, arguments.clone()).await?;
        let mut ended = Ended::default();
        loop {
            let retry = r["status"] == "rejected" && r["error_code"] == "DEVICE_BUSY";
            let open = matches!(r["status"].as_str(), Some("accepted" | "running"));
            if !retry && !open {
                ended.result = r;
                return Ok(ended);
            }
            if Instant::now() >= until {
                bail!(
                    "{tool}: command {} still {} ({}) after 60 s: {}",
                    r["command_id"],
                    r["status"],
                    r["error_code"],
                    r["detail"]
                );
            }
            let pause = if retry { 100 } else { 20 };
            tokio::time::sleep(Duration::from_millis(pause)).await;
            r = match retry {
                true => {
                    ended.retried += 1;
                    self.tool(tool, arguments.clone()).await?
                }
                false => {
                    ended.followed += 1;
                    let id = json!({"command_id": r["command_id"], "wait_s": 10});
                    self.tool("get_command_status", id).await?
                }
            };
        }
    }

    /// Reads one response (Content-Length or chunked body).
    async fn response(&mut self) -> Result<String> {
        let mut status = String::new();
        self.stream.read_line(&mut status).await?;
        if !status.starts_with("HTTP/1.1 200") {
            bail!("HTTP answer {:?}", status.trim_end());
        }
        let (mut length, mut chunked) = (None, false);
        loop {
            let mut line = String::new();
            if self.stream.read_line(&mut line).await? == 0 {
                bail!("the server closed the connection");
            }
            let line = line.trim_end().to_ascii_lowercase();
            if line.is_empty() {
                break;
            }
            if let Some(v) = line.strip_prefix("content-length:") {
                length = Some(v.trim().parse::<usize>()?);
            }
            chunked |= line == "transfer-encoding: chunked";
        }
        match (length, chunked) {
            (Some(n), _) => self.exactly(n).await,
            (None, true) => self.chunks().await,
            (None, false) => bail!("an answer with neither Content-Length nor chunks"),
        }
    }

    async fn exactly(&mut self, n: usize) -> Result<String> {
        let mut body = vec![0; n];
        self.stream.read_exact(&mut body).await?;
        Ok(String::from_utf8(body)?)
    }

    /// A chunked body, whole. An event stream ends with the answer: its last chunk is `0`.
    async fn chunks(&mut self) -> Result<String> {
        let mut body = String::new();
        loop {
            let mut size = String::new();
            self.stream.read_line(&mut size).await?;
            let n = usize::from_str_radix(size.trim(), 16)?;
            let chunk = self.exactly(n).await?;
            let mut crlf = [0; 2];
            self.stream.read_exact(&mut crlf).await?;
            if n == 0 {
                return Ok(body);
            }
            body.push_str(&chunk);
        }
    }
}

/// The JSON-RPC message of a body: the body itself, or the `data:` of an event stream.
fn json_of(body: &str) -> Result<Value> {
    if let Ok(v) = serde_json::from_str(body) {
        return Ok(v);
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("result").is_some() || v.get("error").is_some())
        .ok_or_else(|| anyhow!("no JSON-RPC answer in {body:?}"))
}
