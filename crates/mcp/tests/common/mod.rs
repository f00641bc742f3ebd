//! What the MCP tests share: an engine over simulated devices, and a server on one end of an
//! in-process pipe (MCP over `tokio::io::duplex`, exactly as over stdio).

#![allow(dead_code)]

use closedloop_engine::Engine;
use closedloop_journal::Journal;
use closedloop_mcp::Server;
use closedloop_sim::SimDevice;
use rmcp::ServiceExt;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

#[path = "../../../../tests/plants/mod.rs"]
pub mod plants;

/// Starts an engine for a plant given as TOML (relative paths resolve against `dir`).
pub async fn engine(src: &str, dir: &Path) -> (Arc<Engine>, BTreeMap<String, SimDevice>) {
    let plant = closedloop_plant::parse(src, "test.toml", dir).unwrap_or_else(|e| panic!("{e}"));
    let journal = Journal::open(&plant.server.journal).await.expect("journal");
    let drivers = closedloop_connect::build_drivers(&plant).expect("drivers");
    let links = drivers.open(&plant.devices).expect("links");
    let engine = Engine::start(Arc::new(plant), journal, links)
        .await
        .expect("engine");
    (Arc::new(engine), drivers.sims)
}

/// Serves `server` on one end of a pipe and returns the other end, for a client.
pub fn pipe(server: Server) -> tokio::io::DuplexStream {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    client_io
}

/// An MCP client of a served `Server`.
pub type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

/// An MCP client over Streamable HTTP at `url` (`http://…/mcp`) with the bearer `token`.
pub async fn http_client(url: &str, token: &str) -> Client {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string())
        .auth_header(token.to_string());
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

/// Calls `tool` with `args`; a protocol error fails the test.
pub async fn call(c: &Client, tool: &str, args: serde_json::Value) -> rmcp::model::CallToolResult {
    let p = rmcp::model::CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    c.call_tool(p)
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// The structured content of a tool result.
pub fn sc(r: &rmcp::model::CallToolResult) -> &serde_json::Value {
    r.structured_content.as_ref().expect("structured content")
}

/// An rmcp client handler that declares the Tasks extension (`tasks`) or not.
#[derive(Clone)]
pub struct TaskClient {
    pub tasks: bool,
}

impl rmcp::ClientHandler for TaskClient {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
        let caps = match self.tasks {
            true => ClientCapabilities::builder().enable_tasks().build(),
            false => ClientCapabilities::default(),
        };
        ClientConfig::new(caps, Implementation::new("closedloop-test", "0.0.1"))
    }
}

/// A [`TaskClient`] session.
pub type TaskSession = rmcp::service::RunningService<rmcp::RoleClient, TaskClient>;

/// A [`TaskClient`] over `transport`: protocol 2026-07-28 when `modern` (the only one that gets
/// tasks), else a 2025 session.
pub async fn task_session<T, E, A>(transport: T, tasks: bool, modern: bool) -> TaskSession
where
    T: rmcp::transport::IntoTransport<rmcp::RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let client = TaskClient { tasks };
    if !modern {
        return client.serve(transport).await.unwrap();
    }
    let lifecycle = rmcp::ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    rmcp::ClientServiceExt::serve_with_lifecycle(client, transport, lifecycle)
        .await
        .unwrap()
}

/// Polls `tasks/get` (bounded: 10 s) until the task `id` has its tool result; that result. A
/// task that ends without one fails the test.
pub async fn task_result(
    peer: &rmcp::Peer<rmcp::RoleClient>,
    id: &str,
) -> serde_json::Map<String, serde_json::Value> {
    use rmcp::model::{GetTaskParams, TaskPayload};
    for _ in 0..200 {
        let got = peer.get_task(GetTaskParams::new(id)).await.unwrap().task;
        if let TaskPayload::Completed { result } = got.payload {
            return result;
        }
        assert!(!got.task.status.is_terminal(), "{:?}", got.task.status);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("task {id} did not end within 10 s")
}

/// A [`TaskClient`] over Streamable HTTP at `url` with the bearer `token`.
pub async fn http_task_session(url: &str, token: &str, tasks: bool, modern: bool) -> TaskSession {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string())
        .auth_header(token.to_string());
    task_session(
        StreamableHttpClientTransport::from_config(config),
        tasks,
        modern,
    )
    .await
}

/// The hex SHA-256 of a token's secret, as `[[server.token]] sha256` takes it.
pub fn sha256_hex(s: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
