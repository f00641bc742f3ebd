//! The short way for `tools/call` and `tools/list` gives what rmcp's own parse gives, and leaves
//! every line it could read otherwise to rmcp; lines are bounded, trimmed and skipped as rmcp's
//! transport skips them.

use super::*;
use tokio::io::AsyncWriteExt;

/// What rmcp's own parse makes of `line`.
fn rmcps(line: &str) -> serde_json::Result<RxJsonRpcMessage<RoleServer>> {
    serde_json::from_str(line)
}

/// A message as JSON and as its debug text: two messages alike in both are the same message.
fn seen(message: &RxJsonRpcMessage<RoleServer>) -> (serde_json::Value, String) {
    let json = serde_json::to_value(message).expect("serialised");
    (json, format!("{message:?}"))
}

#[test]
fn tools_call_and_list_parse_as_rmcps_own_parse_reads_them() {
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_device_state","arguments":{"device":"lamp"}}}"#,
        r#"{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"lamp_switch","arguments":{"on":true,"wait_s":0},"_meta":{"progressToken":5}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lamp_switch","arguments":{"on":false},"task":{"ttl":60000}}}"#,
        r#"{"params":{"name":"list_devices"},"id":3,"method":"tools/call","jsonrpc":"2.0","extra":[1,{"a":null}]}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"cursor":"abc"}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
    ];
    for line in lines {
        let ours = known_request(line.as_bytes()).unwrap_or_else(|| panic!("not known: {line}"));
        let theirs = rmcps(line).unwrap_or_else(|e| panic!("rmcp cannot read {line}: {e}"));
        assert_eq!(seen(&ours), seen(&theirs), "{line}");
    }
}

#[test]
fn lines_rmcps_parse_could_read_otherwise_are_left_to_it() {
    let lines = [
        // A stray `result` or `error`, even null, makes rmcp refuse the message.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"result":null}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","error":{"code":1,"message":"m"}}"#,
        // No id, or a null one: a notification, or no request rmcp can read.
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#,
        // Params a call cannot have: rmcp reads it as a custom request.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools\/list"}"#,
        "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}",
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list""#,
    ];
    for line in lines {
        assert!(known_request(line.as_bytes()).is_none(), "{line}");
    }
    // And rmcp does read them otherwise: the custom request, the refusals.
    let custom = rmcps(lines[4]).expect("a custom request");
    assert!(
        format!("{custom:?}").contains("CustomRequest"),
        "{custom:?}"
    );
    assert!(rmcps(lines[0]).is_err() && rmcps(lines[1]).is_err());
}

/// Debug text of the messages our reader reads from `input` (lines of at most 64 bytes) until
/// it ends, `Invalid` for each answer owed.
async fn ours(input: &'static [u8]) -> Vec<String> {
    let mut reader = Reader::new(input, 64);
    let mut read = Vec::new();
    loop {
        match reader.next().await {
            Read::Message(m) => read.push(format!("{m:?}")),
            Read::Invalid => read.push("Invalid".into()),
            Read::Closed => return read,
        }
    }
}

/// The same from rmcp's own line transport: the messages it hands over, `Invalid` for each
/// `Invalid Request` it writes (it writes one before reading the next line).
async fn rmcps_transport(input: &'static [u8]) -> Vec<String> {
    use rmcp::transport::{Transport, async_rw::AsyncRwTransport};
    use tokio::io::AsyncReadExt;
    let (written, mut answers) = tokio::io::duplex(64 * 1024);
    let mut transport = AsyncRwTransport::new_server(input, written).with_max_line_length(64);
    let mut read = Vec::new();
    let mut seen = 0;
    loop {
        let message = transport.receive().await;
        // Answers rmcp wrote before handing this message over (or before the end).
        let mut chunk = vec![0u8; 64 * 1024];
        while let Ok(Ok(n)) = tokio::time::timeout(
            std::time::Duration::from_millis(20),
            answers.read(&mut chunk),
        )
        .await
        {
            seen += chunk[..n].iter().filter(|b| **b == b'\n').count();
        }
        read.extend(std::iter::repeat_n("Invalid".to_string(), seen));
        seen = 0;
        match message {
            Some(m) => read.push(format!("{m:?}")),
            None => return read,
        }
    }
}

#[tokio::test]
async fn lines_are_read_skipped_and_refused_as_rmcps_transport_does() {
    let input: &'static [u8] = concat!(
        "\n",
        "\r\n",
        "not json at all\n",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n",
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{\"cursor\":\"a long cursor that makes the line too long\"}}\n",
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":42}\n",
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/unknown\"}\n",
        "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\"}\n",
        "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{}}\n",
        "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}",
    )
    .as_bytes();
    let read = ours(input).await;
    assert_eq!(read, rmcps_transport(input).await);
    assert_eq!(read.len(), 5, "{read:#?}");
    assert!(
        read[0].contains("PingRequest") && read[0].contains("Number(1)"),
        "{read:#?}"
    );
    assert_eq!(read[1], "Invalid", "method 42 is JSON but no request");
    assert!(
        read[3].contains("ListToolsRequest") && read[3].contains("Number(4)"),
        "{read:#?}"
    );
    assert!(
        read[4].contains("CustomRequest"),
        "a call without a name: {read:#?}"
    );
}

#[tokio::test]
async fn a_line_longer_than_the_limit_is_skipped_whole_across_reads() {
    let (mut client, server) = tokio::io::duplex(16);
    let mut reader = Reader::new(server, 64);
    let writing = tokio::spawn(async move {
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"{}\"}}\n",
            "x".repeat(500)
        );
        client.write_all(long.as_bytes()).await.expect("written");
        client
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n")
            .await
            .expect("written");
    });
    let Read::Message(message) = reader.next().await else {
        panic!("the message after the long line");
    };
    assert!(format!("{message:?}").contains("Number(2)"), "{message:?}");
    writing.await.expect("joined");
    assert!(matches!(reader.next().await, Read::Closed));
}

/// The regression: rmcp drops a `receive` future whenever another event (an answer sent) wins
/// its select. A request read in part at that moment lost its first part, and the rest was
/// answered `Invalid Request`: the request itself never ran.
#[tokio::test]
async fn a_line_read_in_part_when_the_read_is_dropped_is_whole_on_the_next_read() {
    let (mut client, server) = tokio::io::duplex(1024);
    let mut reader = Reader::new(server, 1024);
    client
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":")
        .await
        .expect("written");
    let dropped = tokio::time::timeout(std::time::Duration::from_millis(50), reader.next()).await;
    assert!(dropped.is_err(), "half a line is no message yet");
    client
        .write_all(b"3,\"method\":\"tools/list\"}\n")
        .await
        .expect("written");
    let Read::Message(message) = reader.next().await else {
        panic!("the request, whole");
    };
    assert!(
        format!("{message:?}").contains("ListToolsRequest")
            && format!("{message:?}").contains("Number(3)"),
        "{message:?}"
    );
    // And the line after it starts afresh.
    client
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}\n")
        .await
        .expect("written");
    let Read::Message(message) = reader.next().await else {
        panic!("the next request");
    };
    assert!(format!("{message:?}").contains("Number(4)"), "{message:?}");
}
