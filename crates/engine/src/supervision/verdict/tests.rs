use super::*;
use closedloop_link::clock::rfc3339;
use closedloop_plant::Params;
use serde_json::json;

/// A slide that must be seen moving before it is done, with a stall code; and a relay whose
/// contact must hold 200 ms.
fn plant() -> closedloop_plant::Plant {
    closedloop_plant::parse(
        r#"
[[device]]
id = "slide"
description = "A slide"
driver = { kind = "sim", model = "stepper" }
[device.signals]
position_mm = { input = 0, scale = 0.1 }
moving = { discrete_input = 0 }
stalled = { discrete_input = 1 }
[[device.action]]
name = "move_to"
description = "Move the slide."
params = { target_mm = { type = "number", min = 0.0, max = 300.0 } }
write = [{ holding = 0, scale = 0.1, value = "params.target_mm" }]
started_when = "moving"
done_when = "abs(position_mm - params.target_mm) <= 0.5 && !moving"
fail_when = { MOTOR_STALL = "stalled" }
expect_s = 2.0

[[device]]
id = "lamp"
description = "A lamp"
driver = { kind = "sim", model = "relay" }
[device.signals]
contact = { discrete_input = 0 }
stuck = { discrete_input = 1 }
[[device.action]]
name = "switch"
description = "Switch the lamp."
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "contact == params.on"
fail_when = { STUCK = "devices.lamp.stuck" }
hold_ms = 200
expect_s = 1.0
"#,
        "t.toml",
        std::path::Path::new("."),
    )
    .expect("parses")
}

const T0: i64 = 1_800_000_000_000;

fn reading(at: i64, values: serde_json::Value) -> Journaled {
    let data =
        json!({"values": values, "read_at": rfc3339(T0 + at), "read_from": rfc3339(T0 + at)});
    Journaled::from_event(&data).expect("a reading")
}

fn timeline(baseline: serde_json::Value) -> Timeline {
    Timeline {
        dispatched_ms: Some(T0),
        deadline_ms: None,
        acked_ms: Some(T0 + 5),
        baseline: baseline.as_object().cloned(),
        recovered: false,
    }
}

fn run(
    device: &str,
    params: Params,
    tl: &Timeline,
    readings: &[Journaled],
) -> (Verdict, Option<usize>) {
    let plant = plant();
    let d = plant.device(device).unwrap();
    replay(&d.actions[0], d, &params, tl, readings)
}

fn target(mm: f64) -> Params {
    let mut p = Params::new();
    p.insert("target_mm".into(), closedloop_plant::ParamValue::Number(mm));
    p
}

fn on(b: bool) -> Params {
    let mut p = Params::new();
    p.insert("on".into(), closedloop_plant::ParamValue::Bool(b));
    p
}

#[test]
fn done_counts_only_after_started_and_a_fail_code_wins_over_done() {
    let tl = timeline(json!({"position_mm": 0.0, "moving": false}));
    let at_target = json!({"position_mm": 150.0, "moving": false, "stalled": false});
    let undecided = (Verdict::Undecided(None), None);
    assert_eq!(
        run(
            "slide",
            target(150.0),
            &tl,
            &[reading(10, at_target.clone())]
        ),
        undecided
    );
    let moving = json!({"position_mm": 10.0, "moving": true, "stalled": false});
    let both = [reading(10, moving), reading(900, at_target)];
    assert_eq!(
        run("slide", target(150.0), &tl, &both),
        (Verdict::Completed, Some(1))
    );
    let stalled = json!({"position_mm": 150.0, "moving": true, "stalled": true});
    let failed = Verdict::Failed("MOTOR_STALL".into());
    assert_eq!(
        run("slide", target(150.0), &tl, &[reading(10, stalled)]),
        (failed, Some(0))
    );
}

#[test]
fn hold_ms_is_replayed_where_the_journal_shows_it_and_said_where_it_does_not() {
    let was_off = timeline(json!({"contact": false}));
    let closed = json!({"contact": true});
    // Held from 20 ms to the deciding reading at 400 ms: completed there.
    let held = [reading(20, closed.clone()), reading(400, closed.clone())];
    assert_eq!(
        run("lamp", on(true), &was_off, &held),
        (Verdict::Completed, Some(1))
    );
    // Held 100 ms only, then open: not done, and nothing unknown.
    let short = [
        reading(20, closed.clone()),
        reading(120, json!({"contact": false})),
    ];
    assert_eq!(
        run("lamp", on(true), &was_off, &short),
        (Verdict::Undecided(None), None)
    );
    // Open 500 ms later: the samples in between (closed, not journaled) may have met the hold.
    let long = [reading(20, closed), reading(520, json!({"contact": false}))];
    let (v, _) = run("lamp", on(true), &was_off, &long);
    assert!(
        matches!(&v, Verdict::Undecided(Some(why)) if why.contains("hold_ms")),
        "{v:?}"
    );
}

#[test]
fn the_early_rule_is_replayed_from_the_journaled_baseline_and_read_times() {
    let was_on = timeline(json!({"contact": true}));
    let closed = json!({"contact": true});
    // Already so: readings before expect_s (1 s) confirm nothing; one after it does.
    let early = [reading(20, closed.clone()), reading(300, closed.clone())];
    let (v, _) = run("lamp", on(true), &was_on, &early);
    let unjournaled =
        |v: &Verdict| matches!(v, Verdict::Undecided(Some(why)) if why.contains("did not keep"));
    assert!(
        unjournaled(&v),
        "samples after the last may have completed it: {v:?}"
    );
    // Early, then a failure 1.5 s later: samples in between (closed, not journaled) may have
    // completed it first, so the failure is no verdict.
    let stuck = json!({"contact": true, "devices.lamp.stuck": true});
    let (v, _) = run(
        "lamp",
        on(true),
        &was_on,
        &[reading(20, closed.clone()), reading(1_500, stuck.clone())],
    );
    assert!(unjournaled(&v), "{v:?}");
    // The same failure before expect_s could have passed: it decides.
    let failed = (Verdict::Failed("STUCK".into()), Some(1));
    assert_eq!(
        run(
            "lamp",
            on(true),
            &was_on,
            &[reading(20, closed.clone()), reading(300, stuck)]
        ),
        failed
    );
    let late = [
        reading(1_100, closed.clone()),
        reading(1_400, closed.clone()),
    ];
    assert_eq!(
        run("lamp", on(true), &was_on, &late),
        (Verdict::Completed, Some(1))
    );
    // Without the baseline (a journal from before it was kept), an early-looking reading that
    // would complete is undecided, said so.
    let (v, _) = run("lamp", on(true), &timeline(json!(null)), &early);
    assert!(
        matches!(&v, Verdict::Undecided(Some(why)) if why.contains("at dispatch")),
        "{v:?}"
    );
}

#[test]
fn a_reading_past_the_deadline_decides_nothing_and_a_restart_is_said() {
    let was_off = timeline(json!({"contact": false}));
    let closed = json!({"contact": true});
    // Budget: expect 1 s × factor + floor + poll: far below a minute.
    let late = [reading(60_000, closed.clone()), reading(60_400, closed)];
    assert_eq!(
        run("lamp", on(true), &was_off, &late),
        (Verdict::Undecided(None), None)
    );
    let mut recovered = was_off.clone();
    recovered.recovered = true;
    let (v, _) = run("lamp", on(true), &recovered, &[]);
    assert!(
        matches!(&v, Verdict::Undecided(Some(why)) if why.contains("restart")),
        "{v:?}"
    );
}

#[test]
fn a_criterion_naming_its_own_device_keeps_its_value_beside_the_bare_names() {
    let values = json!({"contact": true, "devices.lamp.stuck": true});
    let (signals, devices) = scope_of("lamp", values.as_object().unwrap());
    assert_eq!(signals.len(), 1);
    assert_eq!(devices["lamp"].len(), 2, "{devices:?}");
    let was_off = timeline(json!({"contact": false}));
    let failed = (Verdict::Failed("STUCK".into()), Some(0));
    assert_eq!(
        run("lamp", on(true), &was_off, &[reading(20, values)]),
        failed
    );
}

#[test]
fn a_timeline_gives_the_moment_the_deadline_was_counted_from() {
    let deadline = rfc3339(T0 + 3_000);
    let events = [
        EventRow {
            at_ms: T0 + 2,
            event: "dispatched".into(),
            data: json!({"deadline": deadline, "budget_s": 2.5, "baseline": {"contact": false}}),
        },
        EventRow {
            at_ms: T0 + 9,
            event: "device_ack".into(),
            data: json!(null),
        },
    ];
    let tl = Timeline::of(&events);
    assert_eq!(tl.dispatched_ms, Some(T0 + 500));
    assert_eq!(tl.acked_ms, Some(T0 + 9));
    assert_eq!(tl.deadline_ms, Some(T0 + 3_000));
    assert_eq!(tl.baseline, json!({"contact": false}).as_object().cloned());
    assert!(!tl.recovered);
}
