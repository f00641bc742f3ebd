//! Resources `device://{id}/state`, `device://{id}/config`, `command://{id}` and their change
//! notifications. (Being written: every method still answers "method not found".)

use crate::Server;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestMethod, ReadResourceRequestParams, ReadResourceResponse,
    SubscribeRequestMethod, SubscribeRequestParams, UnsubscribeRequestMethod,
    UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};

impl Server {
    pub(crate) async fn list_resources_impl(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::default())
    }

    pub(crate) async fn list_resource_templates_impl(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::default())
    }

    pub(crate) async fn read_resource_impl(
        &self,
        _request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        Err(McpError::method_not_found::<ReadResourceRequestMethod>())
    }

    pub(crate) async fn subscribe_impl(
        &self,
        _request: SubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Err(McpError::method_not_found::<SubscribeRequestMethod>())
    }

    pub(crate) async fn unsubscribe_impl(
        &self,
        _request: UnsubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Err(McpError::method_not_found::<UnsubscribeRequestMethod>())
    }
}
