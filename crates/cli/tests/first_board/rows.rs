//! The rows of the page's calls table (`<!-- board calls -->`), each played through
//! `closedloop serve` against the board in the state the row describes, with the liveness the
//! page says closedloop shows then.

use crate::board::{Board, retained};
use crate::common::page::{marked, shown_in_order};
use crate::common::{Client, act, call, outcome, sc, settle};
use crate::steps::Run;
use closedloop_mqtt::testing::next;
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// 13, first row: closedloop starts on retained messages alone; the board is `unknown`, a call
/// on it is refused "never been heard" once its wait ran out, and it is `offline` once
/// `max_silence_s` from the start passed. Returns the client.
pub async fn unknown_on_retained(run: &Run, board: &mut Board) -> Client {
    let (b, window) = (&run.blocks, run.window);
    let banner = run.dir.path().join("serve.stderr");
    let started = Instant::now();
    let c = serve(
        run.dir.path(),
        &run.env,
        std::fs::File::create(&banner).unwrap(),
    )
    .await;
    let until = started + Duration::from_secs(3);
    let s = loop {
        let s = state(&c, "pump").await;
        assert_eq!(s["liveness"], "unknown", "{s}");
        if !s["signals"]["on"].is_null() {
            break s;
        }
        assert!(
            Instant::now() < until,
            "the retained state never showed: {s}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(started.elapsed() < window, "still within max_silence_s");
    assert_eq!(
        s["signals"]["on"]["value"], false,
        "the retained value, shown: {s}"
    );
    assert!(
        s["detail"]
            .as_str()
            .unwrap_or_default()
            .starts_with("pump is unknown: no message since closedloop started"),
        "{s}"
    );
    let (tool, args, want_status, want_code) = &run.calls[0];
    let (status, code, r) = act(&c, tool, args.clone()).await;
    assert_eq!(
        (status.as_str(), code.as_str()),
        (want_status.as_str(), want_code.as_str()),
        "{r}"
    );
    // Answered within the call's wait and a poll, not held until max_silence_s ran out (a plant
    // with an hour's window once held a call for a minute).
    assert!(
        r["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("never been heard since the gateway started"),
        "{r}"
    );
    assert!(
        started.elapsed() < window,
        "answered before max_silence_s: {r}"
    );
    board.no_set().await;
    crate::common::liveness(&c, "pump", "offline").await;
    // The banner (printed after 3 s at most) named the board unknown — never offline while
    // closedloop's own first connection to the broker was still being answered.
    let printed = std::fs::read_to_string(&banner).unwrap();
    shown_in_order(&printed, marked(b, "board banner")[0]);
    c
}

/// Second row: heartbeats make it online; the switch completes only on the echo.
pub async fn online_and_echo(run: &Run, c: &Client, board: &mut Board) {
    let topics = &run.topics;
    board.start_heartbeat();
    let (_, now) = leaves(c, "pump", "offline", topics.heartbeat() * 2).await;
    assert_eq!(now, "online");
    let (tool, args, want_status, want_code) = &run.calls[1];
    let mut args = args.clone();
    args["wait_s"] = json!(0);
    let r = call(c, tool, args.clone()).await;
    let id = sc(&r)["command_id"].as_str().unwrap().to_string();
    let set = next(&mut board.sets).await;
    assert!(!set.retained, "closedloop's set is not retained");
    let got: Value = serde_json::from_slice(&set.payload).unwrap();
    let example: Value = serde_json::from_str(&topics.set.payloads[0]).unwrap();
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&got), keys(&example), "{got}");
    assert_eq!(got["on"], args["on"]);
    assert_eq!(got["command"], json!(id));
    // The board has not echoed: the command is `running` (once the broker's PUBACK is in),
    // not over, whatever the heartbeats say.
    let until = Instant::now() + Duration::from_millis(500);
    let pending = loop {
        let r = call(
            c,
            "get_command_status",
            json!({"command_id": id, "wait_s": 0}),
        )
        .await;
        let (status, _) = outcome(&r);
        if status == "running" {
            break r;
        }
        assert_eq!(status, "accepted", "{:?}", r.structured_content);
        assert!(Instant::now() < until, "{:?}", r.structured_content);
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    board
        .on
        .store(got["on"].as_bool().unwrap(), Ordering::SeqCst);
    board.report().await; // the echo
    let r = settle(c, pending).await;
    let (status, code) = outcome(&r);
    assert_eq!(
        (status.as_str(), code.as_str()),
        (want_status.as_str(), want_code.as_str()),
        "{:?}",
        r.structured_content
    );
    assert_eq!(sc(&r)["verified"], true);
    assert_eq!(sc(&r)["evidence"]["on"]["value"], true);
}

/// Third row: the board stops reporting, its connection open: offline after max_silence_s.
pub async fn silence(run: &Run, c: &Client, board: &mut Board) {
    let window = run.window;
    board.stop_heartbeat();
    let last = board.last_report();
    let (at, now) = leaves(c, "pump", "online", window + Duration::from_secs(3)).await;
    assert_eq!(now, "offline");
    assert!(
        at.duration_since(last) > window,
        "offline only after max_silence_s of silence ({:?})",
        at.duration_since(last)
    );
    let (tool, args, want_status, want_code) = &run.calls[2];
    let (status, code, r) = act(c, tool, args.clone()).await;
    assert_eq!(
        (status.as_str(), code.as_str()),
        (want_status.as_str(), want_code.as_str()),
        "{r}"
    );
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains("sent no message (no reading, heartbeat or status message) for more than"),
        "{r}"
    );
    board.no_set().await;
}

/// Fourth row: reporting again, then the connection ends without a DISCONNECT. `abort` drops
/// the TCP connection under the client, as a crash does; the broker publishes the will at once
/// (a board that vanishes silently is noticed after its keep-alive instead).
pub async fn last_will(run: &Run, c: &Client, board: &mut Board) {
    let (topics, window) = (&run.topics, run.window);
    board.start_heartbeat();
    let (_, now) = leaves(c, "pump", "offline", topics.heartbeat() * 2).await;
    assert_eq!(now, "online");
    board.stop_heartbeat();
    let last = board.last_report();
    let cut = Instant::now();
    board.mqtt.abort();
    let (at, now) = leaves(c, "pump", "online", window).await;
    assert_eq!(now, "offline");
    assert!(
        at.duration_since(cut) < Duration::from_secs(1),
        "the will makes it offline at once ({:?})",
        at.duration_since(cut)
    );
    assert!(
        at.duration_since(last) < window - topics.heartbeat(),
        "not by silence"
    );
    let (tool, args, want_status, want_code) = &run.calls[3];
    let (status, code, r) = act(c, tool, args.clone()).await;
    assert_eq!(
        (status.as_str(), code.as_str()),
        (want_status.as_str(), want_code.as_str()),
        "{r}"
    );
    assert!(
        r["detail"].as_str().unwrap().contains(&format!(
            "announced {:?} on its status topic",
            topics.offline()
        )),
        "{r}"
    );
    // The will is left retained: the status topic's last word.
    let observer = format!("{}-observer-will", run.tag);
    let held = retained(&run.url, &topics.status.topic, &observer).await;
    assert_eq!(held.as_deref(), Some(topics.offline()));
}

/// `closedloop serve DIR/board.toml` with its stderr into `stderr`, an rmcp client on its stdio,
/// as the page's client configuration starts it: in an environment of `env` (the config's `env`
/// block) and nothing of the test's but PATH, HOME and CLOSEDLOOP_LOG, so the block must suffice.
async fn serve(dir: &Path, env: &[(String, String)], stderr: std::fs::File) -> Client {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_closedloop"));
    cmd.arg("serve").arg(dir.join("board.toml")).env_clear();
    for kept in ["PATH", "HOME", "CLOSEDLOOP_LOG"] {
        if let Some(v) = std::env::var_os(kept) {
            cmd.env(kept, v);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (child, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::from(stderr))
        .spawn()
        .unwrap();
    ().serve(child).await.unwrap()
}

/// `get_device_state` of `device`, its structured content.
async fn state(c: &Client, device: &str) -> Value {
    sc(&call(c, "get_device_state", json!({ "device": device })).await).clone()
}

/// Polls `get_device_state` until `device` is not `from` (bounded by `within`); returns what
/// it became and when the answer that said so came back (closedloop judged it before that).
async fn leaves(c: &Client, device: &str, from: &str, within: Duration) -> (Instant, String) {
    let until = Instant::now() + within;
    loop {
        let s = state(c, device).await;
        let now = Instant::now();
        let l = s["liveness"].as_str().unwrap().to_string();
        if l != from {
            return (now, l);
        }
        assert!(now < until, "{device} still {from} after {within:?}: {s}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
