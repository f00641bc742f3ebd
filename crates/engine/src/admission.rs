//! Admission: the checks between valid parameters and acceptance, one small function each, in
//! the order a refusal is reported — confirmation, a standing alarm, liveness (waiting, bounded,
//! for a first answer), a criterion signal the device refuses to read, the plan dry-run, the
//! expected duration, `requires`, a failure already on, and a place in the exclusive group's
//! queue. The first that fails says in words why nothing will be written.

pub(crate) mod refusal;
pub(crate) mod rules;
pub(crate) mod submit;

use crate::Submission;
use crate::admission::refusal::Refusal;
use crate::context::{Full, QUEUE_CAPACITY};
use crate::contract::ErrorCode;
use crate::device::offline_detail;
use crate::device::{DeviceRuntime, Liveness, Snapshot};
use crate::dispatch::plan;
use crate::engine::Engine;
use closedloop_journal::{CommandRow, EventRow, JournalError};
use closedloop_plant::{Action, Params, Scope};
use std::time::Duration;
use tokio::time::Instant;

/// Why a command is refused: its contract code and the words for the caller.
type Refused = (ErrorCode, String);

impl Engine {
    /// The checks between valid parameters and acceptance, in order; the first that fails says
    /// why nothing will be written. On success the command holds a place in its group's queue.
    /// `first_answer`: how long a device never heard may take to answer a first time — the
    /// call's own wait (and a poll), so that every call answers within it; `None` (a command
    /// taken over from another gateway, whose caller is not waiting here): its liveness window.
    pub(crate) async fn admit(
        &self,
        sub: &Submission,
        action: &Action,
        params: &Params,
        first_answer: Option<Duration>,
    ) -> Result<(), Refused> {
        confirmed(sub, action)?;
        if let Some((_, detail)) = self
            .ctx
            .alarms
            .blocking(&self.ctx.plant.alarms, &sub.device)
        {
            return Err((
                ErrorCode::Interlock,
                format!("{detail}; nothing was written"),
            ));
        }
        let dev = &self.ctx.devices[&sub.device];
        let snap = online(dev, first_answer).await?;
        readable_criteria(action, &snap)?;
        let signals = dev.usable_values(&snap, self.ctx.clock.now_ms());
        let devices = self.ctx.scope_for(action);
        let devices = crate::admission::rules::required_values(
            action,
            &self.ctx.devices,
            devices,
            &self.ctx.clock,
        )
        .await
        .map_err(|why| (ErrorCode::Interlock, why))?;
        // The command has no id yet; any id renders the same way, so a placeholder checks the
        // plan (an MQTT payload's `${command_id}`) as the dispatch will evaluate it.
        let scope = Scope {
            signals: &signals,
            params,
            devices: &devices,
            extra_strings: &[("command_id", "cmd_pending")],
        };
        plan::evaluate(&action.write, &scope, dev.link().as_ref()).map_err(|e| {
            (
                ErrorCode::InvalidParams,
                format!("{e}; nothing was written."),
            )
        })?;
        crate::admission::rules::expected_duration(action, &scope)
            .map_err(|detail| (ErrorCode::InvalidParams, detail))?;
        requires_holds(action, &scope)?;
        if let Some(why) = crate::admission::rules::failure_already_on(action, &scope) {
            return Err((ErrorCode::Interlock, format!("{}.", capitalised(&why))));
        }
        self.reserve_place(action)
    }

    /// A place in the exclusive group's queue (or the group itself, for an action that does not
    /// queue).
    fn reserve_place(&self, action: &Action) -> Result<(), Refused> {
        let group = self.ctx.group(&action.exclusive);
        group.reserve(action.queue).map_err(|full| {
            let detail = match full {
                Full::Busy => format!(
                    "{} is busy with another command and {} does not queue.",
                    action.exclusive, action.name
                ),
                Full::Queue => format!(
                    "{} already has {QUEUE_CAPACITY} commands waiting.",
                    action.exclusive
                ),
            };
            (ErrorCode::DeviceBusy, detail)
        })
    }
}

impl Engine {
    /// With several gateways on one journal, only the holder of a device's lease writes to it:
    /// another gateway refuses, naming the holder, so the caller can send the call there. The
    /// refusal leaves the idempotency key free — the same call is meant to be made again — and
    /// its hint says where, not "another command holds this device".
    pub(crate) fn owned(&self, device: &str) -> Result<(), Refusal> {
        let me = self.ctx.ownership.instance();
        if self.ctx.ownership.recovering(device) {
            let detail = format!(
                "this gateway ({me}) has just taken {device} over and is still settling the \
                 commands its previous owner left; try again in a moment; nothing was written"
            );
            return Err(Refusal::not_here(detail, CHANGING_HANDS));
        }
        let Err(not) = self.ctx.ownership.fence(device) else {
            return Ok(());
        };
        Err(match not.owner {
            Some(owner) => Refusal::not_here(
                format!(
                    "{device} is driven by gateway {owner}, not by this one ({me}): send the \
                     call to {owner}; nothing was written"
                ),
                ELSEWHERE,
            ),
            None => Refusal::not_here(
                format!(
                    "this gateway ({me}) does not hold {device}'s lease now (another may, or \
                     none yet); try again within a few seconds, or send the call to the gateway \
                     that holds it; nothing was written"
                ),
                CHANGING_HANDS,
            ),
        })
    }

    /// Journals a new command under the device's lease when there are leases (so a gateway
    /// that lost the device since admission journals nothing nobody would supervise); the
    /// lease's epoch, which every later write about the command goes under.
    pub(crate) async fn insert_owned(
        &self,
        row: &CommandRow,
        events: &[EventRow],
    ) -> Result<Option<i64>, JournalError> {
        let fence = self.ctx.fence_at(&row.device, None)?;
        match &fence {
            Some(f) => self.ctx.journal.insert_fenced(row, events, f).await?,
            None => self.ctx.journal.insert(row, events).await?,
        }
        Ok(fence.map(|f| f.epoch))
    }
}

/// A `confirm = true` action moves only once a person confirmed it.
pub(crate) fn confirmed(sub: &Submission, action: &Action) -> Result<(), Refused> {
    if !action.confirm || sub.confirmed {
        return Ok(());
    }
    Err((
        ErrorCode::Interlock,
        format!(
            "{} {} is declared confirm = true: nothing moves until a person confirms it, and this caller did not.",
            sub.device, action.name
        ),
    ))
}

/// `requires` holds on the values just read (a precondition that cannot be evaluated does not).
fn requires_holds(action: &Action, scope: &Scope<'_>) -> Result<(), Refused> {
    let Some(req) = &action.requires else {
        return Ok(());
    };
    let why = match req.eval_bool(scope) {
        Ok(true) => return Ok(()),
        Ok(false) => format!("The precondition `{}` does not hold", req.source()),
        Err(e) => format!(
            "The precondition `{}` cannot be checked ({e})",
            req.source()
        ),
    };
    let values = crate::admission::rules::values_read(req, scope);
    Err((
        ErrorCode::Interlock,
        format!("{why}{values}; nothing was written."),
    ))
}

/// The device's latest snapshot once it has answered, or once `bound` ran out.
async fn wait_for_first_answer(dev: &DeviceRuntime, bound: Duration) -> Snapshot {
    let mut rx = dev.subscribe();
    let until = Instant::now() + bound;
    loop {
        rx.borrow_and_update();
        let snap = dev.current();
        if snap.liveness != Liveness::Unknown {
            return snap;
        }
        if !matches!(
            tokio::time::timeout_at(until, rx.changed()).await,
            Ok(Ok(()))
        ) {
            return dev.current();
        }
    }
}

/// The least time a device never heard is given for its first answer: a gateway that has just
/// started may not have polled it yet (a call with `wait_s: 0` must not be refused for that).
const FIRST_ANSWER_FLOOR: Duration = Duration::from_secs(1);

/// How long a call waits for a device never heard since start to answer a first time: its
/// liveness window, but never longer than the call's own `wait_s` and one poll (of at least
/// [`FIRST_ANSWER_FLOOR`]) — a plant from `init` with `max_silence_s = 3600` once held a call
/// with `wait_s: 1` for a minute, until the client gave up, with nothing journaled.
fn first_answer_bound(dev: &DeviceRuntime, wait: Option<Duration>) -> Duration {
    let window = Duration::from_secs_f64(dev.spec.liveness.max_silence_s);
    let poll = Duration::from_millis(dev.spec.poll_ms).max(FIRST_ANSWER_FLOOR);
    match wait {
        Some(wait) => window.min(wait + poll),
        None => window,
    }
}

/// The device's snapshot if it is online (waiting, bounded, for a first answer), or why not.
async fn online(dev: &DeviceRuntime, wait: Option<Duration>) -> Result<Snapshot, Refused> {
    let bound = first_answer_bound(dev, wait);
    let snap = wait_for_first_answer(dev, bound).await;
    if snap.liveness == Liveness::Online {
        return Ok(snap);
    }
    let code = if snap.crc_failing {
        ErrorCode::CrcMismatch
    } else {
        ErrorCode::DeviceOffline
    };
    let detail = if snap.liveness == Liveness::Unknown {
        format!(
            "{} has never been heard since the gateway started ({:.1} s waited for a first answer); nothing was written.",
            dev.id(),
            bound.as_secs_f64()
        )
    } else {
        offline_detail(dev, &snap)
    };
    Err((code, detail))
}

/// A criterion signal the device refuses to read: the action could never be confirmed, so
/// it is refused with that cause instead of failing later as if the wiring were at fault.
fn readable_criteria(action: &Action, snap: &Snapshot) -> Result<(), Refused> {
    let criteria = action
        .done_when
        .iter()
        .chain(action.fail_when.iter().map(|(_, e)| e))
        .chain(action.started_when.iter())
        .chain(action.stopped_when.iter());
    let names: std::collections::BTreeSet<&String> = criteria.flat_map(|e| e.signals()).collect();
    let refused = names.into_iter().find_map(|n| {
        // A payload that was no value (`None` before a switch first reports) says nothing of
        // the wiring: the command may still be confirmed by the value that comes next.
        let failure = snap.reading(n)?.failure().filter(|f| !f.no_value)?;
        let (code, why) = (&failure.code, &failure.why);
        Some((
            code.clone(),
            format!(
                "{n} cannot be read ({why}), and {} needs it to confirm the outcome; nothing was written. Fix the signal's address or type in the plant file.",
                action.name
            ),
        ))
    });
    refused.map_or(Ok(()), Err)
}

/// The text with its first letter in capitals.
fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The refusal for a command whose device's lease this gateway lost between admission and the
/// journal (`DEVICE_BUSY`, the key left free for the retry it asks for); `None` for any other
/// journal error.
pub(crate) fn lease_lost(e: &JournalError, me: &str, device: &str) -> Option<Refusal> {
    matches!(e, JournalError::Fenced { .. }).then(|| {
        let detail = format!(
            "this gateway ({me}) lost {device}'s lease while accepting the command, so it was \
             not accepted and nothing was written; try again in a few seconds (the gateway that \
             holds the lease then takes it)"
        );
        Refusal::not_here(detail, CHANGING_HANDS)
    })
}

/// The hint of a call sent to a gateway that does not drive the device.
const ELSEWHERE: &str = "Another gateway drives this device: send the same call (the same \
     idempotency_key is safe) to the gateway the detail names. Nothing was written.";

/// The hint of a call made while the device's lease changes hands.
const CHANGING_HANDS: &str = "The device's lease is changing hands between gateways: make the \
     same call again in a few seconds (the same idempotency_key is safe). Nothing was written.";
