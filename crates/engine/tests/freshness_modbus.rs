//! One freshness rule for every consumer, against a Modbus unit closedloop did not write
//! (`tests/peers/modbus_unit.rs`, from the specification over plain sockets): a probe whose
//! temperature register starts answering exception 4 while its door register still answers.
//! The alarm must not clear on the last good temperature, `requires` must not pass on it, the
//! device state must show it unreadable with its true age, and a command whose criterion
//! register starts answering an exception fails with that code naming the signal.

mod common;

#[path = "../../../tests/peers/modbus_unit.rs"]
mod modbus_unit;

use closedloop_engine::{ErrorCode, Status};
use common::*;
use modbus_unit::ModbusUnit;
use serde_json::json;
use std::time::{Duration, Instant};

const PROBE: u8 = 1;
const HEATER: u8 = 2;
const VENT: u8 = 3;
const VALVE: u8 = 4;

fn plant(addr: &str) -> String {
    let driver = |unit: u8| {
        format!(
            r#"driver = {{ kind = "modbus-tcp", address = "{addr}", unit = {unit}, timeout_ms = 200 }}"#
        )
    };
    format!(
        r#"
[[device]]
id = "probe"
description = "Oven probe: temperature and door contact"
{probe}
poll_ms = 20
liveness = {{ max_silence_s = 0.5 }}
[device.signals]
temp_c = {{ holding = 4, scale = 0.1, unit = "degC" }}
door = {{ discrete_input = 0 }}

[[device]]
id = "heater"
description = "Oven heater contactor"
{heater}
poll_ms = 20
[device.signals]
contact = {{ discrete_input = 0 }}
[[device.action]]
name = "switch"
description = "Switch the oven heater on or off."
params = {{ on = {{ type = "bool" }} }}
write = [{{ coil = 0, value = "params.on" }}]
done_when = "contact == params.on"
expect_s = 0.05
idempotent = true

[[device]]
id = "vent"
description = "Oven vent flap"
{vent}
poll_ms = 20
[device.signals]
contact = {{ discrete_input = 0 }}
[[device.action]]
name = "open"
description = "Open the oven vent flap, only while the oven is below 60 degrees."
params = {{}}
requires = "devices.probe.temp_c < 60.0"
write = [{{ coil = 0, value = "true" }}]
done_when = "contact"
expect_s = 0.05
idempotent = true

[[device]]
id = "valve"
description = "Gas valve with a position feedback register"
{valve}
poll_ms = 20
[device.signals]
position = {{ holding = 1 }}
[[device.action]]
name = "set"
description = "Set the gas valve's opening in percent."
params = {{ percent = {{ type = "number", min = 0.0, max = 100.0 }} }}
write = [{{ holding = 0, value = "params.percent" }}]
done_when = "position == params.percent"
expect_s = 1.0
idempotent = true

[[alarm]]
name = "OVEN_UNSAFE"
when = "devices.probe.temp_c > 60.0 || devices.probe.door"
clear_when = "devices.probe.temp_c < 50.0 && !devices.probe.door"
blocks = ["heater"]
description = "The oven is too hot, or its door is open."
"#,
        probe = driver(PROBE),
        heater = driver(HEATER),
        vent = driver(VENT),
        valve = driver(VALVE),
    )
}

async fn started() -> (ModbusUnit, Rig) {
    let unit = ModbusUnit::start().await;
    unit.set_holding(PROBE, 4, 450);
    unit.set_discrete(PROBE, 0, true);
    for relay in [HEATER, VENT] {
        unit.with(relay, |t| t.contacts.insert(0));
    }
    let rig = rig(&plant(&unit.addr.to_string())).await;
    for d in ["probe", "heater", "vent", "valve"] {
        rig.online(d).await;
    }
    (unit, rig)
}

fn alarm(rig: &Rig) -> closedloop_engine::AlarmInfo {
    let all = rig.engine.alarms().into_iter();
    all.into_iter()
        .find(|a| a.name == "OVEN_UNSAFE")
        .expect("declared")
}

/// Waits (bounded) until `OVEN_UNSAFE` is `active`.
async fn until_alarm(rig: &Rig, active: bool) {
    for _ in 0..300 {
        if alarm(rig).active == active {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "OVEN_UNSAFE never became active = {active}: {:?}",
        alarm(rig)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alarm_never_clears_on_a_value_whose_register_stopped_answering() {
    let (unit, rig) = started().await;
    until_alarm(&rig, true).await; // the door is open

    // The temperature register answers exception 4 from now on; the oven heats to 85 °C; the
    // door is closed. The last good temperature, 45.0, would clear the alarm.
    unit.refuse_holding(PROBE, 4, Some(4));
    let broke = Instant::now();
    unit.set_holding(PROBE, 4, 850);
    unit.set_discrete(PROBE, 0, false);
    tokio::time::sleep(Duration::from_millis(1800)).await;

    // Raised since the start, for the open door; now it holds because the temperature cannot
    // be read, and it says so.
    let a = alarm(&rig);
    assert!(a.active, "cleared on a stale value: {a:?}");
    let why = a.why.clone().unwrap_or_default();
    assert!(
        why.contains("devices.probe.temp_c cannot be read since"),
        "{why}"
    );
    assert!(why.contains("holding:4 answered exception 4"), "{why}");
    assert!(why.contains("its last value, 45,"), "{why}");

    let on = rig.act("heater", "switch", json!({"on": true}), 2.0).await;
    assert_eq!(
        (on.status, code(&on).as_str()),
        (Status::Rejected, "INTERLOCK"),
        "{on:#?}"
    );
    assert!(
        on.detail
            .as_deref()
            .unwrap_or_default()
            .contains("OVEN_UNSAFE"),
        "{on:#?}"
    );
    assert!(!unit.coil(HEATER, 0), "nothing reached the heater");

    let state = rig.engine.device_state("probe").unwrap();
    let refused = &state.unreadable["temp_c"];
    assert_eq!(refused.error_code, "BUS_NAK");
    assert!(
        refused.detail.contains("holding:4 answered exception 4"),
        "{refused:?}"
    );
    let temp = &state.signals["temp_c"];
    assert!(temp.unreadable, "{temp:?}");
    assert_eq!(temp.value, json!(45.0));
    let age = Duration::from_millis(temp.age_ms.expect("read by this gateway") as u64);
    assert!(
        age + Duration::from_millis(50) >= broke.elapsed(),
        "{temp:?}: younger than it is"
    );
    assert!(!state.signals["door"].unreadable);
    let listed = rig.engine.devices(0, 10);
    assert_eq!(
        listed[0].unreadable,
        vec!["temp_c".to_string()],
        "{listed:?}"
    );
    let health = rig.engine.health();
    assert_eq!((health[0].device, health[0].unreadable), ("probe", 1));

    // The register reads again, 85 °C: still unsafe. Then the oven cools below 50 °C.
    unit.refuse_holding(PROBE, 4, None);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(alarm(&rig).active);
    unit.set_holding(PROBE, 4, 450);
    until_alarm(&rig, false).await;
    let on = rig.act("heater", "switch", json!({"on": true}), 2.0).await;
    assert_eq!(on.status, Status::Completed, "{on:#?}");
    assert!(unit.coil(HEATER, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alarm_with_an_unreadable_signal_is_raised_and_says_which_and_since_when() {
    let (unit, rig) = started().await;
    until_alarm(&rig, true).await; // the door is open
    unit.set_discrete(PROBE, 0, false);
    until_alarm(&rig, false).await; // 45 °C, door closed
    unit.refuse_holding(PROBE, 4, Some(4));
    until_alarm(&rig, true).await;
    let a = alarm(&rig);
    let why = a.why.unwrap_or_default();
    assert!(
        why.starts_with("`devices.probe.temp_c > 60.0 || devices.probe.door` cannot be judged: devices.probe.temp_c cannot be read since"),
        "{why}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requires_on_an_unreadable_signal_is_interlock_naming_it() {
    let (unit, rig) = started().await;
    unit.refuse_holding(PROBE, 4, Some(4));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let open = rig.act("vent", "open", json!({}), 2.0).await;
    assert_eq!(
        (open.status, open.error_code.clone()),
        (Status::Rejected, Some(ErrorCode::Interlock)),
        "{open:#?}"
    );
    let detail = open.detail.unwrap_or_default();
    assert!(
        detail.starts_with("The precondition `devices.probe.temp_c < 60.0` cannot be judged: devices.probe.temp_c cannot be read since"),
        "{detail}"
    );
    assert!(
        detail.contains("holding:4 answered exception 4"),
        "{detail}"
    );
    assert!(!unit.coil(VENT, 0), "nothing reached the vent");
    // Readable again: 45 °C passes.
    unit.refuse_holding(PROBE, 4, None);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let open = rig.act("vent", "open", json!({}), 2.0).await;
    assert_eq!(open.status, Status::Completed, "{open:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_criterion_register_answering_an_exception_fails_the_command_with_that_code() {
    let (unit, rig) = started().await;
    let set = rig.act("valve", "set", json!({"percent": 40.0}), 0.0).await;
    // The valve took the write (holding 0) but its position register now answers exception 4.
    for _ in 0..100 {
        if unit.with(VALVE, |t| t.holding.get(&0) == Some(&40)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    unit.refuse_holding(VALVE, 1, Some(4));
    let end = rig.settle(&set).await;
    assert_eq!(
        (end.status, code(&end).as_str(), end.verified),
        (Status::Failed, "BUS_NAK", false),
        "{end:#?}"
    );
    let detail = end.detail.unwrap_or_default();
    assert!(
        detail.starts_with("position cannot be read since"),
        "{detail}"
    );
    assert!(
        detail.contains("holding:1 answered exception 4"),
        "{detail}"
    );
}
