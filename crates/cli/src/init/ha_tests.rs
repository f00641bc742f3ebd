//! Discovery configs of every mapped component, written as the firmwares publish them, through
//! `map` and `render` into a plant the loader takes.

use super::super::discovery::read;
use super::super::ha_render::{Header, render};
use super::*;

const PREFIX: &str = "homeassistant";

fn entity(topic: &str, json: &str) -> Entity {
    read(PREFIX, &format!("{PREFIX}/{topic}/config"), json.as_bytes())
        .expect("a config")
        .expect("not a removal")
}

fn plant(entities: &[Entity]) -> (String, Mapped) {
    let m = map(entities);
    let header = Header {
        broker: "mqtt://127.0.0.1:1883",
        prefix: PREFIX,
        server: "test",
        client_id: "closedloop-test-0a1b2c",
        username: None,
        ca_file: None,
        client_cert: None,
    };
    let text = render(&m, &header);
    let loaded = closedloop_plant::parse(&text, "generated", std::path::Path::new("."));
    assert!(
        loaded.is_ok(),
        "{}\n{text}",
        loaded.err().map(|e| e.to_string()).unwrap_or_default()
    );
    (text, m)
}

const DEV: &str = r#""dev":{"ids":["b1"],"name":"Bench board","mf":"espressif","mdl":"esp32"}"#;

#[test]
fn every_mapped_component_becomes_signals_and_actions_that_load() {
    let list: Vec<Entity> = EVERY_COMPONENT
        .iter()
        .map(|(t, j)| entity(t, &j.replace("DEV", DEV)))
        .collect();
    let (text, m) = plant(&list);
    assert_eq!(m.boards.len(), 1, "{text}");
    let b = &m.boards[0];
    assert_eq!(b.id, "bench_board");
    assert_eq!(b.max_silence_s, 30.0, "the sensor's expire_after");
    assert_eq!(
        b.status,
        Some(("b1/status".into(), "online".into(), "offline".into(), None))
    );
    let names: Vec<&str> = b.actions.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "switch_relay",
            "switch_lamp",
            "switch_fan",
            "set_speed",
            "press_reset",
            "open_blind",
            "open_water",
            "lock_door_lock"
        ]
    );
    holds_every_component_s_lines(&text);
    skips_the_climate_and_says_the_button_is_unconfirmed(&text, &m);
}

/// A discovery config of every component `map` takes (and a climate, which it does not), each
/// `DEV` standing for the board's device object.
const EVERY_COMPONENT: [(&str, &str); 11] = [
    (
        "switch/b1/relay",
        r#"{"name":"Relay","stat_t":"b1/relay/state","cmd_t":"b1/relay/set","avty_t":"b1/status",DEV}"#,
    ),
    (
        "light/b1/lamp",
        r#"{"name":"Lamp","schema":"json","stat_t":"b1/lamp","cmd_t":"b1/lamp/set",DEV}"#,
    ),
    (
        "fan/b1/fan",
        r#"{"name":"Fan","stat_t":"b1/fan/state","cmd_t":"b1/fan/set","pl_on":"1","pl_off":"0",DEV}"#,
    ),
    (
        "binary_sensor/b1/door",
        r#"{"name":"Door","stat_t":"b1/door","pl_on":"open",DEV}"#,
    ),
    (
        "sensor/b1/temp",
        r#"{"name":"Temperature","stat_t":"b1/tele","val_tpl":"{{ value_json.temp | float }}","unit_of_meas":"°C","exp_aft":30,DEV}"#,
    ),
    (
        "number/b1/speed",
        r#"{"name":"Speed","stat_t":"b1/speed","cmd_t":"b1/speed/set","min":0,"max":50,"step":0.5,"unit_of_meas":"rpm",DEV}"#,
    ),
    (
        "button/b1/reset",
        r#"{"name":"Reset","cmd_t":"b1/reset","pl_prs":"GO",DEV}"#,
    ),
    (
        "cover/b1/blind",
        r#"{"name":"Blind","stat_t":"b1/blind/state","cmd_t":"b1/blind/set",DEV}"#,
    ),
    (
        "valve/b1/water",
        r#"{"name":"Water","stat_t":"b1/water/state","cmd_t":"b1/water/set",DEV}"#,
    ),
    (
        "lock/b1/door_lock",
        r#"{"name":"Door lock","stat_t":"b1/lock/state","cmd_t":"b1/lock/set",DEV}"#,
    ),
    ("climate/b1/hvac", r#"{"name":"HVAC",DEV}"#),
];

/// The rendered plant `text` holds each component's signals, payloads and criteria.
fn holds_every_component_s_lines(text: &str) {
    for want in [
        r#"payload = "${params.on ? \"ON\" : \"OFF\"}""#,
        r#"payload = "{\"state\": \"${params.on ? \"ON\" : \"OFF\"}\"}""#,
        r#"payload = "${params.on ? \"1\" : \"0\"}""#,
        r#"door = { topic = "b1/door", true_values = ["open"]"#,
        r#"temperature = { topic = "b1/tele", json = "/temp", unit = "°C""#,
        r#"value = { type = "number", min = 0.0, max = 50.0, unit = "rpm""#,
        r#"done_when = "abs(speed - params.value) <= 0.25""#,
        r#"payload = "GO""#,
        r#"payload = "${params.open ? \"OPEN\" : \"CLOSE\"}""#,
        r#"blind = { topic = "b1/blind/state", true_values = ["open"], false_values = ["opening", "closed", "closing", "stopped"]"#,
        r#"blind_closed = { topic = "b1/blind/state", true_values = ["closed"]"#,
        r#"done_when = "params.open ? blind : blind_closed""#,
        r#"door_lock = { topic = "b1/lock/state", true_values = ["LOCKED"]"#,
        r#"door_lock_unlocked = { topic = "b1/lock/state", true_values = ["UNLOCKED"]"#,
        r#"door_lock_jammed = { topic = "b1/lock/state", true_values = ["JAMMED"], false_values = ["LOCKED", "LOCKING", "UNLOCKED", "UNLOCKING", "OPEN", "OPENING"]"#,
        r#"done_when = "params.locked ? door_lock : door_lock_unlocked""#,
        r#"fail_when = { LOCK_JAMMED = "door_lock_jammed" }"#,
        r#"payload = "${params.locked ? \"LOCK\" : \"UNLOCK\"}""#,
        "expect_s = 0.0\ntimeout_floor_ms = 60000",
        "expect_s = 0.0\ntimeout_floor_ms = 5000",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
}

/// The climate is skipped, saying why; the button's press is left unconfirmed.
fn skips_the_climate_and_says_the_button_is_unconfirmed(text: &str, m: &Mapped) {
    assert_eq!(m.skipped.len(), 1, "{:?}", m.skipped);
    assert!(m.skipped[0].starts_with("climate hvac (homeassistant/climate/b1/hvac/config): closedloop init does not map the component climate"));
    // The button reports nothing: its press ends `sent`, and a person is told.
    let press = &text[text.find("name = \"press_reset\"").unwrap()..];
    let press = &press[..press.find("[[device.action]]").unwrap_or(press.len())];
    assert!(
        press.contains("verification = \"none\"") && !press.contains("done_when"),
        "{press}"
    );
    assert!(m.needs_person.iter().any(|n| n == "bench_board.press_reset: it reports no state (optimistic), so nothing can confirm it: its commands end `sent`"), "{:?}", m.needs_person);
}

#[test]
fn a_template_that_is_not_a_plain_path_leaves_the_action_unconfirmed_and_says_so() {
    let e = entity(
        "switch/p/relay",
        r#"{"name":"Relay","stat_t":"p/state","val_tpl":"{{ 'ON' if value_json.r == 1 else 'OFF' }}","cmd_t":"p/set","dev":{"ids":"p","name":"Plug"}}"#,
    );
    let (text, m) = plant(&[e]);
    assert!(text.contains("verification = \"none\""), "{text}");
    assert!(m.needs_person.iter().any(|n| n.starts_with("plug: the value_template of homeassistant/switch/p/relay/config ({{ 'ON' if value_json.r == 1 else 'OFF' }}) is not a plain value_json path")), "{:?}", m.needs_person);
    assert!(
        m.needs_person
            .iter()
            .any(|n| n.contains("its entities report only on change (no expire_after)")),
        "{:?}",
        m.needs_person
    );
}

#[test]
fn devices_with_the_same_name_get_distinct_ids_and_their_own_entities() {
    let a = entity(
        "switch/a/r",
        r#"{"name":"R","stat_t":"a/s","cmd_t":"a/c","dev":{"ids":["1"],"name":"Plug"}}"#,
    );
    let b = entity(
        "switch/b/r",
        r#"{"name":"R","stat_t":"b/s","cmd_t":"b/c","dev":{"ids":["2"],"name":"Plug"}}"#,
    );
    let (text, m) = plant(&[a, b]);
    let ids: Vec<&str> = m.boards.iter().map(|b| b.id.as_str()).collect();
    assert_eq!(ids, ["plug", "plug_2"], "{text}");
    assert!(m.boards.iter().all(|b| b.actions.len() == 1));
}

#[test]
fn credentials_and_tls_files_go_into_the_driver_table() {
    let e = entity(
        "switch/p/relay",
        r#"{"name":"Relay","stat_t":"p/s","cmd_t":"p/c","dev":{"ids":"p","name":"Plug"}}"#,
    );
    let header = Header {
        broker: "mqtts://broker.lan:8883",
        prefix: PREFIX,
        server: "test",
        client_id: "closedloop-test-0a1b2c",
        username: Some("cl"),
        ca_file: Some("ca.pem"),
        client_cert: Some(("me.pem", "me.key")),
    };
    let text = render(&map(&[e]), &header);
    assert!(
        text.contains(r#"username = "cl", password = "${env:MQTT_PASSWORD}", ca_file = "ca.pem", client_cert = "me.pem", client_key = "me.key" }"#),
        "{text}"
    );
}

/// A multi-line template is said in one comment line (the file still loads); a light of the
/// template schema, a binary sensor whose `payload_on` is `false` and a switch with a numeric
/// payload are left out with why; `expire_after` counts only for an entity whose state is read.
#[test]
fn what_cannot_be_mapped_is_said_and_leaves_a_file_that_loads() {
    let dev = r#""dev":{"ids":["q"],"name":"Odd board"}"#;
    let list = [
        entity(
            "switch/q/a",
            &format!(
                r#"{{"name":"A","stat_t":"q/a","cmd_t":"q/a/set","val_tpl":"{{% if value == '1' %}}\nON\n{{% endif %}}",{dev}}}"#
            ),
        ),
        entity(
            "light/q/l",
            &format!(
                r#"{{"name":"L","schema":"template","stat_t":"q/l","cmd_t":"q/l/set",{dev}}}"#
            ),
        ),
        entity(
            "binary_sensor/q/c",
            &format!(
                r#"{{"name":"Contact","stat_t":"q/c","val_tpl":"{{{{ value_json.contact }}}}","pl_on":false,"exp_aft":3,{dev}}}"#
            ),
        ),
        entity(
            "switch/q/n",
            &format!(
                r#"{{"name":"N","stat_t":"q/n","cmd_t":"q/n/set","pl_on":1,"pl_off":0,{dev}}}"#
            ),
        ),
        entity(
            "binary_sensor/q/m",
            &format!(
                r#"{{"name":"Motion","stat_t":"q/m","val_tpl":"{{{{ value_json.occupancy }}}}","pl_on":true,{dev}}}"#
            ),
        ),
    ];
    let (text, m) = plant(&list);
    assert!(text.contains("# needs a person: odd_board: the value_template of homeassistant/switch/q/a/config ({% if value == '1' %} ON {% endif %})"), "{text}");
    let skipped = m.skipped.join("\n");
    assert!(
        skipped.contains("a light of the template schema"),
        "{skipped}"
    );
    assert!(skipped.contains("payload_on is false"), "{skipped}");
    assert!(
        skipped.contains("payload_on = 1 is not a string payload"),
        "{skipped}"
    );
    assert!(
        text.contains(r#"motion = { topic = "q/m", json = "/occupancy", description"#),
        "{text}"
    );
    // The skipped contact's expire_after (3 s) does not speak for the board.
    assert_eq!(m.boards[0].max_silence_s, ON_CHANGE_SILENCE_S, "{text}");
}

/// Zigbee2MQTT announces the bridge's state and the device's own availability, both JSON read
/// through `{{ value_json.state }}`: the device's own is watched, through its pointer (a dead
/// plug once took commands, its availability not watched). Tasmota announces a light's state with
/// the legacy `val_tpl` on its telemetry topic: that is the light's state, not the whole document.
#[test]
fn zigbee2mqtt_availability_and_a_tasmota_light_map_what_the_firmware_means() {
    let plug = entity(
        "switch/0x00158d/switch",
        r#"{"name":null,"stat_t":"zigbee2mqtt/plug","val_tpl":"{{ value_json.state }}","pl_on":"ON","pl_off":"OFF","cmd_t":"zigbee2mqtt/plug/set","avty":[{"topic":"zigbee2mqtt/bridge/state","value_template":"{{ value_json.state }}"},{"topic":"zigbee2mqtt/plug/availability","value_template":"{{ value_json.state }}"}],"avty_mode":"all","dev":{"ids":["zigbee2mqtt_0x00158d"],"name":"plug"}}"#,
    );
    let (text, m) = plant(&[plug]);
    assert_eq!(
        m.boards[0].status,
        Some((
            "zigbee2mqtt/plug/availability".into(),
            "online".into(),
            "offline".into(),
            Some("/state".into())
        ))
    );
    assert!(
        text.contains(r#"status_topic = "zigbee2mqtt/plug/availability", status_json = "/state""#),
        "{text}"
    );
    let light = entity(
        "light/tasmota_1/light_0",
        r#"{"name":"Lamp","stat_t":"tele/tasmota_1/STATE","val_tpl":"{{value_json.POWER}}","pl_on":"ON","pl_off":"OFF","cmd_t":"cmnd/tasmota_1/POWER","avty_t":"tele/tasmota_1/LWT","pl_avail":"Online","pl_not_avail":"Offline","dev":{"ids":["1A2B3C"],"name":"Tasmota"}}"#,
    );
    let (text, _) = plant(&[light]);
    assert!(
        text.contains(r#"lamp = { topic = "tele/tasmota_1/STATE", json = "/POWER", true_values = ["ON"], false_values = ["OFF"]"#),
        "{text}"
    );
}
