//! One action's behaviour: completion, preconditions, timing, what it writes, and the envelope
//! around it (rate, dead man, confirmation).

use super::criteria::{self, Role};
use super::{Class, Recorded, Shift, num, or_none, plans};
use crate::diff::exprs::Context;
use closedloop_plant::{Action, Expr, Plant, RateLimit, Verification};

/// Every difference between two versions of one action.
pub(super) fn compare(
    (old, new): (&Plant, &Plant),
    device: &str,
    (a, b): (&Action, &Action),
    recorded: &Recorded,
) -> Vec<Shift> {
    let place = format!("{device}.{}", a.name);
    let cx = Context {
        old,
        new,
        device,
        params: &b.params,
        recorded,
    };
    let mut out = completion(&place, (a, b), &cx);
    out.extend(timing(&place, (a, b)));
    out.extend(plans::compare(&place, (a, b)));
    out.extend(envelope(&place, (a, b)));
    out
}

/// `done_when`, each `fail_when` code, `started_when`, `stopped_when`, `requires`, `hold_ms`,
/// `verification`.
fn completion(place: &str, (a, b): (&Action, &Action), cx: &Context) -> Vec<Shift> {
    let mut out = conditions(place, (a, b), cx);
    out.extend(fail_when(place, (a, b), cx));
    if a.hold_ms != b.hold_ms {
        let meaning = format!(
            "done_when must hold {} ms across reads before completed, not {} ms",
            b.hold_ms, a.hold_ms
        );
        let class = Class::wider(b.hold_ms < a.hold_ms);
        let nums = (format!("{} ms", a.hold_ms), format!("{} ms", b.hold_ms));
        out.push(Shift::new(place, "hold_ms", nums, meaning, class));
    }
    let (av, bv) = (a.effective_verification(), b.effective_verification());
    if av != bv {
        out.push(verification(place, av, bv));
    }
    out
}

/// `requires`, `done_when`, `started_when`, `stopped_when`: the criteria with one key each,
/// told apart only by what their holding means.
fn conditions(place: &str, (a, b): (&Action, &Action), cx: &Context) -> Vec<Shift> {
    let role = |holds, more_is_looser, absent_holds| Role {
        holds,
        more_is_looser,
        absent_holds,
    };
    let pairs: [(&str, Option<&Expr>, Option<&Expr>, Role); 4] = [
        (
            "requires",
            a.requires.as_ref(),
            b.requires.as_ref(),
            role("allowed to start", true, true),
        ),
        (
            "done_when",
            a.done_when.as_ref(),
            b.done_when.as_ref(),
            role("completed", true, false),
        ),
        (
            "started_when",
            a.started_when.as_ref(),
            b.started_when.as_ref(),
            role("counted as started", true, true),
        ),
        (
            "stopped_when",
            a.stopped_when.as_ref(),
            b.stopped_when.as_ref(),
            role("counted as stopped after a cancel", true, true),
        ),
    ];
    // A `done_when` that went with a verification change is that change's line: without one,
    // completion is a readback (or nothing), not a criterion that never holds.
    let with_verification =
        a.verification != b.verification && (a.done_when.is_none() || b.done_when.is_none());
    pairs
        .iter()
        .filter(|(key, ..)| !(with_verification && *key == "done_when"))
        .filter_map(|(key, o, n, role)| criteria::shift(place, key, (*o, *n), role, cx))
        .collect()
}

/// Each `fail_when` code in either version, compared by code so a reordering is no change.
fn fail_when(place: &str, (a, b): (&Action, &Action), cx: &Context) -> Vec<Shift> {
    let codes: std::collections::BTreeSet<&String> = a
        .fail_when
        .iter()
        .chain(&b.fail_when)
        .map(|(c, _)| c)
        .collect();
    let find = |act: &Action, code: &str| {
        act.fail_when
            .iter()
            .find(|(c, _)| c == code)
            .map(|(_, e)| e.clone())
    };
    let mut out = Vec::new();
    for code in codes {
        let holds = format!("failed {code}");
        let role = Role {
            holds: &holds,
            more_is_looser: false,
            absent_holds: false,
        };
        let (o, n) = (find(a, code), find(b, code));
        let key = format!("fail_when.{code}");
        out.extend(criteria::shift(
            place,
            &key,
            (o.as_ref(), n.as_ref()),
            &role,
            cx,
        ));
    }
    out
}

fn verification(place: &str, a: Verification, b: Verification) -> Shift {
    let rank = |v: Verification| match v {
        Verification::Feedback => 2,
        Verification::Readback => 1,
        Verification::None => 0,
    };
    let meaning = match b {
        Verification::Feedback => "completed only when a signal senses the effect",
        Verification::Readback => {
            "completed when the written registers read back, without sensing the effect"
        }
        Verification::None => "nothing is read back: the result is sent, never completed",
    };
    let words = (a.as_str().to_string(), b.as_str().to_string());
    Shift::new(
        place,
        "verification",
        words,
        meaning,
        Class::wider(rank(b) < rank(a)),
    )
}

/// `expect_s`, `timeout_factor`, `timeout_floor_ms`, `queue_timeout_s`, `queue`, `exclusive`,
/// `idempotent`: how long closedloop waits, and what runs beside what.
fn timing(place: &str, (a, b): (&Action, &Action)) -> Vec<Shift> {
    let mut out: Vec<Shift> = expect(place, (a, b)).into_iter().collect();
    out.extend(deadlines(place, (a, b)));
    out.extend(sharing(place, (a, b)));
    out
}

/// `expect_s`: a number moves the deadline; an expression on either side computes it another
/// way, which says nothing about longer or shorter.
fn expect(place: &str, (a, b): (&Action, &Action)) -> Option<Shift> {
    let (ea, eb) = (a.expect_s.source(), b.expect_s.source());
    if ea == eb {
        return None;
    }
    let words = (ea.to_string(), eb.to_string());
    let shift = match (ea.trim().parse::<f64>(), eb.trim().parse::<f64>()) {
        (Ok(x), Ok(y)) => Shift::new(
            place,
            "expect_s",
            words,
            format!(
                "TIMEOUT after about {} × expect_s: {} s expected, not {} s",
                num(b.timeout_factor),
                num(y),
                num(x)
            ),
            Class::wider(y > x),
        ),
        _ => Shift::new(
            place,
            "expect_s",
            words,
            "the expected duration, and so the deadline, is computed another way",
            Class::Changed,
        ),
    };
    Some(shift)
}

/// `timeout_factor`, `timeout_floor_ms`, `queue_timeout_s`: waits where longer is looser.
fn deadlines(place: &str, (a, b): (&Action, &Action)) -> Vec<Shift> {
    let longer = |key: &str, x: f64, y: f64, unit: &str, what: &str| {
        (x != y).then(|| {
            let words = (format!("{}{unit}", num(x)), format!("{}{unit}", num(y)));
            let how = if y > x { "later" } else { "sooner" };
            Shift::new(
                place,
                key,
                words,
                format!("{what} {how}"),
                Class::wider(y > x),
            )
        })
    };
    let mut out = Vec::new();
    out.extend(longer(
        "timeout_factor",
        a.timeout_factor,
        b.timeout_factor,
        "",
        "TIMEOUT",
    ));
    let floor = |x: u64| x as f64;
    out.extend(longer(
        "timeout_floor_ms",
        floor(a.timeout_floor_ms),
        floor(b.timeout_floor_ms),
        " ms",
        "TIMEOUT",
    ));
    out.extend(longer(
        "queue_timeout_s",
        a.queue_timeout_s,
        b.queue_timeout_s,
        " s",
        "a queued command gives up",
    ));
    out
}

/// `queue`, `exclusive`, `idempotent`: what happens beside a busy device or a failed write.
fn sharing(place: &str, (a, b): (&Action, &Action)) -> Vec<Shift> {
    let mut out = Vec::new();
    if a.queue != b.queue {
        let meaning = if b.queue {
            "a busy device queues the command instead of refusing it DEVICE_BUSY"
        } else {
            "a busy device refuses the command DEVICE_BUSY instead of queueing it"
        };
        out.push(Shift::new(
            place,
            "queue",
            (a.queue.to_string(), b.queue.to_string()),
            meaning,
            Class::wider(b.queue),
        ));
    }
    if a.exclusive != b.exclusive {
        let meaning = format!(
            "runs one at a time with the actions of group {}, no longer of {}",
            b.exclusive, a.exclusive
        );
        out.push(Shift::new(
            place,
            "exclusive",
            (a.exclusive.clone(), b.exclusive.clone()),
            meaning,
            Class::Changed,
        ));
    }
    if a.idempotent != b.idempotent {
        let meaning = if b.idempotent {
            "written again after a transport error (the write must be harmless twice)"
        } else {
            "no longer written again after a transport error"
        };
        out.push(Shift::new(
            place,
            "idempotent",
            (a.idempotent.to_string(), b.idempotent.to_string()),
            meaning,
            Class::wider(b.idempotent),
        ));
    }
    out
}

/// `max_rate`/`max_burst`, `keepalive_s`, `confirm`, `checklist`.
fn envelope(place: &str, (a, b): (&Action, &Action)) -> Vec<Shift> {
    let mut out = Vec::new();
    out.extend(rate(
        place,
        "max_rate",
        a.max_rate.as_ref(),
        b.max_rate.as_ref(),
    ));
    out.extend(keepalive(place, (a, b)));
    if a.confirm != b.confirm {
        let meaning = if b.confirm {
            "nothing moves until a person confirms"
        } else {
            "moves without anyone confirming"
        };
        out.push(Shift::new(
            place,
            "confirm",
            (a.confirm.to_string(), b.confirm.to_string()),
            meaning,
            Class::wider(!b.confirm),
        ));
    }
    out.extend(checklist(place, (a, b)));
    out
}

/// `keepalive_s`: a dead man added is stricter, one dropped looser, a longer one looser.
fn keepalive(place: &str, (a, b): (&Action, &Action)) -> Option<Shift> {
    if a.keepalive_s == b.keepalive_s {
        return None;
    }
    let (meaning, class) = match (a.keepalive_s, b.keepalive_s) {
        (None, Some(k)) => (
            format!(
                "stops DEADMAN unless its caller asks about it every {} s",
                num(k)
            ),
            Class::Stricter,
        ),
        (Some(_), None) => (
            "runs on when its caller goes silent (no dead man)".to_string(),
            Class::Looser,
        ),
        (Some(x), Some(y)) => (
            format!(
                "stops DEADMAN after {} s without its caller, not {} s",
                num(y),
                num(x)
            ),
            Class::wider(y > x),
        ),
        (None, None) => unreachable!("they differ"),
    };
    let words = (
        or_none(a.keepalive_s.map(num)),
        or_none(b.keepalive_s.map(num)),
    );
    Some(Shift::new(place, "keepalive_s", words, meaning, class))
}

/// `checklist`: items only dropped is looser, only added stricter, both changed.
fn checklist(place: &str, (a, b): (&Action, &Action)) -> Option<Shift> {
    if a.checklist == b.checklist {
        return None;
    }
    let removed: Vec<&String> = a
        .checklist
        .iter()
        .filter(|c| !b.checklist.contains(c))
        .collect();
    let added: Vec<&String> = b
        .checklist
        .iter()
        .filter(|c| !a.checklist.contains(c))
        .collect();
    let class = match (removed.is_empty(), added.is_empty()) {
        (false, true) => Class::Looser,
        (true, false) => Class::Stricter,
        _ => Class::Changed,
    };
    let list = |v: &[String]| format!("{} item(s)", v.len());
    let meaning =
        format!("the person confirming no longer checks {removed:?}; now also checks {added:?}");
    Some(Shift::new(
        place,
        "checklist",
        (list(&a.checklist), list(&b.checklist)),
        meaning,
        class,
    ))
}

/// A rate limit's line (actions and devices have one each): `none` → `6/min` is stricter.
pub(super) fn rate(
    place: &str,
    key: &str,
    a: Option<&RateLimit>,
    b: Option<&RateLimit>,
) -> Option<Shift> {
    let text =
        |r: Option<&RateLimit>| or_none(r.map(|r| format!("{} (burst {})", r.text, r.burst)));
    if text(a) == text(b) {
        return None;
    }
    let per_s = |r: &RateLimit| f64::from(r.count) / r.period_s;
    let (meaning, class) = match (a, b) {
        (None, Some(r)) => (
            format!("refused RATE_LIMITED beyond {}", r.text),
            Class::Stricter,
        ),
        (Some(_), None) => ("no limit on how often it runs".to_string(), Class::Looser),
        (Some(x), Some(y)) if per_s(y) == per_s(x) && y.burst == x.burst => (
            "the same limit, written another way".to_string(),
            Class::Changed,
        ),
        (Some(x), Some(y)) => {
            let meaning = format!(
                "refused RATE_LIMITED beyond {} (burst {}), not {} (burst {})",
                y.text, y.burst, x.text, x.burst
            );
            let (faster, more) = (per_s(y) >= per_s(x), y.burst >= x.burst);
            let (slower, fewer) = (per_s(y) <= per_s(x), y.burst <= x.burst);
            let class = if faster && more {
                Class::Looser
            } else if slower && fewer {
                Class::Stricter
            } else {
                Class::Changed
            };
            (meaning, class)
        }
        (None, None) => return None,
    };
    Some(Shift::new(place, key, (text(a), text(b)), meaning, class))
}
