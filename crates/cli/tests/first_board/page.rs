//! The page's second part read as data: its topic table (what the board speaks), its calls
//! table (what the test asks and expects), its `closedloop check` line, and how printed output is
//! held to the page's abridged (`…`) lines.

use crate::common::page::blocks;
use serde_json::Value;
use std::time::Duration;

/// The whole page, compiled in so the test runs what the reader reads.
pub const PAGE: &str = include_str!("../../../../docs/first-plant.md");

/// The heading the page's second part starts with.
const PART_TWO: &str = "## 7. A relay board on MQTT";

/// The page's second part: everything this test runs (the first is `first_plant.rs`'s).
pub fn part_two() -> &'static str {
    let at = PAGE.find(PART_TWO).expect("the page has its MQTT part");
    &PAGE[at..]
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

/// One row of `<!-- board calls -->`: (tool, arguments, status, error code).
pub type Call = (String, Value, String, String);

/// The rows of `<!-- board calls -->`, the calls the test makes and what each must answer.
pub fn calls(part: &str) -> Vec<Call> {
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

/// Each line of `want` is shown by a line of `got`, in order: printed output is what the page
/// shows, abridged lines included.
pub fn shown_in_order(got: &str, want: &str) {
    let mut lines = got.lines();
    for w in want.lines() {
        assert!(
            lines.any(|l| shows(l, w)),
            "no line like {w:?} in order in:\n{got}"
        );
    }
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
