//! Prompts `diagnose_device(device)` and `act_and_confirm(device, action)` (docs/architecture.md),
//! written for a model: what the gateway knows right now, which tools to call next, and when to
//! stop and ask a person instead of acting again on real hardware.

mod act;
mod diagnose;
mod words;

use crate::Server;
use closedloop_plant::Device;
use rmcp::model::{
    GetPromptRequestParams, GetPromptResponse, JsonObject, ListPromptsResult,
    PaginatedRequestParams, Prompt, PromptArgument,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};

impl Server {
    pub(crate) async fn list_prompts_impl(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let plant = self.engine.plant();
        let devices = ids(plant.devices.iter().map(|d| d.id.as_str()));
        let actions = ids(plant.actions().map(|(d, a)| format!("{}.{}", d.id, a.name)));
        let device_arg = PromptArgument::new("device")
            .with_description(format!("Device id (list_devices names them): {devices}."))
            .with_required(true);
        let diagnose = Prompt::new(
            "diagnose_device",
            Some(
                "Find out why a device misbehaves, the way a technician would: gateway log, bus \
                 traffic, the device itself, then wiring and supply. Embeds the device's current \
                 state and its last commands.",
            ),
            Some(vec![device_arg.clone()]),
        )
        .with_title("Diagnose a device");
        let act = Prompt::new(
            "act_and_confirm",
            Some(
                "Run one action and report only what the hardware confirmed: how to call it, how \
                 to follow the command to a final status, and what each error code means for it.",
            ),
            Some(vec![
                device_arg,
                PromptArgument::new("action")
                    .with_description(format!("Action name of that device ({actions})."))
                    .with_required(true),
            ]),
        )
        .with_title("Act and confirm");
        Ok(ListPromptsResult::with_all_items(vec![diagnose, act]))
    }

    pub(crate) async fn get_prompt_impl(
        &self,
        request: GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let caller = self.caller(&cx);
        if !caller.may_read() {
            return Err(crate::resources::forbidden(&caller, "read device prompts"));
        }
        let args = request.arguments.unwrap_or_default();
        let plant = self.engine.plant();
        match request.name.as_str() {
            "diagnose_device" => {
                let device = device_arg(plant, &args, "diagnose_device")?;
                self.diagnose(device).await.map(Into::into)
            }
            "act_and_confirm" => {
                let device = device_arg(plant, &args, "act_and_confirm")?;
                let name = string_arg(&args, "action", "act_and_confirm", || action_names(device))?;
                let action = device.action(name).ok_or_else(|| {
                    McpError::invalid_params(
                        format!(
                            "device {} has no action {name:?}; its actions are {}",
                            device.id,
                            action_names(device)
                        ),
                        Some(json!({"argument": "action", "device": device.id,
                                    "valid": device.actions.iter().map(|a| &a.name).collect::<Vec<_>>()})),
                    )
                })?;
                Ok(self.act_and_confirm(device, action).into())
            }
            other => Err(McpError::invalid_params(
                format!("no prompt {other:?}; the prompts are diagnose_device and act_and_confirm"),
                Some(json!({"prompt": other})),
            )),
        }
    }
}

fn ids<S: AsRef<str>>(it: impl Iterator<Item = S>) -> String {
    it.map(|s| s.as_ref().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn action_names(d: &Device) -> String {
    ids(d.actions.iter().map(|a| a.name.as_str()))
}

fn string_arg<'a>(
    args: &'a JsonObject,
    name: &str,
    prompt: &str,
    valid: impl Fn() -> String,
) -> Result<&'a str, McpError> {
    match args.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        _ => Err(McpError::invalid_params(
            format!(
                "{prompt} needs the argument {name} (a string); one of: {}",
                valid()
            ),
            Some(json!({"argument": name})),
        )),
    }
}

fn device_arg<'a>(
    plant: &'a closedloop_plant::Plant,
    args: &JsonObject,
    prompt: &str,
) -> Result<&'a Device, McpError> {
    let all = || ids(plant.devices.iter().map(|d| d.id.as_str()));
    let id = string_arg(args, "device", prompt, all)?;
    plant.device(id).ok_or_else(|| {
        McpError::invalid_params(
            format!("no device {id:?}; the devices are {}", all()),
            Some(json!({"argument": "device",
                        "valid": plant.devices.iter().map(|d| &d.id).collect::<Vec<_>>()})),
        )
    })
}

fn about(d: &Device) -> String {
    let desc = d.description.trim();
    if desc.is_empty() {
        String::new()
    } else {
        format!(" ({desc})")
    }
}

fn json_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn signal_line(name: &str, s: &closedloop_engine::SignalState) -> String {
    let unit = s
        .unit
        .as_deref()
        .map(|u| format!(" {u}"))
        .unwrap_or_default();
    match (s.age_ms, &s.at) {
        (Some(age), Some(at)) if s.retained => format!(
            "{name} = {}{unit} (from {}, only a retained message, taken {age} ms ago at {at})",
            s.value, s.source
        ),
        (Some(age), Some(at)) => format!(
            "{name} = {}{unit} (from {}, read {age} ms ago at {at})",
            s.value, s.source
        ),
        _ => format!(
            "{name} = {}{unit} (from {}, only a retained message: its age is unknown)",
            s.value, s.source
        ),
    }
}
