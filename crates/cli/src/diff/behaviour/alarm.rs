//! Standing alarms: when each is raised and cleared, for how long it must hold first, what it
//! blocks, and what a silent device means to it. Raised in more states is stricter (more
//! commands refused); cleared in more states is looser.

use super::criteria::{self, Role};
use super::{Class, Recorded, Shift, or_none};
use crate::diff::exprs::Context;
use closedloop_plant::{Alarm, Expr, Plant, WhenOffline};

/// Every difference between the two files' alarms, by name.
pub(super) fn compare(old: &Plant, new: &Plant, recorded: &Recorded) -> Vec<Shift> {
    let cx = Context {
        old,
        new,
        device: "",
        params: &[],
        recorded,
    };
    let mut out = Vec::new();
    for a in &old.alarms {
        let place = format!("alarm {}", a.name);
        match new.alarms.iter().find(|b| b.name == a.name) {
            Some(b) => out.extend(one(&place, a, b, &cx)),
            None => out.push(Shift::new(
                &place,
                "alarm",
                (a.when.source().to_string(), "none".into()),
                format!("removed: no longer blocks {}", a.blocks.join(", ")),
                Class::Looser,
            )),
        }
    }
    for b in new
        .alarms
        .iter()
        .filter(|b| old.alarms.iter().all(|a| a.name != b.name))
    {
        out.push(Shift::new(
            &format!("alarm {}", b.name),
            "alarm",
            ("none".into(), b.when.source().to_string()),
            format!(
                "added: blocks {} while {}",
                b.blocks.join(", "),
                b.when.source()
            ),
            Class::Stricter,
        ));
    }
    out
}

/// What clears an alarm: its `clear_when`, or `when` no longer holding.
fn clears(a: &Alarm) -> Expr {
    a.clear_when.clone().unwrap_or_else(|| {
        Expr::compile(&format!("!({})", a.when.source()))
            .expect("the negation of a compiled condition compiles")
    })
}

/// Every difference between two versions of one alarm.
fn one(place: &str, a: &Alarm, b: &Alarm, cx: &Context) -> Vec<Shift> {
    let mut out = conditions(place, a, b, cx);
    if a.for_ms != b.for_ms {
        let meaning = format!(
            "raised once `when` has held {} ms on fresh values, not {} ms",
            b.for_ms, a.for_ms
        );
        let words = (format!("{} ms", a.for_ms), format!("{} ms", b.for_ms));
        out.push(Shift::new(
            place,
            "for_ms",
            words,
            meaning,
            Class::wider(b.for_ms > a.for_ms),
        ));
    }
    out.extend(blocks(place, a, b));
    out.extend(when_offline(place, a, b));
    if a.severity != b.severity {
        out.push(Shift::new(
            place,
            "severity",
            (a.severity.clone(), b.severity.clone()),
            "reported with another severity",
            Class::Changed,
        ));
    }
    out
}

/// `when` and `clear_when`: the states the alarm is raised and cleared in.
fn conditions(place: &str, a: &Alarm, b: &Alarm, cx: &Context) -> Vec<Shift> {
    let raised = Role {
        holds: "raised",
        more_is_looser: false,
        absent_holds: false,
    };
    let cleared = Role {
        holds: "cleared",
        more_is_looser: true,
        absent_holds: false,
    };
    let mut out: Vec<Shift> =
        criteria::shift(place, "when", (Some(&a.when), Some(&b.when)), &raised, cx)
            .into_iter()
            .collect();
    // Without a `clear_when` in either file, clearing follows `when`: its line says it.
    let (ca, cb) = (clears(a), clears(b));
    if (a.clear_when.is_some() || b.clear_when.is_some()) && ca.source() != cb.source() {
        let mut shift = criteria::shift(place, "clear_when", (Some(&ca), Some(&cb)), &cleared, cx)
            .expect("they differ");
        (shift.old, shift.new) = (
            or_none(a.clear_when.as_ref().map(Expr::source)),
            or_none(b.clear_when.as_ref().map(Expr::source)),
        );
        out.push(shift);
    }
    out
}

/// `blocks`: devices only added is stricter, only dropped looser, both changed.
fn blocks(place: &str, a: &Alarm, b: &Alarm) -> Option<Shift> {
    let added: Vec<&String> = b.blocks.iter().filter(|d| !a.blocks.contains(d)).collect();
    let gone: Vec<&String> = a.blocks.iter().filter(|d| !b.blocks.contains(d)).collect();
    if added.is_empty() && gone.is_empty() {
        return None;
    }
    let class = match (added.is_empty(), gone.is_empty()) {
        (false, true) => Class::Stricter,
        (true, false) => Class::Looser,
        _ => Class::Changed,
    };
    let meaning =
        format!("while raised it now also blocks {added:?} and no longer blocks {gone:?}");
    Some(Shift::new(
        place,
        "blocks",
        (a.blocks.join(", "), b.blocks.join(", ")),
        meaning,
        class,
    ))
}

/// `when_offline`: ignoring a silent device is looser than counting it as the alarm.
fn when_offline(place: &str, a: &Alarm, b: &Alarm) -> Option<Shift> {
    if a.when_offline == b.when_offline {
        return None;
    }
    let word = |w: WhenOffline| match w {
        WhenOffline::Block => "block",
        WhenOffline::Ignore => "ignore",
    };
    let meaning = match b.when_offline {
        WhenOffline::Block => "a silent device it reads counts as the alarm (fail safe)",
        WhenOffline::Ignore => {
            "a silent device it reads leaves the alarm as it was: nothing known, nothing blocked"
        }
    };
    let words = (
        word(a.when_offline).to_string(),
        word(b.when_offline).to_string(),
    );
    Some(Shift::new(
        place,
        "when_offline",
        words,
        meaning,
        Class::wider(b.when_offline == WhenOffline::Ignore),
    ))
}
