//! A command as the checks see it (`Cmd`): its journal row and timeline turned into case
//! milliseconds, built from a case's outcome by `commands`.

use crate::rig::{Epoch, Journaled, Outcome};
use crate::spec::*;

/// A command as the checks see it: its journal row and timeline, times in case milliseconds.
#[derive(Debug)]
pub struct Cmd<'a> {
    pub id: &'a str,
    pub dev: usize,
    pub action: &'a str,
    pub j: &'a Journaled,
    pub status: &'a str,
    pub code: Option<&'a str>,
    pub verified: bool,
    pub accepted: Option<i64>,
    pub dispatched: Option<(i64, usize)>,
    /// The plan as written at dispatch (`Write`'s display).
    pub writes: Vec<String>,
    /// expect_s as evaluated at dispatch.
    pub expect_s: Option<f64>,
    pub deadline: Option<i64>,
    pub ack: Option<(i64, usize)>,
    pub terminal: Option<(i64, usize)>,
    /// Extra time a later engine's clock gives a recovered command (its wall clock started
    /// behind the paused clock's, see `deadline_slack`).
    pub recovered_skew: Option<i64>,
    pub epochs: &'a [Epoch],
}

pub(super) const TERMINAL: [&str; 6] = [
    "completed",
    "failed",
    "timeout",
    "cancelled",
    "rejected",
    "sent",
];

impl Cmd<'_> {
    /// Case time of the first `name` event, in the epoch that wrote it.
    pub fn event(&self, name: &str) -> Option<i64> {
        self.j
            .events
            .iter()
            .find(|(_, e)| e.event == name)
            .map(|(ep, e)| {
                let e0 = &self.epochs[(*ep).min(self.epochs.len() - 1)];
                e0.start_ms + (e.at_ms - e0.wall_ms)
            })
    }
}

pub fn commands<'a>(case: &Case, out: &'a Outcome) -> Vec<Cmd<'a>> {
    let ids: Vec<String> = (0..case.devices.len())
        .map(|i| device_id(&case.devices, i))
        .collect();
    let to_case = |epoch: usize, wall: i64| {
        let e = &out.epochs[epoch.min(out.epochs.len() - 1)];
        e.start_ms + (wall - e.wall_ms)
    };
    out.journal
        .iter()
        .map(|(id, j)| {
            let at = |name: &str| {
                j.events
                    .iter()
                    .find(|(_, e)| e.event == name)
                    .map(|(ep, e)| (to_case(*ep, e.at_ms), *ep))
            };
            let dispatched_ev = j.events.iter().find(|(_, e)| e.event == "dispatched");
            let writes = dispatched_ev
                .and_then(|(_, e)| e.data.get("writes"))
                .and_then(|w| w.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|w| w.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let expect_s = dispatched_ev
                .and_then(|(_, e)| e.data.get("expect_s"))
                .and_then(|v| v.as_f64());
            let dispatched = at("dispatched");
            let deadline = match (j.row.deadline_ms, dispatched) {
                (Some(d), Some((_, ep))) => Some(to_case(ep, d)),
                _ => None,
            };
            let recovered = at("recovered");
            let recovered_skew = match (recovered, dispatched) {
                (Some((_, later)), Some((_, ep))) => {
                    let (a, b) = (&out.epochs[ep], &out.epochs[later]);
                    Some(((b.start_ms - a.start_ms) - (b.wall_ms - a.wall_ms)).max(0))
                }
                _ => None,
            };
            let terminal = j
                .events
                .iter()
                .find(|(_, e)| TERMINAL.contains(&e.event.as_str()))
                .map(|(ep, e)| (to_case(*ep, e.at_ms), *ep));
            Cmd {
                id,
                dev: ids.iter().position(|d| *d == j.row.device).unwrap_or(0),
                action: &j.row.action,
                j,
                status: &j.row.status,
                code: j.row.error_code.as_deref(),
                verified: j.row.verified,
                accepted: at("accepted").map(|(t, _)| t),
                dispatched,
                writes,
                expect_s,
                deadline,
                ack: at("device_ack"),
                terminal,
                recovered_skew,
                epochs: &out.epochs,
            }
        })
        .collect()
}
