//! [`replay`]: a recorded command's journaled readings through the engine's own [`Machine`].

use super::{Journaled, Timeline, Verdict, holds, scope_of};
use crate::machine::profile::profile;
use crate::machine::{Effect, Event, Machine, Reading};
use closedloop_plant::{Action, Device, Params, Scope};

/// The clocks' give: the engine times `hold_ms` when it judges a sample and the journal keeps
/// when it was read, a few ms apart; a hold or a deadline met within this of its bound is not
/// replayed either way.
const GIVE_MS: i64 = 25;

/// What `action` (of `device`, with `params`) decides on a command's journaled `readings`, and
/// the index of the reading that decides it — by the machine the engine runs, fed the readings
/// as the engine would have judged them, or [`Verdict::Undecided`] with the reason where the
/// journal does not keep what the engine's decision rests on (see the module's docs).
pub fn replay(
    action: &Action,
    device: &Device,
    params: &Params,
    timeline: &Timeline,
    readings: &[Journaled],
) -> (Verdict, Option<usize>) {
    let unsure = |why: &str| (Verdict::Undecided(Some(why.to_string())), None);
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
    let mut streak: Option<i64> = None;
    for (i, r) in readings.iter().enumerate() {
        let Some(at) = r.read_at_ms else {
            return unsure("a reading's time is not journaled");
        };
        if let Some(end) = at_dispatch.past_deadline(at) {
            return end;
        }
        let (signals, devices) = scope_of(&device.id, &r.values);
        let scope = Scope {
            signals: &signals,
            params,
            devices: &devices,
            extra_strings: &[],
        };
        let h = holds(action, &scope);
        let counts = h.done && h.failed.is_none();
        let early = match at_dispatch.early(acked_ms, r) {
            Ok(early) => early,
            Err(why) if counts => return unsure(why),
            Err(_) => true,
        };
        // The samples between two journaled readings had the first one's values: a hold that
        // those could have met, broken by this reading, is not known either way.
        let held = counts && !early;
        if let Some(since) = streak {
            let hold = action.hold_ms as i64;
            let d = at - since;
            let near = action.hold_ms > 0 && (d - hold).abs() < GIVE_MS;
            if (!held && action.hold_ms > 0 && d > hold - GIVE_MS) || (held && near) {
                return unsure(
                    "hold_ms would be met between two journaled readings, and the samples in \
                     between are not journaled",
                );
            }
        }
        streak = match held {
            true => streak.or(Some(at)),
            false => None,
        };
        let fx = machine.on(Event::Reading(Reading {
            at_ms: at.max(0) as u64,
            done: h.done,
            failed: h.failed,
            started: h.started,
            moved: at_dispatch.moved(&r.values),
            early,
            stopped: h.stopped,
            settled: true,
            baseline_known: at_dispatch.already.is_some(),
            already: at_dispatch.already == Some(true),
        }));
        if let Some(v) = decided(&fx) {
            return (v, Some(i));
        }
    }
    (Verdict::Undecided(None), None)
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
        let deadline = tl.dispatched_ms.zip(expect_s).map(|(from, e)| {
            let ms = |pushed| (action.deadline_s(device, e, pushed) * 1000.0).round() as i64;
            (from, ms(false), ms(already != Some(false)))
        });
        AtDispatch {
            already,
            expect_ms: expect_s.map(|e| (e * 1000.0).round() as i64),
            deadline,
            baseline: tl.baseline.as_ref(),
        }
    }

    /// For a reading read at `at` past the deadline (or perhaps past it), how the replay ends:
    /// the engine had ended the command before it.
    fn past_deadline(&self, at: i64) -> Option<(Verdict, Option<usize>)> {
        let (from, short, long) = self.deadline?;
        if at >= from + long + GIVE_MS {
            return Some((Verdict::Undecided(None), None));
        }
        (at > from + short.min(long) - GIVE_MS).then(|| {
            let why = "a reading may have come after its deadline under this file";
            (Verdict::Undecided(Some(why.to_string())), None)
        })
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
    fn moved(&self, values: &serde_json::Map<String, serde_json::Value>) -> bool {
        let Some(base) = self.baseline else {
            return false;
        };
        base.iter()
            .any(|(k, before)| values.get(k).is_some_and(|now| now != before))
    }
}
