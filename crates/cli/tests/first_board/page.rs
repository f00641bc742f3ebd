//! The page's second part read as data: its topic table (what the board speaks) and its
//! `closedloop check` line. Its calls table and its abridged (`…`) output lines are read by
//! `common/page.rs`, as `first_plant.rs` reads the first part's.

use crate::common::page::{blocks, table, ticks};
use std::time::Duration;

/// The whole page, compiled in so the test runs what the reader reads.
pub const PAGE: &str = include_str!("../../../../docs/first-plant.md");

/// The heading the page's second part starts with.
const PART_TWO: &str = "## 7. A relay board on MQTT";

/// The marker of the page's calls table, the rows `first_board/rows.rs` plays.
pub const CALLS: &str = "board calls";

/// The page's second part: everything this test runs (the first is `first_plant.rs`'s).
pub fn part_two() -> &'static str {
    let at = PAGE.find(PART_TWO).expect("the page has its MQTT part");
    &PAGE[at..]
}

/// One row of the page's topic table, so the board plays exactly what the reader is told.
#[derive(Debug, Clone)]
pub struct Topic {
    /// The topic (under this run's prefix once `Topics::under` ran), to publish or subscribe.
    pub topic: String,
    /// Who publishes it, checked against the table's order.
    publisher: String,
    /// The payloads the table shows, in its order, to publish or compare with.
    pub payloads: Vec<String>,
    /// The QoS the table gives, for the board's publishes and the plant's.
    pub qos: u8,
    /// Whether the table says it is retained, for the board's publishes and its will.
    pub retained: bool,
    /// When it is published, which holds the heartbeat's period.
    when: String,
}

/// The topic table: the set, the state and the status, in that order.
pub struct Topics {
    /// The set closedloop publishes and the board subscribes to.
    pub set: Topic,
    /// The state the board reports.
    pub state: Topic,
    /// The board's status: `online`, or its last will `offline`.
    pub status: Topic,
}

impl Topics {
    /// The page's table, checked to have the three rows in the order the test relies on.
    pub fn from_page(part: &str) -> Topics {
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
    pub fn under(mut self, prefix: &str) -> Topics {
        for t in [&mut self.set, &mut self.state, &mut self.status] {
            t.topic = unique(&t.topic, prefix);
        }
        self
    }

    /// The state payload for `on` (the table gives the on payload first).
    pub fn state_payload(&self, on: bool) -> &str {
        &self.state.payloads[usize::from(!on)]
    }

    /// The status payload the board publishes after each connect.
    pub fn online(&self) -> &str {
        &self.status.payloads[0]
    }

    /// The status payload of the board's last will.
    pub fn offline(&self) -> &str {
        &self.status.payloads[1]
    }

    /// The heartbeat: "… every N s" in the state's "when".
    pub fn heartbeat(&self) -> Duration {
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

/// `text` (the page's, under `greenhouse/`) under `prefix/` instead, so a shared broker is safe.
pub fn unique(text: &str, prefix: &str) -> String {
    text.replace("greenhouse/board1/", &format!("{prefix}/board1/"))
}

/// The page's `closedloop check` line: its environment assignments and its arguments, so the
/// test runs the very line the reader types.
pub fn check_line(part: &str) -> (Vec<(String, String)>, Vec<String>) {
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
