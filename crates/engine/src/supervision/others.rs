//! Wakes from the other devices a command's criteria read.
//!
//! A supervisor judges when a sample arrives. Its own device's samples are not enough when
//! `done_when` (or `fail_when`) reads `devices.<id>.<signal>`: a `follow` action confirmed by
//! another relay's contact must be judged when *that* relay is read, or a command whose own
//! device stalls in a long read timeout would reach its deadline on a stale view and report
//! "never moved" while the other device showed the change (found by the ground-truth harness).
//!
//! # Invariants
//! - One forwarding task per other device, owned by the returned [`JoinSet`]: dropping it (the
//!   supervisor leaving `supervise`) aborts them all, so nothing outlives the command.
//! - Wakes coalesce (a channel of one): the judge reads every other device's latest value at
//!   wake time, so a burst of samples needs only one wake.

use crate::context::Context;
use std::collections::BTreeSet;
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinSet;

/// Forwarders that wake `rx` whenever one of `devices` (other than `own`) delivers a sample.
/// Returns `None` when the criteria read no other known device.
pub(crate) fn wakes(
    ctx: &Context,
    own: &str,
    devices: &BTreeSet<String>,
) -> Option<(JoinSet<()>, mpsc::Receiver<()>)> {
    let (tx, rx) = mpsc::channel(1);
    let mut set = JoinSet::new();
    for dev in devices.iter().filter(|d| d.as_str() != own) {
        let Some(rt) = ctx.devices.get(dev) else {
            continue;
        };
        let mut samples = rt.samples();
        let tx = tx.clone();
        set.spawn(async move {
            loop {
                match samples.recv().await {
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        if let Err(mpsc::error::TrySendError::Closed(())) = tx.try_send(()) {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }
    (!set.is_empty()).then_some((set, rx))
}
