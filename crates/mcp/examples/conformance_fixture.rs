//! The fixture server for the MCP conformance suite (`scripts/conformance`).
//!
//! It serves, over Streamable HTTP, the tools, resources and prompts the suite's server scenarios
//! call by name (`test_simple_text`, `test://static-text`, `test_simple_prompt`, the SEP-2322
//! `test_input_required_result_*` tools, …), each behaving as the scenario's description in the
//! suite asks. What is under test is everything around them: rmcp 3.11 and closedloop's own HTTP
//! stack. The real `closedloop serve --http` is run against the scenarios that need no fixture.
//!
//! Usage: `conformance_fixture [ADDR]` (default `127.0.0.1:0`). It prints
//! `conformance fixture listening on http://ADDR/mcp` to stderr once it accepts connections and
//! runs until killed.

// The suite still exercises sampling and logging, which SEP-2577 deprecates.
#![allow(deprecated)]

use closedloop_mcp::http::{Endpoint, HttpOptions, PATH};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities,
    CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock,
    CreateMessageRequestParams, ElicitRequestParams, ErrorCode, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, InputRequest, InputRequests,
    InputRequiredResult, JsonObject, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
    PaginatedRequestParams, ProgressNotificationParam, Prompt, PromptArgument, PromptMessage,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, Role, SamplingMessage, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, Tool,
    UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file.
const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// A change the diagnostic trigger tools announce to every open `subscriptions/listen` stream and
/// 2025 session.
#[derive(Debug, Clone, Copy)]
enum Change {
    Tools,
    Prompts,
}

#[derive(Clone)]
struct Fixture {
    changes: broadcast::Sender<Change>,
    /// Key for the integrity tag of `requestState` (fresh per process).
    state_key: Arc<[u8; 32]>,
}

fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(map) => map,
        other => panic!("not a JSON object: {other}"),
    }
}

fn empty_schema() -> JsonObject {
    object(json!({"type": "object", "properties": {}}))
}

fn tool(name: &'static str, description: &'static str) -> Tool {
    Tool::new(name, description, empty_schema())
}

fn tools() -> Vec<Tool> {
    let mut list = vec![
        tool("test_simple_text", "Returns one text block"),
        tool("test_image_content", "Returns one PNG image block"),
        tool("test_audio_content", "Returns one WAV audio block"),
        tool(
            "test_embedded_resource",
            "Returns one embedded text resource",
        ),
        tool(
            "test_multiple_content_types",
            "Returns text, image and an embedded resource",
        ),
        tool(
            "test_tool_with_logging",
            "Sends three log messages while it runs",
        ),
        tool(
            "test_tool_with_progress",
            "Reports progress 0, 50 and 100 of 100",
        ),
        tool("test_error_handling", "Always fails with isError"),
        tool(
            "test_elicitation_sep1034_defaults",
            "Elicits a form whose fields have defaults",
        ),
        tool(
            "test_elicitation_sep1330_enums",
            "Elicits a form with every enum variant",
        ),
        tool("test_reconnection", "Answers after a short delay"),
        tool(
            "test_missing_capability",
            "Needs the sampling client capability",
        ),
        tool(
            "test_streaming_elicitation",
            "Asks for input through an InputRequiredResult",
        ),
        tool(
            "test_logging_tool",
            "Logs only when the request asks for a log level",
        ),
        tool(
            "test_trigger_tool_change",
            "Announces a change of the tool list",
        ),
        tool(
            "test_trigger_prompt_change",
            "Announces a change of the prompt list",
        ),
        tool(
            "test_input_required_result_elicitation",
            "SEP-2322: asks for a name",
        ),
        tool(
            "test_input_required_result_sampling",
            "SEP-2322: asks for a sampling answer",
        ),
        tool(
            "test_input_required_result_list_roots",
            "SEP-2322: asks for the client's roots",
        ),
        tool(
            "test_input_required_result_request_state",
            "SEP-2322: round-trips requestState",
        ),
        tool(
            "test_input_required_result_multiple_inputs",
            "SEP-2322: asks three things at once",
        ),
        tool(
            "test_input_required_result_multi_round",
            "SEP-2322: asks in two rounds",
        ),
        tool(
            "test_input_required_result_tampered_state",
            "SEP-2322: refuses a forged requestState",
        ),
        tool(
            "test_input_required_result_capabilities",
            "SEP-2322: asks only what the client can answer",
        ),
    ];
    list.push(Tool::new(
        "test_sampling",
        "Asks the client's LLM",
        object(json!({"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]})),
    ));
    list.push(Tool::new(
        "test_elicitation",
        "Asks the user",
        object(json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]})),
    ));
    list.push(Tool::new(
        "json_schema_2020_12_tool",
        "Has a JSON Schema 2020-12 input schema",
        object(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"},
                "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                "phone": {"type": "string"},
                "email": {"type": "string"}
            },
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": false
        })),
    ));
    // SEP-2243: an argument mirrored into an `Mcp-Param-Region` header, which rmcp checks.
    list.push(Tool::new(
        "test_custom_headers",
        "Echoes an argument that is mirrored into an HTTP header",
        object(json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}, "required": ["region"]})),
    ));
    list
}

fn input(method: &str, params: Value) -> InputRequest {
    serde_json::from_value(json!({"method": method, "params": params}))
        .unwrap_or_else(|e| panic!("input request {method}: {e}"))
}

fn ask(message: &str, field: &str, ty: &str) -> InputRequest {
    input(
        "elicitation/create",
        json!({
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": {field: {"type": ty}}, "required": [field]}
        }),
    )
}

fn sample(text: &str, max_tokens: u32) -> InputRequest {
    input(
        "sampling/createMessage",
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max_tokens}),
    )
}

fn roots() -> InputRequest {
    input("roots/list", json!({}))
}

fn need(requests: Vec<(&str, InputRequest)>, state: Option<String>) -> CallToolResponse {
    let map: InputRequests = requests
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    CallToolResponse::InputRequired(InputRequiredResult::new(Some(map), state))
}

fn text(t: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(t)]).into()
}

/// The `content.<field>` string of an elicitation answer, if the answer has that shape.
fn answer<'a>(
    responses: &'a Option<std::collections::BTreeMap<String, Value>>,
    key: &str,
    field: &str,
) -> Option<&'a str> {
    responses
        .as_ref()?
        .get(key)?
        .get("content")?
        .get(field)?
        .as_str()
}

fn has(responses: &Option<std::collections::BTreeMap<String, Value>>, key: &str) -> bool {
    responses
        .as_ref()
        .and_then(|r| r.get(key))
        .is_some_and(Value::is_object)
}

fn caps_json(caps: Option<ClientCapabilities>) -> Value {
    caps.and_then(|c| serde_json::to_value(c).ok())
        .unwrap_or(Value::Null)
}

impl Fixture {
    fn new() -> Fixture {
        let (changes, _) = broadcast::channel(16);
        let mut key = [0u8; 32];
        let seed = format!("{:?}{}", std::time::SystemTime::now(), std::process::id());
        key.copy_from_slice(&Sha256::digest(seed.as_bytes()));
        Fixture {
            changes,
            state_key: Arc::new(key),
        }
    }

    fn tag(&self, payload: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.state_key.as_ref());
        h.update(payload.as_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// `payload.tag`: the client may carry it, never change it unnoticed.
    fn seal(&self, payload: Value) -> String {
        let p = payload.to_string();
        format!("{p}.{}", self.tag(&p))
    }

    fn open(&self, state: &str) -> Result<Value, McpError> {
        let bad = || McpError::invalid_params("requestState failed its integrity check", None);
        let (p, tag) = state.rsplit_once('.').ok_or_else(bad)?;
        if tag != self.tag(p) {
            return Err(bad());
        }
        serde_json::from_str(p).map_err(|_| bad())
    }

    async fn log(cx: &RequestContext<RoleServer>, msg: &str) {
        let _ = cx
            .peer
            .notify_logging_message(
                LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(msg))
                    .with_logger("conformance-fixture"),
            )
            .await;
    }

    async fn elicit(cx: &RequestContext<RoleServer>, params: Value) -> CallToolResponse {
        let params: ElicitRequestParams = match serde_json::from_value(params) {
            Ok(p) => p,
            Err(e) => return text(format!("bad elicitation: {e}")),
        };
        match cx.peer.create_elicitation(params).await {
            Ok(r) => text(format!(
                "Elicitation completed: action={}, content={}",
                serde_json::to_value(&r.action)
                    .unwrap_or_default()
                    .as_str()
                    .unwrap_or("?"),
                r.content
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "{}".into())
            )),
            Err(e) => {
                CallToolResult::error(vec![ContentBlock::text(format!("elicitation failed: {e}"))])
                    .into()
            }
        }
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
                .build(),
        )
        .with_server_info(Implementation::new(
            "closedloop-conformance-fixture",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.clone().unwrap_or_default();
        let responses = request.input_responses.clone();
        let state = request.request_state.clone();
        let caps = caps_json(cx.client_capabilities());
        Ok(match request.name.as_ref() {
            "test_simple_text" => text("This is a simple text response for testing."),
            "test_image_content" => CallToolResult::success(vec![ContentBlock::image(PNG, "image/png")]).into(),
            "test_audio_content" => {
                let audio: ContentBlock = serde_json::from_value(json!({"type": "audio", "data": WAV, "mimeType": "audio/wav"}))
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                CallToolResult::success(vec![audio]).into()
            }
            "test_embedded_resource" => CallToolResult::success(vec![ContentBlock::resource(
                ResourceContents::text("This is an embedded resource content.", "test://embedded-resource"),
            )])
            .into(),
            "test_multiple_content_types" => CallToolResult::success(vec![
                ContentBlock::text("Multiple content types test:"),
                ContentBlock::image(PNG, "image/png"),
                ContentBlock::resource(
                    ResourceContents::text(json!({"test": "data", "value": 123}).to_string(), "test://mixed-content-resource")
                        .with_mime_type("application/json"),
                ),
            ])
            .into(),
            "test_tool_with_logging" => {
                for (i, m) in ["Tool execution started", "Tool processing data", "Tool execution completed"].iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Self::log(&cx, m).await;
                }
                text("Tool with logging executed successfully")
            }
            "test_tool_with_progress" => {
                let token = cx.meta.get_progress_token();
                for (i, p) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    if let Some(t) = &token {
                        let _ = cx
                            .peer
                            .notify_progress(ProgressNotificationParam::new(t.clone(), p).with_total(100.0).with_message(format!("Completed step {p} of 100")))
                            .await;
                    }
                }
                text("Progress test completed")
            }
            "test_error_handling" => CallToolResult::error(vec![ContentBlock::text("This tool intentionally returns an error for testing")]).into(),
            "test_reconnection" => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                text("Reconnection test completed successfully.")
            }
            "test_sampling" => {
                let prompt = args.get("prompt").and_then(Value::as_str).unwrap_or("Hello").to_string();
                match cx.peer.create_message(CreateMessageRequestParams::new(vec![SamplingMessage::user_text(prompt)], 100)).await {
                    Ok(r) => {
                        let reply = serde_json::to_value(&r).unwrap_or_default();
                        let t = reply.pointer("/content/text").or_else(|| reply.pointer("/content/0/text")).and_then(Value::as_str).unwrap_or("No response").to_string();
                        text(format!("LLM response: {t}"))
                    }
                    Err(e) => CallToolResult::error(vec![ContentBlock::text(format!("sampling failed: {e}"))]).into(),
                }
            }
            "test_elicitation" => {
                let message = args.get("message").and_then(Value::as_str).unwrap_or("Please respond");
                Self::elicit(&cx, json!({
                    "mode": "form",
                    "message": message,
                    "requestedSchema": {"type": "object", "properties": {"response": {"type": "string", "description": "User's response"}}, "required": ["response"]}
                }))
                .await
            }
            "test_elicitation_sep1034_defaults" => {
                Self::elicit(&cx, json!({
                    "mode": "form",
                    "message": "Please review and update the form fields with defaults",
                    "requestedSchema": {"type": "object", "properties": {
                        "name": {"type": "string", "description": "User name", "default": "John Doe"},
                        "age": {"type": "integer", "description": "User age", "default": 30},
                        "score": {"type": "number", "description": "User score", "default": 95.5},
                        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                        "verified": {"type": "boolean", "description": "Verification status", "default": true}
                    }, "required": []}
                }))
                .await
            }
            "test_elicitation_sep1330_enums" => {
                Self::elicit(&cx, json!({
                    "mode": "form",
                    "message": "Please select options from the enum fields",
                    "requestedSchema": {"type": "object", "properties": {
                        "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
                        "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": [
                            {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}]},
                        "legacyEnum": {"type": "string", "description": "Select one option (legacy)", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
                        "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3, "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                        "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1, "maxItems": 3, "items": {"anyOf": [
                            {"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}, {"const": "value3", "title": "Third Choice"}]}}
                    }, "required": []}
                }))
                .await
            }
            "test_custom_headers" => text(format!("region: {}", args.get("region").and_then(Value::as_str).unwrap_or(""))),
            "json_schema_2020_12_tool" => text(format!("JSON Schema 2020-12 tool called with: {}", Value::Object(args))),
            "test_missing_capability" => {
                if caps.get("sampling").is_none() {
                    return Err(McpError::new(
                        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                        "test_missing_capability needs the sampling client capability",
                        Some(json!({"requiredCapabilities": {"sampling": {}}})),
                    ));
                }
                need(vec![("answer", sample("Say hello", 20))], None)
            }
            "test_streaming_elicitation" => {
                if has(&responses, "confirm") {
                    text("confirmed")
                } else {
                    need(vec![("confirm", ask("Continue?", "ok", "boolean"))], None)
                }
            }
            "test_logging_tool" => {
                if cx.meta.log_level().is_some() {
                    Self::log(&cx, "test_logging_tool ran").await;
                }
                text("logged only if asked")
            }
            "test_trigger_tool_change" => {
                let _ = self.changes.send(Change::Tools);
                let _ = cx.peer.notify_tool_list_changed().await;
                text("tool list changed")
            }
            "test_trigger_prompt_change" => {
                let _ = self.changes.send(Change::Prompts);
                let _ = cx.peer.notify_prompt_list_changed().await;
                text("prompt list changed")
            }
            "test_input_required_result_elicitation" => match answer(&responses, "user_name", "name") {
                Some(name) => text(format!("Hello, {name}!")),
                None => need(vec![("user_name", ask("What is your name?", "name", "string"))], None),
            },
            "test_input_required_result_sampling" => {
                if has(&responses, "capital_question") {
                    let r = &responses.as_ref().expect("checked")["capital_question"];
                    let t = r.pointer("/content/text").and_then(Value::as_str).unwrap_or("no text");
                    text(format!("Sampling result: {t}"))
                } else {
                    need(vec![("capital_question", sample("What is the capital of France?", 100))], None)
                }
            }
            "test_input_required_result_list_roots" => {
                match responses.as_ref().and_then(|r| r.get("client_roots")).and_then(|r| r.get("roots")).and_then(Value::as_array) {
                    Some(roots) => {
                        let uris: Vec<&str> = roots.iter().filter_map(|r| r.get("uri").and_then(Value::as_str)).collect();
                        text(format!("Found {} root(s): {}", uris.len(), uris.join(", ")))
                    }
                    None => need(vec![("client_roots", roots())], None),
                }
            }
            "test_input_required_result_request_state" => {
                let ok = match &state {
                    Some(s) if has(&responses, "confirm") => self.open(s)?.get("kind") == Some(&json!("request-state")),
                    _ => false,
                };
                if ok {
                    text("state-ok: requestState validated")
                } else {
                    need(vec![("confirm", ask("Please confirm", "ok", "boolean"))], Some(self.seal(json!({"kind": "request-state"}))))
                }
            }
            "test_input_required_result_multiple_inputs" => {
                let all = ["user_name", "greeting", "client_roots"].iter().all(|k| has(&responses, k));
                let ok = match &state {
                    Some(s) if all => self.open(s)?.get("kind") == Some(&json!("multiple-inputs")),
                    _ => false,
                };
                if ok {
                    let name = answer(&responses, "user_name", "name").unwrap_or("unknown");
                    text(format!("Name: {name}; all three inputs received"))
                } else {
                    need(
                        vec![
                            ("user_name", ask("What is your name?", "name", "string")),
                            ("greeting", sample("Generate a greeting", 50)),
                            ("client_roots", roots()),
                        ],
                        Some(self.seal(json!({"kind": "multiple-inputs"}))),
                    )
                }
            }
            "test_input_required_result_multi_round" => {
                let round = match &state {
                    Some(s) => self.open(s)?,
                    None => Value::Null,
                };
                let step1 = || need(vec![("step1", ask("Step 1: What is your name?", "name", "string"))], Some(self.seal(json!({"round": 1}))));
                match round.get("round").and_then(Value::as_u64) {
                    Some(1) if has(&responses, "step1") => {
                        let name = answer(&responses, "step1", "name").unwrap_or("friend");
                        need(
                            vec![("step2", ask("Step 2: What is your favorite color?", "color", "string"))],
                            Some(self.seal(json!({"round": 2, "name": name}))),
                        )
                    }
                    Some(2) if has(&responses, "step2") => {
                        let name = round.get("name").and_then(Value::as_str).unwrap_or("friend");
                        let color = answer(&responses, "step2", "color").unwrap_or("unknown");
                        text(format!("Multi-round complete for {name} who likes {color}"))
                    }
                    _ => step1(),
                }
            }
            "test_input_required_result_tampered_state" => match &state {
                Some(s) => {
                    self.open(s)?;
                    text("state-ok")
                }
                None => need(vec![("confirm", ask("Please confirm", "ok", "boolean"))], Some(self.seal(json!({"kind": "tamper-check"})))),
            },
            "test_input_required_result_capabilities" => {
                if responses.as_ref().is_some_and(|r| !r.is_empty()) {
                    text("inputs received")
                } else {
                    let mut asks = Vec::new();
                    if caps.get("elicitation").is_some() {
                        asks.push(("user_name", ask("What is your name?", "name", "string")));
                    }
                    if caps.get("sampling").is_some() {
                        asks.push(("greeting", sample("Generate a greeting", 50)));
                    }
                    if caps.get("roots").is_some() {
                        asks.push(("client_roots", roots()));
                    }
                    if asks.is_empty() {
                        text("the client declared no capability to ask through")
                    } else {
                        need(asks, None)
                    }
                }
            }
            other => {
                return Err(McpError::invalid_params(format!("Unknown tool: {other}"), Some(json!({"tool": other}))));
            }
        })
    }

    async fn list_resources(
        &self,
        _r: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new("test://static-text", "static-text")
                .with_title("Static Text Resource")
                .with_description("A static text resource for testing")
                .with_mime_type("text/plain"),
            Resource::new("test://static-binary", "static-binary")
                .with_title("Static Binary Resource")
                .with_description("A static binary resource (image) for testing")
                .with_mime_type("image/png"),
            Resource::new("test://watched-resource", "watched-resource")
                .with_title("Watched Resource")
                .with_description("A resource to subscribe to")
                .with_mime_type("text/plain"),
        ]))
    }

    async fn list_resource_templates(
        &self,
        _r: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("test://template/{id}/data", "template")
                .with_title("Resource Template")
                .with_description("A resource template with parameter substitution")
                .with_mime_type("application/json"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.as_str();
        let contents = match uri {
            "test://static-text" => {
                ResourceContents::text("This is the content of the static text resource.", uri)
            }
            "test://static-binary" => ResourceContents::blob(PNG, uri).with_mime_type("image/png"),
            "test://watched-resource" => ResourceContents::text("Watched resource content", uri),
            _ => match uri
                .strip_prefix("test://template/")
                .and_then(|r| r.strip_suffix("/data"))
            {
                Some(id) if !id.is_empty() && !id.contains('/') => ResourceContents::text(
                    json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                        .to_string(),
                    uri,
                )
                .with_mime_type("application/json"),
                _ => {
                    return Err(McpError::resource_not_found(
                        format!("Resource not found: {uri}"),
                        Some(json!({"uri": uri})),
                    ));
                }
            },
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        _r: SubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    #[allow(deprecated)]
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
        let arg = |n: &str, d: &str| {
            PromptArgument::new(n)
                .with_description(d)
                .with_required(true)
        };
        Ok(ListPromptsResult::with_all_items(vec![
            Prompt::new(
                "test_simple_prompt",
                Some("A simple prompt without arguments"),
                None,
            )
            .with_title("Simple Test Prompt"),
            Prompt::new(
                "test_prompt_with_arguments",
                Some("A prompt with required arguments"),
                Some(vec![
                    arg("arg1", "First test argument"),
                    arg("arg2", "Second test argument"),
                ]),
            )
            .with_title("Prompt With Arguments"),
            Prompt::new(
                "test_prompt_with_embedded_resource",
                Some("A prompt that includes an embedded resource"),
                Some(vec![arg("resourceUri", "URI of the resource to embed")]),
            )
            .with_title("Prompt With Embedded Resource"),
            Prompt::new(
                "test_prompt_with_image",
                Some("A prompt that includes image content"),
                None,
            )
            .with_title("Prompt With Image"),
            Prompt::new(
                "test_input_required_result_prompt",
                Some("SEP-2322: asks for context first"),
                None,
            ),
        ]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let args = request.arguments.clone().unwrap_or_default();
        let get = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let messages = match request.name.as_str() {
            "test_simple_prompt" => vec![PromptMessage::new_text(
                Role::User,
                "This is a simple prompt for testing.",
            )],
            "test_prompt_with_arguments" => vec![PromptMessage::new_text(
                Role::User,
                format!(
                    "Prompt with arguments: arg1='{}', arg2='{}'",
                    get("arg1"),
                    get("arg2")
                ),
            )],
            "test_prompt_with_embedded_resource" => {
                let uri = get("resourceUri");
                let uri = if uri.is_empty() {
                    "test://example-resource".to_string()
                } else {
                    uri
                };
                vec![
                    PromptMessage::new(
                        Role::User,
                        ContentBlock::resource(ResourceContents::text(
                            "Embedded resource content for testing.",
                            uri,
                        )),
                    ),
                    PromptMessage::new_text(
                        Role::User,
                        "Please process the embedded resource above.",
                    ),
                ]
            }
            "test_prompt_with_image" => vec![
                PromptMessage::new(Role::User, ContentBlock::image(PNG, "image/png")),
                PromptMessage::new_text(Role::User, "Please analyze the image above."),
            ],
            "test_input_required_result_prompt" => {
                let responses = request.input_responses.clone();
                match answer(&responses, "user_context", "context") {
                    Some(c) => vec![PromptMessage::new_text(
                        Role::User,
                        format!("Prompt with context: {c}"),
                    )],
                    None => {
                        let mut map = InputRequests::new();
                        map.insert(
                            "user_context".into(),
                            ask("What context should the prompt use?", "context", "string"),
                        );
                        return Ok(GetPromptResponse::InputRequired(InputRequiredResult::new(
                            Some(map),
                            None,
                        )));
                    }
                }
            }
            other => {
                return Err(McpError::invalid_params(
                    format!("Unknown prompt: {other}"),
                    None,
                ));
            }
        };
        Ok(GetPromptResult::new(messages).into())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Self::log(&cx, &format!("Log level set to: {:?}", request.level)).await;
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

/// The fixture behind closedloop's own HTTP stack: Host/Origin guard, in-flight limit and
/// bearer-token auth (no tokens declared, so loopback requests are the local user).
fn app(opts: &HttpOptions) -> axum::Router {
    let fixture = Fixture::new();
    closedloop_mcp::http::router_for(
        move || Ok(fixture.clone()),
        Vec::new(),
        opts.clone(),
        tokio_util::sync::CancellationToken::new(),
    )
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let local = listener.local_addr()?;
    let opts = HttpOptions::default();
    let app = app(&opts);
    eprintln!("conformance fixture listening on http://{local}{PATH}");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<Endpoint>(),
    )
    .await
}
