//! The suite's SEP-2322 tools: each answers with an `InputRequiredResult` (questions for the
//! client, and maybe a `requestState`) until the retried call carries the answers.
//!
//! `requestState` is sealed with a keyed hash so that the client may carry it but never change it
//! unnoticed (`test_input_required_result_tampered_state`).

use crate::Fixture;
use crate::tools::text;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, InputRequest, InputRequests,
    InputRequiredResult, Tool,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// A retried call's `inputResponses`.
pub(crate) type Responses = Option<BTreeMap<String, Value>>;

/// The SEP-2322 tools, in `tools/list` order.
pub(crate) fn tools() -> Vec<Tool> {
    let t = |name: &'static str, description: &'static str| {
        Tool::new(
            name,
            description,
            crate::tools::object(json!({"type": "object", "properties": {}})),
        )
    };
    vec![
        t(
            "test_input_required_result_elicitation",
            "SEP-2322: asks for a name",
        ),
        t(
            "test_input_required_result_sampling",
            "SEP-2322: asks for a sampling answer",
        ),
        t(
            "test_input_required_result_list_roots",
            "SEP-2322: asks for the client's roots",
        ),
        t(
            "test_input_required_result_request_state",
            "SEP-2322: round-trips requestState",
        ),
        t(
            "test_input_required_result_multiple_inputs",
            "SEP-2322: asks three things at once",
        ),
        t(
            "test_input_required_result_multi_round",
            "SEP-2322: asks in two rounds",
        ),
        t(
            "test_input_required_result_tampered_state",
            "SEP-2322: refuses a forged requestState",
        ),
        t(
            "test_input_required_result_capabilities",
            "SEP-2322: asks only what the client can answer",
        ),
    ]
}

fn input(method: &str, params: Value) -> InputRequest {
    serde_json::from_value(json!({"method": method, "params": params}))
        .unwrap_or_else(|e| panic!("input request {method}: {e}"))
}

/// A form asking for one `field` of JSON type `ty`.
pub(crate) fn ask(message: &str, field: &str, ty: &str) -> InputRequest {
    input(
        "elicitation/create",
        json!({
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": {field: {"type": ty}}, "required": [field]}
        }),
    )
}

/// A sampling request for one user message.
pub(crate) fn sample(text: &str, max_tokens: u32) -> InputRequest {
    input(
        "sampling/createMessage",
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max_tokens}),
    )
}

fn roots() -> InputRequest {
    input("roots/list", json!({}))
}

/// An `InputRequiredResult` asking `requests`, with `state`.
pub(crate) fn need(requests: Vec<(&str, InputRequest)>, state: Option<String>) -> CallToolResponse {
    let map: InputRequests = requests
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    CallToolResponse::InputRequired(InputRequiredResult::new(Some(map), state))
}

/// The `content.<field>` string of an elicitation answer, if the answer has that shape.
pub(crate) fn answer<'a>(responses: &'a Responses, key: &str, field: &str) -> Option<&'a str> {
    responses
        .as_ref()?
        .get(key)?
        .get("content")?
        .get(field)?
        .as_str()
}

/// Whether the answers include an object under `key`.
pub(crate) fn has(responses: &Responses, key: &str) -> bool {
    responses
        .as_ref()
        .and_then(|r| r.get(key))
        .is_some_and(Value::is_object)
}

/// The client's capabilities as JSON (`null` when it declared none).
pub(crate) fn caps_json(caps: Option<ClientCapabilities>) -> Value {
    caps.and_then(|c| serde_json::to_value(c).ok())
        .unwrap_or(Value::Null)
}

/// `test_input_required_result_capabilities`: asks through each capability the client declared.
fn by_capability(caps: &Value, responses: &Responses) -> CallToolResponse {
    if responses.as_ref().is_some_and(|r| !r.is_empty()) {
        return text("inputs received");
    }
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

/// The tools that need no `requestState`; `None` for any other.
pub(crate) fn stateless(
    name: &str,
    responses: &Responses,
    caps: &Value,
) -> Option<CallToolResponse> {
    Some(match name {
        "test_input_required_result_elicitation" => match answer(responses, "user_name", "name") {
            Some(name) => text(format!("Hello, {name}!")),
            None => need(
                vec![("user_name", ask("What is your name?", "name", "string"))],
                None,
            ),
        },
        "test_input_required_result_sampling" => {
            let reply = responses.as_ref().and_then(|r| r.get("capital_question"));
            match reply.filter(|r| r.is_object()) {
                Some(r) => {
                    let t = r.pointer("/content/text").and_then(Value::as_str);
                    text(format!("Sampling result: {}", t.unwrap_or("no text")))
                }
                None => need(
                    vec![(
                        "capital_question",
                        sample("What is the capital of France?", 100),
                    )],
                    None,
                ),
            }
        }
        "test_input_required_result_list_roots" => {
            let listed = responses.as_ref().and_then(|r| r.get("client_roots"));
            match listed
                .and_then(|r| r.get("roots"))
                .and_then(Value::as_array)
            {
                Some(roots) => {
                    let uris: Vec<&str> = roots
                        .iter()
                        .filter_map(|r| r.get("uri").and_then(Value::as_str))
                        .collect();
                    text(format!("Found {} root(s): {}", uris.len(), uris.join(", ")))
                }
                None => need(vec![("client_roots", roots())], None),
            }
        }
        "test_input_required_result_capabilities" => by_capability(caps, responses),
        _ => return None,
    })
}

impl Fixture {
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

    /// The tools that keep state across rounds in `requestState`; `None` for any other.
    pub(crate) fn stateful(
        &self,
        request: &CallToolRequestParams,
    ) -> Option<Result<CallToolResponse, McpError>> {
        let responses = &request.input_responses;
        let state = request.request_state.as_deref();
        Some(match request.name.as_ref() {
            "test_input_required_result_request_state" => self.request_state(state, responses),
            "test_input_required_result_multiple_inputs" => self.multiple_inputs(state, responses),
            "test_input_required_result_multi_round" => self.multi_round(state, responses),
            "test_input_required_result_tampered_state" => match state {
                Some(s) => self.open(s).map(|_| text("state-ok")),
                None => {
                    let confirm = ask("Please confirm", "ok", "boolean");
                    let sealed = self.seal(json!({"kind": "tamper-check"}));
                    Ok(need(vec![("confirm", confirm)], Some(sealed)))
                }
            },
            _ => return None,
        })
    }

    fn request_state(
        &self,
        state: Option<&str>,
        responses: &Responses,
    ) -> Result<CallToolResponse, McpError> {
        let ok = match state {
            Some(s) if has(responses, "confirm") => {
                self.open(s)?.get("kind") == Some(&json!("request-state"))
            }
            _ => false,
        };
        Ok(match ok {
            true => text("state-ok: requestState validated"),
            false => {
                let confirm = ask("Please confirm", "ok", "boolean");
                let sealed = self.seal(json!({"kind": "request-state"}));
                need(vec![("confirm", confirm)], Some(sealed))
            }
        })
    }

    fn multiple_inputs(
        &self,
        state: Option<&str>,
        responses: &Responses,
    ) -> Result<CallToolResponse, McpError> {
        let all = ["user_name", "greeting", "client_roots"]
            .iter()
            .all(|k| has(responses, k));
        let ok = match state {
            Some(s) if all => self.open(s)?.get("kind") == Some(&json!("multiple-inputs")),
            _ => false,
        };
        if ok {
            let name = answer(responses, "user_name", "name").unwrap_or("unknown");
            return Ok(text(format!("Name: {name}; all three inputs received")));
        }
        let asks = vec![
            ("user_name", ask("What is your name?", "name", "string")),
            ("greeting", sample("Generate a greeting", 50)),
            ("client_roots", roots()),
        ];
        Ok(need(
            asks,
            Some(self.seal(json!({"kind": "multiple-inputs"}))),
        ))
    }

    fn multi_round(
        &self,
        state: Option<&str>,
        responses: &Responses,
    ) -> Result<CallToolResponse, McpError> {
        let round = match state {
            Some(s) => self.open(s)?,
            None => Value::Null,
        };
        Ok(match round.get("round").and_then(Value::as_u64) {
            Some(1) if has(responses, "step1") => {
                let name = answer(responses, "step1", "name").unwrap_or("friend");
                let step2 = ask("Step 2: What is your favorite color?", "color", "string");
                let sealed = self.seal(json!({"round": 2, "name": name}));
                need(vec![("step2", step2)], Some(sealed))
            }
            Some(2) if has(responses, "step2") => {
                let name = round
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("friend");
                let color = answer(responses, "step2", "color").unwrap_or("unknown");
                text(format!("Multi-round complete for {name} who likes {color}"))
            }
            _ => {
                let step1 = ask("Step 1: What is your name?", "name", "string");
                need(vec![("step1", step1)], Some(self.seal(json!({"round": 1}))))
            }
        })
    }
}
