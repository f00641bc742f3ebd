//! Home Assistant MQTT discovery messages (`<prefix>/<component>/[<node_id>/]<object_id>/config`)
//! read into entities: abbreviated keys written out (ESPHome and Tasmota abbreviate, Zigbee2MQTT
//! does not), `~` replaced by the base topic, the device an entity belongs to found by its
//! first identifier. Only what `init` maps is kept; the mapping is in `ha.rs`.

use serde_json::{Map, Value};

/// The abbreviations of the keys `init` reads, as Home Assistant's MQTT documentation lists them.
const ABBREVIATIONS: &[(&str, &str)] = &[
    ("avty", "availability"),
    ("avty_mode", "availability_mode"),
    ("avty_t", "availability_topic"),
    ("avty_tpl", "availability_template"),
    ("cmd_t", "command_topic"),
    ("cmd_tpl", "command_template"),
    ("dev", "device"),
    ("dev_cla", "device_class"),
    ("exp_aft", "expire_after"),
    ("json_attr_t", "json_attributes_topic"),
    ("obj_id", "object_id"),
    ("opt", "optimistic"),
    ("pl_avail", "payload_available"),
    ("pl_not_avail", "payload_not_available"),
    ("pl_on", "payload_on"),
    ("pl_off", "payload_off"),
    ("pl_prs", "payload_press"),
    ("pl_open", "payload_open"),
    ("pl_cls", "payload_close"),
    ("pl_stop", "payload_stop"),
    ("pl_lock", "payload_lock"),
    ("pl_unlk", "payload_unlock"),
    ("stat_t", "state_topic"),
    ("stat_val_tpl", "state_value_template"),
    ("stat_on", "state_on"),
    ("stat_off", "state_off"),
    ("stat_open", "state_open"),
    ("stat_clsd", "state_closed"),
    ("stat_locked", "state_locked"),
    ("stat_unlocked", "state_unlocked"),
    ("uniq_id", "unique_id"),
    ("unit_of_meas", "unit_of_measurement"),
    ("val_tpl", "value_template"),
    ("ret", "retain"),
    ("t", "topic"),
    ("ids", "identifiers"),
    ("mf", "manufacturer"),
    ("mdl", "model"),
    ("sw", "sw_version"),
];

/// One discovered entity.
#[derive(Debug, Clone)]
pub struct Entity {
    /// `switch`, `sensor`, …: the topic's component.
    pub component: String,
    /// The topic's object id (or the config's `object_id`).
    pub object_id: String,
    /// Its config with keys written out and `~` replaced.
    pub config: Map<String, Value>,
    /// The device it belongs to: its first identifier, else its name, else the config topic.
    pub device_key: String,
    /// The config topic it came on.
    pub topic: String,
}

impl Entity {
    /// A string key of its config.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.config.get(key).and_then(Value::as_str)
    }

    /// A key of the device table.
    pub fn device_text(&self, key: &str) -> Option<&str> {
        self.config.get("device")?.get(key)?.as_str()
    }

    /// Its own name: `name`, or `None` when it is null or absent (the device's own entity).
    pub fn name(&self) -> Option<&str> {
        self.text("name").filter(|n| !n.trim().is_empty())
    }
}

/// Reads one retained message; `Err` says why it is not a discovery config (a removal — an
/// empty payload — is `Ok(None)`).
pub fn read(prefix: &str, topic: &str, payload: &[u8]) -> Result<Option<Entity>, String> {
    let rest = topic
        .strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('/'))
        .and_then(|r| r.strip_suffix("/config"))
        .ok_or_else(|| format!("{topic}: not <prefix>/<component>/<object_id>/config"))?;
    let parts: Vec<&str> = rest.split('/').collect();
    let (component, object_id) = match parts.as_slice() {
        [c, o] | [c, _, o] => (c.to_string(), o.to_string()),
        _ => {
            return Err(format!(
                "{topic}: not <prefix>/<component>/<object_id>/config"
            ));
        }
    };
    if payload.is_empty() {
        return Ok(None);
    }
    let raw: Value = serde_json::from_slice(payload)
        .map_err(|e| format!("{topic}: the payload is not JSON ({e})"))?;
    let Value::Object(raw) = raw else {
        return Err(format!("{topic}: the payload is not a JSON object"));
    };
    if topic.contains("${") || raw.iter().any(|(k, v)| k.contains("${") || expands(v)) {
        // The plant file replaces `${env:NAME}` in every string at load: a device's text would
        // read the service's environment into tools/list and into what is published.
        return Err(format!(
            "{topic}: its config holds \"${{\", which the plant file would expand into the service's environment variables; it is left out — map it by hand if it is yours"
        ));
    }
    let config = expand(raw);
    let object_id = config
        .get("object_id")
        .and_then(Value::as_str)
        .map_or(object_id, str::to_string);
    let device = config.get("device");
    let first_id = device.and_then(|d| match d.get("identifiers") {
        Some(Value::Array(ids)) => ids.first().and_then(Value::as_str).map(str::to_string),
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    });
    let device_key = first_id
        .or_else(|| device.and_then(|d| d.get("name")?.as_str().map(str::to_string)))
        .unwrap_or_else(|| topic.to_string());
    Ok(Some(Entity {
        component,
        object_id,
        config,
        device_key,
        topic: topic.to_string(),
    }))
}

/// Whether a JSON value holds `${` anywhere (a string, a key, nested).
fn expands(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains("${"),
        Value::Array(a) => a.iter().any(expands),
        Value::Object(o) => o.iter().any(|(k, v)| k.contains("${") || expands(v)),
        _ => false,
    }
}

/// The config with every abbreviation written out (in the device table and availability list
/// too) and `~` at either end of a topic replaced by the base topic.
fn expand(raw: Map<String, Value>) -> Map<String, Value> {
    let base = raw.get("~").and_then(Value::as_str).map(str::to_string);
    let mut out = Map::new();
    for (k, v) in raw {
        let key = long(&k);
        let v = match v {
            Value::Object(m) => Value::Object(m.into_iter().map(|(k, v)| (long(&k), v)).collect()),
            Value::Array(items) if key == "availability" => Value::Array(
                items
                    .into_iter()
                    .map(|i| match i {
                        Value::Object(m) => Value::Object(
                            m.into_iter()
                                .map(|(k, v)| {
                                    let k = long(&k);
                                    let v = tilde(&k, v, base.as_deref());
                                    (k, v)
                                })
                                .collect(),
                        ),
                        other => other,
                    })
                    .collect(),
            ),
            v => tilde(&key, v, base.as_deref()),
        };
        out.insert(key, v);
    }
    out
}

fn long(k: &str) -> String {
    ABBREVIATIONS
        .iter()
        .find(|(short, _)| *short == k)
        .map_or(k, |(_, full)| full)
        .to_string()
}

/// A topic value with `~` at its start or end replaced by `base`.
fn tilde(key: &str, v: Value, base: Option<&str>) -> Value {
    let (Value::String(s), Some(base)) = (&v, base) else {
        return v;
    };
    if !(key.ends_with("_topic") || key == "topic") {
        return v;
    }
    if let Some(rest) = s.strip_prefix('~') {
        return Value::String(format!("{base}{rest}"));
    }
    if let Some(rest) = s.strip_suffix('~') {
        return Value::String(format!("{rest}{base}"));
    }
    v
}

/// A Jinja `value_template` as a JSON pointer: `None` for the plain payload (`{{ value }}`),
/// `Some(pointer)` for a plain `value_json` path (`{{ value_json.a.b }}`,
/// `{{ value_json['a'] }}`, with a trailing `| float` or `| int`); `Err` for anything else.
pub fn pointer(template: &str) -> Result<Option<String>, ()> {
    let inner = template
        .trim()
        .strip_prefix("{{")
        .and_then(|t| t.strip_suffix("}}"))
        .ok_or(())?
        .trim();
    let expr = match inner.split_once('|') {
        Some((e, filter)) => {
            let f = filter.trim();
            let plain = ["float", "int", "float(0)", "int(0)", "is_defined"];
            if !plain.contains(&f) {
                return Err(());
            }
            e.trim()
        }
        None => inner,
    };
    if expr == "value" {
        return Ok(None);
    }
    let path = expr.strip_prefix("value_json").ok_or(())?;
    let mut out = String::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            if key.is_empty() || !key.chars().all(|c| c.is_alphanumeric() || c == '_') {
                return Err(());
            }
            out.push('/');
            out.push_str(key);
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').ok_or(())?;
            let key = r[..end].trim_matches(|c| c == '\'' || c == '"');
            out.push('/');
            out.push_str(&key.replace('~', "~0").replace('/', "~1"));
            rest = &r[end + 1..];
        } else {
            return Err(());
        }
    }
    if out.is_empty() {
        return Err(());
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_templates_that_are_plain_paths_become_json_pointers() {
        assert_eq!(pointer("{{ value }}"), Ok(None));
        assert_eq!(pointer("{{ value_json.POWER }}"), Ok(Some("/POWER".into())));
        assert_eq!(pointer("{{value_json.a.b}}"), Ok(Some("/a/b".into())));
        assert_eq!(
            pointer("{{ value_json['t'] | float }}"),
            Ok(Some("/t".into()))
        );
        assert_eq!(pointer("{{ value_json.x * 10 }}"), Err(()));
        assert_eq!(pointer("{% if value %}1{% endif %}"), Err(()));
        assert_eq!(pointer("{{ value_json.x | round(1) }}"), Err(()));
    }

    #[test]
    fn abbreviations_and_the_base_topic_are_written_out() {
        let msg = br#"{"~":"tasmota/plug","stat_t":"~/STATE","cmd_t":"cmnd/plug/POWER","pl_on":"ON","dev":{"ids":["A1"],"mf":"Tasmota"},"avty":[{"t":"~/LWT"}]}"#;
        let e = read("homeassistant", "homeassistant/switch/A1_RL_1/config", msg)
            .unwrap()
            .unwrap();
        assert_eq!(e.text("state_topic"), Some("tasmota/plug/STATE"));
        assert_eq!(e.text("command_topic"), Some("cmnd/plug/POWER"));
        assert_eq!(e.text("payload_on"), Some("ON"));
        assert_eq!(e.device_text("manufacturer"), Some("Tasmota"));
        assert_eq!(e.device_key, "A1");
        assert_eq!(e.config["availability"][0]["topic"], "tasmota/plug/LWT");
        assert_eq!(e.object_id, "A1_RL_1");
        assert_eq!(e.component, "switch");
    }

    #[test]
    fn a_config_naming_an_environment_variable_is_left_out() {
        for payload in [
            r#"{"name": "${env:SECRET}", "stat_t": "a/b"}"#,
            r#"{"name": "x", "dev": {"ids": ["${env:HOME}"]}}"#,
            r#"{"name": "x", "cmd_t": "a/${env:X}/set"}"#,
        ] {
            let why = read(
                "homeassistant",
                "homeassistant/switch/x/config",
                payload.as_bytes(),
            )
            .expect_err(payload);
            assert!(why.contains("would expand"), "{why}");
        }
        let why = read("homeassistant", "homeassistant/switch/${x}/config", b"{}").unwrap_err();
        assert!(why.contains("would expand"), "{why}");
    }

    #[test]
    fn a_removal_and_a_foreign_topic_are_told_apart() {
        assert!(
            read("homeassistant", "homeassistant/switch/x/config", b"")
                .unwrap()
                .is_none()
        );
        assert!(read("homeassistant", "homeassistant/status", b"online").is_err());
        assert!(read("homeassistant", "homeassistant/switch/x/config", b"[1]").is_err());
    }
}
