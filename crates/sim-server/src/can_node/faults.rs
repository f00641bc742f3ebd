//! The faults of a simulated CAN node that its [`SimDevice`](closedloop_sim::SimDevice) cannot
//! carry for it, and the ones CAN refuses.
//!
//! A node reads its status from the device's registers every period, so the device must answer
//! those reads at once: `latency_ms` and `drop_rate` would delay or lose the node's own reads,
//! and with them the status frames. On CAN they belong to the command path instead (a node that
//! reacts late, a command frame lost), so the node keeps them here and applies them to command
//! frames; every other fault lives in the device, exactly as in-process.

use closedloop_sim::{Fault, FaultKind, FaultSpec, SimConfigError};
use tokio::time::{Duration, Instant};

/// Why a CAN node cannot suffer a fault of `kind`, or `None` when it can.
///
/// One function, so that the plant-file check and the control endpoint refuse the same kinds
/// with the same words.
pub(crate) fn refusal(kind: FaultKind) -> Option<&'static str> {
    match kind {
        FaultKind::Nak => Some(
            "a CAN node has no negative answer to a command frame: the bus acknowledges the \
             frame, never the node; use `drop_rate` for a node that misses commands or `zombie` \
             for one that goes silent",
        ),
        FaultKind::CrcError => Some(
            "the CAN controller checks every frame's CRC and drops a bad frame; over slcan the \
             checksum is never visible: use `drop_rate` for lost command frames",
        ),
        _ => None,
    }
}

/// Whether the node (not its device) carries faults of `kind`: see the module doc.
pub(crate) fn held_by_node(kind: FaultKind) -> bool {
    matches!(kind, FaultKind::LatencyMs | FaultKind::DropRate)
}

/// A validated single-fault table's error, with `faults[0]` renamed `fault` (the control
/// endpoint's prefix, as [`closedloop_sim::SimDevice::inject_config`] names it).
pub(crate) fn rekey(e: SimConfigError) -> SimConfigError {
    let fix = |key: String| match key.strip_prefix("faults[0]") {
        Some(rest) => format!("fault{rest}"),
        None => key,
    };
    match e {
        SimConfigError::OutOfRange {
            key,
            value,
            expected,
        } => SimConfigError::OutOfRange {
            key: fix(key),
            value,
            expected,
        },
        SimConfigError::Missing { key, what, fix: f } => SimConfigError::Missing {
            key: fix(key),
            what,
            fix: f,
        },
        SimConfigError::UnknownFaultKind { key, kind } => SimConfigError::UnknownFaultKind {
            key: fix(key),
            kind,
        },
        SimConfigError::FaultNotForModel {
            key,
            kind,
            model,
            why,
        } => SimConfigError::FaultNotForModel {
            key: fix(key),
            kind,
            model,
            why,
        },
        SimConfigError::FaultOptionNotAllowed { key, kind, allowed } => {
            SimConfigError::FaultOptionNotAllowed {
                key: fix(key),
                kind,
                allowed,
            }
        }
        SimConfigError::Conflict { key, other, fix: f } => SimConfigError::Conflict {
            key: fix(key),
            other: fix(other),
            fix: f,
        },
        other => other,
    }
}

/// When a node-held fault strikes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Has `after_ms`; waits for the node's first actuating write to start counting.
    Waiting,
    /// In force from this instant.
    From(Instant),
}

/// The node's `latency_ms` and `drop_rate`, with `after_ms` counted as the simulator counts it:
/// from the first actuating write, or from the injection once a write has happened.
///
/// # Invariants
/// At most one entry per kind, and only kinds [`held_by_node`] accepts.
#[derive(Debug)]
pub(crate) struct NodeFaults {
    entries: Vec<(FaultSpec, Phase)>,
    first_write: Option<Instant>,
    rng: SplitMix,
}

impl NodeFaults {
    /// No faults; `seed` makes the drop draws reproducible.
    pub(crate) fn new(seed: u64) -> NodeFaults {
        NodeFaults {
            entries: Vec::new(),
            first_write: None,
            rng: SplitMix(seed),
        }
    }

    /// Adds a fault the node holds, replacing any of its kind.
    pub(crate) fn inject(&mut self, spec: FaultSpec, now: Instant) {
        let kind = spec.fault.kind();
        if !held_by_node(kind) {
            return;
        }
        self.clear(kind);
        let phase = match (spec.after_ms, self.first_write) {
            (None, _) => Phase::From(now),
            (Some(ms), Some(_)) => after(now, ms),
            (Some(_), None) => Phase::Waiting,
        };
        self.entries.push((spec, phase));
    }

    /// Removes the fault of `kind`, if the node holds one.
    pub(crate) fn clear(&mut self, kind: FaultKind) {
        self.entries.retain(|(s, _)| s.fault.kind() != kind);
    }

    /// Records an actuating write; the first one starts every waiting fault's countdown.
    pub(crate) fn on_write(&mut self, now: Instant) {
        if self.first_write.is_some() {
            return;
        }
        self.first_write = Some(now);
        for (spec, phase) in &mut self.entries {
            if let (Phase::Waiting, Some(ms)) = (*phase, spec.after_ms) {
                *phase = after(now, ms);
            }
        }
    }

    /// The faults pending or in force, as given.
    pub(crate) fn specs(&self) -> Vec<FaultSpec> {
        self.entries.iter().map(|(s, _)| *s).collect()
    }

    fn in_force(&self, now: Instant) -> impl Iterator<Item = Fault> + '_ {
        self.entries.iter().filter_map(move |(s, p)| match p {
            Phase::From(t) if *t <= now => Some(s.fault),
            _ => None,
        })
    }

    /// How long a command frame arriving at `now` waits before it takes effect.
    pub(crate) fn latency(&self, now: Instant) -> Duration {
        self.in_force(now)
            .find_map(|f| match f {
                Fault::LatencyMs { ms } => Some(Duration::from_millis(ms)),
                _ => None,
            })
            .unwrap_or(Duration::ZERO)
    }

    /// Whether a command frame arriving at `now` is lost (one draw when `drop_rate` is in
    /// force, none otherwise, so the sequence of draws is reproducible from the seed).
    pub(crate) fn lose(&mut self, now: Instant) -> bool {
        let p = self.in_force(now).find_map(|f| match f {
            Fault::DropRate { p } => Some(p),
            _ => None,
        });
        match p {
            Some(p) if p > 0.0 => self.rng.next_f64() < p,
            _ => false,
        }
    }
}

/// `From(now + ms)`, or `Waiting` forever when that instant cannot be represented.
fn after(now: Instant, ms: u64) -> Phase {
    now.checked_add(Duration::from_millis(ms))
        .map_or(Phase::Waiting, Phase::From)
}

/// Steele, Lea and Flood's SplitMix64: small, seedable, plenty for deciding lost frames.
#[derive(Debug)]
struct SplitMix(u64);

impl SplitMix {
    /// Uniform in `[0, 1)`.
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn delayed_faults_count_from_the_first_write() {
        let mut f = NodeFaults::new(1);
        let t0 = Instant::now();
        f.inject(FaultSpec::after(Fault::LatencyMs { ms: 200 }, 50), t0);
        assert_eq!(f.latency(t0 + Duration::from_secs(5)), Duration::ZERO);
        let tw = t0 + Duration::from_millis(10);
        f.on_write(tw);
        f.on_write(tw + Duration::from_millis(30)); // only the first counts
        assert_eq!(f.latency(tw + Duration::from_millis(49)), Duration::ZERO);
        assert_eq!(
            f.latency(tw + Duration::from_millis(50)),
            Duration::from_millis(200)
        );
        // After a write, a new delayed fault counts from its injection.
        let ti = tw + Duration::from_millis(100);
        f.inject(FaultSpec::after(Fault::DropRate { p: 1.0 }, 20), ti);
        assert!(!f.lose(ti + Duration::from_millis(19)));
        assert!(f.lose(ti + Duration::from_millis(20)));
        f.clear(FaultKind::DropRate);
        assert!(!f.lose(ti + Duration::from_secs(1)));
        assert_eq!(f.specs().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn drop_rate_draws_are_reproducible_and_bounded_by_p() {
        let now = Instant::now();
        let draws = |seed| {
            let mut f = NodeFaults::new(seed);
            f.inject(FaultSpec::now(Fault::DropRate { p: 0.5 }), now);
            (0..1000).map(|_| f.lose(now)).collect::<Vec<bool>>()
        };
        let a = draws(7);
        assert_eq!(a, draws(7));
        let lost = a.iter().filter(|l| **l).count();
        assert!((400..600).contains(&lost), "{lost}");
        let mut never = NodeFaults::new(7);
        never.inject(FaultSpec::now(Fault::DropRate { p: 0.0 }), now);
        assert!((0..100).all(|_| !never.lose(now)));
    }

    #[test]
    fn only_latency_and_drop_rate_are_held_and_only_nak_and_crc_refused() {
        for kind in FaultKind::ALL {
            let held = matches!(kind, FaultKind::LatencyMs | FaultKind::DropRate);
            assert_eq!(held_by_node(kind), held, "{kind}");
            let refused = matches!(kind, FaultKind::Nak | FaultKind::CrcError);
            assert_eq!(refusal(kind).is_some(), refused, "{kind}");
        }
    }

    #[test]
    fn rekey_names_the_control_prefix() {
        let e = rekey(SimConfigError::Missing {
            key: "faults[0].ms".into(),
            what: "w".into(),
            fix: "f".into(),
        });
        assert_eq!(e.key(), "fault.ms");
    }
}
