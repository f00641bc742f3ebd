//! Resources `device://{id}/state`, `device://{id}/config`, `command://{id}` and their change
//! notifications (docs/architecture.md).
//!
//! - `device://{id}/state`: what `get_device_state` answers (liveness, last_seen, signals with
//!   unit, read time, age and source).
//! - `device://{id}/config`: the device's plant declaration, without secrets ([`config`]).
//! - `command://{id}`: the result object (docs/architecture.md), as `get_command_status` with
//!   `wait_s = 0`.
//! - `alarm://active` (when the plant declares alarms): the standing alarms raised now, each
//!   with severity, since, why and what it blocks; a raise or a clear notifies subscribers.
//!
//! `resources/list` names the state and config of every device (and `alarm://active`); commands are too many to list
//! and are offered through their URI template only. Change notifications come from
//! [`subscriptions`]: `resources/subscribe` for 2025 clients, `subscriptions/listen` for
//! 2026-07-28 clients, both fed by the same watchers.

mod config;
mod subscription_requests;
mod subscriptions;

pub(crate) use subscriptions::Subscriptions;

use crate::Server;
use closedloop_engine::EngineError;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::json;

/// The MIME type of every resource.
const JSON: &str = "application/json";
/// The `not_found` reason for a URI of no known shape: the shapes there are.
const NO_SUCH_RESOURCE: &str = "resources are device://{id}/state, device://{id}/config, command://{id}, command://{id}/timeline and alarm://active";
/// Longest command id accepted in a `command://` URI (a UUIDv7 has 36 characters).
const MAX_COMMAND_ID: usize = 64;

/// A resource URI, parsed. Parsing checks the shape only; whether the device or command exists
/// is the caller's question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Uri {
    /// `device://{id}/state`.
    State(String),
    /// `device://{id}/config`.
    Config(String),
    /// `command://{id}`.
    Command(String),
    /// `command://{id}/timeline` (page 0) or `command://{id}/timeline?page=N`.
    Timeline(String, usize),
    /// `alarm://active`.
    Alarms,
}

/// The standing alarms raised now.
pub(crate) const ALARMS_URI: &str = "alarm://active";

/// Timeline entries per page of `command://{id}/timeline`: a page stays well under what a
/// client reads comfortably (an entry is ~100–300 bytes).
pub(crate) const TIMELINE_PAGE: usize = 100;

impl Uri {
    /// The resource `uri` names, or `None` when it has none of the five shapes.
    pub(crate) fn parse(uri: &str) -> Option<Uri> {
        if uri == ALARMS_URI {
            return Some(Uri::Alarms);
        }
        if let Some(rest) = uri.strip_prefix("device://") {
            let (id, what) = rest.split_once('/')?;
            if !is_device_id(id) {
                return None;
            }
            return match what {
                "state" => Some(Uri::State(id.to_string())),
                "config" => Some(Uri::Config(id.to_string())),
                _ => None,
            };
        }
        let id = uri.strip_prefix("command://")?;
        if let Some((id, rest)) = id.split_once('/') {
            let page = match rest.strip_prefix("timeline")? {
                "" => 0,
                q => q.strip_prefix("?page=")?.parse().ok()?,
            };
            return Uri::parse(&format!("command://{id}")).map(|u| match u {
                Uri::Command(id) => Uri::Timeline(id, page),
                other => other,
            });
        }
        let ok = !id.is_empty()
            && id.len() <= MAX_COMMAND_ID
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        ok.then(|| Uri::Command(id.to_string()))
    }
}

/// One page of a command's whole timeline.
fn timeline_page(r: &closedloop_engine::CommandResult, page: usize) -> serde_json::Value {
    let total = r.timeline.len();
    let pages = total.div_ceil(TIMELINE_PAGE).max(1);
    let entries: Vec<_> = r
        .timeline
        .iter()
        .skip(page.saturating_mul(TIMELINE_PAGE))
        .take(TIMELINE_PAGE)
        .collect();
    let next = (page + 1 < pages)
        .then(|| format!("command://{}/timeline?page={}", r.command_id, page + 1));
    json!({"command_id": r.command_id, "status": r.status, "page": page, "pages": pages,
           "total": total, "entries": entries, "next": next})
}

/// Whether `id` has the shape of a plant-file device id (lower case, digits, `_`).
fn is_device_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// `device://{id}/state`.
pub(crate) fn state_uri(device: &str) -> String {
    format!("device://{device}/state")
}

/// `device://{id}/config`.
pub(crate) fn config_uri(device: &str) -> String {
    format!("device://{device}/config")
}

/// `resource_not_found` for `uri`, with the reason and the URI in its data.
fn not_found(uri: &str, why: &str) -> McpError {
    McpError::resource_not_found(
        format!("no resource {uri:?}: {why}"),
        Some(json!({"uri": uri})),
    )
}

/// The error for a caller without the `read` scope.
pub(crate) fn forbidden(caller: &crate::Caller, what: &str) -> McpError {
    McpError::invalid_request(
        format!(
            "forbidden: {} has no read scope and may not {what}",
            caller.name
        ),
        Some(json!({"error_code": "UNAUTHORIZED"})),
    )
}

impl Server {
    /// Refuses a caller without the `read` scope; `what` names the refused request.
    fn check_read(&self, cx: &RequestContext<RoleServer>, what: &str) -> Result<(), McpError> {
        let caller = self.caller(cx);
        if caller.may_read() {
            Ok(())
        } else {
            Err(forbidden(&caller, what))
        }
    }

    /// `resources/list`: the state and the config of every device. Commands are too many to
    /// list; they are offered through their URI templates only.
    pub(crate) async fn list_resources_impl(
        &self,
        _request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.check_read(&cx, "list resources")?;
        let mut list = Vec::new();
        for d in &self.engine.plant().devices {
            let about = if d.description.trim().is_empty() {
                String::new()
            } else {
                format!(" ({})", d.description.trim())
            };
            list.push(
                Resource::new(state_uri(&d.id), format!("{}_state", d.id))
                    .with_title(format!("{} — live state", d.id))
                    .with_description(format!(
                        "Liveness and latest signal values of {}{about}, each with unit, read time, \
                         age and source. Subscribe to be told when a value or the liveness changes.",
                        d.id
                    ))
                    .with_mime_type(JSON),
            );
            list.push(
                Resource::new(config_uri(&d.id), format!("{}_config", d.id))
                    .with_title(format!("{} — plant declaration", d.id))
                    .with_description(format!(
                        "How {} is declared in the plant file: driver, polling, liveness, signals \
                         with their sources and units, actions with parameters and completion criteria.",
                        d.id
                    ))
                    .with_mime_type(JSON),
            );
        }
        if !self.engine.plant().alarms.is_empty() {
            list.push(
                Resource::new(ALARMS_URI, "active_alarms")
                    .with_title("Active alarms")
                    .with_description(
                        "The standing alarms raised now (a guard door open, an over-temperature), \
                         each with severity, since when, why and the devices it blocks. Subscribe \
                         to be told when one is raised or cleared.",
                    )
                    .with_mime_type(JSON),
            );
        }
        Ok(ListResourcesResult::with_all_items(list))
    }

    /// `resources/templates/list`: the four URI shapes, described for a model that reads them.
    pub(crate) async fn list_resource_templates_impl(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let templates = vec![
            ResourceTemplate::new("device://{id}/state", "device_state")
                .with_title("Device state")
                .with_description(
                    "A device's liveness (online/offline/unknown), last_seen and latest signal values \
                     with unit, read time, age and source. {id} is a device id from list_devices.",
                )
                .with_mime_type(JSON),
            ResourceTemplate::new("device://{id}/config", "device_config")
                .with_title("Device declaration")
                .with_description(
                    "A device's plant declaration: driver kind, poll_ms, liveness window, signals \
                     with sources and units, actions with parameters, done_when/fail_when and \
                     verification. Never contains secrets.",
                )
                .with_mime_type(JSON),
            ResourceTemplate::new("command://{id}/timeline{?page}", "command_timeline")
                .with_title("Command timeline")
                .with_description(
                    "Every journaled event of one command, every reading included, oldest first, \
                     in pages of 100 entries (page 0 first; `next` names the following page). \
                     The result object keeps only milestones and the first and last readings.",
                )
                .with_mime_type(JSON),
            ResourceTemplate::new("command://{id}", "command")
                .with_title("Command result")
                .with_description(
                    "The result object of one command (status, verified, evidence, error_code, \
                     detail, hint, timeline). {id} is a command_id returned by an action tool. \
                     Subscribe to be told of every status change.",
                )
                .with_mime_type(JSON),
        ];
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    /// `resources/read`: the resource's JSON, pretty-printed, or `not_found` naming what exists.
    pub(crate) async fn read_resource_impl(
        &self,
        request: ReadResourceRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.check_read(&cx, "read resources")?;
        let uri = request.uri;
        let value = match Uri::parse(&uri) {
            Some(Uri::State(id)) => self.engine.device_state(&id).map(|s| json!(s)),
            Some(Uri::Config(id)) => self.engine.plant().device(&id).map(config::device),
            Some(Uri::Command(id)) => {
                Some(json!(self.command_result(&uri, &id).await?.into_model()))
            }
            Some(Uri::Timeline(id, page)) => {
                Some(timeline_page(&self.command_result(&uri, &id).await?, page))
            }
            Some(Uri::Alarms) => Some(self.active_alarms(&uri)?),
            None => return Err(not_found(&uri, NO_SUCH_RESOURCE)),
        };
        let Some(value) = value else {
            return Err(not_found(&uri, &self.no_device_text()));
        };
        let text = serde_json::to_string_pretty(&value)
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        Ok(
            ReadResourceResult::new(vec![ResourceContents::text(text, uri).with_mime_type(JSON)])
                .into(),
        )
    }

    /// `alarm://active`: the alarms raised now; `not_found` for a plant without alarms.
    pub(crate) fn active_alarms(&self, uri: &str) -> Result<serde_json::Value, McpError> {
        if self.engine.plant().alarms.is_empty() {
            return Err(not_found(uri, "this plant declares no [[alarm]]"));
        }
        let active: Vec<_> = self
            .engine
            .alarms()
            .into_iter()
            .filter(|a| a.active)
            .map(|a| {
                json!({"name": a.name, "severity": a.severity, "since": a.since,
                            "why": a.why, "blocks": a.blocks, "description": a.description})
            })
            .collect();
        Ok(json!({"active": active}))
    }

    /// A command's result object, or the error a request about `uri` answers when there is none.
    async fn command_result(
        &self,
        uri: &str,
        id: &str,
    ) -> Result<closedloop_engine::CommandResult, McpError> {
        // A viewer's read: never a dead-man command's renewal.
        match self.engine.peek(id).await {
            Ok(r) => Ok(r),
            Err(EngineError::UnknownCommand(_)) => Err(not_found(uri, "no command has this id")),
            Err(e) => Err(McpError::internal_error(e.to_string(), None)),
        }
    }

    /// The `not_found` reason for a device id the plant does not have: the ids it has.
    fn no_device_text(&self) -> String {
        let ids: Vec<&str> = self
            .engine
            .plant()
            .devices
            .iter()
            .map(|d| d.id.as_str())
            .collect();
        format!("no such device; the devices are {}", ids.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::Uri;

    #[test]
    fn uris_parse_by_shape() {
        assert_eq!(
            Uri::parse("device://lamp/state"),
            Some(Uri::State("lamp".into()))
        );
        assert_eq!(
            Uri::parse("device://slide_2/config"),
            Some(Uri::Config("slide_2".into()))
        );
        assert_eq!(
            Uri::parse("command://0193f0c2-7c1e-7a51-9c1f-3f0f4c1b2a77"),
            Some(Uri::Command("0193f0c2-7c1e-7a51-9c1f-3f0f4c1b2a77".into()))
        );
        assert_eq!(
            Uri::parse("command://0193f0c2-7c1e/timeline"),
            Some(Uri::Timeline("0193f0c2-7c1e".into(), 0))
        );
        assert_eq!(
            Uri::parse("command://0193f0c2-7c1e/timeline?page=3"),
            Some(Uri::Timeline("0193f0c2-7c1e".into(), 3))
        );
        assert_eq!(Uri::parse("alarm://active"), Some(Uri::Alarms));
        for bad in [
            "command://c1/timeline?page=x",
            "command://c1/timelines",
            "command://c1/timeline?pages=1",
            "command:///timeline",
        ] {
            assert_eq!(Uri::parse(bad), None, "{bad}");
        }
        for bad in [
            "device://lamp",
            "device://lamp/",
            "device://lamp/other",
            "device://Lamp/state",
            "device:///state",
            "device://lamp/state/x",
            "command://",
            "command://a/b",
            "alarm://all",
            "alarm://active/x",
            "file:///etc/passwd",
            "",
        ] {
            assert_eq!(Uri::parse(bad), None, "{bad}");
        }
    }
}
