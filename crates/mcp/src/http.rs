//! Streamable HTTP transport and bearer-token auth. (Being written.)

use crate::Caller;
use rmcp::RoleServer;
use rmcp::service::RequestContext;

/// The authenticated caller the HTTP layer attached to this request, if any.
pub(crate) fn caller_from(_cx: &RequestContext<RoleServer>) -> Option<Caller> {
    None
}
