//! `closedloop serve` on stdio fed by a client that writes one request in pieces while the server
//! is answering another: a pipe hands a reader whatever was written so far, and rmcp drops the
//! transport's read whenever an answer goes out. No MCP library on the client's side, so the
//! bytes and their timing are the test's own.

use serde_json::{Value, json};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout, Command};

/// One simulated relay that takes 300 ms to pull in, its contact read back every 10 ms.
const PLANT: &str = r#"
[server]
name = "split-lines"
journal = "sqlite://split.db"

[[device]]
id = "relay"
description = "A simulated relay with a contact read back."
driver = { kind = "sim", model = "relay", pull_in_ms = 300 }
poll_ms = 10
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"
description = "Switch the relay on or off and confirm it on the contact."
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "contact == params.on"
expect_s = 0.3
"#;

/// Writes `bytes` to the server's input at once.
async fn write(stdin: &mut ChildStdin, bytes: &str) {
    stdin.write_all(bytes.as_bytes()).await.expect("written");
    stdin.flush().await.expect("flushed");
}

/// The answer to request `id`, other lines skipped; at most 10 s.
async fn answer(lines: &mut Lines<BufReader<ChildStdout>>, id: u64) -> Value {
    let read = async {
        loop {
            let line = lines.next_line().await.expect("read").expect("a line");
            let message: Value = serde_json::from_str(&line).expect("JSON");
            if message["id"] == id {
                return message;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .unwrap_or_else(|_| panic!("no answer to request {id} within 10 s"))
}

/// A `tools/call` request line.
fn call(id: u64, tool: &str, arguments: Value) -> String {
    let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": tool, "arguments": arguments}});
    format!("{request}\n")
}

/// The regression: the transport read a request's first part, rmcp dropped the read to send an
/// answer, and the part was lost; the rest was no JSON and the request was never answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_written_in_pieces_while_an_answer_goes_out_is_answered() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("plant.toml"), PLANT).expect("plant");
    let mut child = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .arg("serve")
        .arg("plant.toml")
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("serve started");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let hello = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "split-lines", "version": "1"}}});
    write(&mut stdin, &format!("{hello}\n")).await;
    answer(&mut lines, 1).await;
    write(
        &mut stdin,
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
    )
    .await;

    // A switch that answers once the relay pulled in, and meanwhile half of a read.
    let switch = call(2, "relay_switch", json!({"on": true, "wait_s": 5}));
    write(&mut stdin, &switch).await;
    let read = call(3, "get_device_state", json!({"device": "relay"}));
    let (first, rest) = read.split_at(read.len() / 2);
    write(&mut stdin, first).await;
    let switched = answer(&mut lines, 2).await;
    assert_eq!(
        switched["result"]["structuredContent"]["status"], "completed",
        "{switched}"
    );
    // The switch's answer has gone out (rmcp's loop woke for it); now the rest of the read.
    tokio::time::sleep(Duration::from_millis(100)).await;
    write(&mut stdin, rest).await;
    let state = answer(&mut lines, 3).await;
    assert!(state.get("error").is_none(), "{state}");
    let state = &state["result"]["structuredContent"];
    assert_eq!(state["device"], "relay", "{state}");
    assert_eq!(state["signals"]["contact"]["value"], true, "{state}");
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
}
