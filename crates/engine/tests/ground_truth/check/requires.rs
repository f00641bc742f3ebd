//! `requires` against what the other device physically did: a command dispatched under a
//! precondition on another device was dispatched on a read of that device, answered with data
//! shortly before the dispatch, that showed the precondition physically true. A read the device
//! refused (exception 4), or no read at all, decides nothing. A relay whose contact reads
//! inverted is a limitation.

use super::Cmd;
use crate::rig::{Obs, ObsKind, Outcome};
use crate::spec::{Case, DeviceSpec, Model, Requires};
use closedloop_driver::Area;

/// The block the signal `requires` reads lies in, and whether it physically holds in a state.
fn required(model: &Model) -> (Area, u16) {
    match model {
        Model::Relay { .. } => (Area::DiscreteInput, 0),
        Model::Stepper { .. } => (Area::DiscreteInput, 0),
        Model::Heater { .. } => (Area::Coil, 0),
    }
}

/// Whether `r` holds in `state` of its device.
fn holds(r: Requires, model: &Model, state: &closedloop_sim::SimState) -> Option<bool> {
    let on = match model {
        Model::Relay { .. } => state.contact?,
        Model::Stepper { .. } => state.moving?,
        Model::Heater { .. } => *state.coils.first()?,
    };
    Some(on != r.off)
}

/// Every dispatched command with a `requires` was dispatched on a truthful read that held.
pub fn check_requires(
    case: &Case,
    out: &Outcome,
    cmds: &[Cmd],
    v: &mut Vec<String>,
    l: &mut Vec<String>,
) {
    for c in cmds {
        let own: &DeviceSpec = &case.devices[c.dev];
        let (Some(r), Some((dispatched, epoch))) = (own.requires, c.dispatched) else {
            continue;
        };
        if c.action == "follow" {
            continue;
        }
        let other = &case.devices[r.device];
        if other.push.is_some() {
            let window = (other.max_silence_s * 1000.0).ceil() as i64;
            let holds = |s: &closedloop_sim::SimState| holds(r, &other.model, s);
            super::board::requires(out, c, (r, window), holds, (&mut *v, &mut *l));
            continue;
        }
        // A fresh read is asked for at dispatch and waited for up to the request timeout.
        let since = dispatched - other.timeout_ms as i64 - other.poll_ms as i64 - 50;
        let reads: Vec<&Obs> = (out.obs.iter())
            .filter(|o| o.dev == r.device && o.epoch == epoch)
            .filter(|o| matches!(o.kind, ObsKind::Read { block: (a, s, _), .. } if (a, s) == required(&other.model)))
            .filter(|o| o.t_ms() >= since && o.seen_by(dispatched))
            .collect();
        let shown = reads
            .iter()
            .any(|o| holds(r, &other.model, &o.state) == Some(true));
        let lied = reads
            .iter()
            .any(|o| matches!(o.kind, ObsKind::Read { lied: true, .. }));
        match (shown, lied) {
            (true, _) => {}
            (false, true) => l.push(format!(
                "command {} dispatched on a contact that reads inverted (swapped_contacts)",
                c.id
            )),
            (false, false) => v.push(format!(
                "command {} was dispatched at {dispatched} ms, but no read of the device its \
                 requires names, answered since {since} ms, showed it physically holding",
                c.id
            )),
        }
    }
}
