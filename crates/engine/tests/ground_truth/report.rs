//! A readable account of a case, for failure messages.

use super::check::commands;
use super::rig::Outcome;
use super::spec::*;
use closedloop_sim::SimState;
use std::fmt::Write as _;

/// A device's physical state in one line.
pub fn brief(s: &SimState) -> String {
    let mut out = String::new();
    if s.silent {
        out.push_str("silent ");
    }
    if let Some(c) = s.contact {
        let _ = write!(
            out,
            "coil={} contact={c}",
            s.coils.first().copied().unwrap_or(false)
        );
    }
    if let Some(p) = s.position_mm {
        let _ = write!(
            out,
            "pos={p:.2} target={:.2} moving={} fault={}",
            s.target_mm.unwrap_or(f64::NAN),
            s.moving.unwrap_or(false),
            s.fault.unwrap_or(false)
        );
    }
    if let Some(t) = s.temperature_c {
        let _ = write!(
            out,
            "temp={t:.2} sp={:.1} enabled={}",
            s.setpoint_c.unwrap_or(f64::NAN),
            s.coils.first().copied().unwrap_or(false)
        );
    }
    out
}

/// A readable account of a case for a failure message.
pub fn report(case: &Case, out: &Outcome) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "--- plant ---{}", case_toml(case));
    let _ = writeln!(s, "--- steps ---");
    let mut t = 0;
    for (i, st) in case.steps.iter().enumerate() {
        t += st.delay_ms;
        let _ = writeln!(s, "#{i} at {t} ms: {:?}", st.op);
    }
    let _ = writeln!(s, "--- epochs --- {:?}", out.epochs);
    let _ = writeln!(s, "--- commands ---");
    for c in commands(case, out) {
        let evs: Vec<String> =
            c.j.events
                .iter()
                .filter(|(_, e)| e.event != "signal")
                .map(|(ep, e)| {
                    let ep_ = &out.epochs[(*ep).min(out.epochs.len() - 1)];
                    format!("{}@{}", e.event, ep_.start_ms + e.at_ms - ep_.wall_ms)
                })
                .collect();
        let _ = writeln!(
            s,
            "{} {} {} {} -> {} {:?} verified={} deadline={:?} | {}\n    detail: {}",
            c.id,
            device_id(&case.devices, c.dev),
            c.action,
            c.j.row.params,
            c.status,
            c.code,
            c.verified,
            c.deadline,
            evs.join(" "),
            c.j.row.detail.as_deref().unwrap_or("")
        );
    }
    let _ = writeln!(s, "--- device log (first 200) ---");
    for o in out.obs.iter().take(200) {
        let _ = writeln!(
            s,
            "{:>6} e{} {} {:?} {}",
            o.t_ms(),
            o.epoch,
            device_id(&case.devices, o.dev),
            o.kind,
            brief(&o.state)
        );
    }
    s
}
