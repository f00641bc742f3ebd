//! What the engine shows of its devices: a page of them (`list_devices`), one device's state
//! (`get_device_state`, with the owner's values when this gateway cannot read it:
//! `ownership/values.rs`), their health for `/metrics`, and a watch on one.

use crate::api::{DeviceInfo, DeviceState, SignalState, UnreadableSignal};
use crate::clock::rfc3339;
use crate::device::Liveness;
use crate::engine::Engine;

impl Engine {
    /// Up to `limit` devices from the `from`-th on (plant order), with their liveness: a page
    /// of a hall's thousands costs what the page holds, not what the plant holds.
    pub fn devices(&self, from: usize, limit: usize) -> Vec<DeviceInfo> {
        self.ctx
            .plant
            .devices
            .iter()
            .skip(from)
            .take(limit)
            .map(|d| {
                let (owner, epoch) = self.ctx.ownership.owner_of(&d.id).unzip();
                let dev = &self.ctx.devices[&d.id];
                let own = dev.liveness();
                let unreadable = dev
                    .with_snapshot(|s| s.unreadable().map(|(name, _)| name.to_string()).collect());
                DeviceInfo {
                    device: d.id.clone(),
                    description: d.description.clone(),
                    liveness: (self.ctx.owners_values).liveness(
                        &d.id,
                        own,
                        crate::ownership::values::window_ms(d),
                    ),
                    unreadable: self.ctx.owners_values.unreadable(&d.id, own, unreadable),
                    actions: d.actions.iter().map(|a| a.name.clone()).collect(),
                    signals: d.signals.iter().map(|s| s.name.clone()).collect(),
                    owner,
                    epoch,
                }
            })
            .collect()
    }

    /// Every device's liveness, how long ago it last answered and how long its last poll took,
    /// in plant order: what `/metrics` reports at each scrape — from the same state
    /// `get_device_state` shows (the owner's published one where this gateway cannot read the
    /// device), so the two never disagree.
    pub fn health(&self) -> Vec<crate::DeviceHealth<'_>> {
        let devices = &self.ctx.plant.devices;
        devices
            .iter()
            .map(|d| {
                let device = &self.ctx.devices[&d.id];
                let now = self.ctx.clock.now_ms();
                let snap = device.current();
                let owners =
                    snap.liveness != Liveness::Online && self.ctx.owners_values.of(&d.id).is_some();
                let (liveness, last_seen_ms, unreadable) = match owners {
                    // Read here: this gateway's own (cheap: no state built).
                    false => (snap.liveness, snap.last_seen_ms, snap.unreadable().count()),
                    // The owner's published state, exactly as get_device_state shows it.
                    true => match self.device_state(&d.id) {
                        Some(s) => (s.liveness, s.last_seen_ms, s.unreadable.len()),
                        None => (Liveness::Unknown, None, 0),
                    },
                };
                crate::DeviceHealth {
                    device: d.id.as_str(),
                    liveness,
                    age_ms: last_seen_ms.map(|t| (now - t).max(0)),
                    last_poll: device.link().last_poll(),
                    polls_missed: device.link().polls_missed(),
                    unreadable,
                }
            })
            .collect()
    }

    /// The cached signals of a device with their ages and sources.
    pub fn device_state(&self, device: &str) -> Option<DeviceState> {
        let dev = self.ctx.devices.get(device)?;
        let snap = dev.current();
        let now = self.ctx.clock.now_ms();
        let (owner, epoch) = self.ctx.ownership.owner_of(device).unzip();
        let here = self.ctx.ownership.instance();
        let at = crate::views::state_text::Where {
            here,
            owner: owner.as_deref(),
        };
        let detail = crate::views::state_text::detail(dev, &snap, at);
        let mut state = DeviceState {
            owner,
            epoch,
            device: device.to_string(),
            liveness: snap.liveness,
            last_seen: snap.last_seen_ms.map(rfc3339),
            last_seen_ms: snap.last_seen_ms,
            signals: snap
                .readings()
                .filter_map(|(name, r)| {
                    let v = r.last_good()?;
                    let unit = dev.spec.signal(name).and_then(|s| s.unit.as_deref());
                    let signal = SignalState::of(v, unit, now, r.failure().is_some());
                    Some((name.to_string(), signal))
                })
                .collect(),
            unreadable: snap
                .unreadable()
                .map(|(name, f)| {
                    let s = UnreadableSignal {
                        error_code: f.code.as_str().to_string(),
                        detail: f.why.clone(),
                        since: rfc3339(f.since_ms),
                    };
                    (name.to_string(), s)
                })
                .collect(),
            detail,
            alarms: self
                .ctx
                .alarms
                .blocking_names(&self.ctx.plant.alarms, device),
            read_by: None,
        };
        crate::ownership::rounds::overlay(&self.ctx, dev, &mut state, now);
        Some(state)
    }

    /// A receiver woken after every read cycle of a device (for resource notifications).
    pub fn watch_device(
        &self,
        device: &str,
    ) -> Option<tokio::sync::watch::Receiver<crate::device::Snapshot>> {
        self.ctx.devices.get(device).map(|d| d.subscribe())
    }
}
