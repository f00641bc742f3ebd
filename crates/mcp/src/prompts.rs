//! Prompts `diagnose_device(device)` and `act_and_confirm(device, action)`. (Being written.)

use crate::Server;
use rmcp::model::{
    GetPromptRequestMethod, GetPromptRequestParams, GetPromptResponse, ListPromptsResult,
    PaginatedRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};

impl Server {
    pub(crate) async fn list_prompts_impl(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::default())
    }

    pub(crate) async fn get_prompt_impl(
        &self,
        _request: GetPromptRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        Err(McpError::method_not_found::<GetPromptRequestMethod>())
    }
}
