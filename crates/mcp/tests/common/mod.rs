//! What the MCP tests share: an engine over simulated devices, and a server on one end of an
//! in-process pipe (MCP over `tokio::io::duplex`, exactly as over stdio); for the HTTP tests, a
//! gateway on a loopback port and its clients ([`gateway`]).

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

pub mod resources;
pub mod slide;

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

/// What the HTTP tests share: an engine and the Streamable HTTP endpoint in this process on a free
/// loopback port, over the shared lamp and a slow slide, with an `ops` and a `viewer` token; and
/// the clients that call it (rmcp's, of both generations, and raw requests).
pub mod gateway {
    use super::{Client, plants, sha256_hex};
    use closedloop_engine::Engine;
    use closedloop_journal::Journal;
    use closedloop_mcp::Server;
    use closedloop_mcp::http::{self, HttpOptions};
    use reqwest::StatusCode;
    use rmcp::model::ProtocolVersion;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceExt};
    use serde_json::{Value, json};
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::task::JoinHandle;

    pub const OPS: &str = "ops-secret-7f3a";
    pub const VIEWER: &str = "viewer-secret-91c2";

    /// The server table; `{TOKENS}` is replaced by the token tables.
    const SERVER: &str = r#"
[server]
name = "http"
journal = "sqlite://journal.db"
{TOKENS}
"#;

    /// The shared lamp and a slow shared slide (50 mm/s, no faults) with the token tables `tokens`.
    pub fn plant_text(tokens: &str) -> String {
        format!(
            "{}{}\n{}",
            SERVER.replace("{TOKENS}", tokens),
            plants::LAMP,
            plants::slide_at(50.0)
        )
    }

    /// `ops` may act on both devices; `viewer` may only read.
    pub fn tokens() -> String {
        format!(
            "[[server.token]]\nname = \"ops\"\nsha256 = \"{}\"\nscopes = [\"read\", \"actuate:lamp\", \"actuate:slide\"]\n\
             [[server.token]]\nname = \"viewer\"\nsha256 = \"{}\"\nscopes = [\"read\"]\n",
            sha256_hex(OPS),
            sha256_hex(VIEWER)
        )
    }

    /// The engine and the HTTP endpoint, in this process, on a free loopback port.
    pub struct Gateway {
        pub url: String,
        pub engine: Arc<Engine>,
        journal_url: String,
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        task: Option<JoinHandle<Result<(), http::HttpError>>>,
        _dir: tempfile::TempDir,
    }

    impl Gateway {
        pub async fn start(tokens: &str, opts: HttpOptions) -> Gateway {
            Gateway::start_plant(&plant_text(tokens), opts).await
        }

        pub async fn start_plant(plant: &str, opts: HttpOptions) -> Gateway {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("plant.toml");
            std::fs::write(&path, plant).unwrap();
            let plant = closedloop_plant::load(&path).unwrap_or_else(|e| panic!("{e}"));
            let journal_url = plant.server.journal.clone();
            let journal = Journal::open(&journal_url).await.unwrap();
            let drivers = closedloop_connect::build_drivers(&plant).unwrap();
            let links = drivers.open(&plant.devices).expect("links");
            let engine = Arc::new(
                Engine::start(Arc::new(plant), journal, links)
                    .await
                    .unwrap(),
            );
            // Bound before the server task starts: connections queue until it accepts them.
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}{}", listener.local_addr().unwrap(), http::PATH);
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let server = Server::new(Arc::clone(&engine), "http");
            let task = tokio::spawn(http::serve(listener, server, opts, async move {
                let _ = stopped.await;
            }));
            Gateway {
                url,
                engine,
                journal_url,
                stop: Some(stop),
                task: Some(task),
                _dir: dir,
            }
        }

        /// Stops HTTP and the engine, then reads the journal's `caller` of a command.
        pub async fn stop_and_caller(mut self, command_id: &str) -> Option<String> {
            self.stop.take().map(|s| s.send(()));
            if let Some(t) = self.task.take() {
                t.await.unwrap().unwrap();
            }
            self.engine.shutdown().await;
            let journal = Journal::open(&self.journal_url).await.unwrap();
            let row = journal.get(command_id).await.unwrap().expect("journaled");
            journal.close().await;
            row.caller
        }

        /// Stops everything when the test journaled nothing worth reading back.
        pub async fn stop_and_caller_none(mut self) {
            self.stop.take().map(|s| s.send(()));
            if let Some(t) = self.task.take() {
                t.await.unwrap().unwrap();
            }
            self.engine.shutdown().await;
        }
    }

    /// A Streamable HTTP client transport to `url`, with the bearer `token` if any.
    pub fn transport(
        url: &str,
        token: Option<&str>,
    ) -> StreamableHttpClientTransport<reqwest::Client> {
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
        if let Some(t) = token {
            config = config.auth_header(t.to_string());
        }
        StreamableHttpClientTransport::from_config(config)
    }

    /// A 2025-era client: `initialize`, then a session.
    pub async fn session_client(url: &str, token: Option<&str>) -> Client {
        ().serve(transport(url, token)).await.unwrap()
    }

    /// A 2026-07-28 client: `server/discover`, then self-contained stateless requests.
    pub async fn stateless_client(url: &str, token: Option<&str>) -> Client {
        ().serve_with_lifecycle(
            transport(url, token),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap()
    }

    /// A raw 2026-07-28 JSON-RPC request (headers and `_meta` as the revision wants them).
    pub fn raw(
        url: &str,
        token: Option<&str>,
        method: &str,
        params: Value,
    ) -> reqwest::RequestBuilder {
        let mut params = params;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        });
        let mut req = reqwest::Client::new()
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method);
        if let Some(name) = params.get("name").and_then(Value::as_str) {
            req = req.header("mcp-name", name);
        }
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.body(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string())
    }

    /// A raw 2026-07-28 `tools/call` of `tool` with `args` (see [`raw`]).
    pub fn raw_tool(
        url: &str,
        token: Option<&str>,
        tool: &str,
        args: Value,
    ) -> reqwest::RequestBuilder {
        raw(
            url,
            token,
            "tools/call",
            json!({"name": tool, "arguments": args}),
        )
    }

    /// The `result` of a JSON answer.
    pub async fn result(resp: reqwest::Response) -> Value {
        assert_eq!(resp.status(), StatusCode::OK);
        let v: Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
        v["result"].clone()
    }

    /// Waits (bounded) until the engine reports a `running` command on `device`, and returns it.
    pub async fn running_on(engine: &Engine, device: &str) -> String {
        for _ in 0..200 {
            let list = engine.list(Some(device), Some("running"), 1).await.unwrap();
            if let Some(c) = list.first() {
                return serde_json::to_value(c).unwrap()["command_id"]
                    .as_str()
                    .unwrap()
                    .to_string();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no running command on {device}");
    }
}
