//! The baseline of the bench: a bare rmcp server built from this workspace, with one `echo`
//! tool and nothing behind it. Its figures say what MCP over stdio costs on this machine, so
//! closedloop's can be read as a ratio of them. Given the plant, it also lists the very tools
//! `serve` would list for it (answering none of them), so `tools/list` compares like with like.

use anyhow::{Result, anyhow};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

/// The echo server.
#[derive(Clone)]
struct Echo {
    tools: Vec<Tool>,
}

impl Echo {
    fn new(plant: Option<&Path>) -> Result<Echo> {
        let schema = json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "additionalProperties": true
        });
        let schema = Arc::new(schema.as_object().cloned().unwrap_or_default());
        let mut tools = vec![Tool::new(
            "echo",
            "Answer with the arguments given.",
            schema,
        )];
        if let Some(path) = plant {
            let plant = closedloop_plant::load(path).map_err(|e| anyhow!("{e}"))?;
            tools.extend(closedloop_mcp::build_tools(&plant));
        }
        Ok(Echo { tools })
    }
}

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("closedloop-bench-echo", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let mut result = CallToolResult::success(vec![ContentBlock::text(args.to_string())]);
        result.structured_content = Some(args);
        Ok(result.into())
    }
}

/// Serves the echo server on stdin/stdout until the client closes them; with `plant`, it also
/// lists that plant's tools.
pub async fn serve(plant: Option<&Path>) -> Result<()> {
    let running = Echo::new(plant)?.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
