//! What a new plant file changes for a person next to the machine, beside what it changes for
//! a client ([`super::surface`]): when closedloop says `completed` or `failed`, what must hold
//! before it writes, how long it waits, what it writes and reads, what stops it, and who may
//! ask. Each difference is one [`Shift`], classed by what closedloop now lets through:
//! **looser** (it accepts, allows or waits for more than before), **stricter** (less), or
//! **changed** (neither: another address, another group, an expression rewritten with no
//! difference found).
//!
//! A pure function over two loaded plants, like the surface rules; the journal's re-judging
//! ([`super::journal`]) adds the values it recorded to the states expressions are tried in.

mod action;
mod alarm;
mod criteria;
mod plans;
mod server;
mod wire;

use closedloop_plant::Plant;
use std::collections::BTreeMap;

/// Which way a change moves what closedloop lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Class {
    /// Completes, allows, waits or admits in more cases than before: the change a reviewer
    /// must look at first, since a result that was refused may now say `completed`.
    Looser,
    /// In fewer cases: calls that worked may now fail or wait.
    Stricter,
    /// Another meaning, neither wider nor narrower (an address, a group, a rewritten
    /// expression where no difference was found).
    Changed,
}

impl Class {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Class::Looser => "looser",
            Class::Stricter => "stricter",
            Class::Changed => "changed",
        }
    }

    /// The class of a change that widens (`true`) or narrows what is let through.
    pub(crate) fn wider(looser: bool) -> Class {
        if looser {
            Class::Looser
        } else {
            Class::Stricter
        }
    }
}

/// One behaviour difference: one line of the report.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shift {
    /// Where: `oven.set_temperature` (an action), `oven` (a device), `alarm OVERHEAT`, or
    /// `(server)`.
    pub place: String,
    /// The plant-file key (`done_when`, `fail_when.MOTOR_STALL`, `write[1]`, `signal
    /// temperature_c`).
    pub key: String,
    /// As the old file has it (`none` when absent).
    pub old: String,
    /// As the new file has it.
    pub new: String,
    /// What it means next to the machine, with the state that shows it when an expression
    /// changed.
    pub meaning: String,
    /// Looser, stricter or changed.
    pub class: Class,
}

impl Shift {
    pub(crate) fn new(
        place: &str,
        key: impl Into<String>,
        (old, new): (String, String),
        meaning: impl Into<String>,
        class: Class,
    ) -> Shift {
        Shift {
            place: place.to_string(),
            key: key.into(),
            old,
            new,
            meaning: meaning.into(),
            class,
        }
    }

    /// The row as JSON, for `--json`.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "place": self.place,
            "key": self.key,
            "old": self.old,
            "new": self.new,
            "meaning": self.meaning,
            "class": self.class.as_str(),
        })
    }
}

/// Values a journal recorded, by the name an expression reads them by (`temperature_c` within
/// its device's actions, `devices.oven.temperature_c` everywhere): tried beside the sampled
/// states, so a counterexample can be a state the plant was really in.
pub(crate) type Recorded = BTreeMap<String, Vec<f64>>;

/// Every behaviour difference between the two plants: the server's settings, then each device
/// (its driver, liveness and signals, then its actions), then the alarms. An action or device
/// the new file adds changes nothing that ran before (the surface table lists a new tool); one
/// it removes is listed here too, since whatever read or ran it stops.
pub(crate) fn compare(old: &Plant, new: &Plant, recorded: &Recorded) -> Vec<Shift> {
    let mut out = server::compare(old, new);
    for o in &old.devices {
        let Some(n) = new.device(&o.id) else {
            out.push(Shift::new(
                &o.id,
                "device",
                ("declared".into(), "none".into()),
                "removed: nothing of it is read or written any more",
                Class::Changed,
            ));
            continue;
        };
        out.extend(wire::device(o, n));
        let plants = (old, new);
        for a in &o.actions {
            match n.action(&a.name) {
                Some(b) => out.extend(action::compare(plants, &o.id, (a, b), recorded)),
                None => out.push(Shift::new(
                    &format!("{}.{}", o.id, a.name),
                    "action",
                    ("declared".into(), "none".into()),
                    "removed: it can no longer be run",
                    Class::Stricter,
                )),
            }
        }
    }
    out.extend(alarm::compare(old, new, recorded));
    out
}

/// A number in words: `40`, `0.5`, never `40.0`.
pub(crate) fn num(n: f64) -> String {
    format!("{n}")
}

/// An optional value in words: the value, or `none`.
pub(crate) fn or_none<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "none".to_string(), |v| v.to_string())
}
