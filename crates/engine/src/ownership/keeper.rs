//! One round of the keeper: heartbeat, renew, spread, claim, hand over, read who owns what.

use super::{Held, Ownership, State, rendezvous};
use closedloop_journal::{JournalError, Leases};
use closedloop_plant::Plant;
use tokio::time::Instant;

impl Ownership {
    /// One keeper round over the devices of `plant`; a device newly held is marked to recover
    /// (its unfinished commands are now this instance's: [`Ownership::to_recover`]). Devices
    /// are placed by cell (`closedloop_plant::Cells`: joined by exclusive groups), so a group's
    /// devices are driven by one gateway. `busy(device)` says whether a command of this
    /// instance is on the device: a cell with such a device is never handed over.
    pub(crate) async fn round(
        &self,
        plant: &Plant,
        busy: impl Fn(&str) -> bool,
    ) -> Result<(), JournalError> {
        let Some(leases) = &self.leases else {
            return Ok(());
        };
        self.renew(leases).await?;
        let live = leases.live_instances(self.lease).await?;
        let cells = plant.cells();
        let mut cell_busy: std::collections::HashMap<&str, bool> = Default::default();
        let mut wanted = std::collections::HashMap::with_capacity(plant.devices.len());
        for device in &plant.devices {
            let (key, allowed, members) = match cells.cell(&device.id) {
                Some(c) if !c.disjoint => (c.key.as_str(), &c.gateways, c.devices.as_slice()),
                _ => (
                    device.id.as_str(),
                    &device.gateways,
                    std::slice::from_ref(&device.id),
                ),
            };
            let eligible: Vec<String> = live
                .iter()
                .filter(|i| allowed.is_empty() || allowed.contains(i))
                .cloned()
                .collect();
            let Some(desired) = rendezvous(key, &eligible) else {
                continue;
            };
            wanted.insert(device.id.clone(), desired.clone());
            let mine = self.state().held.contains_key(&device.id);
            if *desired == self.instance && !mine {
                let sent = Instant::now();
                if let Some(epoch) = leases.claim(&device.id, &self.instance, self.lease).await? {
                    let held = Held {
                        epoch,
                        valid_until: self.valid_until(sent),
                    };
                    let mut s = self.state();
                    s.held.insert(device.id.clone(), held);
                    s.unrecovered.insert(device.id.clone());
                    tracing::info!(device = %device.id, epoch, instance = %self.instance, "lease taken");
                    metrics::counter!("closedloop_leases_taken_total").increment(1);
                }
            } else if *desired != self.instance && mine {
                // Judged once per cell, so the whole cell goes in one round: a command that
                // slips in after the check cannot run on (its writes are fenced by the lease).
                let held_up = *cell_busy
                    .entry(key)
                    .or_insert_with(|| members.iter().any(|d| busy(d)));
                if !held_up {
                    self.hand_over(leases, &device.id).await?;
                }
            }
        }
        let all = leases.all().await?;
        let mut s = self.state();
        s.owners = all
            .into_iter()
            .filter(|l| l.expires_in_ms > 0)
            .map(|l| (l.device, (l.owner, l.epoch)))
            .collect();
        s.desired = wanted;
        Ok(())
    }

    /// Beats the heartbeat and renews every lease held; a lease not renewed (it expired, or the
    /// database lost it) is dropped here at once.
    async fn renew(&self, leases: &Leases) -> Result<(), JournalError> {
        let sent = Instant::now();
        leases.heartbeat(&self.instance).await?;
        let held: Vec<(String, i64)> = self
            .state()
            .held
            .iter()
            .map(|(d, h)| (d.clone(), h.epoch))
            .collect();
        let renewed = leases.renew(&self.instance, &held, self.lease).await?;
        let valid_until = self.valid_until(sent);
        let mut s = self.state();
        s.held.clear();
        for (device, epoch) in renewed {
            s.held.insert(device, Held { epoch, valid_until });
        }
        // A device lost before its recovery is recovered by whoever takes it next.
        let State {
            held, unrecovered, ..
        } = &mut *s;
        unrecovered.retain(|d| held.contains_key(d));
        Ok(())
    }

    /// Gives `device` up to the instance it now falls to: no longer written from here first,
    /// then released so the other can claim it at once.
    async fn hand_over(&self, leases: &Leases, device: &str) -> Result<(), JournalError> {
        let held = self.state().held.remove(device);
        if let Some(h) = held {
            leases.release(device, &self.instance, h.epoch).await?;
            tracing::info!(device, epoch = h.epoch, "lease handed over");
        }
        Ok(())
    }
}

impl crate::Engine {
    /// Starts the lease keeper when several gateways share the journal (a no-op otherwise): a
    /// first round now, so a gateway takes calls for the devices that fall to it as soon as it
    /// serves, then a round every third of `lease_s`, with the unfinished commands of every
    /// device it takes recovered at once; and the follower of the journal's change feed
    /// ([`Engine::follow_feed`]), through which it hears of the commands handed to it. The task holds the engine weakly and ends with it or
    /// at shutdown.
    pub async fn keep_leases(self: &std::sync::Arc<Self>) {
        if !self.ctx.ownership.shared() {
            return;
        }
        self.lease_round().await;
        self.follow_feed().await;
        self.share_values();
        let period = self.ctx.ownership.lease / 3;
        self.spawn_rounds(period, |engine| async move { engine.lease_round().await });
    }

    /// Runs `round` every `period` (the first after one period) on a task that holds the
    /// engine weakly and ends with it or at shutdown; a round that overruns delays the next.
    pub(crate) fn spawn_rounds<F, R>(
        self: &std::sync::Arc<Self>,
        period: std::time::Duration,
        round: F,
    ) where
        F: Fn(std::sync::Arc<Self>) -> R + Send + 'static,
        R: std::future::Future<Output = ()> + Send,
    {
        let engine = std::sync::Arc::downgrade(self);
        let mut stop = self.ctx.shutdown_rx();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
                let Some(engine) = engine.upgrade() else {
                    return;
                };
                round(engine).await;
            }
        });
    }

    /// One keeper round, then recovery of every device taken and not recovered yet — in this
    /// round or an earlier one whose recovery failed or was cut short — and the take-over of
    /// commands other gateways accepted for the devices held (the change feed's backstop). A
    /// database that does not answer is logged; the leases held stop counting at their own time
    /// (`Ownership::fence`).
    async fn lease_round(self: &std::sync::Arc<Self>) {
        let ctx = &self.ctx;
        let busy = |device: &str| ctx.busy_on(device);
        // A round that hangs (a lock held by a paused gateway) must not stop the rounds: the
        // leases held lapse at their own time meanwhile.
        let round =
            tokio::time::timeout(ctx.ownership.lease, ctx.ownership.round(&ctx.plant, busy));
        let outcome = match round.await {
            Err(_) => {
                tracing::warn!("lease round took longer than lease_s; abandoned");
                "abandoned"
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "lease round failed; the leases held lapse at their time");
                "failed"
            }
            Ok(Ok(())) => "ok",
        };
        metrics::counter!("closedloop_lease_rounds_total", "outcome" => outcome).increment(1);
        // The feed's backstop for cancel requests, as `adopt_waiting` is for handed commands.
        let _ = tokio::time::timeout(ctx.ownership.lease / 3, self.cancels_missed()).await;
        metrics::gauge!("closedloop_leases_held").set(ctx.ownership.held_count() as f64);
        for device in ctx.ownership.to_recover() {
            match self.recover_device(&device).await {
                Ok(()) => ctx.ownership.recovered(&device),
                Err(e) => {
                    tracing::error!(device, error = %e, "recovering the device's commands failed; tried again next round")
                }
            }
        }
        if let Err(e) = self.adopt_waiting().await {
            tracing::warn!(error = %e, "looking for commands handed to this gateway failed; tried again next round");
        }
    }
}
