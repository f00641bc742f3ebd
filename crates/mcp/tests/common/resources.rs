//! What the resource and prompt tests share: a simulated lamp and slide, and a 2025-11-25 rmcp
//! client over an in-process pipe (`tokio::io::duplex`) that records every resource update.

use closedloop_engine::Engine;
use closedloop_mcp::Server;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ReadResourceRequestParams, ResourceContents,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// A lamp and a slide with the keys of `examples/workshop.toml`'s: the shared ones, with the
/// lamp's coil readable as `commanded` and its parameter described, and a slide that stalls at
/// 70 mm and is not idempotent.
pub fn plant() -> String {
    use super::plants::{self, replace_lines, with_faults};
    let lamp = replace_lines(
        plants::LAMP,
        &[
            (
                "contact = { discrete_input = 0 }",
                "commanded = { coil = 0 }\ncontact   = { discrete_input = 0 }",
            ),
            (
                r#"params = { on = { type = "bool" } }"#,
                r#"params = { on = { type = "bool", description = "true to switch on" } }"#,
            ),
        ],
    );
    let stall = r#"{ kind = "stall", at_mm = 70.0 }"#;
    let slide = replace_lines(
        plants::SLIDE,
        &[
            (
                plants::SLIDE_DRIVER,
                &with_faults(plants::SLIDE_DRIVER, stall),
            ),
            (
                "stopped_when = \"!moving\"",
                "stopped_when = \"!moving\"\nidempotent = false",
            ),
        ],
    );
    format!(
        "[server]\nname = \"resources-test\"\njournal = \"sqlite://journal.db\"\n\n{lamp}\n{slide}"
    )
}

/// Every `notifications/resources/updated` the client received: URI, monotonic and wall time.
#[derive(Clone, Default)]
pub struct Watcher {
    updates: Arc<Mutex<Vec<(String, Instant, i64)>>>,
}

impl ClientHandler for Watcher {
    async fn on_resource_updated(
        &self,
        p: ResourceUpdatedNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        self.updates
            .lock()
            .unwrap()
            .push((p.uri, Instant::now(), wall));
    }
}

impl Watcher {
    pub fn of(&self, uri: &str) -> Vec<(Instant, i64)> {
        let u = self.updates.lock().unwrap();
        u.iter()
            .filter(|(x, ..)| x == uri)
            .map(|(_, at, wall)| (*at, *wall))
            .collect()
    }

    /// Waits (without asking the server anything) until `uri` has more than `seen` updates.
    pub async fn more_than(&self, uri: &str, seen: usize, within: Duration) -> bool {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if self.of(uri).len() > seen {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        false
    }

    /// Waits until no update for `uri` arrived for `quiet`.
    pub async fn settle(&self, uri: &str, quiet: Duration) {
        loop {
            let n = self.of(uri).len();
            tokio::time::sleep(quiet).await;
            if self.of(uri).len() == n {
                return;
            }
        }
    }
}

pub struct Rig {
    pub client: RunningService<RoleClient, Watcher>,
    pub watcher: Watcher,
    pub server: Server,
    _dir: tempfile::TempDir,
}

pub async fn engine(dir: &std::path::Path) -> Arc<Engine> {
    super::engine(&plant(), dir).await.0
}

/// Starts a server over a pipe and returns its other end.
pub fn serve(server: &Server) -> tokio::io::DuplexStream {
    super::pipe(server.clone())
}

/// A 2025-11-25 client (`initialize`, `resources/subscribe`).
pub async fn start() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(engine(dir.path()).await, "test");
    let watcher = Watcher::default();
    let client = watcher
        .clone()
        .serve(serve(&server))
        .await
        .expect("handshake");
    Rig {
        client,
        watcher,
        server,
        _dir: dir,
    }
}

pub async fn call(client: &RunningService<RoleClient, Watcher>, tool: &str, args: Value) -> Value {
    let p = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap());
    let r: CallToolResult = client.call_tool(p).await.expect(tool);
    r.structured_content.expect("structuredContent")
}

pub async fn read(
    client: &RunningService<RoleClient, Watcher>,
    uri: &str,
) -> Result<Value, ServiceError> {
    let r = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await?;
    assert_eq!(r.contents.len(), 1);
    match &r.contents[0] {
        ResourceContents::TextResourceContents {
            uri: u,
            mime_type,
            text,
            ..
        } => {
            assert_eq!(u, uri);
            assert_eq!(mime_type.as_deref(), Some("application/json"));
            Ok(serde_json::from_str(text).expect("JSON"))
        }
        other => panic!("{other:?}"),
    }
}

pub fn mcp_error(e: ServiceError) -> rmcp::ErrorData {
    match e {
        ServiceError::McpError(e) => e,
        other => panic!("expected an MCP error, got {other:?}"),
    }
}
