//! Live values from the owner: on a journal several gateways share, each gateway publishes what
//! it reads of the devices it drives, and shows the owner's values for a device it cannot read
//! itself (a serial line, `gateways = [...]`, a network it does not reach) instead of nothing.
//!
//! Every half second ([`ROUND`]) a gateway writes the devices it holds whose liveness, values
//! or unreadable signals changed since it last wrote them (with its lease epoch), and stamps its
//! round, changed rows or none (`closedloop_journal::DeviceValues`). In the same round it reads
//! the owners' values of the devices that do not read online here and that another gateway
//! holds. `get_device_state` and `list_devices` then show those, naming the gateway that read
//! them (`read_by`), each value's age bounded from below by when the owner last confirmed it
//! current plus the device's poll period: a value shown is never younger than it is.
//!
//! A device this gateway reads online is always shown from its own reads.

use crate::api::{DeviceState, SignalState};
use crate::device::Liveness;
use crate::engine::Engine;
use closedloop_journal::Published;
use closedloop_link::clock::rfc3339;
use closedloop_plant::Device;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::Duration;

/// How often a gateway publishes its devices' changes and reads the owners' values.
pub(crate) const ROUND: Duration = Duration::from_millis(500);

/// This gateway's side of the published values.
#[derive(Debug, Default)]
pub(crate) struct OwnersValues {
    /// What this gateway last published, by device: the epoch and a fingerprint of the state.
    published: Mutex<HashMap<String, (i64, u64)>>,
    /// The owners' values of the devices this gateway cannot read, as of the last round.
    seen: Mutex<HashMap<String, Published>>,
}

/// A device's state as published: what a reader shows, without the read times, which change
/// on every poll (a row is written only when this changes).
fn published_state(snap: &crate::device::Snapshot) -> Value {
    let values: serde_json::Map<String, Value> = snap
        .values
        .iter()
        .map(|(name, v)| {
            let value = crate::plan::value_json(v.value);
            (name.clone(), json!({"value": value, "source": v.source}))
        })
        .collect();
    let unreadable: Vec<&String> = snap.unreadable.keys().collect();
    json!({"liveness": snap.liveness.as_str(), "values": values, "unreadable": unreadable})
}

fn fingerprint(state: &Value) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    state.to_string().hash(&mut h);
    h.finish()
}

impl OwnersValues {
    /// The owner's values of `device`, if this gateway read them in its last round.
    pub(crate) fn of(&self, device: &str) -> Option<Published> {
        lock(&self.seen).get(device).cloned()
    }

    /// The liveness `list_devices` shows: this gateway's own, unless it does not read the
    /// device online and the owner's published one is at hand.
    pub(crate) fn liveness(&self, device: &str, own: Liveness) -> Liveness {
        match (own, lock(&self.seen).get(device)) {
            (Liveness::Online, _) | (_, None) => own,
            (_, Some(p)) => liveness_of(p),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn liveness_of(p: &Published) -> Liveness {
    match p.state["liveness"].as_str() {
        Some("online") => Liveness::Online,
        Some("offline") => Liveness::Offline,
        _ => Liveness::Unknown,
    }
}

/// `state`, built from this gateway's reads of `dev`, with the owner's published values in
/// their place when this gateway does not read the device online and has them.
pub(crate) fn overlay(
    ctx: &crate::context::Context,
    dev: &crate::device::DeviceRuntime,
    state: &mut DeviceState,
    now_ms: i64,
) {
    if state.liveness == Liveness::Online {
        return;
    }
    if let Some(owner) = ctx.owners_values.of(&state.device) {
        from_owner(state, &owner, &dev.spec, now_ms);
    }
}

impl Engine {
    /// Starts the rounds of publishing and reading when several gateways share the journal.
    pub(crate) fn share_values(self: &std::sync::Arc<Self>) {
        let Some(table) = self.ctx.journal.device_values() else {
            return;
        };
        self.spawn_rounds(ROUND, move |engine| {
            let table = table.clone();
            async move {
                if let Err(e) = engine.values_round(&table).await {
                    tracing::debug!(error = %e, "device values not shared this round");
                }
            }
        });
    }

    /// One round: this gateway's changes published, the owners' values of the devices it
    /// cannot read fetched.
    async fn values_round(
        &self,
        table: &closedloop_journal::DeviceValues,
    ) -> Result<(), closedloop_journal::JournalError> {
        let here = self.ctx.ownership.instance();
        let mut changed = Vec::new();
        let mut wanted = Vec::new();
        {
            let published = lock(&self.ctx.owners_values.published);
            for (id, dev) in &self.ctx.devices {
                match self.ctx.ownership.owner_of(id) {
                    Some((owner, epoch)) if owner == here => {
                        let state = published_state(&dev.current());
                        let print = (epoch, fingerprint(&state));
                        if published.get(id) != Some(&print) {
                            changed.push((id.clone(), epoch, state));
                        }
                    }
                    Some(_) if dev.liveness() != Liveness::Online => wanted.push(id.clone()),
                    _ => {}
                }
            }
        }
        table.publish(here, &changed).await?;
        {
            let mut published = lock(&self.ctx.owners_values.published);
            for (id, epoch, state) in &changed {
                published.insert(id.clone(), (*epoch, fingerprint(state)));
            }
        }
        let seen = match wanted.is_empty() {
            true => HashMap::new(),
            false => table
                .read(&wanted)
                .await?
                .into_iter()
                .map(|p| (p.device.clone(), p))
                .collect(),
        };
        *lock(&self.ctx.owners_values.seen) = seen;
        Ok(())
    }
}

/// `state` (this gateway's, of a device it does not read online) with the owner's published
/// values in place of its own: liveness, signals and `read_by`; each value's time is when
/// the owner last confirmed it current, less the device's poll period.
fn from_owner(state: &mut DeviceState, owner: &Published, spec: &Device, now_ms: i64) {
    let age_ms = owner.confirmed_ms_ago + i64::try_from(spec.poll_ms).unwrap_or(i64::MAX);
    let at = rfc3339(now_ms - age_ms);
    state.liveness = liveness_of(owner);
    state.signals = owner.state["values"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, v)| {
            let signal = SignalState {
                value: v["value"].clone(),
                unit: spec.signal(name).and_then(|s| s.unit.clone()),
                at: at.clone(),
                age_ms,
                source: v["source"].as_str().unwrap_or_default().to_string(),
            };
            (name.clone(), signal)
        })
        .collect();
    state.read_by = Some(owner.owner.clone());
    state.detail = Some(format!(
        "{} cannot be read from this gateway; these are the reads of gateway {}, which drives \
         it, confirmed current {} ms ago.",
        state.device, owner.owner, age_ms
    ));
}
