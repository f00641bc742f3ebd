//! Which devices this gateway may write to, when several gateways share one PostgreSQL journal.
//!
//! Each device has one lease in the journal (`closedloop_journal::Leases`): an owner, an epoch and
//! an expiry on the database's clock. A keeper task ([`keep`]) beats this instance's heartbeat,
//! renews the leases it holds every third of `lease_s`, and spreads the devices over the live
//! instances that may reach them (rendezvous hashing: each device goes to the eligible live
//! instance with the highest hash of the pair, so a change of instances moves only the devices
//! it must), claiming the ones that fall to it and handing over, between commands only, the ones
//! that fall elsewhere.
//!
//! # Invariants
//! - A lease counts here only until `valid_until`: the moment the renewal was *sent* plus the
//!   lease, less a margin. The database's expiry is later than that (it counts from when it
//!   received the renewal), so this instance stops writing before anyone else can take over,
//!   whatever its own clock or a pause says.
//! - Every journal write about a command on a leased device is fenced (`Journal::update_fenced`):
//!   an instance that lost the lease, paused or cut off, can neither journal a dispatch nor
//!   anything else about that device's commands, and drops them; the new owner recovers them.
//! - On a SQLite journal there are no leases: this gateway owns every device.

use closedloop_journal::{Fence, Leases};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// A lease this instance holds.
#[derive(Debug, Clone, Copy)]
struct Held {
    epoch: i64,
    valid_until: Instant,
}

/// This instance's view of the device leases.
pub struct Ownership {
    instance: String,
    pub(crate) lease: Duration,
    leases: Option<Leases>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    held: HashMap<String, Held>,
    /// Devices taken whose earlier commands are not recovered yet: they take no new command
    /// until then (a stop the dead owner's move needs must not queue behind a new one).
    unrecovered: HashSet<String>,
    /// Every device's owner and epoch as last read (refreshed each keeper round).
    owners: HashMap<String, (String, i64)>,
    /// The live instance each device falls to, as the last keeper round computed it: where a
    /// call goes while the device's lease is between owners.
    desired: HashMap<String, String>,
}

/// Why a device cannot be written from here now.
#[derive(Debug, Clone, PartialEq)]
pub struct NotOwner {
    /// The instance that holds the lease, when one does.
    pub owner: Option<String>,
    /// The epoch this instance held it under, when it held it (and its time ran out).
    pub lapsed_epoch: Option<i64>,
}

impl Ownership {
    /// Ownership for `instance` with leases of `lease`; `leases` is `None` on a journal one
    /// gateway owns whole (SQLite), where every device is this gateway's.
    pub fn new(instance: String, lease: Duration, leases: Option<Leases>) -> Ownership {
        Ownership {
            instance,
            lease,
            leases,
            state: Mutex::new(State::default()),
        }
    }

    /// This instance's name.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// Whether several gateways may share the journal (leases are in use).
    pub fn shared(&self) -> bool {
        self.leases.is_some()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The fence a write about `device` goes under now: `Ok(None)` when there are no leases,
    /// `Ok(Some)` while this instance's lease holds, `Err` naming the owner otherwise.
    pub fn fence(&self, device: &str) -> Result<Option<Fence>, NotOwner> {
        if self.leases.is_none() {
            return Ok(None);
        }
        let s = self.state();
        match s.held.get(device) {
            Some(h) if Instant::now() < h.valid_until => Ok(Some(Fence {
                device: device.to_string(),
                owner: self.instance.clone(),
                epoch: h.epoch,
            })),
            held => Err(NotOwner {
                lapsed_epoch: held.map(|h| h.epoch),
                owner: s
                    .owners
                    .get(device)
                    .map(|(o, _)| o.clone())
                    .filter(|o| *o != self.instance),
            }),
        }
    }

    /// [`Ownership::fence`] for a command started under `epoch`: refused as well when the lease
    /// held now is a later one (this gateway lost the device and took it back: meanwhile
    /// another may have recovered the command, and the journal is that one's now).
    pub fn fence_at(&self, device: &str, epoch: Option<i64>) -> Result<Option<Fence>, NotOwner> {
        match (self.fence(device)?, epoch) {
            (Some(f), Some(e)) if f.epoch != e => Err(NotOwner {
                owner: Some(self.instance.clone()),
                lapsed_epoch: Some(e),
            }),
            (fence, _) => Ok(fence),
        }
    }

    /// How many device leases this instance holds now (`closedloop_leases_held`).
    pub fn held_count(&self) -> usize {
        let s = self.state();
        let now = Instant::now();
        s.held.values().filter(|h| now < h.valid_until).count()
    }

    /// Whether `device` was just taken and its earlier commands are still to be recovered.
    pub fn recovering(&self, device: &str) -> bool {
        self.state().unrecovered.contains(device)
    }

    /// The devices taken whose recovery is still to do (or failed and is to be tried again).
    pub(crate) fn to_recover(&self) -> Vec<String> {
        let s = self.state();
        let mut v: Vec<String> = s
            .unrecovered
            .iter()
            .filter(|d| s.held.contains_key(*d))
            .cloned()
            .collect();
        v.sort();
        v
    }

    /// `device`'s earlier commands are recovered: it takes new commands.
    pub(crate) fn recovered(&self, device: &str) {
        self.state().unrecovered.remove(device);
    }

    /// The live instance `device` falls to (it holds the lease, or claims it within a keeper
    /// round), as the last round computed it; `None` without leases or live eligible instances.
    pub fn desired(&self, device: &str) -> Option<String> {
        self.state().desired.get(device).cloned()
    }

    /// The owner and epoch of `device`'s lease as last read, when leases are in use.
    pub fn owner_of(&self, device: &str) -> Option<(String, i64)> {
        self.leases.as_ref()?;
        let s = self.state();
        if let Some(h) = s.held.get(device) {
            return Some((self.instance.clone(), h.epoch));
        }
        s.owners.get(device).cloned()
    }

    fn valid_until(&self, sent: Instant) -> Instant {
        // A margin for the time between the check and the write it allows.
        let margin = (self.lease / 5).max(Duration::from_millis(100));
        sent + self.lease.saturating_sub(margin)
    }
}

/// The device's owner among `candidates` (the live instances that may reach it): the one with
/// the highest hash of (device, instance). Stable while the candidates stay, and a change of
/// candidates moves only the devices whose winner came or went.
pub fn rendezvous<'a>(device: &str, candidates: &'a [String]) -> Option<&'a String> {
    candidates.iter().max_by_key(|i| (fnv1a(device, i), *i))
}

/// FNV-1a over `a`, a separator and `b`, then SplitMix64's finaliser (FNV alone leaves names
/// that differ in their last bytes too alike to spread fairly): a fixed hash every instance
/// computes alike.
fn fnv1a(a: &str, b: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in a.bytes().chain([0xff]).chain(b.bytes()) {
        h ^= u64::from(byte);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// This machine's host name, the default instance name (`/proc/sys/kernel/hostname`; `gateway`
/// where there is none).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "gateway".to_string())
}

pub(crate) mod adopt;
pub(crate) mod dead_man;
pub(crate) mod handover;
pub(crate) mod keeper;
pub(crate) mod rounds;
pub(crate) mod values;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendezvous_moves_only_the_devices_of_an_instance_that_left() {
        let three: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let two: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        let devices: Vec<String> = (0..300).map(|i| format!("relay_{i}")).collect();
        let mut per = HashMap::new();
        for d in &devices {
            let before = rendezvous(d, &three).unwrap();
            *per.entry(before.clone()).or_insert(0) += 1;
            let after = rendezvous(d, &two).unwrap();
            if before != "c" {
                assert_eq!(before, after, "{d} moved though its owner stayed");
            }
        }
        // Spread: each of three instances gets a fair share of 300 devices.
        for (i, n) in &per {
            assert!((70..=130).contains(n), "{i} got {n} of 300: {per:?}");
        }
        assert_eq!(rendezvous("x", &[]), None);
    }

    #[test]
    fn without_leases_every_device_is_this_gateways() {
        let o = Ownership::new("gw".into(), Duration::from_secs(5), None);
        assert_eq!(o.fence("lamp"), Ok(None));
        assert_eq!(o.owner_of("lamp"), None);
        assert!(!o.shared());
    }
}
