//! The edges of the honesty rule (docs/architecture.md) in an action's own checks — a readback
//! `fail_when`, an `expect_s` that is no number, a failure that already holds, arguments too large
//! to journal whole — each a regression test named after the false outcome it once allowed,
//! checked against the simulator's physical state.

mod common;

use closedloop_engine::Status;
use closedloop_engine::Submission;
use common::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readback_fails_with_the_fail_when_code_that_holds_after_the_ack() {
    // A heater fast enough to pass 30 °C within one poll of being enabled.
    let src = r#"
[[device]]
id = "oven"
description = "Oven"
driver = { kind = "sim", model = "heater", rate_c_per_s = 2000.0 }
poll_ms = 20
[device.signals]
setpoint_c = { holding = 0, scale = 0.1, unit = "°C" }
enabled = { coil = 0 }
temperature_c = { input = 0, type = "i16", scale = 0.1, unit = "°C" }
[[device.action]]
name = "heat"
description = "Heat."
params = { to_c = { type = "number", min = 0.0, max = 300.0 } }
write = [{ holding = 0, value = "params.to_c * 10.0" }, { coil = 0, value = "true" }]
verification = "readback"
fail_when = { OVERHEAT = "temperature_c > 30.0" }
expect_s = 0.05
"#;
    let rig = rig(src).await;
    rig.online("oven").await;
    let r = rig.act("oven", "heat", json!({"to_c": 200.0}), 5.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "OVERHEAT"),
        "{r:#?}"
    );
    assert!(!r.verified, "readback never verifies");
    assert!(rig.sim("oven").peek().temperature_c.unwrap() > 30.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expect_s_that_is_not_a_number_is_rejected_before_anything_is_written() {
    let src = slide("").replace(
        r#"expect_s = "abs(params.target_mm - position_mm) / 100.0 + 0.05""#,
        r#"expect_s = "(params.target_mm - 12.0) / (params.target_mm - 12.0) * 2.0""#,
    );
    let rig = rig(&src).await;
    rig.online("slide").await;
    let r = rig
        .act("slide", "move_to", json!({"target_mm": 12.0}), 2.0)
        .await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "INVALID_PARAMS"),
        "{r:#?}"
    );
    let detail = r.detail.as_deref().unwrap();
    assert!(
        detail.contains("expect_s") && detail.contains("params.target_mm = 12"),
        "{detail}"
    );
    assert_eq!(
        rig.sim("slide").peek().target_mm,
        Some(0.0),
        "nothing written"
    );
    // Any other target is a duration of 2 s, and moves.
    let ok = rig
        .act("slide", "move_to", json!({"target_mm": 20.0}), 0.0)
        .await;
    assert_eq!(ok.status, Status::Accepted, "{ok:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_that_already_holds_is_rejected_interlock_before_writing() {
    let rig = rig(&slide(r#"{ kind = "stall", at_mm = 70.0 }"#)).await;
    let r = rig
        .act("slide", "move_to", json!({"target_mm": 150.0}), 8.0)
        .await;
    assert_eq!(code(&r), "MOTOR_STALL", "{r:#?}");
    // The fault is latched: the next move is refused before anything is written.
    let again = rig
        .act("slide", "move_to", json!({"target_mm": 10.0}), 2.0)
        .await;
    assert_eq!(
        (again.status, code(&again).as_str()),
        (Status::Rejected, "INTERLOCK"),
        "{again:#?}"
    );
    assert!(again.detail.as_deref().unwrap().contains("MOTOR_STALL"));
    assert!(rig.sim("slide").peek().fault.unwrap());
    assert_ne!(
        rig.sim("slide").peek().target_mm,
        Some(10.0),
        "nothing written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_call_with_huge_arguments_journals_a_bounded_digest() {
    let rig = rig(&relay("")).await;
    let garbage = "x".repeat(400_000);
    let r = rig
        .act("lamp", "switch", json!({"on": garbage.clone()}), 0.0)
        .await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "INVALID_PARAMS"),
        "{:?}",
        r.detail
    );
    let stored = serde_json::to_string(&r.params).unwrap();
    assert!(stored.len() < 3_000, "{} bytes journaled", stored.len());
    // {"on":"…"} around the string: 9 more bytes.
    assert_eq!(r.params["bytes"], json!(garbage.len() + 9), "{stored:.200}");
    assert!(r.detail.as_deref().unwrap().len() <= 1_100);
}

/// A caller pastes a secret into a parameter: the refusal is journaled — read by every reader of
/// the journal, `list_commands`, `audit` — with a digest of the arguments, never their text, and
/// its detail describes a long string by its length. The same keyed call replayed gets the same
/// refusal (it compares digests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_call_never_journals_raw_argument_text() {
    let rig = rig(&relay("")).await;
    let secret = "api_key=sk-live-4f9a2c1e8b7d";
    let args = json!({"on": secret, "token": "sk-live-other"});
    let submit = |args: &Value| Submission {
        device: "lamp".into(),
        action: "switch".into(),
        args: args.as_object().cloned().unwrap_or_default(),
        idempotency_key: Some("k-secret".into()),
        ..Submission::default()
    };
    let r = rig.engine.submit(submit(&args)).await.unwrap();
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "INVALID_PARAMS")
    );
    let journaled = serde_json::to_string(&r.params).unwrap();
    assert!(!journaled.contains("sk-live"), "{journaled}");
    assert_eq!(r.params["parameters"], json!(["on"]), "{journaled}");
    assert_eq!(r.params["undeclared"], json!(1), "{journaled}");
    let detail = r.detail.clone().unwrap_or_default();
    assert!(!detail.contains("sk-live"), "{detail}");
    assert!(detail.contains("a string of 28 characters"), "{detail}");
    let listed =
        serde_json::to_string(&rig.engine.list(Some("lamp"), None, 5).await.unwrap()).unwrap();
    assert!(!listed.contains("sk-live"), "{listed}");
    let again = rig.engine.submit(submit(&args)).await.unwrap();
    assert_eq!(
        again.command_id, r.command_id,
        "the same call replays its refusal"
    );
}
