//! The transport on in-memory pipes: answers arrive as whole lines beside the `Invalid Request`
//! answers the reading half owes.

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

/// A big answer starts out and stalls (the client reads nothing yet); meanwhile a message that
/// is JSON but not JSON-RPC is owed an `Invalid Request`. That answer waits for the big one (and
/// the next message for it, as in rmcp's own transport): every line the client gets is one
/// whole message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_request_answer_waits_for_the_answer_being_written() {
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
    let receiving = tokio::spawn(async move {
        let ping = transport.receive().await;
        (transport, ping)
    });
    let all = read_lines(&mut client_in, 2).await;
    sending.await.expect("joined").expect("sent");
    let (mut transport, ping) = receiving.await.expect("joined");
    assert!(format!("{ping:?}").contains("Ping"), "{ping:?}");
    transport.close().await.expect("closed");
    assert_eq!(all.len(), 2, "{} lines", all.len());
    assert_eq!(all[0]["id"], 1, "the big answer first");
    let text = all[0]["result"]["content"][0]["text"]
        .as_str()
        .expect("text");
    assert_eq!(text.len(), 1 << 20);
    assert_eq!(all[1]["error"]["code"], -32600);
    assert_eq!(all[1]["id"], serde_json::Value::Null);
}

/// The regression: an `Invalid Request` answer waiting for the output when rmcp dropped the
/// `receive` future (another event won its select) was dropped with it; it goes out whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_request_answer_owed_is_written_though_the_receive_is_dropped() {
    let (mut client_out, server_in) = tokio::io::duplex(4096);
    let (server_out, mut client_in) = tokio::io::duplex(4096);
    let mut transport = StdioTransport::new(server_in, server_out);
    let sending = tokio::spawn(transport.send(big_answer(64 * 1024, 1)));
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(!sending.is_finished(), "the answer must stall on the pipe");
    client_out
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":42}\n")
        .await
        .expect("written");
    let wait = std::time::Duration::from_millis(100);
    let dropped = tokio::time::timeout(wait, transport.receive()).await;
    assert!(dropped.is_err(), "the owed answer waits for the big one");
    let all = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        read_lines(&mut client_in, 2),
    )
    .await
    .expect("the owed answer after the big one, not lost");
    sending.await.expect("joined").expect("sent");
    assert_eq!(all.len(), 2, "{} lines", all.len());
    assert_eq!(all[0]["id"], 1, "the big answer first");
    assert_eq!(all[1]["error"]["code"], -32600);
    transport.close().await.expect("closed");
}

/// Reads from `from` until `n` whole lines have come; each line as JSON.
pub(super) async fn read_lines(
    from: &mut tokio::io::DuplexStream,
    n: usize,
) -> Vec<serde_json::Value> {
    let mut all = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    while all.iter().filter(|b| **b == b'\n').count() < n {
        let n = from.read(&mut chunk).await.expect("read");
        assert!(n > 0, "the output closed early");
        all.extend_from_slice(&chunk[..n]);
    }
    all.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("a whole JSON-RPC message per line"))
        .collect()
}
