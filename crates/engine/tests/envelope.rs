//! The safety envelope an agent cannot talk its way around: operation-rate limits, counted from
//! the journal so a restart does not reset them.

mod common;

use closedloop_engine::Status;
use common::*;
use serde_json::json;

fn rated(extra_action: &str, extra_device: &str) -> String {
    relay("")
        .replace(
            "idempotent = true",
            &format!("idempotent = true\n{extra_action}"),
        )
        .replace("poll_ms = 20", &format!("poll_ms = 20\n{extra_device}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_loop_hits_rate_limited_with_the_time_to_wait_also_after_a_restart() {
    let src = rated("max_rate = \"3/min\"", "");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let rig = rig_in(&src, dir).await;
    rig.online("lamp").await;
    for on in [true, false, true] {
        let r = rig.act("lamp", "switch", json!({"on": on}), 2.0).await;
        assert_eq!(r.status, Status::Completed, "{r:#?}");
    }
    let r = rig.act("lamp", "switch", json!({"on": false}), 2.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "RATE_LIMITED"),
        "{r:#?}"
    );
    // Three at once used the burst; the next one is due one interval (20 s) after the first.
    let wait = r.retry_after_s.expect("retry_after_s");
    assert!(wait > 15.0 && wait <= 20.0, "{wait}");
    assert!(
        r.detail
            .as_deref()
            .unwrap()
            .contains("max_rate = \"3/min\""),
        "{:?}",
        r.detail
    );
    assert!(
        rig.sim("lamp").peek().coils[0],
        "the refused call wrote nothing"
    );
    let limited = serde_json::to_value(&r).unwrap();
    assert_eq!(limited["retry_after_s"], json!(r.retry_after_s.unwrap()));

    // A restart on the same journal keeps the budget spent.
    rig.engine.shutdown().await;
    let dir = rig.dir;
    assert_eq!(dir.path(), path);
    drop(rig.sims);
    let rig = rig_in(&src, dir).await;
    rig.online("lamp").await;
    let r = rig.act("lamp", "switch", json!({"on": false}), 2.0).await;
    assert_eq!(code(&r), "RATE_LIMITED", "{r:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_limit_counts_every_action_of_the_device() {
    let src = format!(
        "{}\n[[device.action]]\nname = \"blink\"\ndescription = \"Blink.\"\nparams = {{}}\nwrite = [{{ coil = 0, value = \"true\" }}]\ndone_when = \"contact\"\nexpect_s = 0.02\n",
        rated("", "max_rate = \"2/h\"\nmax_burst = 2")
    );
    let rig = rig(&src).await;
    rig.online("lamp").await;
    let a = rig.act("lamp", "switch", json!({"on": true}), 2.0).await;
    let b = rig.act("lamp", "blink", json!({}), 2.0).await;
    assert_eq!((a.status, b.status), (Status::Completed, Status::Completed));
    let c = rig.act("lamp", "switch", json!({"on": false}), 2.0).await;
    assert_eq!(code(&c), "RATE_LIMITED", "{c:#?}");
    assert!(
        c.detail
            .as_deref()
            .unwrap()
            .contains("the device's max_rate"),
        "{:?}",
        c.detail
    );
    // 2/h: one every 30 minutes.
    let wait = c.retry_after_s.unwrap();
    assert!(wait > 1700.0 && wait <= 1800.0, "{wait}");
}
