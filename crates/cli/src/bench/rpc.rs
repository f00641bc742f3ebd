//! A lean JSON-RPC client on a child's stdio: one request line out, answers read until the one
//! with the request's id. No MCP library on this side, so the figures are the server's.

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long one answer may take before the bench gives up on the server.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// A server started as a child process and spoken to over its stdin and stdout.
pub struct Rpc {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    /// Requests written by `send_call` and not yet flushed.
    outgoing: Vec<u8>,
    /// Answers read while waiting for another one, by id.
    early: HashMap<u64, (String, Head)>,
}

impl Rpc {
    /// Starts `program args…` with stderr discarded, and completes the MCP handshake.
    pub async fn start(program: &Path, args: &[&str], dir: &Path) -> Result<Rpc> {
        let mut child = Command::new(program)
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let stdin = child.stdin.take().ok_or_else(|| anyhow!("no stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
        let mut rpc = Rpc {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            next_id: 0,
            outgoing: Vec::new(),
            early: HashMap::new(),
        };
        let params = json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "closedloop-bench", "version": env!("CARGO_PKG_VERSION")}
        });
        rpc.call("initialize", params).await?;
        rpc.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(rpc)
    }

    /// The child's process id (for its memory and CPU time in /proc).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    async fn send(&mut self, message: &Value) -> Result<()> {
        self.outgoing
            .extend_from_slice(message.to_string().as_bytes());
        self.outgoing.push(b'\n');
        self.flush().await
    }

    /// Queues one request without writing it (see [`Rpc::flush`]); its id.
    pub fn send_call(&mut self, method: &str, params: Value) -> Result<u64> {
        self.next_id += 1;
        let id = self.next_id;
        let mut request = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            request["params"] = params;
        }
        serde_json::to_writer(&mut self.outgoing, &request)?;
        self.outgoing.push(b'\n');
        Ok(id)
    }

    /// Writes every queued request at once.
    pub async fn flush(&mut self) -> Result<()> {
        self.stdin.write_all(&self.outgoing).await?;
        self.stdin.flush().await?;
        self.outgoing.clear();
        Ok(())
    }

    /// The line of request `id`'s answer; answers to other requests read meanwhile are kept
    /// for their own turn. Lines are only skimmed here ([`Head`]): a timed call should not
    /// pay for building the answer the bench does not look at.
    async fn answer_line(&mut self, id: u64) -> Result<(String, Head)> {
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        loop {
            if let Some(a) = self.early.remove(&id) {
                return Ok(a);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let line = tokio::time::timeout(left, self.lines.next_line())
                .await
                .map_err(|_| anyhow!("request {id}: no answer within {ANSWER_TIMEOUT:?}"))??
                .ok_or_else(|| anyhow!("request {id}: the server closed its output"))?;
            let head = match serde_json::from_str::<Head>(&line) {
                Ok(head) => head,
                // Not an answer in a shape the bench reads: an error if it is ours (rather
                // than waiting out the timeout for it), skipped otherwise.
                Err(e) => match serde_json::from_str::<Value>(&line) {
                    Ok(v) if v.get("id").and_then(Value::as_u64) == Some(id) => {
                        bail!("request {id}: an answer the bench cannot read ({e}): {line}")
                    }
                    _ => continue,
                },
            };
            // Notifications and server requests carry no id of ours: skip them.
            match head.id.as_ref().and_then(Value::as_u64) {
                Some(n) if n == id && !head.is_request() => return Ok((line, head)),
                Some(n) if n <= self.next_id && !head.is_request() => {
                    self.early.insert(n, (line, head));
                }
                _ => {}
            }
        }
    }

    /// The `result` of request `id`; an error answer is an error here.
    pub async fn answer(&mut self, id: u64) -> Result<Value> {
        let (line, head) = self.answer_line(id).await?;
        if let Some(e) = head.error {
            bail!("request {id}: {e}");
        }
        let mut answer: Value = serde_json::from_str(&line)?;
        Ok(answer
            .get_mut("result")
            .map(Value::take)
            .unwrap_or(Value::Null))
    }

    /// Sends one request and checks its answer is neither an error nor a tool's `isError`
    /// result, without building it: what the timed loops of the bench call.
    pub async fn round_trip(&mut self, method: &str, params: Value) -> Result<()> {
        let id = self.send_call(method, params)?;
        self.flush().await?;
        let (_, head) = self.answer_line(id).await?;
        match (head.error, head.result) {
            (Some(e), _) => bail!("{method}: {e}"),
            (None, None) => bail!("{method}: an answer with neither result nor error"),
            (None, Some(r)) if r.is_error == Some(true) => {
                bail!("{method}: the tool answered isError")
            }
            _ => Ok(()),
        }
    }

    /// Sends one request and returns its `result`.
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.send_call(method, params)?;
        self.flush().await?;
        self.answer(id).await.map_err(|e| anyhow!("{method}: {e}"))
    }

    /// Calls a tool and returns its structured content (or its whole result when it has none).
    pub async fn tool(&mut self, name: &str, arguments: Value) -> Result<Value> {
        let r = self
            .call("tools/call", json!({"name": name, "arguments": arguments}))
            .await?;
        Ok(r.get("structuredContent").cloned().unwrap_or(r))
    }

    /// Closes stdin (the server's signal to end) and waits a little for it to go.
    pub async fn stop(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }
}

/// What the bench reads of an answer line. Parsing into it still checks the whole line is JSON,
/// but builds nothing of the parts it ignores.
#[derive(Deserialize)]
struct Head {
    id: Option<Value>,
    method: Option<IgnoredAny>,
    error: Option<Value>,
    result: Option<ResultHead>,
}

impl Head {
    /// A request from the server (it has a method), not an answer to one of ours.
    fn is_request(&self) -> bool {
        self.method.is_some()
    }
}

/// Whether a tool's result says it failed.
#[derive(Deserialize)]
struct ResultHead {
    #[serde(rename = "isError", default)]
    is_error: Option<bool>,
}
