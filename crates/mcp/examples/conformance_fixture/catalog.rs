//! The suite's resources and prompts.

use crate::mrtr::{answer, ask};
use crate::tools::PNG;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ContentBlock, GetPromptRequestParams, GetPromptResponse, GetPromptResult, InputRequests,
    InputRequiredResult, Prompt, PromptArgument, PromptMessage, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, Role,
};
use serde_json::{Value, json};

/// The resources `resources/list` shows.
pub(crate) fn resources() -> Vec<Resource> {
    vec![
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
    ]
}

/// The one resource template.
pub(crate) fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new("test://template/{id}/data", "template")
            .with_title("Resource Template")
            .with_description("A resource template with parameter substitution")
            .with_mime_type("application/json"),
    ]
}

/// `resources/read` of `uri`.
pub(crate) fn read(uri: &str) -> Result<ReadResourceResult, McpError> {
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
    Ok(ReadResourceResult::new(vec![contents]))
}

/// The prompts `prompts/list` shows.
pub(crate) fn prompts() -> Vec<Prompt> {
    let arg = |n: &str, d: &str| {
        PromptArgument::new(n)
            .with_description(d)
            .with_required(true)
    };
    vec![
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
    ]
}

/// `prompts/get`.
pub(crate) fn get_prompt(request: &GetPromptRequestParams) -> Result<GetPromptResponse, McpError> {
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
            let uri = match get("resourceUri") {
                u if u.is_empty() => "test://example-resource".to_string(),
                u => u,
            };
            vec![
                PromptMessage::new(
                    Role::User,
                    ContentBlock::resource(ResourceContents::text(
                        "Embedded resource content for testing.",
                        uri,
                    )),
                ),
                PromptMessage::new_text(Role::User, "Please process the embedded resource above."),
            ]
        }
        "test_prompt_with_image" => vec![
            PromptMessage::new(Role::User, ContentBlock::image(PNG, "image/png")),
            PromptMessage::new_text(Role::User, "Please analyze the image above."),
        ],
        "test_input_required_result_prompt" => {
            return Ok(context_prompt(&request.input_responses));
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

/// `test_input_required_result_prompt`: asks for the context, then uses it.
fn context_prompt(responses: &crate::mrtr::Responses) -> GetPromptResponse {
    match answer(responses, "user_context", "context") {
        Some(c) => GetPromptResult::new(vec![PromptMessage::new_text(
            Role::User,
            format!("Prompt with context: {c}"),
        )])
        .into(),
        None => {
            let mut map = InputRequests::new();
            map.insert(
                "user_context".into(),
                ask("What context should the prompt use?", "context", "string"),
            );
            GetPromptResponse::InputRequired(InputRequiredResult::new(Some(map), None))
        }
    }
}
