//! The probe's record (`Truth`: every change the test made to the unit, with when) and the
//! properties every observation (`Seen`) is held to.

use super::PROBE;
use super::modbus_unit::ModbusUnit;
use serde_json::Value;
use std::sync::Mutex;

/// Scheduling and one poll: how far a reading may stray from the instant it names.
const TOL: i64 = 150;
/// The owners' publish round (`owners_values::ROUND`).
const ROUND: i64 = 500;

/// How much later than it says a value may have been read at gateway `gw`: a shows its own
/// reads; b shows a's, and says them no younger than a last confirmed them (up to two rounds:
/// a's publish, b's read).
fn lag(gw: usize) -> i64 {
    if gw == 0 { 0 } else { 2 * ROUND + 200 }
}

/// The probe as the test made it: `(wall ms, tenths of a degree, refused)`, oldest first.
pub struct Truth<'u> {
    unit: &'u ModbusUnit,
    log: Mutex<Vec<(i64, u16, bool)>>,
}

impl<'u> Truth<'u> {
    pub fn new(unit: &'u ModbusUnit) -> Truth<'u> {
        Truth {
            unit,
            log: Mutex::new(Vec::new()),
        }
    }

    /// Makes the probe hold `tenths` and answer exception 4 (or not), and records it.
    pub fn set(&self, tenths: u16, refused: bool) {
        self.unit.set_holding(PROBE, 4, tenths);
        self.unit.refuse_holding(PROBE, 4, refused.then_some(4));
        let mut log = self.log.lock().unwrap();
        log.push((super::common::gateways::now_ms(), tenths, refused));
    }

    pub fn log(&self) -> Vec<(i64, u16, bool)> {
        self.log.lock().unwrap().clone()
    }

    pub fn temp(&self) -> u16 {
        self.log().last().map_or(0, |l| l.1)
    }

    pub fn refused(&self) -> bool {
        self.log().last().is_some_and(|l| l.2)
    }

    /// Every state the probe was in during `[from, to]`.
    fn during(&self, from: i64, to: i64) -> Vec<(u16, bool)> {
        let log = self.log();
        let first = log.iter().rposition(|l| l.0 <= from).unwrap_or(0);
        log[first..]
            .iter()
            .filter(|l| l.0 <= to)
            .map(|l| (l.1, l.2))
            .collect()
    }

    fn ever(&self, from: i64, to: i64, p: impl Fn((u16, bool)) -> bool) -> bool {
        self.during(from, to).into_iter().any(p)
    }

    fn always(&self, from: i64, to: i64, p: impl Fn((u16, bool)) -> bool) -> bool {
        self.during(from, to).into_iter().all(p)
    }
}

/// What the test saw at gateway `gw` (0: a, 1: b) between `t0` and `t1` (wall ms).
#[derive(Debug)]
pub enum Seen {
    State {
        gw: usize,
        t0: i64,
        t1: i64,
        state: Value,
        alarms: Value,
    },
    Warm {
        gw: usize,
        t0: i64,
        t1: i64,
        result: Value,
    },
}

const GW: [&str; 2] = ["a", "b"];

/// Every property every observation breaks, in words.
pub fn violations(truth: &Truth, seen: &[Seen]) -> Vec<String> {
    let mut v = Vec::new();
    for s in seen {
        match s {
            Seen::State {
                gw,
                t0,
                t1,
                state,
                alarms,
            } => {
                value(truth, *gw, (*t0, *t1), state, &mut v);
                unreadable(truth, *gw, (*t0, *t1), state, &mut v);
                alarm(truth, *gw, (*t0, *t1), alarms, &mut v);
            }
            Seen::Warm { gw, t0, t1, result } => warm(truth, *gw, (*t0, *t1), result, &mut v),
        }
    }
    for pair in seen.windows(2) {
        if let [
            Seen::State {
                gw: 0,
                t0,
                state: a,
                ..
            },
            Seen::State {
                gw: 1,
                t1,
                state: b,
                ..
            },
        ] = pair
        {
            same_at_both(truth, (*t0, *t1), a, b, &mut v);
        }
    }
    v
}

/// The temperature a state shows as current, with its age: none when it is unreadable.
fn shown(state: &Value) -> Option<(u16, i64)> {
    let t = &state["signals"]["temp_c"];
    if t["unreadable"] == true {
        return None;
    }
    let tenths = (t["value"].as_f64()? * 10.0).round() as u16;
    Some((tenths, t["age_ms"].as_i64()?))
}

/// A value shown was the probe's, unrefused, at the time it says it was read or up to the lag
/// later — never at a later time than that (younger than it is).
fn value(truth: &Truth, gw: usize, (t0, t1): (i64, i64), state: &Value, v: &mut Vec<String>) {
    let Some((tenths, age)) = shown(state) else {
        return;
    };
    let (lo, hi) = (t0 - age - TOL, t1 - age + lag(gw) + TOL);
    if !truth.ever(lo, hi, |(t, r)| t == tenths && !r) {
        v.push(format!(
            "{} at {t1}: temp_c = {tenths} tenths read {age} ms ago, but the probe did not read so between {lo} and {hi}",
            GW[gw]
        ));
    }
}

/// A refusal that lasts is listed; a listed one was (recently) real.
fn unreadable(truth: &Truth, gw: usize, (t0, t1): (i64, i64), state: &Value, v: &mut Vec<String>) {
    let listed = state["unreadable"]["temp_c"].is_object();
    let window = 400 + lag(gw);
    if !listed && truth.always(t0 - window, t1, |(_, r)| r) {
        v.push(format!(
            "{} at {t1}: temp_c not listed unreadable, its register refused since before {}: {state}",
            GW[gw],
            t0 - window
        ));
    }
    if listed && !truth.ever(t0 - window, t1, |(_, r)| r) {
        v.push(format!(
            "{} at {t1}: temp_c listed unreadable, its register answered since {}: {state}",
            GW[gw],
            t0 - window
        ));
    }
}

/// HOT is raised when the probe read hot or could not be read for a while (at both); at a,
/// which reads it, it is cleared when it read cool for a while, and clears only on a cool read.
fn alarm(truth: &Truth, gw: usize, (t0, t1): (i64, i64), alarms: &Value, v: &mut Vec<String>) {
    let list = alarms["alarms"].as_array().cloned().unwrap_or_default();
    let Some(hot) = list.iter().find(|a| a["name"] == "HOT") else {
        v.push(format!("{}: no HOT in {alarms}", GW[gw]));
        return;
    };
    let active = hot["active"] == true;
    let window = 500 + lag(gw);
    if !active && truth.always(t0 - window, t1, |(t, r)| r || t > 600) {
        v.push(format!(
            "{} at {t1}: HOT cleared while the probe read hot or nothing since {}",
            GW[gw],
            t0 - window
        ));
    }
    if gw == 0 && active && truth.always(t0 - window, t1, |(t, r)| !r && t < 500) {
        v.push(format!(
            "a at {t1}: HOT raised while the probe read cool since {}: {hot}",
            t0 - window
        ));
    }
    if !active && !truth.ever(t0 - 10_000, t1, |(t, r)| !r && t <= 600) {
        v.push(format!(
            "{} at {t1}: HOT cleared, but the probe never read 60.0 or below",
            GW[gw]
        ));
    }
}

/// `relay_warm` is sent only on a read, shortly before, that showed the probe below 40 °C;
/// refused `INTERLOCK` when no read could have.
fn warm(truth: &Truth, gw: usize, (t0, t1): (i64, i64), result: &Value, v: &mut Vec<String>) {
    let events: Vec<&str> = (result["timeline"].as_array().into_iter().flatten())
        .filter_map(|e| e["event"].as_str())
        .collect();
    let sent = events.contains(&"dispatched");
    let window = 700;
    if sent && !truth.ever(t0 - window, t1, |(t, r)| !r && t < 400) {
        v.push(format!(
            "relay_warm at {} sent, but the probe did not read below 40.0 between {} and {t1}: {result}",
            GW[gw],
            t0 - window
        ));
    }
    let never = truth.always(t0 - window, t1, |(t, r)| r || t >= 400);
    if never && result["error_code"] != "INTERLOCK" {
        v.push(format!(
            "relay_warm at {}: the probe read 40.0 or more, or nothing, the whole time, and the answer is not INTERLOCK: {result}",
            GW[gw]
        ));
    }
}

/// While nothing changed for three seconds, a and b show the same value and unreadable list,
/// b's age no younger than a's and at most a round and the calls' gap older.
fn same_at_both(truth: &Truth, (t0, t1): (i64, i64), a: &Value, b: &Value, v: &mut Vec<String>) {
    if truth.during(t0 - 3000, t1).len() > 1 {
        return;
    }
    let keys = |s: &Value| -> Vec<String> {
        s["unreadable"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    if keys(a) != keys(b) {
        v.push(format!("unreadable lists differ: a {a}\nb {b}"));
    }
    let (va, vb) = (
        &a["signals"]["temp_c"]["value"],
        &b["signals"]["temp_c"]["value"],
    );
    if va != vb {
        v.push(format!("temp_c differs: a {va}, b {vb}"));
    }
    let (Some(age_a), Some(age_b)) = (
        a["signals"]["temp_c"]["age_ms"].as_i64(),
        b["signals"]["temp_c"]["age_ms"].as_i64(),
    ) else {
        return;
    };
    let gap = t1 - t0;
    if age_b < age_a - TOL || age_b > age_a + gap + ROUND + TOL {
        v.push(format!(
            "temp_c's age at b ({age_b} ms) is not within a round of a's ({age_a} ms, calls {gap} ms apart)"
        ));
    }
}

/// What the observations covered, for the run's summary line: values shown at each gateway,
/// unreadable listings at each, HOT raised and cleared at each, `relay_warm` sent and refused.
pub fn coverage(seen: &[Seen]) -> String {
    let mut n = [[0usize; 2]; 6];
    for s in seen {
        match s {
            Seen::State {
                gw, state, alarms, ..
            } => {
                n[0][*gw] += usize::from(shown(state).is_some());
                n[1][*gw] += usize::from(state["unreadable"]["temp_c"].is_object());
                let hot = alarms["alarms"][0]["active"] == true;
                n[2][*gw] += usize::from(hot);
                n[3][*gw] += usize::from(!hot);
            }
            Seen::Warm { gw, result, .. } => {
                let sent = result["timeline"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|e| e["event"] == "dispatched"));
                n[4][*gw] += usize::from(sent);
                n[5][*gw] += usize::from(result["error_code"] == "INTERLOCK");
            }
        }
    }
    let names = [
        "value shown",
        "unreadable",
        "HOT raised",
        "HOT clear",
        "warm sent",
        "warm INTERLOCK",
    ];
    let parts: Vec<String> = names
        .iter()
        .zip(n)
        .map(|(k, [a, b])| format!("{k} a {a} b {b}"))
        .collect();
    parts.join(", ")
}
