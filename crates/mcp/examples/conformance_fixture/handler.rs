//! The `ServerHandler` rmcp calls: the task tools and `tasks/*` go to closedloop's server
//! unchanged; everything else is the suite's.

use crate::{Change, Fixture, catalog, interactive, mrtr, tools};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
    CompleteResult, CompletionInfo, GetPromptRequestParams, GetPromptResponse, GetTaskParams,
    GetTaskResult, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SetLevelRequestParams,
    SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::json;
use tokio::sync::broadcast;

impl Fixture {
    /// Whether closedloop serves `name` (the task tools and closedloop's own command tools).
    fn is_closedloop(&self, name: &str) -> bool {
        self.closedloop.get_tool(name).is_some()
    }

    /// The suite's tools, each answered as its scenario asks.
    async fn suite_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.as_ref();
        let args = request.arguments.clone().unwrap_or_default();
        let responses = &request.input_responses;
        if let Some(answer) = tools::content(name, &args) {
            return answer;
        }
        if let Some(answer) = self.notifying(name, &cx).await {
            return answer;
        }
        if let Some(answer) = interactive::asking(name, &args, responses, &cx).await {
            return answer;
        }
        let caps = mrtr::caps_json(cx.client_capabilities());
        if let Some(answer) = mrtr::stateless(name, responses, &caps) {
            return Ok(answer);
        }
        if let Some(answer) = self.stateful(&request) {
            return answer;
        }
        Err(McpError::invalid_params(
            format!("Unknown tool: {name}"),
            Some(json!({"tool": name})),
        ))
    }
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_completions()
                .enable_prompts()
                .enable_resources()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_prompts_list_changed()
                .enable_resources_subscribe()
                .enable_resources_list_changed()
                .enable_logging()
                // closedloop's: the task tools answer a Tasks client with tasks.
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new(
            "closedloop-conformance-fixture",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        r: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut list = tools::list();
        list.extend(self.closedloop.list_tools(r, cx).await?.tools);
        Ok(ListToolsResult::with_all_items(list))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let suite = tools::list().into_iter().find(|t| t.name == name);
        suite.or_else(|| self.closedloop.get_tool(name))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        match self.is_closedloop(&request.name) {
            true => self.closedloop.call_tool(request, cx).await,
            false => self.suite_tool(request, cx).await,
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.closedloop.get_task(request, cx).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.closedloop.update_task(request, cx).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.closedloop.cancel_task(request, cx).await
    }

    async fn list_resources(
        &self,
        _r: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(catalog::resources()))
    }

    async fn list_resource_templates(
        &self,
        _r: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(
            catalog::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        catalog::read(request.uri.as_str()).map(Into::into)
    }

    async fn subscribe(
        &self,
        _r: SubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn unsubscribe(
        &self,
        _r: UnsubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut rx = self.changes.subscribe();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                change = rx.recv() => {
                    let sink = context.sink();
                    let sent = match change {
                        Ok(Change::Tools) if sink.accepted().tools_list_changed == Some(true) => sink.notify_tool_list_changed().await,
                        Ok(Change::Prompts) if sink.accepted().prompts_list_changed == Some(true) => sink.notify_prompt_list_changed().await,
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => Ok(()),
                        Err(broadcast::error::RecvError::Closed) => return Ok(()),
                    };
                    if sent.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }

    async fn list_prompts(
        &self,
        _r: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(catalog::prompts()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        catalog::get_prompt(&request)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        interactive::log(&cx, &format!("Log level set to: {:?}", request.level)).await;
        Ok(())
    }

    async fn complete(
        &self,
        _r: CompleteRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let info =
            CompletionInfo::new(Vec::new()).map_err(|e| McpError::internal_error(e, None))?;
        Ok(CompleteResult::new(info))
    }
}
