//! The checks across commands: every write the devices received belongs to a running command
//! or a cancel plan, and no two commands of one exclusive group run at once.

use super::Cmd;
use crate::rig::{ObsKind, Outcome};
use crate::spec::*;
use std::collections::BTreeMap;

/// Every write the devices received belongs to a command that was dispatched and not yet
/// terminal, or is the cancel plan of a command dispatched before it.
pub(super) fn check_writes(case: &Case, out: &Outcome, cmds: &[Cmd], v: &mut Vec<String>) {
    for o in &out.obs {
        let ObsKind::Write { what } = &o.kind else {
            continue;
        };
        let t = o.t_ms();
        let mine = cmds.iter().filter(|c| c.dev == o.dev);
        let mut covered = false;
        for c in mine {
            let Some((td, _)) = c.dispatched else {
                continue;
            };
            if t < td {
                continue;
            }
            let before_end = c.terminal.is_none_or(|(te, _)| t <= te);
            if before_end && c.writes.contains(what) {
                covered = true;
            }
            if case.devices[c.dev].cancel_writes().contains(what) {
                covered = true;
            }
        }
        if !covered {
            v.push(format!(
                "{}: {what} written at {t} ms (epoch {}) by no running command and no cancel plan",
                device_id(&case.devices, o.dev),
                o.epoch
            ));
        }
    }
}

/// No two commands of one exclusive group between dispatch and terminal at the same time.
pub(super) fn check_groups(case: &Case, cmds: &[Cmd], v: &mut Vec<String>) {
    let mut by_group: BTreeMap<String, Vec<(i64, i64, &str)>> = BTreeMap::new();
    for c in cmds {
        let (Some((a, _)), Some((b, _))) = (c.dispatched, c.terminal) else {
            continue;
        };
        let id = device_id(&case.devices, c.dev);
        by_group
            .entry(case.devices[c.dev].group_name(&id))
            .or_default()
            .push((a, b, c.id));
    }
    for (g, mut spans) in by_group {
        spans.sort();
        for w in spans.windows(2) {
            if w[1].0 < w[0].1 {
                v.push(format!(
                    "group {g}: {} ran {}..{} ms while {} ran {}..{} ms",
                    w[1].2, w[1].0, w[1].1, w[0].2, w[0].0, w[0].1
                ));
            }
        }
    }
}
