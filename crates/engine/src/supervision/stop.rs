//! Stopping a running command: the cancel plan written (with the scope every plan sees), and
//! the device held until `stopped_when` holds on a fresh read, bounded by [`SAFE_STATE_MAX`], so
//! the next command never starts on a device still moving.

use crate::contract::ErrorCode;
use crate::device::Snapshot;
use crate::dispatch::plan::{self, WriteError};
use crate::machine::Event;
use crate::supervision::Supervisor;
use serde_json::json;
use std::time::Duration;
use tokio::time::Instant;

/// Upper bound on how long a device stays held after a stop, waiting for `stopped_when`.
pub(crate) const SAFE_STATE_MAX: Duration = Duration::from_secs(30);
/// How long a cancel plan's MQTT publish may wait for the device: a stop usually goes out after
/// the deadline, and arriving late is still better than never.
pub(crate) const CANCEL_EXPIRY: Duration = Duration::from_secs(10);

impl Supervisor {
    /// Writes the cancel plan; holds the device until `stopped_when` afterwards.
    pub(crate) async fn write_cancel(&mut self) -> Event {
        // A cyclic start frame must not keep going out beside the stop.
        self.stop_cycling();
        let planned = self.in_latest_scope(&self.dev.snapshot(), |scope| {
            plan::evaluate(&self.action.cancel, scope, self.dev.link().as_ref())
        });
        let result = match planned {
            Ok(writes) => self.write_all(&writes, CANCEL_EXPIRY).await.map(|_| ()),
            Err(e) => Err(WriteError::refused(ErrorCode::InvalidParams, e.to_string())),
        };
        match result {
            Ok(()) => {
                self.hold = self.action.stopped_when.is_some();
                // What triggered the stop goes first: the journal reads in causal order.
                let cause = self.deciding.take().into_iter();
                let events = cause.chain([("cancel_sent", serde_json::Value::Null)]);
                self.ctx.record(&self.cmd, |_| {}, events.collect()).await;
                Event::CancelWritten
            }
            Err(e) => {
                let failed = json!({"code": e.code.as_str(), "detail": e.detail});
                let cause = self.deciding.take().into_iter();
                let events = cause.chain([("cancel_failed", failed)]);
                self.ctx.record(&self.cmd, |_| {}, events.collect()).await;
                Event::CancelFailed {
                    code: e.code,
                    detail: e.detail,
                }
            }
        }
    }

    /// Keeps the device busy until `stopped_when` holds on a fresh read (bounded); returns the
    /// evidence of that read (where the device stopped), `None` when it never held in time.
    pub(crate) async fn hold_until_stopped(&mut self) -> Option<serde_json::Value> {
        let stopped = self.action.stopped_when.clone()?;
        let mut rx = self.dev.subscribe();
        let after = self.dev.issued_seq();
        self.dev.poll_now();
        let until = Instant::now() + SAFE_STATE_MAX;
        loop {
            let snap = rx.borrow_and_update().clone();
            let fresh = stopped
                .signals()
                .iter()
                .all(|n| snap.read_after(n, after).is_some());
            if snap.seq > after && fresh {
                let holds =
                    self.in_latest_scope(&snap, |scope| stopped.eval_bool(scope).unwrap_or(false));
                if holds {
                    return Some(self.stopped_evidence(&snap));
                }
            }
            // A device that stopped answering will not confirm the stop: release it now
            // (its commands are refused while it is offline) instead of waiting out the bound.
            let gone = self.dev.current().liveness == crate::device::Liveness::Offline;
            match tokio::time::timeout_at(until, rx.changed()).await {
                Ok(Ok(())) if !gone => {}
                _ => {
                    let row = self.cmd.row();
                    tracing::warn!(request_id = %row.request_id, command_id = %row.command_id, device = %self.dev.id(),
                                   offline = gone, "stopped_when did not hold within {SAFE_STATE_MAX:?}, or the device went offline; releasing it");
                    return None;
                }
            }
        }
    }

    /// The criterion signals of a snapshot as evidence (value, time, source, unit).
    fn stopped_evidence(&self, snap: &Snapshot) -> serde_json::Value {
        let action = &self.action;
        let names: std::collections::BTreeSet<&String> = action
            .done_when
            .iter()
            .chain(action.stopped_when.iter())
            .flat_map(|e| e.signals())
            .collect();
        let mut evidence = serde_json::Map::new();
        for n in names {
            if let Some(v) = snap.reading(n).and_then(|r| r.current()) {
                let unit = self.dev.spec.signal(n).and_then(|s| s.unit.as_deref());
                let e = closedloop_link::Shown::read(v, unit).evidence();
                evidence.insert(n.clone(), e);
            }
        }
        serde_json::Value::Object(evidence)
    }
}
