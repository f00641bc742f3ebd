//! The transport on in-memory pipes: answers arrive as whole lines beside the `Invalid Request`
//! answers rmcp's reading half writes itself.

use super::*;
use rmcp::model::{CallToolResult, ContentBlock, NumberOrString, ServerResult};
use tokio::io::AsyncReadExt;

/// A tool result whose text is `bytes` long.
pub(super) fn big_answer(bytes: usize, id: i64) -> TxJsonRpcMessage<RoleServer> {
    let text = "x".repeat(bytes);
    let result = CallToolResult::success(vec![ContentBlock::text(text)]);
    TxJsonRpcMessage::<RoleServer>::response(
        ServerResult::CallToolResult(result),
        NumberOrString::Number(id),
    )
}

/// A big answer starts out and stalls (the client reads nothing yet); meanwhile a message rmcp
/// reads as JSON but not as JSON-RPC gets rmcp's own `Invalid Request`. That answer waits for
/// the big one: every line the client gets is one whole message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcps_own_error_answer_waits_for_the_answer_being_written() {
    let (mut client_out, server_in) = tokio::io::duplex(4096);
    let (server_out, mut client_in) = tokio::io::duplex(4096);
    let mut transport = StdioTransport::new(server_in, server_out);
    let sending = tokio::spawn(transport.send(big_answer(1 << 20, 1)));
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(
        !sending.is_finished(),
        "the pipe holds 4 KiB: the answer must stall"
    );
    client_out
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":42}\n")
        .await
        .expect("written");
    client_out
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}\n")
        .await
        .expect("written");
    let ping = transport.receive().await.expect("the ping");
    assert!(format!("{ping:?}").contains("Ping"), "{ping:?}");
    // rmcp has written its answer to the pipe; give the pump time to try the output.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let mut all = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    while all.iter().filter(|b| **b == b'\n').count() < 2 {
        let n = client_in.read(&mut chunk).await.expect("read");
        assert!(n > 0, "the output closed before two lines");
        all.extend_from_slice(&chunk[..n]);
    }
    sending.await.expect("joined").expect("sent");
    transport.close().await.expect("closed");
    let lines: Vec<serde_json::Value> = all
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("a whole JSON-RPC message per line"))
        .collect();
    assert_eq!(lines.len(), 2, "{} lines", lines.len());
    assert_eq!(lines[0]["id"], 1, "the big answer first");
    let text = lines[0]["result"]["content"][0]["text"]
        .as_str()
        .expect("text");
    assert_eq!(text.len(), 1 << 20);
    assert_eq!(lines[1]["error"]["code"], -32600);
}
