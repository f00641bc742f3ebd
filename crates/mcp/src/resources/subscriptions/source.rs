//! The change feeds a watcher waits on: a device's snapshots, the engine's command changes, the
//! standing alarms' raises and clears, or nothing at all for a resource that never changes.

use closedloop_engine::{Change, Engine, Snapshot};
use tokio::sync::{broadcast, watch};

/// A change feed for one resource.
pub(crate) enum Source {
    /// `device://{id}/state`: changes when a signal value or the liveness does.
    Device {
        /// The device's snapshots, one per read cycle.
        rx: watch::Receiver<Snapshot>,
        /// The state the subscriber was last told about (or that was current at subscription).
        last: Snapshot,
    },
    /// `command://{id}` and its timeline: changes on every journaled change of that command.
    Command {
        /// The command watched.
        id: String,
        /// The engine's changes of every command, filtered to `id` as they arrive.
        rx: broadcast::Receiver<Change>,
    },
    /// `alarm://active`: changes on every raise and clear of a standing alarm.
    Alarms(watch::Receiver<u64>),
    /// `device://{id}/config`: never changes while the server runs.
    Fixed,
}

impl Source {
    /// `device://{id}/state`: a device's snapshots; the current one counts as already known.
    pub(crate) fn device(mut rx: watch::Receiver<Snapshot>) -> Source {
        let last = rx.borrow_and_update().clone();
        Source::Device { rx, last }
    }

    /// `command://{id}`: the engine's change feed, filtered to one command.
    pub(crate) fn command(id: String, engine: &Engine) -> Source {
        Source::Command {
            id,
            rx: engine.changes(),
        }
    }

    /// `alarm://active`: the alarm board's version; the current one counts as already known.
    pub(crate) fn alarms(mut rx: watch::Receiver<u64>) -> Source {
        rx.borrow_and_update();
        Source::Alarms(rx)
    }

    /// Something that never changes while the server runs (`device://{id}/config`).
    pub(crate) fn fixed() -> Source {
        Source::Fixed
    }

    /// Waits for the next change a reader would see; `None` when the feed ended.
    /// Cancel-safe: its only await points are `watch::changed` and `broadcast::recv`.
    pub(super) async fn next(&mut self) -> Option<()> {
        match self {
            Source::Device { rx, last } => loop {
                rx.changed().await.ok()?;
                let now = rx.borrow_and_update();
                if !same_state(&now, last) {
                    *last = now.clone();
                    return Some(());
                }
            },
            Source::Command { id, rx } => loop {
                match rx.recv().await {
                    Ok(Change::Command { command_id, .. }) if command_id == *id => return Some(()),
                    Ok(_) => continue,
                    // Some changes were lost; one of them may have been ours.
                    Err(broadcast::error::RecvError::Lagged(_)) => return Some(()),
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            },
            Source::Alarms(rx) => rx.changed().await.ok(),
            Source::Fixed => std::future::pending().await,
        }
    }

    /// Takes in every change already pending: the notification about to be sent covers them.
    pub(super) fn absorb(&mut self) {
        match self {
            Source::Device { rx, last } => {
                if rx.has_changed().unwrap_or(false) {
                    *last = rx.borrow_and_update().clone();
                }
            }
            Source::Command { rx, .. } => {
                use broadcast::error::TryRecvError;
                while !matches!(
                    rx.try_recv(),
                    Err(TryRecvError::Empty | TryRecvError::Closed)
                ) {}
            }
            Source::Alarms(rx) => {
                rx.borrow_and_update();
            }
            Source::Fixed => {}
        }
    }
}

/// Same signal values, the same unreadable signals and the same liveness (read times and
/// cycle numbers aside): a signal that stops reading is a change its readers must hear of.
fn same_state(a: &Snapshot, b: &Snapshot) -> bool {
    let shown = |r: &closedloop_engine::Reading| {
        let value = r.last_good().map(|v| v.value);
        (value, r.failure().map(|f| f.code.clone()))
    };
    a.liveness == b.liveness
        && a.readings().count() == b.readings().count()
        && (a.readings())
            .zip(b.readings())
            .all(|((ka, ra), (kb, rb))| ka == kb && shown(ra) == shown(rb))
}
