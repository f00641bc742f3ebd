//! Confirmations nobody can give: with `[server] confirm_by`, nobody confirms their own request,
//! a confirmer's token included. A `confirm = true` action of a device that a `confirm_by` token
//! may act on, when that token is the only one in `confirm_by`, can never be confirmed if that
//! token asks for it. `closedloop check` warns; it does not refuse, since another token may be
//! the one that asks (and a plant may be edited in steps).

use super::sim_map::{Finding, Severity};
use closedloop_plant::{Plant, PlantError};

/// A warning for every `confirm = true` action that a `confirm_by` token may ask for while no
/// other `confirm_by` token exists to confirm it.
pub fn lint(plant: &Plant, file: &str) -> Vec<Finding> {
    let by = &plant.server.confirm_by;
    let [only] = by.as_slice() else {
        return Vec::new();
    };
    let Some(token) = plant.server.tokens.iter().find(|t| &t.name == only) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for device in &plant.devices {
        if !token.scopes.iter().any(|s| s.allows_actuate(&device.id)) {
            continue;
        }
        for action in device.actions.iter().filter(|a| a.confirm) {
            out.push(Finding {
                severity: Severity::Warning,
                error: PlantError {
                    file: file.to_string(),
                    device: Some(device.id.clone()),
                    key: Some(format!("action.{}.confirm", action.name)),
                    line: None,
                    message: format!(
                        "{only} may ask for {} {} and is the only token of [server] confirm_by: \
                         nobody confirms their own request, so a request {only} makes can never \
                         be confirmed. Add another person's token to confirm_by, or take \
                         {only}'s actuate scope for {}",
                        device.id, action.name, device.id
                    ),
                },
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plant(confirm_by: &str, scopes: &str) -> Plant {
        let text = format!(
            r#"
[server]
confirm_by = {confirm_by}
[[server.token]]
name = "boss"
sha256 = "{h}"
scopes = {scopes}
[[server.token]]
name = "operator"
sha256 = "{h}"
scopes = ["read"]
[[device]]
id = "press"
description = "A press"
driver = {{ kind = "sim", model = "relay" }}
[device.signals]
contact = {{ discrete_input = 0 }}
[[device.action]]
name = "stroke"
description = "One stroke of the press."
params = {{}}
write = [{{ coil = 0, value = "true" }}]
done_when = "contact"
expect_s = 0.05
confirm = true
"#,
            h = "0".repeat(64)
        );
        closedloop_plant::parse(&text, "t.toml", std::path::Path::new(".")).expect("parses")
    }

    #[test]
    fn a_sole_confirmer_that_may_act_is_warned_about() {
        let found = lint(&plant(r#"["boss"]"#, r#"["read", "actuate:*"]"#), "t.toml");
        assert_eq!(found.len(), 1, "{found:?}");
        let text = found[0].to_string();
        assert!(
            text.starts_with("warning: t.toml: device \"press\", key action.stroke.confirm: boss may ask for press stroke and is the only token of [server] confirm_by"),
            "{text}"
        );
    }

    #[test]
    fn a_second_confirmer_or_a_confirmer_that_cannot_act_is_not() {
        let two = plant(r#"["boss", "operator"]"#, r#"["read", "actuate:*"]"#);
        assert!(lint(&two, "t.toml").is_empty());
        let reader = plant(r#"["boss"]"#, r#"["read"]"#);
        assert!(lint(&reader, "t.toml").is_empty());
    }
}
