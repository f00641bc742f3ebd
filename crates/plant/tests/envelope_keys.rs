//! The safety envelope's plant keys: `max_rate`/`max_burst`, `keepalive_s`, `task` and
//! `[[alarm]]`, each refused with file, key and fix when it cannot work.

mod common;

use closedloop_plant::parse_with_env;
use common::{BASE, edit, env, expect_one};
use std::path::Path;

fn load(src: &str) -> closedloop_plant::Plant {
    parse_with_env(src, "workshop.toml", Path::new("/srv"), &env).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn rate_limits_parse_and_bad_ones_say_what_to_write() {
    let p = load(&edit(
        "expect_s = 0.02",
        "expect_s = 0.02\nmax_rate = \"6/min\"\nmax_burst = 2",
    ));
    let r = p
        .device("lamp")
        .unwrap()
        .action("switch")
        .unwrap()
        .max_rate
        .clone()
        .unwrap();
    assert_eq!((r.count, r.period_s, r.burst), (6, 60.0, 2));
    expect_one(
        &edit("expect_s = 0.02", "expect_s = 0.02\nmax_rate = \"6/day\""),
        Some("lamp"),
        "action.switch.max_rate",
        "is not a rate; write operations per period, like \"6/min\"",
    );
    expect_one(
        &edit("expect_s = 0.02", "expect_s = 0.02\nmax_burst = 2"),
        Some("lamp"),
        "action.switch.max_burst",
        "max_burst needs a max_rate",
    );
}

#[test]
fn a_dead_man_action_needs_a_cancel_plan() {
    expect_one(
        &edit("expect_s = 0.02", "expect_s = 0.02\nkeepalive_s = 2"),
        Some("lamp"),
        "action.switch.keepalive_s",
        "keepalive_s needs a cancel plan",
    );
}

#[test]
fn task_required_is_said_in_the_tool_description_and_a_bad_value_names_the_choices() {
    let p = load(&edit(
        "expect_s = 0.02",
        "expect_s = 0.02\ntask = \"required\"",
    ));
    let lamp = p.device("lamp").unwrap();
    let switch = lamp.action("switch").unwrap();
    assert_eq!(switch.task, closedloop_plant::TaskSupport::Required);
    assert!(
        switch
            .tool_description(lamp, 2.0)
            .ends_with("It runs as an MCP task: only a client that follows tasks (the io.modelcontextprotocol/tasks extension) can call it."),
        "{}",
        switch.tool_description(lamp, 2.0)
    );
    let default = load(BASE);
    let switch = default.device("lamp").unwrap().action("switch").unwrap();
    assert_eq!(switch.task, closedloop_plant::TaskSupport::Optional);
    expect_one(
        &edit("expect_s = 0.02", "expect_s = 0.02\ntask = \"always\""),
        Some("lamp"),
        "action.switch.task",
        "task = \"always\" is not allowed; write one of optional, required",
    );
}

#[test]
fn alarms_read_other_devices_and_block_known_ones() {
    let alarm = |body: &str| format!("{BASE}\n[[alarm]]\n{body}\n");
    let p = load(&alarm(
        "name = \"LAMP_ON\"\nwhen = \"devices.lamp.contact\"\nblocks = [\"lamp\"]\ndescription = \"x\"",
    ));
    assert_eq!(p.alarms[0].name, "LAMP_ON");
    expect_one(
        &alarm("name = \"lamp on\"\nwhen = \"devices.lamp.contact\"\nblocks = [\"lamp\"]"),
        None,
        "alarm[0].name",
        "in capitals",
    );
    expect_one(
        &alarm("name = \"X\"\nwhen = \"devices.lamp.contact\"\nblocks = [\"lamb\"]"),
        None,
        "alarm[0].blocks",
        "unknown device \"lamb\"",
    );
    expect_one(
        &alarm("name = \"X\"\nwhen = \"devices.lamp.nope\"\nblocks = [\"lamp\"]"),
        None,
        "alarm[0].when",
        "nope",
    );
}

#[test]
fn an_alarm_s_clear_when_is_a_condition_over_devices_like_its_when() {
    let alarm = |clear: &str| {
        format!(
            "{BASE}\n[[alarm]]\nname = \"LAMP_ON\"\nwhen = \"devices.lamp.contact\"\nblocks = [\"slide\"]\n{clear}\n"
        )
    };
    let p = load(&alarm("clear_when = \"!devices.lamp.contact\""));
    let clear = p.alarms[0].clear_when.as_ref().expect("clear_when kept");
    assert_eq!(clear.source(), "!devices.lamp.contact");
    assert!(load(&alarm("")).alarms[0].clear_when.is_none());
    expect_one(
        &alarm("clear_when = \"!contact\""),
        None,
        "alarm[0].clear_when",
        "reads signals as devices.<id>.<signal>",
    );
    expect_one(
        &alarm("clear_when = \"devices.lamp.nope\""),
        None,
        "alarm[0].clear_when",
        "nope",
    );
    expect_one(
        &alarm("clear_when = 50"),
        None,
        "alarm[0].clear_when",
        "a condition in quotes",
    );
}

#[test]
fn check_shows_each_tool_s_envelope_and_the_alarms() {
    let src = BASE
        .replacen(
            "expect_s = 0.02",
            "expect_s = 0.02\nmax_rate = \"6/min\"\nmax_burst = 2\nconfirm = true",
            1,
        )
        .replacen(
            "driver = { kind = \"sim\", model = \"stepper\" }",
            "driver = { kind = \"sim\", model = \"stepper\" }\nmax_rate = \"60/h\"",
            1,
        )
        .replacen(
            "stopped_when = \"!moving\"",
            "stopped_when = \"!moving\"\nkeepalive_s = 2",
            1,
        );
    let src = format!(
        "{src}\n[[alarm]]\nname = \"LAMP_ON\"\nwhen = \"devices.lamp.contact\"\nfor_ms = 200\nclear_when = \"!devices.lamp.contact\"\nblocks = [\"slide\"]\n"
    );
    let text = closedloop_plant::render_surface(&load(&src));
    // The lamp: its own rate limit and a person's confirmation; no alarm blocks it.
    assert!(
        text.contains("tool lamp_switch")
            && text.contains(
                "    envelope: action max_rate 6/min max_burst 2, confirm (a person first)\n"
            ),
        "{text}"
    );
    // The slide: the device's limit, the dead-man keepalive and the alarm that blocks it.
    assert!(
        text.contains(
            "    envelope: device max_rate 60/h max_burst 60, keepalive_s 2 (dead-man), blocked by alarm LAMP_ON\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "call get_command_status or keep_alive with its command_id at least every 2 s"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "alarm LAMP_ON (warning) blocks slide while `devices.lamp.contact` for 200 ms, until `!devices.lamp.contact`"
        ),
        "{text}"
    );
}
