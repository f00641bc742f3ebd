//! `relay`: coil 0 is the commanded state; discrete input 0 the contact, which follows the coil
//! after `pull_in_ms` — the gap between "commanded" and "done" that closedloop exists to respect.

use super::SimState;
use crate::faults::Effects;
use crate::model::RelayOptions;
use closedloop_contract::{Area, Exception, Write};
use tokio::time::{Duration, Instant};

/// A relay whose armature moves `pull_in_ms` after its drive changes.
///
/// # Invariants
/// The contact is `from` before `switch_at` and `to` from then on; `to` is the drive (coil on
/// and no brownout) as of the last change, so rewriting the same coil value never restarts the
/// pull-in.
#[derive(Debug)]
pub(crate) struct Relay {
    opts: RelayOptions,
    /// The commanded coil state (what coil 0 reads back).
    coil: bool,
    /// A brownout is in force: the coil cannot hold the armature.
    brownout: bool,
    /// The contact before the last drive change.
    from: bool,
    /// The contact the armature is moving to.
    to: bool,
    /// When the contact reaches `to`.
    switch_at: Instant,
}

impl Relay {
    /// A de-energised relay with an open contact.
    pub fn new(opts: RelayOptions, now: Instant) -> Relay {
        Relay {
            opts,
            coil: false,
            brownout: false,
            from: false,
            to: false,
            switch_at: now,
        }
    }

    /// Whether the contact is physically closed at `t`.
    pub fn contact(&self, t: Instant) -> bool {
        if t >= self.switch_at {
            self.to
        } else {
            self.from
        }
    }

    /// Re-aims the armature at the current drive; `immediate` opens it at once (brownout).
    fn redrive(&mut self, now: Instant, immediate: bool) {
        let drive = self.coil && !self.brownout;
        if immediate {
            (self.from, self.to, self.switch_at) = (drive, drive, now);
        } else if drive != self.to {
            self.from = self.contact(now);
            self.to = drive;
            let pull_in = Duration::from_millis(self.opts.pull_in_ms);
            self.switch_at = now.checked_add(pull_in).unwrap_or(now);
        }
    }

    /// Commands the coil.
    pub fn set_coil(&mut self, now: Instant, on: bool) {
        self.coil = on;
        self.redrive(now, false);
    }

    /// A brownout opens the contact at once and keeps it open; when it ends, the contact
    /// follows the coil again after `pull_in_ms`.
    pub fn set_brownout(&mut self, now: Instant, on: bool) {
        if on != self.brownout {
            self.brownout = on;
            self.redrive(now, on);
        }
    }

    /// Coil 0; discrete input 0 when `feedback`, inverted by swapped contacts.
    pub fn bit(&self, now: Instant, area: Area, addr: u16, fx: &Effects) -> Option<bool> {
        match (area, addr) {
            (Area::Coil, 0) => Some(self.coil),
            (Area::DiscreteInput, 0) if self.opts.feedback => Some(self.contact(now) != fx.swapped),
            _ => None,
        }
    }

    /// Only coil 0 is writable.
    pub fn write(&mut self, now: Instant, write: &Write) -> Result<(), Exception> {
        match write {
            Write::Coils { start: 0, values } if values.len() == 1 => {
                self.set_coil(now, values[0]);
                Ok(())
            }
            _ => Err(Exception::ILLEGAL_DATA_ADDRESS),
        }
    }

    /// Coil and physical contact.
    pub fn peek(&self, now: Instant) -> SimState {
        SimState {
            model: "relay",
            coils: vec![self.coil],
            contact: Some(self.contact(now)),
            ..SimState::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relay(now: Instant) -> Relay {
        Relay::new(
            RelayOptions {
                feedback: true,
                pull_in_ms: 10,
            },
            now,
        )
    }

    #[test]
    fn rewriting_the_coil_does_not_restart_the_pull_in() {
        let t0 = Instant::now();
        let mut r = relay(t0);
        r.set_coil(t0, true);
        r.set_coil(t0 + Duration::from_millis(8), true);
        assert!(!r.contact(t0 + Duration::from_millis(9)));
        assert!(r.contact(t0 + Duration::from_millis(10)));
    }

    #[test]
    fn a_short_pulse_never_closes_the_contact() {
        let t0 = Instant::now();
        let mut r = relay(t0);
        r.set_coil(t0, true);
        r.set_coil(t0 + Duration::from_millis(5), false);
        assert!(!r.contact(t0 + Duration::from_millis(12)));
        assert!(!r.contact(t0 + Duration::from_millis(100)));
    }

    #[test]
    fn brownout_opens_at_once_and_recovery_takes_the_pull_in() {
        let t0 = Instant::now();
        let mut r = relay(t0);
        r.set_coil(t0, true);
        let t1 = t0 + Duration::from_millis(50);
        assert!(r.contact(t1));
        r.set_brownout(t1, true);
        assert!(!r.contact(t1));
        let t2 = t1 + Duration::from_millis(50);
        r.set_brownout(t2, false);
        assert!(!r.contact(t2 + Duration::from_millis(9)));
        assert!(r.contact(t2 + Duration::from_millis(10)));
    }
}
