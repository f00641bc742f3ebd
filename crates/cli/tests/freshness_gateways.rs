//! One freshness rule across gateways (`CLOSEDLOOP_PG_URL`): two `closedloop serve` processes on
//! one PostgreSQL journal, over a Modbus unit closedloop did not write (`tests/peers`, plain
//! sockets from the specification). A probe only gateway a reaches shows, at b, the same value,
//! the same unreadable list and the same age as at a once its register answers exception 4; and
//! a raw `modbus_write` at the gateway that does not hold a device's lease is refused
//! `DEVICE_BUSY`, the unit's own log showing it never arrived.

mod common;

#[path = "../../../tests/peers/modbus_unit.rs"]
mod modbus_unit;

use common::gateways::{call, gateway_on, owned_by, settled_owner};
use common::pg::Database;
use modbus_unit::ModbusUnit;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const PROBE: u8 = 1;
const RELAY: u8 = 2;

fn plant(journal: &str, probe_at: &str, relay_at: &str) -> String {
    format!(
        r#"
[server]
name = "freshness"
journal = "{journal}"
lease_s = 2

[[device]]
id = "probe"
description = "Oven probe: temperature and door contact"
gateways = ["a"]
driver = {{ kind = "modbus-tcp", address = "{probe_at}", unit = {PROBE}, timeout_ms = 200 }}
poll_ms = 20
liveness = {{ max_silence_s = 0.5 }}
[device.signals]
temp_c = {{ holding = 4, scale = 0.1, unit = "degC" }}
door = {{ discrete_input = 0 }}

[[device]]
id = "relay"
description = "A relay open for raw writes while commissioning"
raw_access = true
driver = {{ kind = "modbus-tcp", address = "{relay_at}", unit = {RELAY}, timeout_ms = 200 }}
poll_ms = 20
[device.signals]
contact = {{ discrete_input = 0 }}
[[device.action]]
name = "switch"
description = "Switch the relay."
params = {{ on = {{ type = "bool" }} }}
write = [{{ coil = 0, value = "params.on" }}]
done_when = "contact == params.on"
expect_s = 0.05
idempotent = true
"#
    )
}

/// Writes a's plant and b's (b reaches the probe at an address nothing listens on, as a serial
/// line on another machine), returning their paths.
fn plants(dir: &Path, journal: &str, unit: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let closed = common::gateways::closed_address();
    let (a, b) = (dir.join("plant_a.toml"), dir.join("plant_b.toml"));
    std::fs::write(&a, plant(journal, unit, unit)).unwrap();
    std::fs::write(&b, plant(journal, &closed, unit)).unwrap();
    (a, b)
}

async fn probe_at(at: &str, until: impl Fn(&Value) -> bool) -> Value {
    let mut state = Value::Null;
    for _ in 0..150 {
        state = call(at, "get_device_state", r#"{"device":"probe"}"#).await;
        if until(&state) {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the probe at {at} never came to that: {state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_read_by_the_owner_is_shown_as_old_and_as_unreadable_at_every_gateway() {
    let Some(db) = Database::create("freshness_shown").await else {
        return;
    };
    let unit = ModbusUnit::start().await;
    unit.set_holding(PROBE, 4, 450);
    let dir = tempfile::tempdir().unwrap();
    let (plant_a, plant_b) = plants(dir.path(), &db.url, &unit.addr.to_string());
    let (mut a, a_at) = gateway_on(&plant_a, "a");
    let (mut b, b_at) = gateway_on(&plant_b, "b");
    owned_by(&b_at, "probe", Some("a")).await;
    probe_at(&b_at, |s| {
        s["read_by"] == "a" && s["signals"]["temp_c"]["value"] == 45.0
    })
    .await;

    // The temperature register answers exception 4 from now on; the oven heats to 85 °C.
    unit.refuse_holding(PROBE, 4, Some(4));
    let broke = Instant::now();
    unit.set_holding(PROBE, 4, 850);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let at_a = probe_at(&a_at, |_| true).await;
    let at_b = probe_at(&b_at, |s| s["read_by"] == "a").await;
    let elapsed = broke.elapsed().as_millis() as i64;
    each_shows_the_last_value_unreadable_and_as_old(&at_a, &at_b, elapsed);
    both_list_it_unreadable_read_at_one_time(&a_at, &b_at, &at_a, &at_b).await;
    b_s_metrics_agree_and_follow_the_owner_freezing(&a, &b_at).await;
    common::gateways::signal(&a, "-CONT");
    common::gateways::wind_up(db, &mut [&mut a, &mut b]).await;
}

/// At a and at b (`at_a`, `at_b`): the temperature 45 °C read before the register broke,
/// `elapsed` ms ago, unreadable since one time with the exception; the door readable.
fn each_shows_the_last_value_unreadable_and_as_old(at_a: &Value, at_b: &Value, elapsed: i64) {
    for (gw, s) in [("a", at_a), ("b", at_b)] {
        let temp = &s["signals"]["temp_c"];
        assert_eq!(temp["value"], 45.0, "{gw}: {s}");
        assert_eq!(temp["unreadable"], true, "{gw}: {s}");
        let age = temp["age_ms"].as_i64().unwrap();
        assert!(
            age >= elapsed - 300 && age <= elapsed + 1000,
            "{gw}: age {age} ms, {elapsed} ms since: {s}"
        );
        let refused = &s["unreadable"]["temp_c"];
        assert_eq!(refused["error_code"], "BUS_NAK", "{gw}: {s}");
        assert!(
            refused["detail"]
                .as_str()
                .unwrap()
                .contains("holding:4 answered exception 4"),
            "{gw}: {s}"
        );
        assert_eq!(s["signals"]["door"]["unreadable"], Value::Null, "{gw}: {s}");
    }
    assert_eq!(
        at_a["unreadable"]["temp_c"]["since"],
        at_b["unreadable"]["temp_c"]["since"]
    );
}

/// Both gateways list the temperature unreadable; both show it read at one time, b's age no
/// younger than a's; a value read fresh is no younger at b than the owner's round allows.
async fn both_list_it_unreadable_read_at_one_time(
    a_at: &str,
    b_at: &str,
    at_a: &Value,
    at_b: &Value,
) {
    for at in [a_at, b_at] {
        let listed = call(at, "list_devices", "{}").await;
        let probe = &listed["devices"][0];
        assert_eq!(
            probe["unreadable"],
            serde_json::json!(["temp_c"]),
            "{listed}"
        );
    }
    assert_eq!(
        at_a["signals"]["temp_c"]["at"],
        at_b["signals"]["temp_c"]["at"]
    );
    let (age_a, age_b) = (
        at_a["signals"]["temp_c"]["age_ms"].as_i64().unwrap(),
        at_b["signals"]["temp_c"]["age_ms"].as_i64().unwrap(),
    );
    assert!(
        age_b >= age_a && age_b - age_a <= 500,
        "a {age_a} ms, b {age_b} ms"
    );
    // A value read fresh is shown no younger at b than the owner's round allows.
    let door_b = at_b["signals"]["door"]["age_ms"].as_i64().unwrap();
    assert!((20..=1000).contains(&door_b), "{at_b}");
}

/// b's /metrics agrees with b's own device state: the owner's liveness and unreadable list
/// (it once said device_up 0, unreadable 0 beside an online state with one unreadable). Then
/// the owner `a` freezes (left stopped): within its window and a round, b no longer shows the
/// probe online.
async fn b_s_metrics_agree_and_follow_the_owner_freezing(a: &std::process::Child, b_at: &str) {
    let metric = |series: &'static str| {
        let b_at = b_at.to_string();
        async move { common::gateways::metric(&b_at, series).await }
    };
    let up = metric(r#"closedloop_device_up{device="probe"}"#).await;
    let unreadable = metric(r#"closedloop_device_unreadable_signals{device="probe"}"#).await;
    let state = probe_at(b_at, |s| s["read_by"] == "a").await;
    assert_eq!(state["liveness"], "online", "{state}");
    assert_eq!((up, unreadable), (Some(1.0), Some(1.0)), "{state}");
    // The owner freezes: within its window and a round, b no longer shows the probe online.
    common::gateways::signal(a, "-STOP");
    let frozen = Instant::now();
    let gone = probe_at(b_at, |s| s["liveness"] != "online").await;
    println!(
        "b showed the probe {} {} ms after its owner froze (window 500 ms)",
        gone["liveness"],
        frozen.elapsed().as_millis()
    );
    let down = metric(r#"closedloop_device_up{device="probe"}"#).await;
    assert_eq!(down, Some(0.0), "/metrics agrees: {gone}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_write_at_a_gateway_without_the_lease_is_refused_and_never_reaches_the_device() {
    let Some(db) = Database::create("freshness_raw").await else {
        return;
    };
    let unit = ModbusUnit::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (plant_a, plant_b) = plants(dir.path(), &db.url, &unit.addr.to_string());
    let (mut a, a_at) = gateway_on(&plant_a, "a");
    let (mut b, b_at) = gateway_on(&plant_b, "b");
    let owner = settled_owner(&a_at, &b_at, "relay").await;
    let (owner_at, other_at, other) = match owner.as_str() {
        "a" => (&a_at, &b_at, "b"),
        _ => (&b_at, &a_at, "a"),
    };
    let args = r#"{"device":"relay","area":"coil","address":0,"values":[true]}"#;
    let before = unit.writes().len();
    let refused = call(other_at, "modbus_write", args).await;
    assert_eq!(refused["error_code"], "DEVICE_BUSY", "{refused}");
    let detail = refused["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains(&format!("driven by gateway {owner}")),
        "{refused}"
    );
    assert!(
        detail.contains(&format!("not by this one ({other})")),
        "{refused}"
    );
    assert_eq!(
        unit.writes().len(),
        before,
        "the refused write reached the device"
    );
    assert!(!unit.coil(RELAY, 0));

    let done = call(owner_at, "modbus_write", args).await;
    assert_eq!(done["acknowledged"], true, "{done}");
    let writes = unit.writes();
    assert_eq!(writes.len(), before + 1, "{writes:?}");
    assert_eq!((writes[before].unit, writes[before].function), (RELAY, 5));
    assert!(unit.coil(RELAY, 0));
    common::gateways::wind_up(db, &mut [&mut a, &mut b]).await;
}
