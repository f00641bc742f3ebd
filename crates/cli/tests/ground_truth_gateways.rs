//! Ground truth across two gateways (`CLOSEDLOOP_PG_URL`): random scripts change what a Modbus
//! unit closedloop did not write (`tests/peers`) holds — an oven probe's temperature, and
//! whether its register answers exception 4 — and after each step every consumer of that value
//! at both gateways is checked against the unit's own record of it:
//! - the device state at a (which reads the probe) and at b (which cannot, and shows what a
//!   publishes): a value shown was the probe's true value, unrefused, no later than it says it
//!   was read (never younger than it is); a refusal that lasts is listed unreadable at both;
//!   while nothing changes, both show the same value, the same unreadable list, and ages apart by
//!   no more than one publish round;
//! - the standing alarm on the probe at each gateway: raised once the probe reads hot or cannot
//!   be read for a while, cleared once it reads cool for a while;
//! - a command whose `requires` reads the probe, called at either gateway (and run by a, which
//!   drives the relay): sent only when a read of the probe shortly before showed it true and
//!   readable; refused `INTERLOCK` when no such read could have.
//!
//! Scripts come from fixed seeds (`GATEWAY_SEEDS=1,2,…` replays or adds others); a failure
//! prints its seed, its script and every observation.

mod common;

#[path = "../../../tests/peers/modbus_unit.rs"]
mod modbus_unit;

#[path = "ground_truth_gateways/check.rs"]
mod check;
#[path = "ground_truth_gateways/script.rs"]
mod script;

use check::{Seen, Truth};
use common::gateways::{call, gateway_on, now_ms, owned_by};
use common::pg::Database;
use modbus_unit::ModbusUnit;
use script::{Step, script};
use std::path::Path;
use std::time::Duration;

pub const PROBE: u8 = 1;
const RELAY: u8 = 2;
const LAMP: u8 = 3;

fn plant(journal: &str, probe_at: &str) -> String {
    format!(
        r#"
[server]
name = "gateways-truth"
journal = "{journal}"
lease_s = 2

[[device]]
id = "probe"
description = "Oven probe"
gateways = ["a"]
driver = {{ kind = "modbus-tcp", address = "{probe_at}", unit = {PROBE}, timeout_ms = 200 }}
poll_ms = 20
liveness = {{ max_silence_s = 0.5 }}
[device.signals]
temp_c = {{ holding = 4, scale = 0.1, unit = "degC" }}

[[device]]
id = "relay"
description = "Oven heater relay"
gateways = ["a"]
driver = {{ kind = "modbus-tcp", address = "{probe_at}", unit = {RELAY}, timeout_ms = 200 }}
poll_ms = 20
[device.signals]
contact = {{ discrete_input = 0 }}
[[device.action]]
name = "warm"
description = "Switch the heater while the oven is cool."
params = {{ on = {{ type = "bool" }} }}
write = [{{ coil = 0, value = "params.on" }}]
done_when = "contact == params.on"
requires = "devices.probe.temp_c < 40.0"
expect_s = 0.05
idempotent = true

[[device]]
id = "lamp"
description = "Oven lamp"
driver = {{ kind = "modbus-tcp", address = "{probe_at}", unit = {LAMP}, timeout_ms = 200 }}
poll_ms = 20
[device.signals]
contact = {{ discrete_input = 0 }}

[[alarm]]
name = "HOT"
when = "devices.probe.temp_c > 60.0"
clear_when = "devices.probe.temp_c < 50.0"
blocks = ["lamp"]
description = "The oven is too hot to open."
"#
    )
}

/// a's plant and b's: b reaches the probe and the relay at an address nothing listens on (a
/// serial line on another machine).
fn plants(dir: &Path, journal: &str, unit: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let closed = common::gateways::closed_address();
    let (a, b) = (dir.join("plant_a.toml"), dir.join("plant_b.toml"));
    std::fs::write(&a, plant(journal, unit)).unwrap();
    std::fs::write(&b, plant(journal, &closed)).unwrap();
    (a, b)
}

/// The seeds to run: `GATEWAY_SEEDS`, else four fixed ones.
fn seeds() -> Vec<u64> {
    match std::env::var("GATEWAY_SEEDS") {
        Ok(s) => s.split(',').filter_map(|x| x.trim().parse().ok()).collect(),
        Err(_) => vec![1, 2, 3, 4],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_consumer_at_two_gateways_agrees_with_the_probes_record() {
    let Some(db) = Database::create("gateways_truth").await else {
        return;
    };
    let unit = ModbusUnit::start().await;
    unit.with(RELAY, |t| t.contacts.insert(0));
    let truth = Truth::new(&unit);
    truth.set(300, false);
    let dir = tempfile::tempdir().unwrap();
    let (plant_a, plant_b) = plants(dir.path(), &db.url, &unit.addr.to_string());
    let (mut a, a_at) = gateway_on(&plant_a, "a");
    let (mut b, b_at) = gateway_on(&plant_b, "b");
    owned_by(&b_at, "probe", Some("a")).await;
    owned_by(&b_at, "relay", Some("a")).await;
    let mut failures = Vec::new();
    for seed in seeds() {
        truth.set(300, false);
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let steps = script(seed);
        let mut seen = Vec::new();
        for step in &steps {
            run_step(step, &truth, [&a_at, &b_at], &mut seen).await;
        }
        let violations = check::violations(&truth, &seen);
        eprintln!(
            "gateways ground truth seed {seed}: {}",
            check::coverage(&seen)
        );
        if !violations.is_empty() {
            failures.push(format!(
                "seed {seed}: {}\nscript: {steps:?}\ntruth: {:?}\nseen:\n{}",
                violations.join("\n"),
                truth.log(),
                seen.iter()
                    .map(|s| format!("{s:?}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }
    }
    common::gateways::wind_up(db, &mut [&mut a, &mut b]).await;
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// One step of a script, then what both gateways show.
async fn run_step(step: &Step, truth: &Truth<'_>, at: [&String; 2], seen: &mut Vec<Seen>) {
    match *step {
        Step::Temp(tenths, hold) => {
            truth.set(tenths, truth.refused());
            tokio::time::sleep(Duration::from_millis(hold)).await;
        }
        Step::Refuse(on, hold) => {
            truth.set(truth.temp(), on);
            tokio::time::sleep(Duration::from_millis(hold)).await;
        }
        Step::Warm { on, at_b } => {
            let gw = usize::from(at_b);
            let args = format!(r#"{{"on":{on},"wait_s":3}}"#);
            let t0 = now_ms();
            let result = call(at[gw], "relay_warm", &args).await;
            seen.push(Seen::Warm {
                gw,
                t0,
                t1: now_ms(),
                result,
            });
        }
    }
    for (gw, host) in at.iter().enumerate() {
        let t0 = now_ms();
        let state = call(host, "get_device_state", r#"{"device":"probe"}"#).await;
        let alarms = call(host, "list_alarms", "{}").await;
        seen.push(Seen::State {
            gw,
            t0,
            t1: now_ms(),
            state,
            alarms,
        });
    }
}
