//! The safety envelope an agent cannot talk its way around: operation-rate limits, counted from
//! the journal so a restart does not reset them, and dead-man motion that stops when its caller
//! stops asking.

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jog_whose_caller_stops_asking_is_stopped_deadman_within_its_keepalive() {
    // A 3 s move that runs only while someone asks about it every 0.5 s.
    let rig = rig(&slide("").replace(
        "idempotent = false",
        "idempotent = false\nkeepalive_s = 0.5",
    ))
    .await;
    rig.online("slide").await;
    let r = rig
        .act("slide", "move_to", json!({"target_mm": 300.0}), 0.0)
        .await;
    // Asked every 0.2 s for a second: it keeps moving.
    for _ in 0..5 {
        let s = rig
            .engine
            .status(&r.command_id, std::time::Duration::from_millis(200))
            .await
            .unwrap();
        assert!(!s.status.is_terminal(), "{s:#?}");
    }
    assert!(rig.sim("slide").peek().moving.unwrap());
    let asked_last = std::time::Instant::now();
    // Then nobody asks: stopped within keepalive_s + a poll or two, the stop written.
    let mut ended = None;
    for _ in 0..60 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        if let Some(row) = rig
            .engine
            .list(Some("slide"), None, 1)
            .await
            .unwrap()
            .first()
            && row.status.is_terminal()
        {
            ended = Some(asked_last.elapsed());
            break;
        }
    }
    let after = ended.expect("the jog never ended");
    assert!(after < std::time::Duration::from_millis(2000), "{after:?}");
    let done = rig
        .engine
        .status(&r.command_id, std::time::Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        (done.status, code(&done).as_str()),
        (Status::Cancelled, "DEADMAN"),
        "{done:#?}"
    );
    assert!(events(&done).contains(&"cancel_sent".to_string()));
    assert!(
        !rig.sim("slide").peek().moving.unwrap(),
        "the axis was stopped"
    );
    assert!(rig.sim("slide").peek().position_mm.unwrap() < 250.0);
}

/// A guard door (a relay's contact) and a slide it blocks while open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapse_ends_a_dead_man_move_at_once_saying_why_and_only_while_it_runs() {
    // A keepalive far longer than the test: only the lapse can end it this soon.
    let rig =
        rig(&slide("").replace("idempotent = false", "idempotent = false\nkeepalive_s = 60")).await;
    rig.online("slide").await;
    assert!(!rig.engine.lapse("no-such-command", "the session ended"));
    let r = rig
        .act("slide", "move_to", json!({"target_mm": 300.0}), 0.0)
        .await;
    for _ in 0..50 {
        if rig.sim("slide").peek().moving.unwrap() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(rig.sim("slide").peek().moving.unwrap());
    assert!(
        rig.engine
            .lapse(&r.command_id, "The MCP session that started it ended")
    );
    let done = rig
        .engine
        .status(&r.command_id, std::time::Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        (done.status, code(&done).as_str()),
        (Status::Cancelled, "DEADMAN"),
        "{done:#?}"
    );
    let detail = done.detail.clone().unwrap_or_default();
    assert!(
        detail.starts_with("The MCP session that started it ended")
            && detail.contains("the cancel plan (stop) was written"),
        "{detail}"
    );
    assert!(events(&done).contains(&"cancel_sent".to_string()));
    assert!(
        !rig.sim("slide").peek().moving.unwrap(),
        "the axis was stopped"
    );
    // Finished: a second lapse finds nothing to end.
    assert!(!rig.engine.lapse(&r.command_id, "again"));
}

fn guarded() -> String {
    let door = relay("")
        .replace("id = \"lamp\"", "id = \"door\"")
        .replace("max_silence_s = 0.5", "max_silence_s = 1.0");
    let alarm = r#"
[[alarm]]
name = "GUARD_DOOR_OPEN"
when = "devices.door.contact"
severity = "critical"
blocks = ["slide"]
description = "The guard door is open; close it before the slide may move."
"#;
    format!("{}{door}{alarm}", slide(""))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standing_alarm_stops_a_move_blocks_the_device_and_clears_when_the_door_closes() {
    let rig = rig(&guarded()).await;
    rig.online("slide").await;
    rig.online("door").await;
    // Until its watcher has read the door online, the alarm holds (nothing showed it safe).
    for _ in 0..200 {
        if rig.engine.alarms().iter().all(|a| !a.active) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    the_door_opening_stops_the_move(&rig).await;
    the_alarm_blocks_the_slide(&rig).await;
    closing_the_door_clears_it(&rig).await;
    the_journal_kept_the_raise_and_the_clear(&rig).await;
}

/// The door opens mid-move: the move is stopped with the alarm's name as its code.
async fn the_door_opening_stops_the_move(rig: &Rig) {
    let r = rig
        .act("slide", "move_to", json!({"target_mm": 300.0}), 0.0)
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let open = rig.act("door", "switch", json!({"on": true}), 2.0).await;
    assert_eq!(open.status, Status::Completed, "{open:#?}");
    let r = rig.settle(&r).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "GUARD_DOOR_OPEN"),
        "{r:#?}"
    );
    assert!(
        events(&r).contains(&"cancel_sent".to_string()),
        "{:?}",
        events(&r)
    );
    assert_causal(&r, |e| {
        e.event == "alarm" && e.data.get("name") == Some(&json!("GUARD_DOOR_OPEN"))
    });
    assert!(
        !rig.sim("slide").peek().moving.unwrap(),
        "the slide was stopped"
    );
}

/// While it lasts, the slide takes no command, and its state says why.
async fn the_alarm_blocks_the_slide(rig: &Rig) {
    let refused = rig
        .act("slide", "move_to", json!({"target_mm": 10.0}), 0.0)
        .await;
    assert_eq!(
        (refused.status, code(&refused).as_str()),
        (Status::Rejected, "INTERLOCK"),
        "{refused:#?}"
    );
    assert!(
        refused
            .detail
            .as_deref()
            .unwrap()
            .contains("GUARD_DOOR_OPEN")
    );
    assert_eq!(
        rig.engine.device_state("slide").unwrap().alarms,
        ["GUARD_DOOR_OPEN"]
    );
}

/// The door closes: the alarm clears and the slide moves again.
async fn closing_the_door_clears_it(rig: &Rig) {
    let closed = rig.act("door", "switch", json!({"on": false}), 2.0).await;
    assert_eq!(closed.status, Status::Completed);
    let mut again = None;
    for _ in 0..50 {
        let r = rig
            .act("slide", "move_to", json!({"target_mm": 10.0}), 0.0)
            .await;
        if r.status != Status::Rejected {
            again = Some(r);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let again = rig.settle(&again.expect("the alarm never cleared")).await;
    assert_eq!(again.status, Status::Completed, "{again:#?}");
}

/// The journal kept the raise and the clear, each with what decided it.
async fn the_journal_kept_the_raise_and_the_clear(rig: &Rig) {
    let url = format!("sqlite://{}", rig.dir.path().join("journal.db").display());
    let journal = closedloop_journal::Journal::open_read_only(&url)
        .await
        .unwrap();
    let kept: Vec<(String, bool, String)> = journal
        .alarm_events(0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.name, a.active, a.evidence["why"].to_string()))
        .collect();
    let raised = kept
        .iter()
        .position(|(n, active, _)| n == "GUARD_DOOR_OPEN" && *active);
    let raised = raised.unwrap_or_else(|| panic!("no raise journaled: {kept:?}"));
    assert!(kept[raised].2.contains("door"), "{kept:?}");
    assert!(
        kept[raised..]
            .iter()
            .any(|(n, active, _)| n == "GUARD_DOOR_OPEN" && !active),
        "no clear journaled after the raise: {kept:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alarm_whose_device_goes_silent_blocks_fail_safe() {
    let rig = rig(&guarded()).await;
    rig.online("slide").await;
    rig.online("door").await;
    rig.sim("door").inject(closedloop_sim::FaultSpec::now(
        closedloop_sim::Fault::PowerOff,
    ));
    let mut refused = None;
    for _ in 0..100 {
        let r = rig
            .act("slide", "move_to", json!({"target_mm": 10.0}), 0.0)
            .await;
        if r.status == Status::Rejected {
            refused = Some(r);
            break;
        }
        rig.settle(&r).await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let r = refused.expect("a silent door never blocked the slide");
    assert_eq!(code(&r), "INTERLOCK", "{r:#?}");
    assert!(
        r.detail
            .as_deref()
            .unwrap()
            .contains("door is not answering"),
        "{:?}",
        r.detail
    );
}
