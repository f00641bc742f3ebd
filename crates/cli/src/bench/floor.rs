//! The floor under `tools/list`: a plain loop on blocking stdio, no MCP library and no runtime,
//! that answers `tools/list` with closedloop's own list, serialised once before the loop starts,
//! and every other request with an empty result. Moving a list's bytes through the pipe is what
//! no server can avoid (242 KB took about five pings' time here whoever wrote them), so
//! closedloop's `tools/list` beside this loop's shows what serving the list adds to moving it.

use super::rpc::Rpc;
use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::{Value, json};
use std::io::{BufRead, Write};
use std::path::Path;

/// The fields of a request the loop reads; the rest (`params`) is skipped.
#[derive(Deserialize)]
struct Request {
    id: Option<Value>,
    method: Option<String>,
}

/// Serves the loop on this process's stdin and stdout until stdin ends; `list` is the file of
/// the `tools/list` result to answer with. Notifications and lines that are not JSON get no
/// answer.
pub fn serve(list: &Path) -> Result<()> {
    let listed: Value = serde_json::from_slice(&std::fs::read(list)?)
        .with_context(|| format!("{}: not the JSON of a tools/list result", list.display()))?;
    let body = serde_json::to_vec(&listed)?;
    let hello = serde_json::to_vec(&json!({
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "closedloop-bench-floor", "version": env!("CARGO_PKG_VERSION")}
    }))?;
    let mut out = std::io::stdout().lock();
    let mut answer = Vec::with_capacity(body.len() + 64);
    for line in std::io::stdin().lock().lines() {
        let Ok(Request {
            id: Some(id),
            method: Some(method),
            ..
        }) = serde_json::from_str::<Request>(&line?)
        else {
            continue;
        };
        answer.clear();
        answer.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        serde_json::to_writer(&mut answer, &id)?;
        answer.extend_from_slice(br#","result":"#);
        answer.extend_from_slice(match method.as_str() {
            "tools/list" => &body,
            "initialize" => &hello,
            _ => b"{}",
        });
        answer.extend_from_slice(b"}\n");
        out.write_all(&answer)?;
        out.flush()?;
    }
    Ok(())
}

/// Starts the loop with the list `ours` answers `tools/list` with, written to a file in `dir`.
pub async fn start(exe: &Path, dir: &Path, ours: &mut Rpc) -> Result<Rpc> {
    let listed = ours.call("tools/list", Value::Null).await?;
    let file = dir.join("floor-tools.json");
    std::fs::write(&file, serde_json::to_vec(&listed)?)?;
    let file = file.display().to_string();
    Rpc::start(exe, &["bench", "--floor-server", &file], dir).await
}
