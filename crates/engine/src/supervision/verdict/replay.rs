//! [`replay`]: a recorded command's journaled readings through the engine's own [`Machine`].

use super::{Journaled, Timeline, Verdict, holds, scope_of};
use crate::machine::profile::profile;
use crate::machine::{Effect, Event, Machine, Reading};
use closedloop_plant::{Action, Device, Params, Scope};

/// The clocks' give: journals from before `read_from` was kept timed `hold_ms` by when the
/// engine judged a sample, not when it was read; a hold met within this of its bound, or a
/// deadline, is not replayed either way.
const GIVE_MS: i64 = 25;

/// What `action` (of `device`, with `params`) decides on a command's journaled `readings`, and
/// the index of the reading that decides it — by the machine the engine runs, fed the readings
/// as the engine judged them, or [`Verdict::Undecided`] with the reason where the journal does
/// not keep what the engine's decision rests on (see the module's docs).
///
/// A reading is journaled when its values change: the samples between two journaled readings
/// had the first one's values. Once a reading counts (`done_when` holds, nothing failed,
/// started) without completing — too early, or holding — an unjournaled sample after it may
/// have completed the command (`could`), and a later reading that does not complete it is no
/// verdict.
pub fn replay(
    action: &Action,
    device: &Device,
    params: &Params,
    timeline: &Timeline,
    readings: &[Journaled],
) -> (Verdict, Option<usize>) {
    if timeline.recovered {
        return unsure(
            "it was supervised across a restart or by another gateway, and what it was judged \
             against then is not journaled",
        );
    }
    let Some(acked_ms) = timeline.acked_ms else {
        return unsure("its acknowledgement is not journaled");
    };
    let at_dispatch = AtDispatch::of(action, device, params, timeline);
    let mut machine = Machine::new(profile(action));
    for e in [Event::Accept, Event::Dispatch, Event::WriteAcked] {
        machine.on(e);
    }
    let mut started = action.started_when.is_none();
    let (mut since, mut could): (Option<i64>, Option<i64>) = (None, None);
    // An unjournaled sample may have completed it before the reading at hand: only a
    // completion later on is then a verdict (a command once complete stays so).
    let mut maybe_done = false;
    for (i, r) in readings.iter().enumerate() {
        let Some(at) = r.read_at_ms else {
            return unsure("a reading's time is not journaled");
        };
        if let Some(end) = at_dispatch.past_deadline(at) {
            return match maybe_done || could.is_some() {
                true => unsure(SAMPLES_BETWEEN),
                false => end,
            };
        }
        let (signals, devices) = scope_of(&device.id, &r.values);
        let scope = Scope {
            signals: &signals,
            params,
            devices: &devices,
            extra_strings: &[],
        };
        let h = holds(action, &scope);
        started |= h.started;
        let counts = h.done && h.failed.is_none() && started;
        let early = match at_dispatch.early(acked_ms, r) {
            Ok(early) => early,
            Err(why) if counts => return unsure(why),
            Err(_) => true,
        };
        since = (counts && !early).then(|| since.unwrap_or(at));
        let fx = machine.on(Event::Reading(at_dispatch.reading(at, h, r, early)));
        maybe_done |= could.is_some_and(|t| at > t);
        match decided(&fx) {
            Some(_) if at_dispatch.deadline.is_none() => return unsure(NO_DEADLINE),
            Some(Verdict::Completed) if near_hold(action, since, at, r) => {
                return unsure(SAMPLES_BETWEEN);
            }
            // Completed here or by a sample before: completed either way.
            Some(Verdict::Completed) => return (Verdict::Completed, Some(i)),
            Some(_) if maybe_done => return unsure(SAMPLES_BETWEEN),
            Some(v) => return (v, Some(i)),
            None => {}
        }
        could = counts.then(|| at_dispatch.could_complete(action, early, since));
    }
    match maybe_done || could.is_some() {
        true => unsure(SAMPLES_BETWEEN),
        false => (Verdict::Undecided(None), None),
    }
}

/// Why a command is not judged when its deadline under the new file cannot be computed.
const NO_DEADLINE: &str = "expect_s cannot be computed from what was journaled at dispatch, so \
     its deadline under this file is not known";

/// Why a command whose unjournaled samples may have decided it is not judged.
const SAMPLES_BETWEEN: &str = "samples the journal did not keep (they repeat the values of a \
     journaled reading) may have completed it, under hold_ms or once expect_s had passed";

fn unsure(why: &str) -> (Verdict, Option<usize>) {
    (Verdict::Undecided(Some(why.to_string())), None)
}

/// Whether a completion by `hold_ms` at `at` (held since `since`) is within the clocks' give
/// of its bound in a journal that timed holds by when samples were judged (no `read_from`).
fn near_hold(action: &Action, since: Option<i64>, at: i64, r: &Journaled) -> bool {
    let hold = action.hold_ms as i64;
    let held = since.map_or(0, |s| at - s);
    hold > 0 && r.read_from_ms.is_none() && held < hold + GIVE_MS
}

/// The verdict a machine's effects finish with, if they do.
fn decided(fx: &[Effect]) -> Option<Verdict> {
    fx.iter().find_map(|f| match f {
        Effect::Finish(o) => Some(match (&o.status, &o.code) {
            (crate::Status::Completed, _) => Verdict::Completed,
            (_, Some(crate::ErrorCode::Signal(code))) => Verdict::Failed(code.clone()),
            _ => Verdict::Undecided(None),
        }),
        _ => None,
    })
}

/// What the action would have computed at dispatch under this file, from what was journaled.
struct AtDispatch<'a> {
    /// `done_when` already held on the journaled baseline; `None` when it reads a value the
    /// baseline does not have.
    already: Option<bool>,
    /// `expect_s` in ms, from the parameters and the baseline.
    expect_ms: Option<i64>,
    /// When the deadline was counted from, and its budget with and without "already so" on a
    /// device that reports when it likes (the longer one).
    deadline: Option<(i64, i64, i64)>,
    baseline: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// How long after its read a reading may be judged: a request timeout and a poll period.
    delivery_ms: i64,
    /// The deadline the command ran under.
    ran_until: Option<i64>,
}

impl<'a> AtDispatch<'a> {
    fn of(action: &Action, device: &Device, params: &Params, tl: &'a Timeline) -> AtDispatch<'a> {
        let empty = serde_json::Map::new();
        let (signals, devices) = scope_of(&device.id, tl.baseline.as_ref().unwrap_or(&empty));
        let scope = Scope {
            signals: &signals,
            params,
            devices: &devices,
            extra_strings: &[],
        };
        let already = match (&tl.baseline, &action.done_when) {
            (_, None) => Some(false),
            (None, Some(_)) => None,
            (Some(_), Some(done)) => done.eval_bool(&scope).ok(),
        };
        let expect_s = crate::admission::rules::expected_duration(action, &scope).ok();
        // The longer budget is for "already so" on a device that reports when it likes.
        let pushes = !device.driver.is_register_based();
        let deadline = tl.dispatched_ms.zip(expect_s).map(|(from, e)| {
            let ms = |pushed| (action.deadline_s(device, e, pushed) * 1000.0).round() as i64;
            let long = ms(pushes && already != Some(false));
            let short = match pushes && already == Some(true) {
                true => long,
                false => ms(false),
            };
            (from, short, long)
        });
        AtDispatch {
            already,
            expect_ms: expect_s.map(|e| (e * 1000.0).round() as i64),
            deadline,
            baseline: tl.baseline.as_ref(),
            delivery_ms: (device.request_timeout_ms() + device.poll_ms) as i64 + GIVE_MS,
            ran_until: tl.deadline_ms,
        }
    }

    /// For a reading read at `at` past the deadline (or perhaps past it), how the replay ends:
    /// the engine had ended the command before it. A reading is judged when its cycle is
    /// delivered, up to a request timeout and a poll after it was read: one read that close
    /// before the deadline may have been judged after it.
    fn past_deadline(&self, at: i64) -> Option<(Verdict, Option<usize>)> {
        let (from, short, long) = self.deadline?;
        if at >= from + long + GIVE_MS {
            return Some((Verdict::Undecided(None), None));
        }
        // Every journaled reading was judged before the deadline it ran under: one no earlier
        // under this file passes them all.
        if self
            .ran_until
            .is_some_and(|end| from + short.min(long) + 1 >= end)
        {
            return None;
        }
        (at > from + short.min(long) - self.delivery_ms)
            .then(|| unsure("a reading may have come after its deadline under this file"))
    }

    /// From when an unjournaled sample with the values of a reading that counts (at `since`
    /// when it holds, else too early) could have completed the command: once `expect_s` has
    /// passed since the acknowledgement (at the earliest, since dispatch), then `hold_ms`.
    fn could_complete(&self, action: &Action, early: bool, since: Option<i64>) -> i64 {
        let hold = action.hold_ms as i64;
        let from = match (early, since) {
            (false, Some(s)) => s,
            _ => match (self.deadline, self.expect_ms) {
                (Some((dispatched, ..)), Some(e)) => dispatched + e,
                _ => i64::MIN / 2,
            },
        };
        from + hold - GIVE_MS
    }

    /// Whether reading `r` came sooner than `expect_s` after the acknowledgement while
    /// `done_when` already held at dispatch (the early rule), or why that is not known.
    fn early(&self, acked_ms: i64, r: &Journaled) -> Result<bool, &'static str> {
        if self.already == Some(false) {
            return Ok(false);
        }
        let Some(expect) = self.expect_ms else {
            return Err("expect_s cannot be computed from what was journaled at dispatch");
        };
        if r.read_from_ms.is_some_and(|t| t >= acked_ms + expect) {
            return Ok(false);
        }
        let before = self.deadline.map(|(from, ..)| from + expect);
        match (self.already, r.read_at_ms, before) {
            (Some(true), Some(at), Some(b)) if at < b => Ok(true),
            (None, ..) => Err("done_when's values at dispatch are not journaled"),
            _ => Err("a reading may have come before expect_s after the acknowledgement"),
        }
    }

    /// Whether `done_when`'s values in `values` differ from the journaled baseline.
    /// The machine's reading of the journaled reading `r`, read at `at`, whose criteria gave `h`.
    fn reading(&self, at: i64, h: super::Holds, r: &Journaled, early: bool) -> Reading {
        Reading {
            at_ms: at.max(0) as u64,
            done: h.done,
            failed: h.failed,
            started: h.started,
            moved: self.moved(&r.values),
            early,
            stopped: h.stopped,
            settled: true,
            baseline_known: self.already.is_some(),
            already: self.already == Some(true),
        }
    }

    fn moved(&self, values: &serde_json::Map<String, serde_json::Value>) -> bool {
        let Some(base) = self.baseline else {
            return false;
        };
        base.iter()
            .any(|(k, before)| values.get(k).is_some_and(|now| now != before))
    }
}
