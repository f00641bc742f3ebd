//! Words for outcomes: the `detail` and `hint` of a result, rendered from the machine's
//! [`Reason`] and the evidence, so the agent (and the person behind it) reads what the hardware
//! showed rather than a bare code.

use crate::contract::Status;
use crate::machine::{Found, Outcome, Reason};
use crate::views::result::evidence_text;
use closedloop_plant::{Action, Device, Params};

/// Who finishes a command its gateway left unfinished: that gateway after its own restart, or
/// another gateway that took the device over from the one that ran it (several gateways on one
/// journal). The words of a recovered command's ending say which.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Recovery {
    /// This gateway, at its start (or nothing was recovered).
    #[default]
    AtStart,
    /// `here` took the device over from `from`, which ran the command.
    TakenOver { from: String, here: String },
}

impl Recovery {
    /// "The gateway restarted" / "Gateway a, which ran this command, stopped, and gateway b
    /// took the device over".
    fn restarted(&self) -> String {
        match self {
            Recovery::AtStart => "The gateway restarted".into(),
            Recovery::TakenOver { from, here } => format!(
                "Gateway {from}, which ran this command, stopped, and gateway {here} took the device over"
            ),
        }
    }

    /// "The gateway restarted while this command ran" / "Gateway a, which ran this command,
    /// stopped while it ran, and gateway b took the device over".
    fn restarted_while(&self) -> String {
        match self {
            Recovery::AtStart => "The gateway restarted while this command ran".into(),
            Recovery::TakenOver { from, here } => format!(
                "Gateway {from}, which ran this command, stopped while it ran, and gateway {here} took the device over"
            ),
        }
    }

    /// "The gateway stopped" / "Gateway a, which ran this command, stopped".
    fn stopped(&self) -> String {
        match self {
            Recovery::AtStart => "The gateway stopped".into(),
            Recovery::TakenOver { from, .. } => {
                format!("Gateway {from}, which ran this command, stopped")
            }
        }
    }

    /// "at start-up" / "by gateway b when it took the device over".
    fn when(&self) -> String {
        match self {
            Recovery::AtStart => "at start-up".into(),
            Recovery::TakenOver { here, .. } => {
                format!("by gateway {here} when it took the device over")
            }
        }
    }
}

/// What every `detail` text may say besides its reason: the evidence, the parameters asked
/// for, the deadline, `done_when`, and whose device it was.
struct Words<'a> {
    ev: String,
    asked: String,
    within: String,
    done: String,
    action: &'a Action,
    device: &'a Device,
    recovery: &'a Recovery,
}

/// The `detail` text: present exactly for `rejected`, `failed`, `timeout` and `cancelled`.
/// `recovery` says who recovered the command, when it was recovered.
pub fn render(
    o: &Outcome,
    action: &Action,
    device: &Device,
    evidence: &serde_json::Value,
    params: &Params,
    budget_s: Option<f64>,
    recovery: &Recovery,
) -> Option<String> {
    if !matches!(
        o.status,
        Status::Rejected | Status::Failed | Status::Timeout | Status::Cancelled
    ) {
        return None;
    }
    let asked = if params.is_empty() {
        String::new()
    } else {
        let p: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{k} = {}", serde_json::to_value(v).unwrap_or_default()))
            .collect();
        format!(" Asked for: {}.", p.join(", "))
    };
    let w = Words {
        ev: evidence_text(evidence),
        asked,
        within: budget_s
            .map(|b| format!(" within its {b:.2} s deadline"))
            .unwrap_or_default(),
        done: (action.done_when.as_ref())
            .map(|d| d.source().to_string())
            .unwrap_or_default(),
        action,
        device,
        recovery,
    };
    let text = reason_text(o, &w);
    Some(tidy(&text))
}

/// The text of an outcome the readings decided (or could not): what held, what never moved
/// (`reason_text` sends only those here).
fn judged_text(o: &Outcome, w: &Words) -> String {
    let Words {
        ev,
        asked,
        within,
        done,
        action,
        device,
        recovery,
    } = w;
    match &o.reason {
        Reason::FailSignal => {
            let code = o.code.as_ref().map(|c| c.as_str()).unwrap_or("");
            let expr = action
                .fail_when
                .iter()
                .find(|(c, _)| c == code)
                .map(|(_, e)| e.source())
                .unwrap_or("");
            format!(
                "The failure condition {code} (`{expr}`) held on a fresh read of {}. {ev}{asked}",
                device.id
            )
        }
        Reason::NeverMoved => format!(
            "The feedback never moved: `{done}` did not hold and its signals kept their values from before the write{within}. {ev}{asked}"
        ),
        Reason::NotReached => {
            format!("The feedback moved but `{done}` never held{within}. {ev}{asked}")
        }
        Reason::NoBaseline => format!(
            "`{done}` never held{within}. Its signals had not been read from {} before the write, so whether the feedback moved cannot be told. {ev}{asked}",
            device.id
        ),
        Reason::NoFreshRead { answering: false } => format!(
            "No read of {} taken after the action's expected duration came back with every signal the criteria need{within}, and none before showed the feedback moving, so nothing shows whether it moved; the write may have taken effect. {ev}{asked}",
            device.id
        ),
        Reason::NoFreshRead { answering: true } => format!(
            "The device ({}) is online but reported nothing on the signals the criteria read after the write was acknowledged{within}: it may have ignored the command, or acted without reporting it. Nothing shows whether it acted. {ev}{asked}",
            device.id
        ),
        Reason::AlreadyUnconfirmed { answering } => format!(
            "`{done}` already held when the write was sent ({} was already in that state), but {}{within}, so nothing confirms it still holds or shows that it acted. {ev}{asked}",
            device.id,
            if *answering {
                "the device is online and reported nothing after the action's expected duration"
            } else {
                "no read taken after the action's expected duration came back"
            }
        ),
        Reason::StoppedShort => format!(
            "{}; fresh reads since show {} standing still short of `{done}`. {ev}{asked}",
            recovery.restarted_while(),
            device.id
        ),
        _ => String::new(),
    }
}

/// The text of an outcome's reason: the readings' (`judged_text`), the device's, the queue's,
/// a cancel's, a restart's, a crash's. Exhaustive: a new reason needs its words here.
fn reason_text(o: &Outcome, w: &Words) -> String {
    let Words {
        ev,
        within,
        action,
        device,
        recovery,
        ..
    } = w;
    match &o.reason {
        Reason::Unreadable(t) => format!("{t} {ev}"),
        Reason::Alarm(t) => format!("{t}. {ev}"),
        Reason::Deadman { stop_written } => format!(
            "Nobody asked about this command within its keepalive_s = {} s, so it was stopped{}. {ev}",
            action.keepalive_s.unwrap_or_default(),
            if *stop_written { ": the cancel plan (stop) was written" } else { "; it has no cancel plan, nothing was written" }
        ),
        Reason::ReadbackMismatch => format!("The written registers did not read back the written values{within}. {ev}"),
        Reason::QueueExpired => format!(
            "Waited {} s for {} (held by another command); nothing was written.",
            action.queue_timeout_s, device.id
        ),
        Reason::Driver(t) | Reason::Offline(t) | Reason::Rejected(t) => t.clone(),
        Reason::Cancelled { stop_written: true, shutdown: false } if ev.is_empty() => {
            "Cancelled on request; the cancel plan (stop) was written. Nothing read back shows the device stopped (the action has no stopped_when, or it did not hold in time).".into()
        }
        Reason::Cancelled { stop_written: true, shutdown: false } => {
            format!("Cancelled on request; the cancel plan (stop) was written and the device reads stopped. {ev}")
        }
        Reason::Cancelled { stop_written: true, shutdown: true } => {
            "The gateway shut down while the command ran; the cancel plan (stop) was written.".into()
        }
        Reason::Cancelled { stop_written: false, .. } => {
            "Cancelled before it completed. No stop was written: either nothing had been sent yet, or this action has no cancel plan and the device may still finish what it was told.".into()
        }
        Reason::CancelFailed(t) => format!("Cancel was requested but the stop could not be written: {t}"),
        Reason::Restart(found) => restart_text(*found, recovery),
        Reason::RestartStop { failed: None } => format!("{} while the write was on its way, before the device acknowledged it; the write may have arrived, so the cancel plan (stop) was written {}.", recovery.stopped(), recovery.when()),
        Reason::RestartStop { failed: Some(d) } => format!("{} while the write was on its way, before the device acknowledged it; the write may have arrived, and the stop written {} failed: {d}. Check the device.", recovery.stopped(), recovery.when()),
        Reason::Crashed { why, stop } => crashed_text(why, stop),
        Reason::Interrupted => restart_text(Found::Acknowledged, recovery),
        Reason::Confirmed | Reason::AlreadySo | Reason::Delivered => String::new(),
        Reason::FailSignal
        | Reason::NeverMoved
        | Reason::NotReached
        | Reason::NoBaseline
        | Reason::NoFreshRead { .. }
        | Reason::AlreadyUnconfirmed { .. }
        | Reason::StoppedShort => judged_text(o, w),

    }
}

/// The `detail` of a dead-man action ended before its keepalive ran out, because its renewals
/// could no longer come (`why`: the MCP session that started it ended).
pub(crate) fn ended_early(why: &str, stop_written: bool, evidence: &serde_json::Value) -> String {
    let stop = match stop_written {
        true => ": the cancel plan (stop) was written",
        false => "; it has no cancel plan, nothing was written",
    };
    tidy(&format!(
        "{} and nobody can keep this dead-man action going, so it was stopped{stop}. {}",
        why.trim_end_matches('.'),
        evidence_text(evidence)
    ))
}

/// What a command whose supervisor panicked says (see `supervision/crash.rs`).
pub(crate) fn crashed_text(why: &str, stop: &crate::machine::CrashStop) -> String {
    use crate::machine::CrashStop;
    let what = match stop {
        CrashStop::NotSent => "before anything was sent to the device".to_string(),
        CrashStop::NoPlan => "after the write was sent; nothing confirms what the device did, and the action has no cancel plan to stop it".to_string(),
        CrashStop::Written => "after the write was sent; the cancel plan (stop) was written, and nothing confirms what the device did".to_string(),
        CrashStop::Failed(d) => format!("after the write was sent, and the stop could not be written: {d}. Nothing confirms what the device did; check it"),
    };
    format!(
        "closedloop's supervision of this command failed with an internal error ({why}) {what}. \
         This is a bug in closedloop or in a driver: please report it with the gateway's log."
    )
}

/// What recovery says of a command it could not supervise, or could not confirm; needs no
/// action (the plant may no longer declare it).
pub(crate) fn restart_text(found: Found, recovery: &Recovery) -> String {
    match (found, recovery) {
        (Found::Undeclared, _) => format!(
            "{} and the plant no longer declares this action as it was; its outcome is unknown.",
            recovery.restarted()
        ),
        (Found::InFlight, _) => format!(
            "{} while the write was on its way, before the device acknowledged it; the write may or may not have arrived.",
            recovery.stopped()
        ),
        (Found::NotSent, _) => {
            let stopped = recovery.stopped();
            let mut first = stopped.chars();
            let lower: String = first.next().map(|c| c.to_ascii_lowercase()).into_iter().chain(first).collect();
            format!("Accepted, but {lower} before it was sent; it was not sent late.")
        }
        (Found::Acknowledged, Recovery::AtStart) => {
            "The gateway stopped or restarted before it could confirm this command; its outcome is unknown.".into()
        }
        (Found::Acknowledged, Recovery::TakenOver { here, .. }) => format!(
            "{} before it could confirm it, and gateway {here}, which took the device over, could not confirm it either by the command's deadline; its outcome is unknown.",
            recovery.stopped()
        ),
    }
}

/// One line of prose: no doubled or trailing spaces where an empty part was left out, and a
/// full stop at the end. (The first letter stays as it is: it may be a signal's name.)
pub(crate) fn tidy(text: &str) -> String {
    let mut s = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if !s.is_empty() && !s.ends_with(['.', '!', '?']) {
        s.push('.');
    }
    s
}

/// The hint for a command ended by closedloop's own failure: whether the device was told anything.
fn crashed_hint(reason: &Reason) -> &'static str {
    match reason {
        Reason::Crashed {
            stop: crate::machine::CrashStop::NotSent,
            ..
        } => {
            "closedloop itself failed before anything was sent; the device was not told to act. Query the device state (get_device_state) before trying again."
        }
        _ => {
            "closedloop itself failed while supervising this command; the device may have acted. Query the device state (get_device_state) before retrying."
        }
    }
}

/// The `hint`: with an error code, with `sent`, and with readback completions.
pub fn hint(o: &Outcome) -> Option<String> {
    match (o.status, &o.code) {
        (Status::Sent, _) => Some(
            "Acknowledged (by the device; for MQTT, by the broker, which had a subscriber for the topic), but this device cannot report back: whether it received or acted on it could not be confirmed. Ask the user to check it if it matters."
                .into(),
        ),
        (Status::Completed, _) if o.readback_matched == Some(true) => Some(
            "The register holds the written value; the physical effect itself was not sensed.".into(),
        ),
        // Codes whose usual hint would mislead for this reason.
        (_, Some(_)) if o.reason == Reason::QueueExpired => Some(
            "Other commands held the device the whole time; nothing was sent. Check them (list_commands) before trying again."
                .into(),
        ),
        (_, Some(_))
            if matches!(
                o.reason,
                Reason::NoFreshRead { answering: false }
                    | Reason::AlreadyUnconfirmed { answering: false }
            ) =>
        {
            Some(
            "The device did not answer in time after the write; it may have taken effect. Query the device state (get_device_state) before retrying."
                .into(),
        )
        }
        (_, Some(_)) if o.reason == Reason::NoBaseline => Some(
            "The write was acknowledged but the device never confirmed; it may have taken effect. Query the device state (get_device_state) before acting on it."
                .into(),
        ),
        (_, Some(_)) if o.reason == Reason::ReadbackMismatch => Some(
            "The registers do not hold what was written. Query the device state (get_device_state) before retrying."
                .into(),
        ),
        (_, Some(_)) if matches!(o.reason, Reason::Crashed { .. }) => {
            Some(crashed_hint(&o.reason).into())
        }
        (_, Some(code)) => Some(code.hint().into()),
        _ => None,
    }
}
