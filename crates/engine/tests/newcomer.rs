//! What a newcomer meets first, through the engine API: a signal the device cannot read is
//! named, never silently missing, and an action that needs it says so instead of blaming the
//! wiring.

mod common;

use closedloop_engine::Status;
use common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_the_device_cannot_read_is_named_and_the_action_needing_it_is_refused() {
    // The relay has discrete input 0 only: 9 answers exception 2 (Illegal Data Address).
    let rig = rig(&relay("").replace(
        "contact   = { discrete_input = 0 }",
        "contact   = { discrete_input = 9 }",
    ))
    .await;
    rig.online("lamp").await;
    let mut state = rig.engine.device_state("lamp").unwrap();
    for _ in 0..100 {
        if !state.unreadable.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        state = rig.engine.device_state("lamp").unwrap();
    }
    let contact = &state.unreadable["contact"];
    assert_eq!(contact.error_code, "REGISTER_INVALID");
    assert_eq!(
        contact.detail,
        "discrete_input:9 answered exception 2 (Illegal Data Address)"
    );
    assert!(state.signals.contains_key("commanded") && !state.signals.contains_key("contact"));
    let detail = state.detail.as_deref().unwrap_or_default();
    assert!(
        detail.starts_with("contact cannot be read since "),
        "{detail}"
    );
    assert!(
        detail.ends_with(
            " (discrete_input:9 answered exception 2 (Illegal Data Address)). \
             Check those signals' addresses and types in the plant file."
        ),
        "{detail}"
    );

    let r = rig.act("lamp", "switch", json!({"on": true}), 2.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "REGISTER_INVALID"),
        "{r:#?}"
    );
    assert!(
        r.detail
            .as_deref()
            .unwrap()
            .starts_with("contact cannot be read"),
        "{:?}",
        r.detail
    );
    assert!(!rig.sim("lamp").peek().coils[0], "nothing written");
}
