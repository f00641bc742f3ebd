//! Judging a running command on fresh samples: which values may count (the fence of every device
//! an expression reads), what they say (done, failed, started, stopped, moved), and readback.
//!
//! # Invariants
//! - A value counts only if it was read by a request issued after the acknowledgement: the
//!   command's own device against `ack_seq`, every other device named as `devices.<id>.<signal>`
//!   against the number that device had issued when the acknowledgement came (`fences`).
//! - Each sample is judged once: a snapshot republished without a new value (an MQTT or OPC UA
//!   listener's tick) is no second sample, so `hold_ms` needs distinct samples.

use crate::device::offline_detail;
use crate::device::{Liveness, SignalValue, Snapshot};
use crate::dispatch::plan::{self, Request};
use crate::machine::{Event, Reading};
use crate::supervision::Supervisor;
use closedloop_contract::Value;
use closedloop_link::Shown;
use closedloop_plant::{Action, Expr, Scope, other_device, other_device_name};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tokio::time::Instant;

/// The values one judgement may use, all read after the acknowledgement.
pub(crate) struct View {
    /// The command's own device's values.
    pub signals: BTreeMap<String, Value>,
    /// Every device's values, with the ones the criteria read taken after their fences.
    pub devices: BTreeMap<String, BTreeMap<String, Value>>,
    /// The sample numbers of every criterion value: equal keys are the same sample.
    pub key: Vec<u64>,
    /// Wall-clock ms of the oldest feedback value: of `done_when`'s signals (or of every
    /// criterion without one). Only the feedback's age says whether it has had time to move; a
    /// `stopped_when` coil read earlier in the same poll cycle does not make it early.
    pub oldest_ms: i64,
    /// Wall-clock ms of the newest criterion value: when the reading was read, journaled with
    /// it (`read_at`) so that a chart draws it where it happened, not where it was recorded.
    pub newest_ms: i64,
    /// Wall-clock ms of the oldest criterion value, journaled (`read_from`) so that a replay
    /// of the early rule knows the reading's feedback was read no sooner.
    pub first_ms: i64,
    /// Value, time, source (and unit) of every criterion value, for `evidence`.
    pub evidence: serde_json::Map<String, serde_json::Value>,
}

impl View {
    /// A criterion value by its evidence name (`position_mm`, `devices.meter.contact`).
    fn value_of(&self, name: &str) -> Option<Value> {
        match other_device(name) {
            Some((d, s)) => self.devices.get(d).and_then(|m| m.get(s)).copied(),
            None => self.signals.get(name).copied(),
        }
    }
}

/// The `done_when` values at dispatch (own signals by name, other devices' as
/// `devices.<id>.<signal>`), to tell "never moved" from "moved" at the deadline; and whether
/// `done_when` already held then ("already so").
pub(crate) fn baseline_of(action: &Action, scope: &Scope) -> (BTreeMap<String, Value>, bool) {
    let Some(done) = &action.done_when else {
        return (BTreeMap::new(), false);
    };
    let own = done
        .signals()
        .iter()
        .filter_map(|s| scope.signals.get(s).map(|v| (s.clone(), *v)));
    let others = done.devices().iter().filter_map(|(d, s)| {
        let v = scope.devices.get(d).and_then(|m| m.get(s))?;
        Some((other_device_name(d, s), *v))
    });
    (
        own.chain(others).collect(),
        done.eval_bool(scope).unwrap_or(false),
    )
}

/// Every expression that decides a running command.
fn criteria(s: &Supervisor) -> impl Iterator<Item = &Expr> {
    let a = &s.action;
    a.done_when
        .iter()
        .chain(a.fail_when.iter().map(|(_, e)| e))
        .chain(a.started_when.iter())
        .chain(a.stopped_when.iter())
}

impl Supervisor {
    /// Evaluates `f` in the one scope every plan and criterion of this command sees: `signals`
    /// of its own device, `devices` (the other devices its action reads), its parameters, and
    /// its id for payload templates.
    pub(crate) fn in_scope<R>(
        &self,
        signals: &BTreeMap<String, Value>,
        devices: &BTreeMap<String, BTreeMap<String, Value>>,
        f: impl FnOnce(&Scope<'_>) -> R,
    ) -> R {
        let extra = [("command_id", self.command_id.as_str())];
        f(&Scope {
            signals,
            params: &self.params,
            devices,
            extra_strings: &extra,
        })
    }

    /// `f` in this command's scope on the latest values of `snap`'s device and of the other
    /// devices its action reads.
    pub(crate) fn in_latest_scope<R>(&self, snap: &Snapshot, f: impl FnOnce(&Scope<'_>) -> R) -> R {
        let devices = self.ctx.scope_for(&self.action);
        self.in_scope(&snap.readable_values(), &devices, f)
    }

    /// The own signals the criteria read, sorted.
    fn criterion_names(&self) -> BTreeSet<String> {
        criteria(self)
            .flat_map(|e| e.signals().iter().cloned())
            .collect()
    }

    /// The other devices' signals the criteria read (`devices.<id>.<signal>`).
    pub(crate) fn criterion_refs(&self) -> BTreeSet<(String, String)> {
        criteria(self)
            .flat_map(|e| e.devices().iter().cloned())
            .collect()
    }

    /// Whether the criterion value named `name` (`position_mm`, `devices.meter.contact`) is
    /// feedback: one of `done_when`'s signals, or any criterion without a `done_when`. Asked per
    /// value of every sample, so it allocates nothing.
    fn is_feedback(&self, name: &str) -> bool {
        let Some(done) = &self.action.done_when else {
            return true;
        };
        match other_device(name) {
            Some((d, sig)) => done.devices().iter().any(|(dd, ss)| dd == d && ss == sig),
            None => done.signals().iter().any(|s| s == name),
        }
    }

    /// Right after the acknowledgement: the fence of every other device the criteria read, and
    /// a read of each asked for now rather than at its next tick.
    pub(crate) fn fence_others(&mut self) {
        let own = self.dev.id().to_string();
        for (d, _) in self.criterion_refs() {
            if d == own || self.fences.contains_key(&d) {
                continue;
            }
            if let Some(dev) = self.ctx.devices.get(&d) {
                self.fences.insert(d, dev.issued_seq());
                dev.poll_now();
            }
        }
    }

    /// The criterion values of this sample and of the other devices, or `None` while any of
    /// them was read before its fence (or its device is offline: it decides nothing).
    pub(crate) fn fresh_view(&self, snap: &Snapshot) -> Option<View> {
        let mut key = Vec::new();
        let mut oldest_ms = i64::MAX;
        let mut newest_ms = i64::MIN;
        let mut first_ms = i64::MAX;
        let mut evidence = serde_json::Map::new();
        let unit_of = |dev: &crate::device::DeviceRuntime, n: &str| {
            dev.spec.signal(n).and_then(|s| s.unit.clone())
        };
        let mut note = |name: String, v: &SignalValue, unit: Option<String>| {
            key.push(v.seq);
            newest_ms = newest_ms.max(v.at_ms);
            first_ms = first_ms.min(v.at_ms);
            if self.is_feedback(&name) {
                oldest_ms = oldest_ms.min(v.at_ms);
            }
            evidence.insert(name, Shown::read(v, unit.as_deref()).evidence());
        };
        for n in self.criterion_names() {
            let v = match snap.read_after(&n, self.ack_seq) {
                Some(v) => v,
                None => self.standing_value(snap, &n)?,
            };
            note(n.clone(), v, unit_of(&self.dev, &n));
        }
        // Every criterion value above was fenced by its number: the judge's own rule.
        let signals = snap.readable_values();
        let mut devices = self.ctx.scope_for(&self.action);
        devices.insert(self.dev.id().to_string(), signals.clone());
        let own = self.dev.id();
        for (d, s) in self.criterion_refs() {
            let (other, fence) = if d == own {
                (snap.clone(), self.ack_seq)
            } else {
                let dev = self.ctx.devices.get(&d)?;
                let other = dev.current();
                if other.liveness != Liveness::Online {
                    return None;
                }
                (other, *self.fences.get(&d)?)
            };
            let v = other.read_after(&s, fence)?;
            devices
                .entry(d.clone())
                .or_default()
                .insert(s.clone(), v.value);
            let unit = self.ctx.devices.get(&d).and_then(|dev| unit_of(dev, &s));
            note(other_device_name(&d, &s), v, unit);
        }
        Some(View {
            signals,
            devices,
            key,
            oldest_ms: if oldest_ms == i64::MAX { 0 } else { oldest_ms },
            newest_ms: newest_ms.max(0),
            first_ms: first_ms.min(newest_ms).max(0),
            evidence,
        })
    }

    /// The last value of `name` when it is read by `fail_when` alone on a device that reports
    /// on change (MQTT): a `fault` published only when it changes stands while the device is
    /// online — it was judged clear at dispatch (a failure already on is refused), and a relay
    /// that reported ON 20 ms after the write was once `NO_FEEDBACK` for want of a new `fault`.
    /// Feedback (`done_when`), `started_when` and `stopped_when` still need a fresh read.
    fn standing_value<'s>(&self, snap: &'s Snapshot, name: &str) -> Option<&'s SignalValue> {
        let a = &self.action;
        let reads = |e: &Option<Expr>| {
            e.as_ref()
                .is_some_and(|e| e.signals().iter().any(|s| s == name))
        };
        if self.dev.can_be_asked()
            || reads(&a.done_when)
            || reads(&a.started_when)
            || reads(&a.stopped_when)
        {
            return None;
        }
        let rule = self.dev.freshness(self.ctx.clock.now_ms());
        snap.usable(name, rule).ok()
    }

    /// Whether the devices the criteria read are all online and all report when they like
    /// (MQTT): a deadline without a fresh read of them is then `NO_FEEDBACK` — they answer, but
    /// reported nothing — rather than `DEVICE_OFFLINE`. A device that can be asked was asked
    /// while the command ran: reads it did not answer are no answer.
    ///
    /// When the criteria's last report carried no value, that report was an answer (a polled
    /// device answered with NaN, a board published `None`): they answer while all are online,
    /// whatever their kind.
    pub(crate) fn answering(&self) -> bool {
        let online = |d: &crate::device::DeviceRuntime| d.liveness() == Liveness::Online;
        match self.machine.awaits_a_value() {
            true => self.criterion_devices_all(online),
            false => self.criterion_devices_all(|d| !d.can_be_asked() && online(d)),
        }
    }

    /// Whether there are criterion devices and `ok` holds for each.
    fn criterion_devices_all(&self, ok: impl Fn(&crate::device::DeviceRuntime) -> bool) -> bool {
        let others = self.criterion_refs().into_iter().map(|(d, _)| d);
        let mut ids: BTreeSet<String> = others.collect();
        if !self.criterion_names().is_empty() {
            ids.insert(self.dev.id().to_string());
        }
        let mut devices = ids.iter().map(|d| self.ctx.devices.get(d));
        !ids.is_empty() && devices.all(|d| d.is_some_and(|d| ok(d)))
    }

    /// The criterion signals whose last read failed after the acknowledgement (own signals by
    /// name, others' as `devices.<id>.<signal>`), with why.
    fn failed_criteria(&self, snap: &Snapshot) -> Vec<(String, crate::device::Failure)> {
        let own = self.criterion_names().into_iter().map(|n| {
            let failure = snap.reading(&n)?.failure()?.clone();
            (failure.seq > self.ack_seq).then_some((n, failure))
        });
        let others = self.criterion_refs().into_iter().map(|(d, s)| {
            let fence = *self.fences.get(&d)?;
            let dev = self.ctx.devices.get(&d)?;
            let failure = dev.with_snapshot(|o| o.reading(&s)?.failure().cloned())?;
            (failure.seq > fence).then(|| (other_device_name(&d, &s), failure))
        });
        own.chain(others).flatten().collect()
    }

    /// A criterion signal whose read failed after the acknowledgement: refused (its register
    /// answered an exception, its node reads Bad) — nothing can confirm the command any more,
    /// so it fails with that code, naming the signal, not later as if the feedback never moved;
    /// or answered with no value (`None`, NaN, an empty payload) — the machine is told what
    /// came, and waits for a value until the deadline.
    fn unreadable_criterion(&self, snap: &Snapshot) -> Option<Event> {
        let failed = self.failed_criteria(snap);
        if let Some((name, f)) = failed.iter().find(|(_, f)| !f.no_value) {
            let at = crate::clock::rfc3339(f.since_ms);
            let detail = format!(
                "{name} cannot be read since {at} ({}), so nothing can confirm the outcome; the \
                 write may have taken effect.",
                f.why
            );
            return Some(Event::Unreadable {
                code: f.code.clone(),
                detail,
            });
        }
        let (name, f) = failed.first()?;
        let at = crate::clock::rfc3339(f.since_ms);
        let device = other_device(name).map_or(self.dev.id(), |(d, _)| d);
        let detail = format!(
            "{device} answered after the write was acknowledged, but {name} has had no value \
             since {at} ({}), so nothing shows whether {} acted; the write may have taken effect.",
            f.why,
            self.dev.id()
        );
        Some(Event::NoValue { detail })
    }

    /// A `fail_when` on this device's own signals that holds on values read after the
    /// acknowledgement alone (an expression reading a signal without a fresh value holds
    /// nothing), as a failing reading with its evidence; for the time a criterion signal has
    /// no value and the full view cannot be judged.
    fn failure_on_fresh(&mut self, snap: &Snapshot) -> Option<Event> {
        let mut fresh = BTreeMap::new();
        let mut evidence = serde_json::Map::new();
        for n in self.criterion_names() {
            if let Some(v) = snap.read_after(&n, self.ack_seq) {
                fresh.insert(n.clone(), v.value);
                let unit = self.dev.spec.signal(&n).and_then(|s| s.unit.as_deref());
                evidence.insert(n, Shown::read(v, unit).evidence());
            }
        }
        let devices = BTreeMap::new();
        let action = Arc::clone(&self.action);
        let code = self.in_scope(&fresh, &devices, |scope| {
            (action.fail_when.iter())
                .filter(|(_, e)| e.devices().is_empty())
                .find(|(_, e)| e.eval_bool(scope).unwrap_or(false))
                .map(|(c, _)| c.clone())
        })?;
        Some(self.failing(code, evidence))
    }

    /// A reading that fails the command with the `fail_when` code `code`, on `evidence`.
    fn failing(
        &mut self,
        code: String,
        evidence: serde_json::Map<String, serde_json::Value>,
    ) -> Event {
        self.evidence = serde_json::Value::Object(evidence);
        Event::Reading(Reading {
            at_ms: self.ctx.clock.mono_ms(Instant::now()),
            done: false,
            failed: Some(code),
            started: true,
            moved: false,
            early: false,
            stopped: false,
            settled: true,
            baseline_known: true,
            already: false,
        })
    }

    /// Whether every signal `done_when` reads had a value at dispatch (see `baseline_of`).
    fn baseline_known(&self) -> bool {
        let Some(done) = &self.action.done_when else {
            return true;
        };
        let own = done.signals().iter().all(|s| self.baseline.contains_key(s));
        own && done
            .devices()
            .iter()
            .all(|(d, s)| self.baseline.contains_key(&other_device_name(d, s)))
    }

    /// Turns a sample into an event, if it says something new about this command.
    pub(crate) async fn judge(&mut self, snap: &Snapshot) -> Option<Event> {
        if snap.liveness == Liveness::Offline {
            return Some(Event::Offline {
                detail: offline_detail(&self.dev, snap),
            });
        }
        if let Some(refused) = self.unreadable_criterion(snap) {
            // Waiting for a value of one signal does not stop a failure on the others: an
            // encoder reading NaN must not keep an overcurrent from stopping the motor.
            if matches!(refused, Event::NoValue { .. })
                && let Some(failed) = self.failure_on_fresh(snap)
            {
                return Some(failed);
            }
            return Some(refused);
        }
        let view = self.fresh_view(snap)?;
        if self.last_sample.as_ref() == Some(&view.key) {
            // The same sample again (a listener's tick): not a new read.
            return None;
        }
        self.last_sample = Some(view.key.clone());
        let action = Arc::clone(&self.action);
        let crate::supervision::verdict::Holds {
            failed,
            done,
            started,
            stopped,
        } = self.in_scope(&view.signals, &view.devices, |scope| {
            crate::supervision::verdict::holds(&action, scope)
        });
        let moved = self
            .baseline
            .iter()
            .any(|(name, before)| view.value_of(name).is_some_and(|now| now != *before));
        self.evidence = serde_json::Value::Object(view.evidence.clone());
        let values: serde_json::Map<String, serde_json::Value> = view
            .evidence
            .iter()
            .map(|(k, e)| (k.clone(), e["value"].clone()))
            .collect();
        let values = serde_json::Value::Object(values);
        let read_at = crate::clock::rfc3339(view.newest_ms);
        let read_from = crate::clock::rfc3339(view.first_ms);
        let entry = json!({"values": values, "read_at": read_at, "read_from": read_from});
        if done || failed.is_some() {
            // Journaled with the outcome it may decide (`Supervisor::deciding`).
            self.deciding = Some(("signal", entry));
            self.last_logged = Some(values);
        } else if self.last_logged.as_ref() != Some(&values) {
            self.ctx.note(&self.cmd, vec![("signal", entry)]).await;
            self.last_logged = Some(values);
        }
        // Taken expect_s after the acknowledgement: the feedback has had its time to move.
        let in_time = view.oldest_ms >= self.settle_until_ms;
        // "Already so" is confirmed only by such a read, whatever the protocol: a report that
        // comes sooner (an MQTT heartbeat, a state echoed on receipt) may show the device before
        // the write took effect. A broker's PUBACK says nothing of when the device acted.
        let early = self.baseline_done && !in_time;
        // For "never moved", a device that reports on change (MQTT, which cannot be asked) would
        // have reported a move: any fresh report of it stands until the next.
        let settled = !self.dev.can_be_asked() || in_time;
        // `hold_ms` counts between the reads themselves (on the gateway's monotonic clock), not
        // between when they were judged: the journal keeps read times, so a replay of the
        // journal (`crate::verdict`) times a hold exactly as the engine did.
        let at_ms = view.newest_ms.max(0) as u64;
        Some(Event::Reading(Reading {
            at_ms,
            done,
            failed,
            started,
            moved,
            early,
            stopped,
            settled,
            baseline_known: self.baseline_known(),
            already: self.baseline_done,
        }))
    }

    /// Readback verification: read the written blocks back and compare with what was written;
    /// a `fail_when` that holds on fresh values fails the command all the same. With a
    /// `fail_when`, the readback confirms only on failure signals read after the ack and no
    /// sooner than `expect_s` after it.
    pub(crate) async fn readback(&mut self) -> Option<Event> {
        let snap = self.dev.current();
        if snap.liveness == Liveness::Offline {
            return Some(Event::Offline {
                detail: offline_detail(&self.dev, &snap),
            });
        }
        let view = self.fresh_view(&snap);
        if view.is_none() && !self.action.fail_when.is_empty() {
            // No fresh sample of the failure signals yet: a readback that matched says nothing
            // about a fault, so wait for one before completing.
            self.dev.poll_now();
            return None;
        }
        let failed = view.and_then(|view| {
            let code = self.in_scope(&view.signals, &view.devices, |scope| {
                let fail_when = &self.action.fail_when;
                fail_when
                    .iter()
                    .find(|(_, e)| e.eval_bool(scope).unwrap_or(false))
                    .map(|(c, _)| c.clone())
            })?;
            Some((code, view.evidence))
        });
        if let Some((code, evidence)) = failed {
            return Some(self.failing(code, evidence));
        }
        let writes = match self.writes.is_empty() {
            // A recovered command: what was written is what the plan says now.
            true => self.planned_writes(&snap)?,
            false => self.writes.clone(),
        };
        let mut all = true;
        let mut evidence = serde_json::Map::new();
        for w in &writes {
            // Only what the link can read back (registers, node writes) is compared.
            if let Some(back) = self.dev.read_back(w).await {
                all &= back.matched;
                evidence.extend(back.evidence);
            }
        }
        self.evidence = serde_json::Value::Object(evidence);
        // With a fail_when, a matching readback confirms nothing before expect_s: the failure
        // signals are watched for the action's expected duration first.
        let early =
            !self.action.fail_when.is_empty() && self.ctx.clock.now_ms() < self.settle_until_ms;
        Some(Event::Reading(Reading {
            at_ms: self.ctx.clock.mono_ms(Instant::now()),
            done: all,
            failed: None,
            started: true,
            moved: false,
            early,
            stopped: false,
            settled: true,
            baseline_known: true,
            already: false,
        }))
    }

    /// The plan evaluated on this snapshot (for a recovered command's readback).
    fn planned_writes(&self, snap: &Snapshot) -> Option<Vec<Request>> {
        self.in_latest_scope(snap, |scope| {
            plan::evaluate(&self.action.write, scope, self.dev.link().as_ref()).ok()
        })
    }
}
