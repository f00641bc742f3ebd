//! The walk-through's setting and the steps around the table's rows: the page's plant made
//! unique to this run and held to the topic table, the client configuration's `env` block, the
//! page's `closedloop check` line, the board's first words, the journal, and the cleanup.

use crate::board::{Board, Broker, retained};
use crate::common::closedloop;
use crate::common::page::{Block, Call, blocks, calls, marked, shown_in_order};
use crate::page::{CALLS, Topics, check_line, unique};
use closedloop_mqtt::BrokerConfig;
use closedloop_mqtt::testing::connected;
use closedloop_plant::{DriverConfig, Source, WriteEntry};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;

/// Everything the steps share: the page as read, this run's names and the plant's folder.
pub struct Run {
    /// The part's fenced blocks, for the steps that compare with one.
    pub blocks: Vec<Block>,
    /// The broker's URL, the value of every variable the plant reads.
    pub url: String,
    /// Unique to this run, so client ids and topics do not meet another run's.
    pub tag: String,
    /// The topic table, under this run's prefix.
    pub topics: Arc<Topics>,
    /// The calls table's rows, one per row step.
    pub calls: Vec<Call>,
    /// The variables the plant reads, in the order the plant file first names them.
    pub vars: Vec<String>,
    /// The client configuration's `env` block, each variable set to the broker's URL: the whole
    /// environment `closedloop serve` gets beyond PATH, HOME and CLOSEDLOOP_LOG.
    pub env: Vec<(String, String)>,
    /// The plant's `max_silence_s`.
    pub window: Duration,
    /// The folder holding `board.toml` and its journal.
    pub dir: TempDir,
    part: &'static str,
    plant: String,
    /// Our own Mosquitto, if any, kept running until the run ends.
    _broker: Broker,
}

impl Run {
    /// Reads `part`, picks the broker, and makes the page's plant this run's, checked against
    /// the topic table and the client configuration.
    pub async fn new(part: &'static str) -> Run {
        let blocks = blocks(part);
        let broker = Broker::get().await;
        let url = broker.url().to_string();
        let tag = tag();
        let prefix = format!("closedloop-test/first-board-{tag}");
        let topics = Arc::new(Topics::from_page(part).under(&prefix));
        let calls = calls(part, CALLS);
        let (plant, vars) = run_plant(&blocks, &url, &prefix, &tag);
        let window = agrees(&plant, &url, &topics);
        let env = client_env(&blocks, &vars, &url);
        Run {
            blocks,
            url,
            tag,
            topics,
            calls,
            vars,
            env,
            window,
            dir: tempfile::tempdir().unwrap(),
            part,
            plant,
            _broker: broker,
        }
    }

    /// 11. check: the page's line, its output, its warning; and without the variable, refused.
    pub fn check(&self) {
        let b = &self.blocks;
        std::fs::write(self.dir.path().join("board.toml"), &self.plant).unwrap();
        let (line_env, args) = check_line(self.part);
        let mut check = closedloop();
        check.current_dir(self.dir.path()).args(&args);
        for (k, v) in &line_env {
            check.env(k, v);
        }
        let out = check.output().unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{stderr}");
        shown_in_order(&stdout, marked(b, "board check output")[0]);
        assert_eq!(stderr, marked(b, "board check warnings")[0]);
        let mut check = closedloop();
        check.current_dir(self.dir.path()).args(&args);
        for v in &self.vars {
            check.env_remove(v);
        }
        let out = check.output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            marked(b, "board env missing")[0]
        );
    }

    /// The board: connected with its will, `online` and its state published (both retained),
    /// then silent. The broker holds both before closedloop starts.
    pub async fn board_online(&self) -> Board {
        let (topics, tag) = (&self.topics, &self.tag);
        let board = Board::connect(&self.url, &format!("{tag}-board1"), Arc::clone(topics)).await;
        board.online().await;
        board.report().await;
        for (n, (t, want)) in [
            (&topics.status.topic, topics.online()),
            (&topics.state.topic, topics.state_payload(false)),
        ]
        .into_iter()
        .enumerate()
        {
            let held = retained(&self.url, t, &format!("{tag}-observer-{n}")).await;
            assert_eq!(held.as_deref(), Some(want), "{t}");
        }
        board
    }

    /// The journal has the four commands, the refused ones too (no broker needed to list them).
    pub fn journal(&self) {
        let out = closedloop()
            .current_dir(self.dir.path())
            .args(["commands", "board.toml"])
            .env_remove(&self.vars[0])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(text.lines().count(), 4, "{text}");
    }

    /// Leave nothing retained on a shared broker.
    pub async fn clear_retained(&self) {
        let cleaner = connected(BrokerConfig::new(
            &self.url,
            format!("{}-cleaner", self.tag),
        ))
        .await;
        for t in [&self.topics.state.topic, &self.topics.status.topic] {
            cleaner
                .send(t, Vec::<u8>::new().into(), 1, None, true)
                .await
                .expect("retained message cleared");
        }
    }
}

/// A name unique to this run (process id and the clock's nanoseconds).
fn tag() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{}-{nanos}", std::process::id())
}

/// The plant of the page, on this run's topics and with its own client id: the plant and the
/// variables it reads.
fn run_plant(b: &[Block], url: &str, prefix: &str, tag: &str) -> (String, Vec<String>) {
    let page_plant = marked(b, "board.toml").join("\n");
    let vars = closedloop_plant::env_variables(&page_plant);
    let page_env = |_: &str| Some(url.to_string());
    let parsed =
        closedloop_plant::parse_with_env(&page_plant, "board.toml", Path::new("."), &page_env)
            .expect("the page's plant loads");
    let device = &parsed.devices[0];
    let DriverConfig::Mqtt { client_id, .. } = &device.driver else {
        panic!("an mqtt driver");
    };
    let plant = unique(&page_plant, prefix).replace(
        &format!("client_id = \"{client_id}\""),
        &format!("client_id = \"closedloop-{tag}\""),
    );
    assert!(plant.contains(&format!("closedloop-{tag}")));
    (plant, vars)
}

/// The plant file and the topic table agree (the board speaks the table): the plant's
/// `max_silence_s`.
fn agrees(plant: &str, url: &str, topics: &Topics) -> Duration {
    let page_env = |_: &str| Some(url.to_string());
    let parsed = closedloop_plant::parse_with_env(plant, "board.toml", Path::new("."), &page_env)
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
    window
}

/// The client configuration's `env` block names exactly the variables the plant reads (as a
/// set: the block's order is the page's, `vars` the plant file's): the environment it gives
/// `closedloop serve`, each variable set to the broker's URL.
fn client_env(b: &[Block], vars: &[String], url: &str) -> Vec<(String, String)> {
    let cfg: Value = serde_json::from_str(marked(b, "board client config")[0]).unwrap();
    let server = cfg["mcpServers"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap();
    assert_eq!(server["args"][0], "serve");
    let env_keys: Vec<String> = server["env"].as_object().unwrap().keys().cloned().collect();
    let plant_reads: BTreeSet<&String> = vars.iter().collect();
    assert_eq!(
        env_keys.iter().collect::<BTreeSet<_>>(),
        plant_reads,
        "the client config's env block and the plant's variables"
    );
    env_keys.into_iter().map(|k| (k, url.to_string())).collect()
}
