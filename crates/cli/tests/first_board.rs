//! The second part of `docs/first-plant.md` ("A relay board on MQTT"), run against a real
//! broker: its plant file (the ```toml blocks marked `<!-- board.toml -->`, joined) passes
//! `closedloop check` with the output and the warning the page shows, and fails as shown without
//! its environment variable; then this test plays the board with exactly the topics, payloads,
//! QoS, retain flags, last will and heartbeat of the page's topic table, serves the plant
//! through `closedloop serve` (with the `env` block of the page's client configuration) and makes
//! the calls of its table, asserting the statuses and codes the table says and the liveness the
//! page describes: `unknown` on retained messages alone, `completed` only after the echo,
//! `offline` after `max_silence_s` of silence, and at once on the last will.
//!
//! The broker is `$CLOSEDLOOP_MQTT_URL` when set (`.ci/run` points it at the machine's
//! Mosquitto), else a Mosquitto this test starts on a free port, as in `tests/mqtt.rs`. Topics
//! and client ids are made unique per run, so a shared broker is safe.
//!
//! The page is read in `first_board/page.rs`, the board and the broker are `first_board/board.rs`,
//! the steps around the calls table are `first_board/steps.rs` and its rows `first_board/rows.rs`.

mod common;

#[path = "first_board/board.rs"]
mod board;
#[path = "first_board/page.rs"]
mod page;
#[path = "first_board/rows.rs"]
mod rows;
#[path = "first_board/steps.rs"]
mod steps;

use common::page::{blocks, calls, marked};
use page::{CALLS, PAGE, Topics, part_two};
use steps::Run;

#[test]
fn the_second_part_has_what_the_test_runs() {
    let part = part_two();
    let b = blocks(part);
    assert_eq!(marked(&b, "board.toml").len(), 3);
    for m in [
        "board check output",
        "board check warnings",
        "board env missing",
        "board banner",
        "board client config",
    ] {
        assert_eq!(marked(&b, m).len(), 1, "{m}");
    }
    assert_eq!(calls(part, CALLS).len(), 4);
    let t = Topics::from_page(part);
    assert_eq!(t.online(), "online");
    assert_eq!(t.offline(), "offline");

    // The firmware sketch is not run, but it uses the table's topics, flags and heartbeat.
    let python: Vec<&str> = b
        .iter()
        .filter(|(_, info, _)| info == "python")
        .map(|(_, _, body)| body.as_str())
        .collect();
    assert_eq!(python.len(), 1);
    let sketch = python[0];
    let flag = |yes: bool| if yes { "True" } else { "False" };
    for want in [
        format!("SET = b\"{}\"", t.set.topic),
        format!("STATE = b\"{}\"", t.state.topic),
        format!("STATUS = b\"{}\"", t.status.topic),
        format!("HEARTBEAT_MS = {}", t.heartbeat().as_millis()),
        format!("subscribe(SET, qos={})", t.set.qos),
        format!(
            "set_last_will(STATUS, b\"{}\", retain={}, qos={})",
            t.offline(),
            flag(t.status.retained),
            t.status.qos
        ),
        format!(
            "publish(STATUS, b\"{}\", retain={}, qos={})",
            t.online(),
            flag(t.status.retained),
            t.status.qos
        ),
        format!(
            "publish(STATE, state, retain={}, qos={})",
            flag(t.state.retained),
            t.state.qos
        ),
    ] {
        assert!(sketch.contains(&want), "the sketch lacks {want:?}");
    }
    // The states the sketch sends are the table's (MicroPython's json.dumps writes `true`).
    assert!(sketch.contains(r#"json.dumps({"on": relay.value() == 1})"#));
    assert_eq!(t.state_payload(true), r#"{"on": true}"#);
    assert_eq!(t.state_payload(false), r#"{"on": false}"#);
    assert!(!PAGE.contains("../shared"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mqtt_board_walk_through_runs_as_written() {
    let run = Run::new(part_two()).await;
    run.check();
    let mut board = run.board_online().await;
    let c = rows::unknown_on_retained(&run, &mut board).await;
    rows::online_and_echo(&run, &c, &mut board).await;
    rows::silence(&run, &c, &mut board).await;
    rows::last_will(&run, &c, &mut board).await;
    c.cancel().await.unwrap();
    run.journal();
    run.clear_retained().await;
}
