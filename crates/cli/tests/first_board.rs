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

mod common;

use closedloop_mqtt::testing::{await_active, connected, next};
use closedloop_mqtt::{BrokerConfig, MqttBroker, Subscription, Will};
use closedloop_plant::{DriverConfig, Source, WriteEntry};
use common::*;
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PAGE: &str = include_str!("../../../docs/first-plant.md");

/// The heading the page's second part starts with.
const PART_TWO: &str = "## 7. A relay board on MQTT";

/// The page's second part.
fn part_two() -> &'static str {
    let at = PAGE.find(PART_TWO).expect("the page has its MQTT part");
    &PAGE[at..]
}

/// The broker to use: the one named by `$CLOSEDLOOP_MQTT_URL`, or our own (as `tests/mqtt.rs`).
enum Broker {
    Shared(String),
    Own(Box<closedloop_mqtt::testing::Mosquitto>),
}

impl Broker {
    async fn get() -> Broker {
        match std::env::var("CLOSEDLOOP_MQTT_URL") {
            Ok(url) => {
                let (host, port) = closedloop_mqtt::parse_broker_url(&url).expect("a broker URL");
                tokio::net::TcpStream::connect((host.as_str(), port))
                    .await
                    .unwrap_or_else(|e| panic!("CLOSEDLOOP_MQTT_URL={url} is not reachable: {e}"));
                Broker::Shared(url)
            }
            Err(_) => Broker::Own(Box::new(closedloop_mqtt::testing::Mosquitto::start().await)),
        }
    }

    fn url(&self) -> &str {
        match self {
            Broker::Shared(url) => url,
            Broker::Own(m) => &m.url,
        }
    }
}

/// The fenced blocks of `page`: (the HTML comment just before it, if any; the info string; the
/// body). The same reading of the page as `first_plant.rs`.
fn blocks(page: &str) -> Vec<(Option<String>, String, String)> {
    let mut out = Vec::new();
    let mut marker: Option<String> = None;
    let mut open: Option<(Option<String>, String, String)> = None;
    for line in page.lines() {
        if let Some((m, info, body)) = open.as_mut() {
            if line.starts_with("```") {
                out.push((m.take(), std::mem::take(info), std::mem::take(body)));
                open = None;
            } else {
                body.push_str(line);
                body.push('\n');
            }
            continue;
        }
        if let Some(info) = line.strip_prefix("```") {
            open = Some((marker.take(), info.trim().to_string(), String::new()));
        } else if let Some(m) = line
            .strip_prefix("<!-- ")
            .and_then(|l| l.strip_suffix(" -->"))
        {
            marker = Some(m.to_string());
        } else if !line.trim().is_empty() {
            marker = None;
        }
    }
    out
}

fn marked<'a>(blocks: &'a [(Option<String>, String, String)], m: &str) -> Vec<&'a str> {
    blocks
        .iter()
        .filter(|(marker, _, _)| marker.as_deref() == Some(m))
        .map(|(_, _, body)| body.as_str())
        .collect()
}

/// The cells of the table right after `<!-- marker -->`, header and rule left out.
fn table(page: &str, marker: &str) -> Vec<Vec<String>> {
    page.split(&format!("<!-- {marker} -->"))
        .nth(1)
        .unwrap_or_else(|| panic!("a table marked {marker}"))
        .lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|row| {
            let cells: Vec<String> = row.split('|').map(|c| c.trim().to_string()).collect();
            cells[1..cells.len() - 1].to_vec()
        })
        .collect()
}

/// The `code` spans of a cell, in order.
fn ticks(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// One row of the page's topic table.
#[derive(Debug, Clone)]
struct Topic {
    topic: String,
    publisher: String,
    payloads: Vec<String>,
    qos: u8,
    retained: bool,
    when: String,
}

/// The topic table: the set, the state and the status, in that order.
struct Topics {
    set: Topic,
    state: Topic,
    status: Topic,
}

impl Topics {
    fn from_page(part: &str) -> Topics {
        let rows: Vec<Topic> = table(part, "board topics")
            .iter()
            .map(|c| Topic {
                topic: ticks(&c[0]).first().expect("a `topic`").clone(),
                publisher: c[1].clone(),
                payloads: ticks(&c[2]),
                qos: c[3].parse().expect("QoS 0 or 1"),
                retained: match c[4].as_str() {
                    "yes" => true,
                    "no" => false,
                    other => panic!("retained: {other:?} is not yes or no"),
                },
                when: c[5].clone(),
            })
            .collect();
        let [set, state, status]: [Topic; 3] = rows.try_into().expect("three topics");
        assert!(set.publisher.starts_with("closedloop"), "{set:?}");
        assert!(state.publisher.starts_with("the board"), "{state:?}");
        assert!(status.publisher.starts_with("the board"), "{status:?}");
        assert_eq!(
            state.payloads.len(),
            2,
            "the on and the off state: {state:?}"
        );
        assert_eq!(status.payloads.len(), 2, "online, offline: {status:?}");
        Topics { set, state, status }
    }

    /// Every topic with the page's prefix `greenhouse/` swapped for `prefix/`.
    fn under(mut self, prefix: &str) -> Topics {
        for t in [&mut self.set, &mut self.state, &mut self.status] {
            t.topic = unique(&t.topic, prefix);
        }
        self
    }

    /// The state payload for `on` (the table gives the on payload first).
    fn state_payload(&self, on: bool) -> &str {
        &self.state.payloads[usize::from(!on)]
    }

    fn online(&self) -> &str {
        &self.status.payloads[0]
    }

    fn offline(&self) -> &str {
        &self.status.payloads[1]
    }

    /// The heartbeat: "… every N s" in the state's "when".
    fn heartbeat(&self) -> Duration {
        let n: f64 = self
            .state
            .when
            .split("every ")
            .skip(1)
            .find_map(
                |after| match after.split_whitespace().collect::<Vec<_>>()[..] {
                    [n, "s", ..] => n.parse().ok(),
                    _ => None,
                },
            )
            .expect("the state's period: every N s");
        Duration::from_secs_f64(n)
    }
}

/// `topic` (one of the page's, under `greenhouse/`) under `prefix/` instead.
fn unique(text: &str, prefix: &str) -> String {
    text.replace("greenhouse/board1/", &format!("{prefix}/board1/"))
}

/// The rows of `<!-- board calls -->`: (tool, arguments, status, error code).
fn calls(part: &str) -> Vec<(String, Value, String, String)> {
    table(part, "board calls")
        .iter()
        .map(|c| {
            let call = c[1].trim_matches('`');
            let (tool, args) = call.split_once(' ').expect("`tool {args}`");
            let t = ticks(&c[2]);
            let code = t
                .get(1)
                .filter(|t| t.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
                .cloned()
                .unwrap_or_default();
            (
                tool.to_string(),
                serde_json::from_str(args).unwrap(),
                t[0].clone(),
                code,
            )
        })
        .collect()
}

/// Whether `line` is what `want` shows, `…` standing for any text.
fn shows(line: &str, want: &str) -> bool {
    let pieces: Vec<&str> = want.split('…').collect();
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if pieces.len() == 1 {
        return line == want;
    }
    if !line.starts_with(first) || !line[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for middle in &pieces[1..pieces.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

/// Each line of `want` is shown by a line of `got`, in order.
fn shown_in_order(got: &str, want: &str) {
    let mut lines = got.lines();
    for w in want.lines() {
        assert!(
            lines.any(|l| shows(l, w)),
            "no line like {w:?} in order in:\n{got}"
        );
    }
}

fn tag() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{}-{nanos}", std::process::id())
}

/// The page's `closedloop check` line: its environment assignments and its arguments.
fn check_line(part: &str) -> (Vec<(String, String)>, Vec<String>) {
    let b = blocks(part);
    let lines: Vec<&str> = b
        .iter()
        .filter(|(_, info, _)| info == "sh")
        .flat_map(|(_, _, body)| body.lines())
        .filter(|l| l.contains("closedloop check"))
        .collect();
    assert_eq!(lines.len(), 1, "one check line: {lines:?}");
    let mut env = Vec::new();
    let mut words = lines[0].split_whitespace();
    for w in words.by_ref() {
        match w.split_once('=') {
            Some((k, v)) => env.push((k.to_string(), v.to_string())),
            None => {
                assert_eq!(w, "closedloop");
                break;
            }
        }
    }
    (env, words.map(str::to_string).collect())
}

/// The board, as the page's table says it behaves: its own client with the last will, the set
/// topic subscribed, its state reported with the table's QoS and retain flag, on a heartbeat
/// when one runs.
struct Board {
    mqtt: MqttBroker,
    sets: Subscription,
    topics: Arc<Topics>,
    on: Arc<AtomicBool>,
    /// When the board last started a report.
    last_report: Arc<Mutex<Instant>>,
    heartbeat: Option<tokio::task::JoinHandle<()>>,
}

impl Board {
    async fn connect(url: &str, client_id: &str, topics: Arc<Topics>) -> Board {
        let mut config = BrokerConfig::new(url, client_id);
        config.will = Some(Will {
            topic: topics.status.topic.clone(),
            payload: topics.offline().to_string(),
            retain: topics.status.retained,
        });
        let mqtt = connected(config).await;
        let mut sets = mqtt.subscribe(&topics.set.topic);
        await_active(&mqtt, &mut sets, &topics.set.topic).await;
        Board {
            mqtt,
            sets,
            topics,
            on: Arc::new(AtomicBool::new(false)),
            last_report: Arc::new(Mutex::new(Instant::now())),
            heartbeat: None,
        }
    }

    /// `online` on the status topic, as after each connect.
    async fn online(&self) {
        let s = &self.topics.status;
        let payload = self.topics.online().to_string();
        self.mqtt
            .send(&s.topic, payload.into(), s.qos, None, s.retained)
            .await
            .expect("online published");
    }

    /// The state, as the table says it is published.
    async fn report(&self) {
        report(&self.mqtt, &self.topics, &self.on, &self.last_report).await;
    }

    fn start_heartbeat(&mut self) {
        let (mqtt, topics) = (self.mqtt.clone(), Arc::clone(&self.topics));
        let (on, last) = (Arc::clone(&self.on), Arc::clone(&self.last_report));
        let period = topics.heartbeat();
        self.heartbeat = Some(tokio::spawn(async move {
            loop {
                report(&mqtt, &topics, &on, &last).await;
                tokio::time::sleep(period).await;
            }
        }));
    }

    /// The main loop hangs: no more reports; the connection stays open.
    fn stop_heartbeat(&mut self) {
        if let Some(h) = self.heartbeat.take() {
            h.abort();
        }
    }

    fn last_report(&self) -> Instant {
        *self.last_report.lock().unwrap()
    }

    /// No set arrived (within a short look; late probes of `await_active` aside).
    async fn no_set(&mut self) {
        let look = async {
            loop {
                match self.sets.recv().await {
                    Some(m) if m.payload.as_ref() == b"probe" => continue,
                    other => return other,
                }
            }
        };
        let got = tokio::time::timeout(Duration::from_millis(300), look).await;
        assert!(got.is_err(), "a set was published: {got:?}");
    }
}

async fn report(mqtt: &MqttBroker, topics: &Topics, on: &AtomicBool, last: &Mutex<Instant>) {
    let s = &topics.state;
    let payload = topics.state_payload(on.load(Ordering::SeqCst)).to_string();
    *last.lock().unwrap() = Instant::now();
    // A report the broker does not take (the board is being cut off) is simply lost.
    let _ = mqtt
        .send(&s.topic, payload.into(), s.qos, None, s.retained)
        .await;
}

/// What the broker holds retained on `topic`, asked by a fresh client (bounded).
async fn retained(url: &str, topic: &str, client_id: &str) -> Option<String> {
    let observer = connected(BrokerConfig::new(url, client_id)).await;
    let mut sub = observer.subscribe(topic);
    let got = tokio::time::timeout(Duration::from_secs(1), sub.recv()).await;
    match got {
        Ok(Some(m)) if m.retained => Some(String::from_utf8_lossy(&m.payload).into_owned()),
        _ => None,
    }
}

/// `closedloop serve DIR/board.toml` with `env` and its stderr into `stderr`, an rmcp client on
/// its stdio.
async fn serve(dir: &Path, env: &[(String, String)], stderr: std::fs::File) -> Client {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_closedloop"));
    cmd.arg("serve").arg(dir.join("board.toml"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (child, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::from(stderr))
        .spawn()
        .unwrap();
    ().serve(child).await.unwrap()
}

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
    assert_eq!(calls(part).len(), 4);
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
    let part = part_two();
    let b = blocks(part);
    let broker = Broker::get().await;
    let url = broker.url().to_string();
    let tag = tag();
    let prefix = format!("closedloop-test/first-board-{tag}");
    let topics = Arc::new(Topics::from_page(part).under(&prefix));
    let calls = calls(part);

    // The plant of the page, on this run's topics and with its own client id.
    let page_plant = marked(&b, "board.toml").join("\n");
    let vars = closedloop_plant::env_variables(&page_plant);
    let page_env = |_: &str| Some(url.clone());
    let parsed =
        closedloop_plant::parse_with_env(&page_plant, "board.toml", Path::new("."), &page_env)
            .expect("the page's plant loads");
    let device = &parsed.devices[0];
    let DriverConfig::Mqtt { client_id, .. } = &device.driver else {
        panic!("an mqtt driver");
    };
    let plant = unique(&page_plant, &prefix).replace(
        &format!("client_id = \"{client_id}\""),
        &format!("client_id = \"closedloop-{tag}\""),
    );
    assert!(plant.contains(&format!("closedloop-{tag}")));

    // The plant file and the topic table agree (the board below speaks the table).
    let parsed = closedloop_plant::parse_with_env(&plant, "board.toml", Path::new("."), &page_env)
        .expect("the plant loads");
    let device = &parsed.devices[0];
    let window = Duration::from_secs_f64(device.liveness.max_silence_s);
    assert_eq!(
        device.liveness.status_topic.as_deref(),
        Some(topics.status.topic.as_str())
    );
    assert_eq!(device.liveness.online, topics.online());
    assert_eq!(device.liveness.offline, topics.offline());
    let Source::Topic { topic, .. } = &device.signals[0].source else {
        panic!("a topic signal");
    };
    assert_eq!(topic, &topics.state.topic);
    let WriteEntry::Mqtt { topic, qos, .. } = &device.actions[0].write[0] else {
        panic!("a publish");
    };
    assert_eq!((topic, *qos), (&topics.set.topic, topics.set.qos));
    assert!(
        topics.heartbeat() < window,
        "the heartbeat is below max_silence_s"
    );

    // The client configuration passes every variable the plant reads.
    let cfg: Value = serde_json::from_str(marked(&b, "board client config")[0]).unwrap();
    let server = cfg["mcpServers"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap();
    assert_eq!(server["args"][0], "serve");
    let mut env_keys: Vec<String> = server["env"].as_object().unwrap().keys().cloned().collect();
    env_keys.sort();
    assert_eq!(env_keys, vars);
    let env: Vec<(String, String)> = vars.iter().map(|v| (v.clone(), url.clone())).collect();

    // 11. check: the page's line, its output, its warning; and without the variable, refused.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("board.toml"), &plant).unwrap();
    let (line_env, args) = check_line(part);
    let mut check = closedloop();
    check.current_dir(dir.path()).args(&args);
    for (k, v) in &line_env {
        check.env(k, v);
    }
    let out = check.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    shown_in_order(&stdout, marked(&b, "board check output")[0]);
    assert_eq!(stderr, marked(&b, "board check warnings")[0]);
    let mut check = closedloop();
    check.current_dir(dir.path()).args(&args);
    for v in &vars {
        check.env_remove(v);
    }
    let out = check.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        marked(&b, "board env missing")[0]
    );

    // The board: connected with its will, `online` and its state published (both retained),
    // then silent. The broker holds both before closedloop starts.
    let mut board = Board::connect(&url, &format!("{tag}-board1"), Arc::clone(&topics)).await;
    board.online().await;
    board.report().await;
    for (n, (t, want)) in [
        (&topics.status.topic, topics.online()),
        (&topics.state.topic, topics.state_payload(false)),
    ]
    .into_iter()
    .enumerate()
    {
        let held = retained(&url, t, &format!("{tag}-observer-{n}")).await;
        assert_eq!(held.as_deref(), Some(want), "{t}");
    }

    // 13, first row: closedloop starts on retained messages alone.
    let banner = dir.path().join("serve.stderr");
    let started = Instant::now();
    let c = serve(dir.path(), &env, std::fs::File::create(&banner).unwrap()).await;
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
            .starts_with("pump is unknown: no answer since closedloop started"),
        "{s}"
    );
    let (tool, args, want_status, want_code) = &calls[0];
    let (status, code, r) = act(&c, tool, args.clone()).await;
    assert_eq!(
        (status.as_str(), code.as_str()),
        (want_status.as_str(), want_code.as_str()),
        "{r}"
    );
    assert!(
        started.elapsed() > window,
        "refused only once max_silence_s from the start passed: {r}"
    );
    board.no_set().await;
    assert_eq!(state(&c, "pump").await["liveness"], "offline");
    // The banner (printed after 3 s at most) named the board unknown — never offline while
    // closedloop's own first connection to the broker was still being answered.
    let printed = std::fs::read_to_string(&banner).unwrap();
    shown_in_order(&printed, marked(&b, "board banner")[0]);

    // Second row: heartbeats make it online; the switch completes only on the echo.
    board.start_heartbeat();
    let (_, now) = leaves(&c, "pump", "offline", topics.heartbeat() * 2).await;
    assert_eq!(now, "online");
    let (tool, args, want_status, want_code) = &calls[1];
    let mut args = args.clone();
    args["wait_s"] = json!(0);
    let r = call(&c, tool, args.clone()).await;
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
            &c,
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
    let r = settle(&c, pending).await;
    let (status, code) = outcome(&r);
    assert_eq!(
        (status.as_str(), code.as_str()),
        (want_status.as_str(), want_code.as_str()),
        "{:?}",
        r.structured_content
    );
    assert_eq!(sc(&r)["verified"], true);
    assert_eq!(sc(&r)["evidence"]["on"]["value"], true);

    // Third row: the board stops reporting, its connection open: offline after max_silence_s.
    board.stop_heartbeat();
    let last = board.last_report();
    let (at, now) = leaves(&c, "pump", "online", window + Duration::from_secs(3)).await;
    assert_eq!(now, "offline");
    assert!(
        at.duration_since(last) > window,
        "offline only after max_silence_s of silence ({:?})",
        at.duration_since(last)
    );
    let (tool, args, want_status, want_code) = &calls[2];
    let (status, code, r) = act(&c, tool, args.clone()).await;
    assert_eq!(
        (status.as_str(), code.as_str()),
        (want_status.as_str(), want_code.as_str()),
        "{r}"
    );
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains("no valid answer for more than"),
        "{r}"
    );
    board.no_set().await;

    // Fourth row: reporting again, then the connection ends without a DISCONNECT. `abort`
    // drops the TCP connection under the client, as a crash does; the broker publishes the
    // will at once (a board that vanishes silently is noticed after its keep-alive instead).
    board.start_heartbeat();
    let (_, now) = leaves(&c, "pump", "offline", topics.heartbeat() * 2).await;
    assert_eq!(now, "online");
    board.stop_heartbeat();
    let last = board.last_report();
    let cut = Instant::now();
    board.mqtt.abort();
    let (at, now) = leaves(&c, "pump", "online", window).await;
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
    let (tool, args, want_status, want_code) = &calls[3];
    let (status, code, r) = act(&c, tool, args.clone()).await;
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
    let held = retained(&url, &topics.status.topic, &format!("{tag}-observer-will")).await;
    assert_eq!(held.as_deref(), Some(topics.offline()));
    c.cancel().await.unwrap();

    // The journal has the four commands, the refused ones too (no broker needed to list them).
    let out = closedloop()
        .current_dir(dir.path())
        .args(["commands", "board.toml"])
        .env_remove(&vars[0])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text.lines().count(), 4, "{text}");

    // Leave nothing retained on a shared broker.
    let cleaner = connected(BrokerConfig::new(&url, format!("{tag}-cleaner"))).await;
    for t in [&topics.state.topic, &topics.status.topic] {
        cleaner
            .send(t, Vec::<u8>::new().into(), 1, None, true)
            .await
            .expect("retained message cleared");
    }
}
