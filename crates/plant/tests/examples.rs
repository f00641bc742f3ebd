//! The example plants parse, with the defaults docs/plant-file.md promises.

use closedloop_contract::{Area, Value, ValueType, WordOrder};
use closedloop_plant::{
    Action, Device, DriverConfig, ParamType, ParamValue, Params, Parity, Scope, Source, TokenScope,
    ToolMode, Verification, WriteEntry, load, parse, parse_with_env,
};
use std::collections::BTreeMap;
use std::path::Path;

const WORKSHOP: &str = include_str!("plants/workshop.toml");
const PROTOCOLS: &str = include_str!("plants/protocols.toml");

#[test]
fn design_example_parses_with_defaults() {
    let plant = parse(WORKSHOP, "workshop.toml", Path::new("/srv/plant")).unwrap();
    assert_eq!(plant.server.name, "workshop");
    assert_eq!(plant.server.journal, "sqlite:///srv/plant/closedloop.db");
    assert_eq!(plant.server.tools, ToolMode::PerAction);
    assert!(plant.server.tokens.is_empty());
    assert_eq!(plant.file, Path::new("/srv/plant/workshop.toml"));
    let ids: Vec<&str> = plant.devices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["lamp", "slide", "gripper"]);

    let lamp = plant.device("lamp").unwrap();
    the_lamp_has_the_defaults(lamp);
    the_lamp_switch_has_the_defaults(lamp.action("switch").unwrap());

    let slide = plant.device("slide").unwrap();
    assert_eq!(slide.poll_ms, 100);
    assert_eq!(slide.liveness.max_silence_s, 2.0);
    the_slide_position_is_a_scaled_i32(slide);
    the_slide_move_to_stops_and_expects_by_distance(slide.action("move_to").unwrap());

    let close = plant.device("gripper").unwrap().action("close").unwrap();
    let req = close.requires.as_ref().unwrap();
    assert!(req.signals().is_empty());
    assert_eq!(req.devices().len(), 2);
    assert!(close.params.is_empty());
}

/// The workshop's lamp: the device defaults, a sim relay with two signals.
fn the_lamp_has_the_defaults(lamp: &Device) {
    assert_eq!(lamp.poll_ms, 20);
    assert_eq!(lamp.liveness.max_silence_s, 2.0);
    assert_eq!(lamp.liveness.online, "online");
    assert_eq!(lamp.request_timeout_ms(), 500);
    assert!(!lamp.raw_access);
    assert!(matches!(&lamp.driver, DriverConfig::Sim(c) if c.model == "relay"));
    let names: Vec<&str> = lamp.signals.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["commanded", "contact"]);
    assert_eq!(
        lamp.signal("contact").unwrap().source.describe(),
        "discrete_input:0"
    );
    assert!(lamp.signal("contact").unwrap().source.is_bool());
}

/// The lamp's `switch`: its criterion, and the defaults of the per-action keys.
fn the_lamp_switch_has_the_defaults(switch: &Action) {
    assert_eq!(switch.tool_name, "lamp_switch");
    assert!(switch.idempotent);
    assert_eq!(switch.verification, Verification::Feedback);
    assert_eq!(switch.params[0].ty, ParamType::Bool);
    assert_eq!(
        switch.done_when.as_ref().unwrap().source(),
        "contact == params.on"
    );
    assert_eq!(
        switch
            .done_when
            .as_ref()
            .unwrap()
            .signals()
            .iter()
            .collect::<Vec<_>>(),
        ["contact"]
    );
    // Defaults of the per-action keys.
    assert_eq!(switch.timeout_factor, 3.0);
    assert_eq!(switch.timeout_floor_ms, 100);
    assert_eq!(switch.queue_timeout_s, 10.0);
    assert_eq!(switch.exclusive, "lamp");
    assert_eq!(switch.hold_ms, 0);
    assert!(switch.destructive && switch.queue && !switch.confirm);
    assert!(switch.requires.is_none() && switch.started_when.is_none());
}

/// The slide's `position_mm`: a holding register pair, an i32 in hundredths, big-endian words.
fn the_slide_position_is_a_scaled_i32(slide: &Device) {
    let pos = slide.signal("position_mm").unwrap();
    assert_eq!(pos.source.describe(), "holding:2");
    assert_eq!(pos.unit.as_deref(), Some("mm"));
    match &pos.source {
        Source::Register {
            area,
            address,
            encoding,
        } => {
            assert_eq!((*area, *address), (Area::Holding, 2));
            assert_eq!(encoding.ty, ValueType::I32);
            assert_eq!(encoding.scale, 0.01);
            assert_eq!(encoding.word_order, WordOrder::Big);
        }
        other => panic!("{other:?}"),
    }
}

/// The slide's `move_to`: its fail, cancel and stop keys, its write, and an `expect_s`
/// evaluated at dispatch.
fn the_slide_move_to_stops_and_expects_by_distance(mv: &Action) {
    assert_eq!(mv.fail_when.len(), 1);
    assert_eq!(mv.fail_when[0].0, "MOTOR_STALL");
    assert_eq!(mv.cancel.len(), 1);
    assert_eq!(mv.stopped_when.as_ref().unwrap().source(), "!moving");
    assert!(!mv.idempotent);
    match &mv.write[0] {
        WriteEntry::Register {
            area,
            address,
            encoding,
            value,
        } => {
            assert_eq!(
                (*area, *address, encoding.ty),
                (Area::Holding, 0, ValueType::I32)
            );
            assert_eq!(value.source(), "params.target_mm * 100.0");
        }
        other => panic!("{other:?}"),
    }

    // expect_s is evaluated at dispatch against the current position.
    let mut signals = BTreeMap::new();
    signals.insert("position_mm".to_string(), Value::Number(0.0));
    let mut params = Params::new();
    params.insert("target_mm".into(), ParamValue::Number(150.0));
    let devices = BTreeMap::new();
    let scope = Scope {
        signals: &signals,
        params: &params,
        devices: &devices,
        extra_strings: &[],
    };
    assert!((mv.expect_s.eval_f64(&scope).unwrap() - 1.55).abs() < 1e-9);
}

#[test]
fn every_driver_kind_and_source_family() {
    let env = |k: &str| match k {
        "OPS_TOKEN_SHA256" => Some("AB".repeat(32)),
        "MQTT_PASSWORD" => Some("pw".to_string()),
        _ => None,
    };
    let plant = parse_with_env(PROTOCOLS, "protocols.toml", Path::new("/srv/plant"), &env).unwrap();
    assert_eq!(plant.server.journal, "sqlite:///srv/plant/data/journal.db");
    assert_eq!(plant.server.tools, ToolMode::Generic);
    let token = &plant.server.tokens[0];
    assert_eq!(token.sha256, "ab".repeat(32));
    assert_eq!(token.scopes[1], TokenScope::Actuate("heater".into()));
    assert!(token.scopes[1].allows_actuate("heater") && !token.scopes[1].allows_actuate("pump"));

    the_modbus_tcp_heater(plant.device("heater").unwrap());

    let pump = plant.device("pump").unwrap();
    assert!(matches!(
        pump.driver,
        DriverConfig::ModbusRtu {
            baud: 19200,
            parity: Parity::Even,
            unit: 1,
            ..
        }
    ));
    assert_eq!(
        pump.action("start").unwrap().verification,
        Verification::Readback
    );

    the_mqtt_desk(plant.device("desk").unwrap());

    let conveyor = plant.device("conveyor").unwrap();
    assert_eq!(
        conveyor.signal("speed").unwrap().source.describe(),
        "ns=2;s=Speed"
    );
    assert!(
        matches!(&conveyor.action("reset").unwrap().write[0], WriteEntry::OpcuaMethod { args, .. } if args.len() == 2)
    );

    let axle = plant.device("axle").unwrap();
    assert!(
        matches!(&axle.driver, DriverConfig::Can { dbc, bitrate: 500_000, .. } if dbc == Path::new("/srv/plant/axle.dbc"))
    );
    assert_eq!(
        axle.signal("rpm").unwrap().source.describe(),
        "CAN 0x1F0 Speed"
    );
}

/// The Modbus TCP heater: its timeout, counter, raw access, simulator and action.
fn the_modbus_tcp_heater(heater: &Device) {
    assert_eq!(heater.request_timeout_ms(), 250);
    assert_eq!(heater.liveness.counter, Some(10));
    assert!(heater.raw_access);
    let sim = heater.sim.as_ref().unwrap();
    assert_eq!(
        (sim.listen.as_deref(), sim.unit),
        (Some("127.0.0.1:5020"), Some(3))
    );
    assert_eq!(
        heater.signal("temperature_c").unwrap().source.describe(),
        "input:0"
    );
    assert!(heater.signal("alarm").unwrap().source.is_bool());
    let set = heater.action("set_temperature").unwrap();
    assert_eq!(
        (set.exclusive.as_str(), set.hold_ms, set.destructive),
        ("oven", 500, false)
    );
    assert_eq!(
        set.params
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>(),
        ["mode", "target_c"]
    );
}

/// The MQTT desk: its secret kept out of Debug, its topics, and its `switch`'s payload.
fn the_mqtt_desk(desk: &Device) {
    assert!(
        format!("{:?}", desk.driver).contains("Secret(***)"),
        "passwords stay out of Debug"
    );
    assert_eq!(
        desk.signal("on").unwrap().source.describe(),
        "lab/desk/state /on"
    );
    assert!(desk.signal("power").unwrap().source.is_bool());
    assert!(!desk.signal("watts").unwrap().source.is_bool());
    assert_eq!(
        desk.liveness.status_topic.as_deref(),
        Some("lab/desk/status")
    );
    let WriteEntry::Mqtt { payload, qos, .. } = &desk.action("switch").unwrap().write[0] else {
        panic!()
    };
    assert_eq!(*qos, 1);
    let mut params = Params::new();
    params.insert("on".into(), ParamValue::Bool(false));
    let empty = BTreeMap::new();
    let devices = BTreeMap::new();
    let extra = [("command_id", "c1")];
    let scope = Scope {
        signals: &empty,
        params: &params,
        devices: &devices,
        extra_strings: &extra,
    };
    assert_eq!(
        payload.render(&scope).unwrap(),
        r#"{"on": false, "id": "c1"}"#
    );
    assert_eq!(
        desk.action("blink").unwrap().verification,
        Verification::None
    );
}

#[test]
fn load_reads_the_file_and_resolves_next_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("workshop.toml");
    std::fs::write(&path, WORKSHOP).unwrap();
    let plant = load(&path).unwrap();
    assert_eq!(plant.file, path);
    assert_eq!(
        plant.server.journal,
        format!("sqlite://{}", dir.path().join("closedloop.db").display())
    );

    let missing = load(&dir.path().join("nope.toml")).unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("nope.toml: cannot read the plant file"),
        "{missing}"
    );
}

#[test]
fn surface_lists_every_tool() {
    let plant = parse(WORKSHOP, "workshop.toml", Path::new("/srv")).unwrap();
    let text = closedloop_plant::render_surface(&plant);
    for tool in ["lamp_switch", "slide_move_to", "gripper_close"] {
        assert!(text.contains(&format!("tool {tool}")), "{text}");
    }
    assert!(text.contains("\"additionalProperties\": false"), "{text}");
    assert!(text.contains("get_command_status"), "{text}");
}

/// The listing makes an action's schema again only when its parameters differ from the last
/// action's: each tool still shows its own, whatever came before it.
#[test]
fn the_surface_shows_each_tools_own_schema_when_neighbours_share_or_differ() {
    let src = include_str!("../../../examples/workshop.toml");
    let plant = parse(src, "workshop.toml", Path::new("/srv")).unwrap();
    let text = closedloop_plant::render_surface(&plant);
    let listed: Vec<(&str, &str)> = text
        .split("\n  tool ")
        .skip(1)
        .map(|t| (t.split_whitespace().next().unwrap(), t))
        .collect();
    assert_eq!(listed.len(), 7, "{text}");
    for device in &plant.devices {
        for action in &device.actions {
            let own = serde_json::to_string_pretty(&action.input_schema(2.0)).unwrap();
            let (_, shown) = listed.iter().find(|(n, _)| *n == action.tool_name).unwrap();
            let indented: String = own.lines().map(|l| format!("    {l}\n")).collect();
            assert!(shown.contains(&indented), "{}: {shown}", action.tool_name);
        }
    }
}

/// `-0.0` equals `0.0`, yet a schema writes it `-0.0`: a neighbour's schema is not reused for it.
#[test]
fn a_bound_of_minus_zero_is_listed_as_written_after_one_of_zero() {
    let device = |id: &str, min: &str| {
        format!(
            r#"
[[device]]
id = "{id}"
driver = {{ kind = "sim", model = "heater" }}
[device.signals]
temperature_c = {{ input = 0, type = "i16", scale = 0.1 }}
[[device.action]]
name = "set"
description = "Set the {id} setpoint."
params = {{ c = {{ type = "number", min = {min}, max = 90.0 }} }}
write = [{{ holding = 0, scale = 0.1, value = "params.c" }}]
done_when = "abs(temperature_c - params.c) <= 0.5"
expect_s = 10
"#
        )
    };
    let src = format!("{}{}", device("a", "0.0"), device("b", "-0.0"));
    let text = closedloop_plant::render_surface(&parse(&src, "t.toml", Path::new("/srv")).unwrap());
    let (a, b) = text.split_once("\n  tool b_set").unwrap();
    assert!(a.contains("\"minimum\": 0.0") && !a.contains("-0.0"), "{a}");
    assert!(b.contains("\"minimum\": -0.0"), "{b}");
}
