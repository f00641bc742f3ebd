//! Durations, periods and factors outside their range, and keys that `verification = "none"`
//! would silently ignore, are refused at load: the engine would otherwise panic turning a huge
//! number into a `Duration` on the request path, or accept a criterion it never checks.

mod common;

use closedloop_plant::parse_with_env;
use common::{edit, env, errors, expect_one};
use std::path::Path;

/// `BASE` with `extra` added to the lamp's `switch` action.
fn switch_with(extra: &str) -> String {
    edit("expect_s = 0.02", &format!("expect_s = 0.02\n{extra}"))
}

/// `BASE` with `extra` added to the slide device's own keys.
fn slide_with(extra: &str) -> String {
    edit(
        "model = \"stepper\" }",
        &format!("model = \"stepper\" }}\n{extra}"),
    )
}

#[test]
fn action_durations_out_of_range_name_value_range_and_fix() {
    let e = expect_one(
        &switch_with("timeout_factor = 1e300"),
        Some("lamp"),
        "action.switch.timeout_factor",
        "",
    );
    assert_eq!(
        e.to_string(),
        "workshop.toml: device \"lamp\", key action.switch.timeout_factor: timeout_factor = \
         1e300 is outside the allowed range 1 to 100; the deadline is expect_s × timeout_factor \
         + timeout_floor_ms + poll_ms: below 1 it cuts off actions that run as expected, above \
         100 a stuck action goes unnoticed; write a factor in that range, or remove \
         timeout_factor for the default 3"
    );
    let e = expect_one(
        &switch_with("queue_timeout_s = inf"),
        Some("lamp"),
        "action.switch.queue_timeout_s",
        "",
    );
    assert_eq!(
        e.message,
        "queue_timeout_s = inf is not a finite number; the allowed range is 0 to 3600 s; write \
         how long a command may wait for its device, in that range, or remove queue_timeout_s \
         for the default 10"
    );
    let cases = [
        (
            "timeout_factor = 0.5",
            "timeout_factor",
            "0.5 is outside the allowed range 1 to 100",
        ),
        (
            "timeout_factor = nan",
            "timeout_factor",
            "nan is not a finite number",
        ),
        (
            "queue_timeout_s = 3600.5",
            "queue_timeout_s",
            "3600.5 is outside the allowed range 0 to 3600 s",
        ),
        ("queue_timeout_s = -1.0", "queue_timeout_s", "-1 is outside"),
        (
            "timeout_floor_ms = 600001",
            "timeout_floor_ms",
            "600001 is outside the allowed range 0 to 600000 ms",
        ),
        (
            "timeout_floor_ms = 9223372036854775807",
            "timeout_floor_ms",
            "= 9223372036854775807 is outside",
        ),
        (
            "hold_ms = 3600001",
            "hold_ms",
            "3600001 is outside the allowed range 0 to 3600000 ms",
        ),
    ];
    for (line, key, needle) in cases {
        expect_one(
            &switch_with(line),
            Some("lamp"),
            &format!("action.switch.{key}"),
            needle,
        );
    }
    expect_one(
        &edit("expect_s = 0.02", "expect_s = 1e9"),
        Some("lamp"),
        "action.switch.expect_s",
        "expect_s = 1000000000 is outside the allowed range 0 to 86400 s",
    );
}

#[test]
fn device_durations_out_of_range_name_value_range_and_fix() {
    let e = expect_one(&slide_with("poll_ms = 0"), Some("slide"), "poll_ms", "");
    assert_eq!(
        e.message,
        "poll_ms = 0 is outside the allowed range 1 to 60000 ms; write how often the device is \
         read, in that range, or remove poll_ms for the default 100"
    );
    expect_one(
        &slide_with("poll_ms = 60001"),
        Some("slide"),
        "poll_ms",
        "60001 is outside",
    );
    let e = expect_one(
        &slide_with("liveness = { max_silence_s = 1e300 }"),
        Some("slide"),
        "liveness.max_silence_s",
        "",
    );
    assert_eq!(
        e.message,
        "max_silence_s = 1e300 is outside the allowed range above 0 up to 3600 s; write how long \
         the device may stay silent before it counts as offline, in that range, or remove \
         max_silence_s for the default here, 2 s"
    );
    for (bad, shown) in [("0.0", "0"), ("-inf", "-inf"), ("nan", "nan")] {
        expect_one(
            &slide_with(&format!("liveness = {{ max_silence_s = {bad} }}")),
            Some("slide"),
            "liveness.max_silence_s",
            &format!("max_silence_s = {shown} is "),
        );
    }
    let modbus = edit(
        "driver = { kind = \"sim\", model = \"relay\" }",
        "driver = { kind = \"modbus-tcp\", address = \"10.0.0.2:502\", timeout_ms = 600001 }",
    );
    expect_one(
        &modbus,
        Some("lamp"),
        "driver.timeout_ms",
        "timeout_ms = 600001 is outside the allowed range 1 to 600000 ms",
    );
    expect_one(
        &edit(
            "name = \"workshop\"",
            "name = \"workshop\"\nconfirm_ttl_s = 1e20",
        ),
        None,
        "server.confirm_ttl_s",
        "confirm_ttl_s = 1e20 is outside the allowed range 1 to 86400 s",
    );
}

#[test]
fn the_edges_of_every_range_are_accepted() {
    let src = switch_with(
        "timeout_factor = 100\ntimeout_floor_ms = 600000\nqueue_timeout_s = 3600\nhold_ms = 3600000",
    )
    .replacen("timeout_factor = 100", "timeout_factor = 100.0", 1);
    let src = src.replacen(
        "model = \"stepper\" }",
        "model = \"stepper\" }\npoll_ms = 60000\nliveness = { max_silence_s = 3600.0 }",
        1,
    );
    let plant = parse_with_env(&src, "workshop.toml", Path::new("/srv"), &env).unwrap();
    let switch = plant.devices[0].action("switch").unwrap();
    assert_eq!(switch.timeout_factor, 100.0);
    assert_eq!(switch.timeout_floor_ms, 600_000);
    assert_eq!(switch.queue_timeout_s, 3600.0);
    assert_eq!(switch.hold_ms, 3_600_000);
    assert_eq!(plant.devices[1].poll_ms, 60_000);
    assert_eq!(plant.devices[1].liveness.max_silence_s, 3600.0);
    let low = switch_with("timeout_factor = 1.0\nqueue_timeout_s = 0.0\ntimeout_floor_ms = 0")
        .replacen(
            "model = \"stepper\" }",
            "model = \"stepper\" }\npoll_ms = 1",
            1,
        );
    parse_with_env(&low, "workshop.toml", Path::new("/srv"), &env).unwrap();
}

#[test]
fn every_refused_duration_is_reported_in_one_run() {
    let src = switch_with("timeout_factor = 1e300\nhold_ms = 4000000\nqueue_timeout_s = -1.0")
        .replacen(
            "model = \"stepper\" }",
            "model = \"stepper\" }\npoll_ms = 0",
            1,
        );
    let keys: Vec<_> = errors(&src).into_iter().filter_map(|e| e.key).collect();
    assert_eq!(
        keys,
        [
            "poll_ms",
            "action.switch.timeout_factor",
            "action.switch.queue_timeout_s",
            "action.switch.hold_ms"
        ]
    );
}

/// The lamp's switch with `verification = "none"` and no `done_when` (a valid action), plus
/// `extra`.
fn unverified(extra: &str) -> String {
    edit(
        "done_when = \"contact == params.on\"\nexpect_s = 0.02",
        &format!("verification = \"none\"\n{extra}"),
    )
}

#[test]
fn keys_that_verification_none_never_checks_are_refused() {
    parse_with_env(&unverified(""), "workshop.toml", Path::new("/srv"), &env).unwrap();
    parse_with_env(
        &unverified("hold_ms = 0\nfail_when = {}"),
        "workshop.toml",
        Path::new("/srv"),
        &env,
    )
    .unwrap();
    let e = expect_one(
        &unverified("started_when = \"commanded\""),
        Some("lamp"),
        "action.switch.started_when",
        "",
    );
    assert_eq!(
        e.message,
        "started_when is never checked with verification = \"none\": nothing is read back after \
         the write, so the action ends as sent without looking at it; remove started_when, or \
         set verification = \"feedback\" (with done_when) so it is checked"
    );
    expect_one(
        &unverified("hold_ms = 200"),
        Some("lamp"),
        "action.switch.hold_ms",
        "hold_ms is never checked with verification = \"none\"",
    );
    expect_one(
        &unverified("fail_when = { LAMP_BROKEN = \"!contact\" }"),
        Some("lamp"),
        "action.switch.fail_when",
        "remove fail_when, or set verification = \"feedback\"",
    );
    // done_when was refused before this change; it still is, at the verification key.
    expect_one(
        &unverified("done_when = \"contact\""),
        Some("lamp"),
        "action.switch.verification",
        "remove done_when",
    );
}

#[test]
fn can_frame_periods_out_of_range() {
    let protocols = include_str!("plants/protocols.toml");
    let env = |k: &str| match k {
        "OPS_TOKEN_SHA256" => Some("0".repeat(64)),
        "MQTT_PASSWORD" => Some("pw".to_string()),
        _ => None,
    };
    let refused = |src: &str| {
        parse_with_env(src, "protocols.toml", Path::new("/srv/plant"), &env)
            .unwrap_err()
            .0
    };
    let e = refused(&protocols.replacen("cycle_ms = 100", "cycle_ms = 0", 1));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].device.as_deref(), Some("axle"));
    assert_eq!(e[0].key.as_deref(), Some("action.spin.write[0].cycle_ms"));
    assert_eq!(
        e[0].message,
        "cycle_ms = 0 is outside the allowed range 1 to 60000 ms; write how often the frame is \
         re-sent while the command runs, in that range, or remove cycle_ms to send it once"
    );
    let sim = protocols.replacen(
        "dbc = \"axle.dbc\" }",
        "dbc = \"axle.dbc\" }\nsim = { model = \"relay\", can = { bus = \"b\", dbc = \"/dev/null\", \
         status = \"S\", command = \"C\", period_ms = 86400000 } }",
        1,
    );
    let e = refused(&sim);
    let period: Vec<_> = e
        .iter()
        .filter(|e| e.key.as_deref() == Some("sim.can.period_ms"))
        .collect();
    assert_eq!(period.len(), 1, "{e:#?}");
    assert!(
        period[0]
            .message
            .starts_with("period_ms = 86400000 is outside the allowed range 1 to 60000 ms"),
        "{e:#?}"
    );
}

#[test]
fn keys_that_readback_never_checks_are_refused() {
    let readback = |extra: &str| {
        edit(
            "done_when = \"contact == params.on\"\nexpect_s = 0.02",
            &format!("verification = \"readback\"\nexpect_s = 0.02\n{extra}"),
        )
    };
    parse_with_env(&readback(""), "workshop.toml", Path::new("/srv"), &env).unwrap();
    let e = expect_one(
        &readback("done_when = \"contact == params.on\""),
        Some("lamp"),
        "action.switch.done_when",
        "",
    );
    assert_eq!(
        e.message,
        "done_when is never checked with verification = \"readback\": the written registers or \
         nodes are read back and compared instead; remove done_when, or set verification = \
         \"feedback\" so it is checked"
    );
    expect_one(
        &readback("started_when = \"commanded\""),
        Some("lamp"),
        "action.switch.started_when",
        "started_when is never checked with verification = \"readback\"",
    );
}

#[test]
fn a_retention_is_days_or_hours_of_at_least_one_hour() {
    for bad in ["30", "0d", "2 weeks", "1.5d", "-3h", "\"\""] {
        let src = edit(
            "name = \"workshop\"",
            &format!(
                "name = \"workshop\"\nretain = \"{}\"",
                bad.trim_matches('"')
            ),
        );
        expect_one(
            &src,
            None,
            "server.retain",
            "write days or hours like \"30d\" or \"12h\" (at least 1h), or remove retain",
        );
    }
    for (text, hours) in [("30d", 720), ("12h", 12), ("1h", 1)] {
        let src = edit(
            "name = \"workshop\"",
            &format!("name = \"workshop\"\nretain = \"{text}\""),
        );
        let plant = closedloop_plant::parse(&src, "workshop.toml", std::path::Path::new("/srv"))
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(
            plant.server.retain,
            Some(std::time::Duration::from_secs(hours * 3600))
        );
        assert_eq!(
            closedloop_plant::parse_retention(text),
            Ok(std::time::Duration::from_secs(hours * 3600))
        );
    }
    let kept =
        closedloop_plant::parse(&edit("", ""), "workshop.toml", std::path::Path::new("/srv"))
            .unwrap();
    assert_eq!(
        kept.server.retain, None,
        "without retain every command is kept"
    );
}

#[test]
fn a_journal_key_shorter_than_16_bytes_is_refused_and_a_key_is_never_shown() {
    let src = edit(
        "name = \"workshop\"",
        "name = \"workshop\"\njournal_key = \"short-key\"",
    );
    expect_one(
        &src,
        None,
        "server.journal_key",
        "the journal key is 9 bytes; use at least 16 random bytes from the environment, e.g. journal_key = \"${env:CLOSEDLOOP_JOURNAL_KEY}\" with the variable set from `openssl rand -hex 32`",
    );
    let src = edit(
        "name = \"workshop\"",
        "name = \"workshop\"\njournal_key = \"0123456789abcdef-secret\"",
    );
    let plant =
        closedloop_plant::parse(&src, "workshop.toml", std::path::Path::new("/srv")).unwrap();
    let key = plant.server.journal_key.as_ref().expect("a key");
    assert_eq!(key.0, "0123456789abcdef-secret");
    assert!(!format!("{:?}", plant.server).contains("secret"));
}
