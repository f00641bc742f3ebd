//! When the read that confirms an action is asked for: at the acknowledgement plus the action's
//! `expect_s`, on the paused clock of the ground-truth rig (`ground_truth/fence.rs`: no virtual
//! time passes while the journal writes), so the instant is exact. A relay that pulls in 10 ms
//! after the write, polled only every 200 ms, confirms at the acknowledgement + 10 ms, not a
//! poll later and not at + 11 ms: a margin of a millisecond there used to make the confirming
//! read of a 10 ms relay a whole poll late at times.

#[path = "ground_truth/fence.rs"]
mod fence;

mod common;

use closedloop_engine::Status;
use common::{at_of, plants, rig};
use serde_json::json;

/// Milliseconds of an RFC 3339 timestamp's seconds and milliseconds (`…:SS.mmmZ`).
fn ms(at: &str) -> i64 {
    let seconds: f64 = at[at.len() - 7..at.len() - 1].parse().unwrap();
    (seconds * 1000.0).round() as i64
}

#[test]
fn the_settle_read_is_taken_at_the_ack_plus_expect_s() {
    let driver = r#"driver = { kind = "sim", model = "relay" }"#;
    let slow = r#"driver = { kind = "sim", model = "relay", pull_in_ms = 10 }"#;
    let plant =
        plants::replace_line(plants::LAMP, driver, slow).replace("poll_ms = 20", "poll_ms = 200");
    let plant = plant.replace("expect_s = 0.02", "expect_s = 0.01");
    fence::runtime().block_on(async {
        let rig = rig(&plant).await;
        rig.online("lamp").await;
        let r = rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
        assert_eq!(r.status, Status::Completed, "{r:#?}");
        let took = (ms(at_of(&r, "completed")) - ms(at_of(&r, "device_ack"))).rem_euclid(60_000);
        assert_eq!(took, 10, "{:?}", r.timeline);
    });
}
