//! A Tasks client over Streamable HTTP (rmcp's own, declaring the extension, protocol
//! 2026-07-28) for the tests that drive gateways as tasks.

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, GetTaskParams, Implementation,
    ProtocolVersion, TaskPayload, TaskStatus,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient};
use serde_json::{Map, Value};
use std::time::Duration;

/// The transport's configuration for the gateway at `host_port`.
pub fn config(host_port: &str) -> StreamableHttpClientTransportConfig {
    StreamableHttpClientTransportConfig::with_uri(format!("http://{host_port}/mcp"))
}

/// A `tools/call` of `tool` with `args` (a JSON object).
pub fn params(tool: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().cloned().unwrap())
}

/// A client that declares the Tasks extension and nothing else.
#[derive(Clone)]
pub struct TasksClient;

impl ClientHandler for TasksClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::new("closedloop-tests", "0.0.1"),
        )
    }
}

/// A connected [`TasksClient`].
pub type Tasks = RunningService<RoleClient, TasksClient>;

/// A 2026-07-28 client declaring the Tasks extension.
pub async fn tasks_client(host_port: &str) -> Tasks {
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    TasksClient
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config(host_port)),
            lifecycle,
        )
        .await
        .unwrap()
}

/// Polls `tasks/get` (bounded: 15 s) until the task ends: its status and tool result.
pub async fn task_end(c: &Tasks, id: &str) -> (TaskStatus, Option<Map<String, Value>>) {
    for _ in 0..150 {
        let t = c.get_task(GetTaskParams::new(id)).await.unwrap().task;
        if t.task.status.is_terminal() {
            let result = match t.payload {
                TaskPayload::Completed { result } => Some(result),
                _ => None,
            };
            return (t.task.status, result);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("task {id} did not end within 15 s");
}
