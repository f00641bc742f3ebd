//! Golden texts: the `detail`, `hint` and summary an agent reads for every status and every
//! reason a command can end with, checked against `tests/golden/texts.txt`. Run with
//! `UPDATE_GOLDEN=1` to rewrite the file after a deliberate wording change, then read the diff.

mod common;

use closedloop_engine::contract::{ErrorCode, Status};
use closedloop_engine::machine::{CrashStop, Found, Outcome, Reason};
use closedloop_engine::{CommandResult, detail};
use closedloop_journal::CommandRow;
use common::{plant, slide};
use serde_json::json;

/// Every way a command can end, with the status and code the machine gives it.
fn outcomes() -> Vec<(&'static str, Outcome)> {
    let o = |status, code: Option<ErrorCode>, reason, verified, rb: Option<bool>| Outcome {
        status,
        code,
        reason,
        verified,
        readback_matched: rb,
    };
    use ErrorCode as C;
    use Status as S;
    vec![
        ("confirmed", o(S::Completed, None, Reason::Confirmed, true, None)),
        ("already_so", o(S::Completed, None, Reason::AlreadySo, true, None)),
        ("readback", o(S::Completed, None, Reason::Confirmed, false, Some(true))),
        ("sent", o(S::Sent, None, Reason::Delivered, false, None)),
        ("stall", o(S::Failed, Some(C::Signal("MOTOR_STALL".into())), Reason::FailSignal, true, None)),
        ("never_moved", o(S::Failed, Some(C::FeedbackMismatch), Reason::NeverMoved, false, None)),
        ("not_reached", o(S::Timeout, Some(C::Timeout), Reason::NotReached, false, None)),
        ("no_baseline", o(S::Timeout, Some(C::Timeout), Reason::NoBaseline, false, None)),
        ("no_fresh_read", o(S::Failed, Some(C::DeviceOffline), Reason::NoFreshRead { answering: false }, false, None)),
        ("no_feedback", o(S::Failed, Some(C::NoFeedback), Reason::NoFreshRead { answering: true }, false, None)),
        ("already_unconfirmed", o(S::Failed, Some(C::DeviceOffline), Reason::AlreadyUnconfirmed { answering: false }, false, None)),
        ("already_no_feedback", o(S::Failed, Some(C::NoFeedback), Reason::AlreadyUnconfirmed { answering: true }, false, None)),
        ("unreadable", o(S::Failed, Some(C::BusNak), Reason::Unreadable("position_mm cannot be read since 2026-11-29T16:00:00.100Z (holding:2 answered exception 4 (Server Device Failure)), so nothing can confirm the outcome; the write may have taken effect.".into()), false, None)),
        ("readback_mismatch", o(S::Failed, Some(C::FeedbackMismatch), Reason::ReadbackMismatch, false, Some(false))),
        ("queue_expired", o(S::Timeout, Some(C::Timeout), Reason::QueueExpired, false, None)),
        ("driver_nak", o(S::Failed, Some(C::BusNak), Reason::Driver("holding:0 answered exception 4 (Server Device Failure)".into()), false, None)),
        ("driver_register", o(S::Failed, Some(C::RegisterInvalid), Reason::Driver("holding:0 answered exception 3 (Illegal Data Value)".into()), false, None)),
        ("crc", o(S::Failed, Some(C::CrcMismatch), Reason::Driver("the answer to writing holding:0 failed its checksum".into()), false, None)),
        ("offline", o(S::Failed, Some(C::DeviceOffline), Reason::Offline("slide gave no valid answer for more than 0.5 s.".into()), false, None)),
        ("cancelled_stopped", o(S::Cancelled, Some(C::Cancelled), Reason::Cancelled { stop_written: true, shutdown: false }, false, None)),
        ("cancelled_shutdown", o(S::Cancelled, Some(C::Cancelled), Reason::Cancelled { stop_written: true, shutdown: true }, false, None)),
        ("cancelled_no_stop", o(S::Cancelled, Some(C::Cancelled), Reason::Cancelled { stop_written: false, shutdown: false }, false, None)),
        ("cancel_failed", o(S::Failed, Some(C::DeviceOffline), Reason::CancelFailed("no answer within 500 ms".into()), false, None)),
        ("interrupted", o(S::Failed, Some(C::Interrupted), Reason::Interrupted, false, None)),
        ("crashed_not_sent", o(S::Failed, Some(C::Interrupted), Reason::Crashed { why: "index out of bounds: the len is 2 but the index is 7".into(), stop: CrashStop::NotSent }, false, None)),
        ("crashed_no_plan", o(S::Failed, Some(C::Interrupted), Reason::Crashed { why: "a driver bug".into(), stop: CrashStop::NoPlan }, false, None)),
        ("crashed_stopped", o(S::Failed, Some(C::Interrupted), Reason::Crashed { why: "a driver bug".into(), stop: CrashStop::Written }, false, None)),
        ("crashed_stop_failed", o(S::Failed, Some(C::Interrupted), Reason::Crashed { why: "a driver bug".into(), stop: CrashStop::Failed("no answer within 500 ms".into()) }, false, None)),
        ("deadman", o(S::Cancelled, Some(C::Deadman), Reason::Deadman { stop_written: true }, false, None)),
        ("restart_not_sent", o(S::Failed, Some(C::Interrupted), Reason::Restart(Found::NotSent), false, None)),
        ("restart_in_flight", o(S::Failed, Some(C::Interrupted), Reason::Restart(Found::InFlight), false, None)),
        ("restart_undeclared", o(S::Failed, Some(C::Interrupted), Reason::Restart(Found::Undeclared), false, None)),
        ("restart_stopped", o(S::Failed, Some(C::Interrupted), Reason::RestartStop { failed: None }, false, None)),
        ("restart_stop_failed", o(S::Failed, Some(C::Interrupted), Reason::RestartStop { failed: Some("no answer within 500 ms".into()) }, false, None)),
        ("stopped_short", o(S::Failed, Some(C::Interrupted), Reason::StoppedShort, false, None)),
        ("stopped_short_taken_over", o(S::Failed, Some(C::Interrupted), Reason::StoppedShort, false, None)),
        ("interrupted_taken_over", o(S::Failed, Some(C::Interrupted), Reason::Interrupted, false, None)),
        ("restart_stopped_taken_over", o(S::Failed, Some(C::Interrupted), Reason::RestartStop { failed: None }, false, None)),
        ("restart_in_flight_taken_over", o(S::Failed, Some(C::Interrupted), Reason::Restart(Found::InFlight), false, None)),
        ("rejected_params", o(S::Rejected, Some(C::InvalidParams), Reason::Rejected("target_mm must be from 0 to 300 mm, got 1000".into()), false, None)),
        ("rejected_interlock", o(S::Rejected, Some(C::Interlock), Reason::Rejected("The precondition `!devices.slide.moving` does not hold with devices.slide.moving = true; nothing was written.".into()), false, None)),
        ("rejected_offline", o(S::Rejected, Some(C::DeviceOffline), Reason::Rejected("slide has not answered since the gateway started (0.5 s waited).".into()), false, None)),
        ("rejected_busy", o(S::Rejected, Some(C::DeviceBusy), Reason::Rejected("slide is busy with another command and move_to does not queue.".into()), false, None)),
        ("rejected_unauthorized", o(S::Rejected, Some(C::Unauthorized), Reason::Rejected("viewer has no actuate:slide (or actuate:*, admin) scope; nothing was sent.".into()), false, None)),
    ]
}

fn row(status: Status) -> CommandRow {
    CommandRow {
        command_id: "01a22e00-0000-7000-8000-000000000001".into(),
        request_id: "req_01a22e00-0000-7000-8000-000000000002".into(),
        device: "slide".into(),
        action: "move_to".into(),
        params: json!({"target_mm": 150.0}),
        status: status.as_str().into(),
        verified: false,
        verification: "feedback".into(),
        error_code: None,
        detail: None,
        hint: None,
        evidence: json!({}),
        readback_matched: None,
        accepted_at_ms: 1_790_000_000_000,
        updated_at_ms: 1_790_000_001_500,
        deadline_ms: None,
        dispatched: true,
        caller: None,
        idempotency_key: None,
    }
}

fn render_all() -> String {
    let plant = plant(&slide(""));
    let device = plant.device("slide").unwrap();
    let action = device.action("move_to").unwrap();
    let params = action
        .check_params(json!({"target_mm": 150.0}).as_object().unwrap())
        .unwrap();
    let evidence = json!({
        "position_mm": {"value": 70.2, "at": "2026-11-29T16:00:00.123Z", "source": "holding:2", "unit": "mm"},
        "moving": {"value": false, "at": "2026-11-29T16:00:00.120Z", "source": "discrete_input:0"},
        "fault": {"value": true, "at": "2026-11-29T16:00:00.120Z", "source": "discrete_input:1"}
    });
    let mut out = String::new();
    for (name, o) in outcomes() {
        let recovery = match name.ends_with("_taken_over") {
            true => detail::Recovery::TakenOver {
                from: "a".into(),
                here: "b".into(),
            },
            false => detail::Recovery::AtStart,
        };
        let detail = detail::render(
            &o,
            action,
            device,
            &evidence,
            &params,
            Some(3.27),
            &recovery,
        );
        let hint = detail::hint(&o);
        let mut r = row(o.status);
        r.verified = o.verified;
        r.error_code = o.code.as_ref().map(|c| c.as_str().to_string());
        r.detail = detail.clone();
        r.hint = hint.clone();
        r.readback_matched = o.readback_matched;
        r.evidence = evidence.clone();
        // What the journal's `completed` entry carries for an "already so" ending.
        let already = closedloop_journal::EventRow {
            at_ms: r.updated_at_ms,
            event: "completed".into(),
            data: json!({"already": true}),
        };
        let events = match o.reason {
            Reason::AlreadySo => vec![already],
            _ => vec![],
        };
        let summary = CommandResult::from_rows(&r, &events, None).summary();
        out.push_str(&format!(
            "## {name}: {} {}\ndetail: {}\nhint: {}\nsummary: {summary}\n\n",
            o.status,
            o.code.as_ref().map(|c| c.as_str()).unwrap_or("-"),
            detail.as_deref().unwrap_or("-"),
            hint.as_deref().unwrap_or("-"),
        ));
    }
    for status in [Status::Accepted, Status::Running] {
        let summary = CommandResult::from_rows(&row(status), &[], Some(1.5)).summary();
        out.push_str(&format!("## {status}\nsummary: {summary}\n\n"));
    }
    for (expected, deadline) in [(0.0, Some(2.7)), (0.0, Some(0.0)), (0.04, None)] {
        let summary = CommandResult::from_rows(&row(Status::Running), &[], Some(expected))
            .with_deadline_in(deadline)
            .summary();
        out.push_str(&format!(
            "## running past expect_s, deadline in {deadline:?}\nsummary: {summary}\n\n"
        ));
    }
    out
}

/// Things no text may contain, whatever the wording.
fn lint(text: &str) {
    for bad in ["  ", " .", "..", "(CANCELLED)"] {
        assert!(!text.contains(bad), "{bad:?} in:\n{text}");
    }
    for line in text.lines().filter(|l| !l.is_empty()) {
        assert!(!line.ends_with(' '), "trailing space: {line:?}");
    }
}

#[test]
fn every_status_and_reason_reads_as_the_golden_file_says() {
    let text = render_all();
    lint(&text);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/texts.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let golden = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        golden == text,
        "texts differ from {} (UPDATE_GOLDEN=1 rewrites it):\n{}",
        path.display(),
        text
    );
}

#[test]
fn every_code_has_a_hint_that_does_not_repeat_its_detail() {
    let signal = ErrorCode::Signal("MOTOR_STALL".into());
    for code in ErrorCode::FIXED.into_iter().chain([signal]) {
        let h = code.hint();
        lint(h);
        assert!(h.ends_with('.'), "{code}: {h}");
        assert!(
            !h.contains("does not hold"),
            "{code} repeats the detail: {h}"
        );
    }
}
