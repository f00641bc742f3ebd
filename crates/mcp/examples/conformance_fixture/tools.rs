//! The suite's tools: the list `tools/list` shows (closedloop's tools follow it), and the ones
//! that answer at once with fixed content.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, JsonObject, ResourceContents, Tool,
};
use serde_json::{Value, json};

/// A 1×1 PNG.
pub(crate) const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file.
const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// `v` as a JSON object; the fixture's literals always are.
pub(crate) fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(map) => map,
        other => panic!("not a JSON object: {other}"),
    }
}

fn tool(name: &'static str, description: &'static str) -> Tool {
    Tool::new(
        name,
        description,
        object(json!({"type": "object", "properties": {}})),
    )
}

/// A tool whose one required argument `arg` is a string.
fn with_string(name: &'static str, description: &'static str, arg: &str) -> Tool {
    let schema =
        json!({"type": "object", "properties": {arg: {"type": "string"}}, "required": [arg]});
    Tool::new(name, description, object(schema))
}

/// A text-only tool result.
pub(crate) fn text(t: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(t)]).into()
}

/// The suite's tools, in `tools/list` order.
pub(crate) fn list() -> Vec<Tool> {
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
    ];
    list.extend(crate::mrtr::tools());
    list.push(with_string(
        "test_sampling",
        "Asks the client's LLM",
        "prompt",
    ));
    list.push(with_string("test_elicitation", "Asks the user", "message"));
    // The Tasks scenarios' one sync-only tool: never a task, whoever asks.
    list.push(with_string(
        "greet",
        "Sync-only: returns Hello, {name}!",
        "name",
    ));
    list.extend(schema_tools());
    list
}

/// The tools whose input schemas are what the scenarios check: JSON Schema 2020-12, and an
/// SEP-2243 argument mirrored into an `Mcp-Param-Region` header (which rmcp checks).
fn schema_tools() -> Vec<Tool> {
    vec![
        Tool::new(
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
        ),
        Tool::new(
            "test_custom_headers",
            "Echoes an argument that is mirrored into an HTTP header",
            object(
                json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}, "required": ["region"]}),
            ),
        ),
    ]
}

/// The tools that answer at once with fixed content (or their arguments); `None` for any other.
pub(crate) fn content(name: &str, args: &JsonObject) -> Option<Result<CallToolResponse, McpError>> {
    let arg = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    Some(Ok(match name {
        "test_simple_text" => text("This is a simple text response for testing."),
        "test_image_content" => {
            CallToolResult::success(vec![ContentBlock::image(PNG, "image/png")]).into()
        }
        "test_audio_content" => {
            let audio = json!({"type": "audio", "data": WAV, "mimeType": "audio/wav"});
            return Some(
                serde_json::from_value::<ContentBlock>(audio)
                    .map(|a| CallToolResult::success(vec![a]).into())
                    .map_err(|e| McpError::internal_error(e.to_string(), None)),
            );
        }
        "test_embedded_resource" => {
            CallToolResult::success(vec![ContentBlock::resource(ResourceContents::text(
                "This is an embedded resource content.",
                "test://embedded-resource",
            ))])
            .into()
        }
        "test_multiple_content_types" => CallToolResult::success(vec![
            ContentBlock::text("Multiple content types test:"),
            ContentBlock::image(PNG, "image/png"),
            ContentBlock::resource(
                ResourceContents::text(
                    json!({"test": "data", "value": 123}).to_string(),
                    "test://mixed-content-resource",
                )
                .with_mime_type("application/json"),
            ),
        ])
        .into(),
        "test_error_handling" => CallToolResult::error(vec![ContentBlock::text(
            "This tool intentionally returns an error for testing",
        )])
        .into(),
        "test_custom_headers" => text(format!("region: {}", arg("region"))),
        "json_schema_2020_12_tool" => text(format!(
            "JSON Schema 2020-12 tool called with: {}",
            Value::Object(args.clone())
        )),
        "greet" => text(format!("Hello, {}!", arg("name"))),
        _ => return None,
    }))
}
