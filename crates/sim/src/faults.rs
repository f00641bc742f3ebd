//! The faults a simulated device can suffer (docs/simulator.md), and when each one strikes.
//!
//! Faults exist so that every way real hardware lies or goes quiet can be reproduced in a test:
//! a stalled axis, a relay whose contact never closes, a unit that stops answering. A fault is
//! either static (in force from construction or injection) or carries `after_ms`, counted from
//! the device's first actuating write, so that it strikes in the middle of a command.

use crate::config::FaultConfig;
use std::fmt;
use std::str::FromStr;
use thiserror::Error;
use tokio::time::{Duration, Instant};

/// What goes wrong, with the options of its kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Stepper only: the axis stops and its fault input goes active — at `at_mm` when its path
    /// reaches that point (an obstruction), or where it stands when the fault strikes.
    Stall {
        /// The obstruction's position; `None` stops the axis wherever it is.
        at_mm: Option<f64>,
    },
    /// Relay only: the under-powered coil cannot pull in; the contact stays open.
    Brownout,
    /// Relay only: the contact is wired the wrong way round and reads inverted.
    SwappedContacts,
    /// No answers at all, and every output de-energises (coils off, motion stops).
    PowerOff,
    /// No answers, but the device keeps running: the frozen firmware whose stack still accepts.
    Zombie,
    /// Every request is answered with exception 4 and nothing is applied.
    Nak,
    /// Silent for `down_ms`, then back with outputs off, fault cleared and the command forgotten.
    Reboot {
        /// How long the device stays silent.
        down_ms: u64,
    },
    /// Every answer is delayed; the request still takes effect when it arrives.
    LatencyMs {
        /// The added delay.
        ms: u64,
    },
    /// Each request is lost (not applied, never answered) with probability `p`.
    DropRate {
        /// Probability in `0..=1`.
        p: f64,
    },
    /// The request takes effect but its answer fails its checksum.
    CrcError,
}

impl Fault {
    /// The kind of this fault, as used by [`crate::SimDevice::clear`].
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::Stall { .. } => FaultKind::Stall,
            Fault::Brownout => FaultKind::Brownout,
            Fault::SwappedContacts => FaultKind::SwappedContacts,
            Fault::PowerOff => FaultKind::PowerOff,
            Fault::Zombie => FaultKind::Zombie,
            Fault::Nak => FaultKind::Nak,
            Fault::Reboot { .. } => FaultKind::Reboot,
            Fault::LatencyMs { .. } => FaultKind::LatencyMs,
            Fault::DropRate { .. } => FaultKind::DropRate,
            Fault::CrcError => FaultKind::CrcError,
        }
    }
}

/// A fault and when it strikes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultSpec {
    /// What goes wrong.
    pub fault: Fault,
    /// `None`: in force at once. `Some(ms)`: strikes `ms` after the device's first actuating
    /// write (or after the injection, when a write already happened).
    pub after_ms: Option<u64>,
}

impl FaultSpec {
    /// A fault in force at once.
    pub fn now(fault: Fault) -> FaultSpec {
        FaultSpec {
            fault,
            after_ms: None,
        }
    }

    /// A fault that strikes `ms` after the first actuating write (or the injection).
    pub fn after(fault: Fault, ms: u64) -> FaultSpec {
        FaultSpec {
            fault,
            after_ms: Some(ms),
        }
    }

    /// The plant-file form of this fault, so injected faults pass the same checks as written ones.
    pub fn to_config(&self) -> FaultConfig {
        let mut cfg = FaultConfig {
            kind: self.fault.kind().to_string(),
            after_ms: self.after_ms,
            ..FaultConfig::default()
        };
        match self.fault {
            Fault::Stall { at_mm } => cfg.at_mm = at_mm,
            Fault::Reboot { down_ms } => cfg.down_ms = Some(down_ms),
            Fault::LatencyMs { ms } => cfg.ms = Some(ms),
            Fault::DropRate { p } => cfg.p = Some(p),
            _ => {}
        }
        cfg
    }
}

/// The kind of a fault without its options: what [`crate::SimDevice::clear`] takes, spelled as
/// in the plant file (`swapped_contacts`) by `Display` and `FromStr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// `stall`
    Stall,
    /// `brownout`
    Brownout,
    /// `swapped_contacts`
    SwappedContacts,
    /// `power_off`
    PowerOff,
    /// `zombie`
    Zombie,
    /// `nak`
    Nak,
    /// `reboot`
    Reboot,
    /// `latency_ms`
    LatencyMs,
    /// `drop_rate`
    DropRate,
    /// `crc_error`
    CrcError,
}

impl FaultKind {
    /// Every kind, in the order docs/simulator.md lists them.
    pub const ALL: [FaultKind; 10] = [
        FaultKind::Stall,
        FaultKind::Brownout,
        FaultKind::SwappedContacts,
        FaultKind::PowerOff,
        FaultKind::Zombie,
        FaultKind::Nak,
        FaultKind::Reboot,
        FaultKind::LatencyMs,
        FaultKind::DropRate,
        FaultKind::CrcError,
    ];

    /// The plant-file spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Stall => "stall",
            FaultKind::Brownout => "brownout",
            FaultKind::SwappedContacts => "swapped_contacts",
            FaultKind::PowerOff => "power_off",
            FaultKind::Zombie => "zombie",
            FaultKind::Nak => "nak",
            FaultKind::Reboot => "reboot",
            FaultKind::LatencyMs => "latency_ms",
            FaultKind::DropRate => "drop_rate",
            FaultKind::CrcError => "crc_error",
        }
    }

    /// The options this kind takes besides `after_ms` (the required ones are required).
    pub fn options(self) -> &'static [&'static str] {
        match self {
            FaultKind::Stall => &["at_mm"],
            FaultKind::Reboot => &["down_ms"],
            FaultKind::LatencyMs => &["ms"],
            FaultKind::DropRate => &["p"],
            _ => &[],
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A fault kind name that docs/simulator.md does not list.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "unknown fault kind `{0}`: use one of stall, brownout, swapped_contacts, power_off, zombie, \
     nak, reboot, latency_ms, drop_rate, crc_error"
)]
pub struct UnknownFaultKind(pub String);

impl FromStr for FaultKind {
    type Err = UnknownFaultKind;

    fn from_str(s: &str) -> Result<FaultKind, UnknownFaultKind> {
        FaultKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownFaultKind(s.to_string()))
    }
}

/// Where one fault stands in its life.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Phase {
    /// Has `after_ms` and waits for the device's first actuating write to start counting.
    Waiting,
    /// Strikes at this instant (processed lazily, at the next request or peek).
    Due(Instant),
    /// Struck at this instant and in force.
    Struck(Instant),
}

/// The combined effect of the faults in force, as the request path and the models need it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Effects {
    /// power_off, zombie or a reboot still down: nothing answers.
    pub silent: bool,
    /// Answer every request with exception 4.
    pub nak: bool,
    /// Answer with a checksum failure after applying.
    pub crc: bool,
    /// Delay before each answer.
    pub latency_ms: u64,
    /// Probability of losing a request.
    pub drop_p: f64,
    /// The relay contact cannot close.
    pub brownout: bool,
    /// The relay contact reads inverted.
    pub swapped: bool,
    /// Positions where a stepper's path is obstructed.
    pub obstacles: Vec<f64>,
}

/// What happens next in a [`Schedule`], found by [`Schedule::next_due`] and
/// [`Schedule::next_event`]; the index is that of the fault in the schedule, for
/// [`Schedule::strike`] and [`Schedule::remove`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Due {
    /// The fault at this index strikes.
    Strike(usize),
    /// The reboot at this index is over: the device comes back.
    Recover(usize),
}

/// The faults of one device and the instant of its first actuating write: when each fault
/// strikes (`after_ms`) and when a `reboot` is over (`down_ms`).
///
/// Public so that a simulated device living outside this crate (the `mqtt-relay` of
/// `closedloop-mqtt`, an MQTT client rather than a register map) counts `after_ms` from the same
/// moments as [`crate::SimDevice`] does, by the same code, instead of keeping a copy that could
/// drift. The schedule only keeps time; what a fault does when it strikes, recovers or is cleared
/// is the device's business: it asks [`Schedule::next_due`], then calls [`Schedule::strike`] or
/// [`Schedule::remove`], and reads the faults in force from [`Schedule::struck`].
///
/// # Invariants
/// At most one fault per [`FaultKind`] (injecting a kind again replaces it); a fault is
/// `Waiting` only while no actuating write has happened (or its strike instant overflowed).
#[derive(Debug, Default)]
pub struct Schedule {
    entries: Vec<(FaultSpec, Phase)>,
    first_write: Option<Instant>,
}

impl Schedule {
    /// Adds a fault; a static one is due at once, a delayed one counts from `now` when a write
    /// already happened, else from the first write. The caller has removed any fault of its kind.
    pub fn push(&mut self, spec: FaultSpec, now: Instant) {
        let phase = match (spec.after_ms, self.first_write) {
            (None, _) => Phase::Due(now),
            (Some(ms), Some(_)) => due_after(now, ms),
            (Some(_), None) => Phase::Waiting,
        };
        self.entries.push((spec, phase));
    }

    /// Records an actuating write; the first one starts every waiting fault's countdown.
    pub fn on_write(&mut self, now: Instant) {
        if self.first_write.is_some() {
            return;
        }
        self.first_write = Some(now);
        for (spec, phase) in &mut self.entries {
            if let (Phase::Waiting, Some(ms)) = (*phase, spec.after_ms) {
                *phase = due_after(now, ms);
            }
        }
    }

    /// The earliest event at or before `now`, with its instant: what a device must let happen
    /// (in order, each at its own instant) before it handles anything at `now`.
    pub fn next_due(&self, now: Instant) -> Option<(Instant, Due)> {
        self.next_event().filter(|(t, _)| *t <= now)
    }

    /// The earliest event still to come, due or not, with its instant (ties go to the lower
    /// index); `None` while nothing is scheduled (a fault waiting for the first write has no
    /// instant yet).
    ///
    /// [`crate::SimDevice`] reads time only when asked and needs only [`Schedule::next_due`]; a
    /// device that acts by itself (the `mqtt-relay` drops its connection when `power_off`
    /// strikes) uses this to know when to wake up.
    pub fn next_event(&self) -> Option<(Instant, Due)> {
        let mut best: Option<(Instant, Due)> = None;
        for (i, (spec, phase)) in self.entries.iter().enumerate() {
            let event = match (*phase, spec.fault) {
                (Phase::Due(t), _) => Some((t, Due::Strike(i))),
                (Phase::Struck(t), Fault::Reboot { down_ms }) => t
                    .checked_add(Duration::from_millis(down_ms))
                    .map(|back| (back, Due::Recover(i))),
                _ => None,
            };
            if let Some((t, due)) = event
                && best.is_none_or(|(b, _)| t < b)
            {
                best = Some((t, due));
            }
        }
        best
    }

    /// Marks the fault at `index` as struck at `t` and returns it.
    pub fn strike(&mut self, index: usize, t: Instant) -> Option<Fault> {
        let (spec, phase) = self.entries.get_mut(index)?;
        *phase = Phase::Struck(t);
        Some(spec.fault)
    }

    /// Removes the fault at `index` (spent).
    pub fn remove(&mut self, index: usize) {
        if index < self.entries.len() {
            self.entries.remove(index);
        }
    }

    /// Removes the fault of `kind`, returning it and whether it had struck.
    pub fn take(&mut self, kind: FaultKind) -> Option<(Fault, bool)> {
        let index = self
            .entries
            .iter()
            .position(|(s, _)| s.fault.kind() == kind)?;
        let (spec, phase) = self.entries.remove(index);
        Some((spec.fault, matches!(phase, Phase::Struck(_))))
    }

    /// The faults not yet spent, as given.
    pub fn specs(&self) -> Vec<FaultSpec> {
        self.entries.iter().map(|(s, _)| *s).collect()
    }

    /// The faults that have struck and are in force, in the order they were added.
    pub fn struck(&self) -> impl Iterator<Item = Fault> + '_ {
        self.entries
            .iter()
            .filter(|(_, phase)| matches!(phase, Phase::Struck(_)))
            .map(|(spec, _)| spec.fault)
    }

    /// The combined effect of the faults that have struck, as this crate's models apply it.
    pub(crate) fn effects(&self) -> Effects {
        let mut fx = Effects::default();
        for fault in self.struck() {
            match fault {
                Fault::Stall { at_mm: Some(at) } => fx.obstacles.push(at),
                Fault::Stall { at_mm: None } => {}
                Fault::Brownout => fx.brownout = true,
                Fault::SwappedContacts => fx.swapped = true,
                Fault::PowerOff | Fault::Zombie | Fault::Reboot { .. } => fx.silent = true,
                Fault::Nak => fx.nak = true,
                Fault::LatencyMs { ms } => fx.latency_ms = ms,
                Fault::DropRate { p } => fx.drop_p = p,
                Fault::CrcError => fx.crc = true,
            }
        }
        fx
    }
}

/// `Due(now + ms)`, or `Waiting` forever when the instant cannot be represented.
fn due_after(now: Instant, ms: u64) -> Phase {
    now.checked_add(Duration::from_millis(ms))
        .map_or(Phase::Waiting, Phase::Due)
}

#[cfg(test)]
mod tests;
