//! The rounds that share device values among gateways (`ownership/values.rs` holds what they
//! publish and read): every [`ROUND`] a gateway publishes the changed states of the devices it
//! holds and reads the owners' rows of the devices it does not read online, and
//! [`overlay`] puts the owner's values in a device state this gateway cannot read itself.

use crate::api::DeviceState;
use crate::device::Liveness;
use crate::engine::Engine;
use crate::ownership::values::{ROUND, fingerprint, from_owner, lock, published_state};
use std::collections::HashMap;
use std::time::Instant;

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
                let round = tokio::time::timeout(ROUND * 2, engine.values_round(&table));
                let failed = match round.await {
                    Ok(Ok(())) => return,
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => "the round took longer than a second".to_string(),
                };
                // Nothing shown is older than the last round that read it.
                lock(&engine.ctx.owners_values.seen).clear();
                tracing::debug!(error = %failed, "device values not shared this round");
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
        let now_ms = self.ctx.clock.now_ms();
        let mut changed = Vec::new();
        let mut wanted = Vec::new();
        {
            let published = lock(&self.ctx.owners_values.published);
            for (id, dev) in &self.ctx.devices {
                match self.ctx.ownership.owner_of(id) {
                    Some((owner, epoch)) if owner == here => {
                        let poll_ms = i64::try_from(dev.spec.poll_ms).unwrap_or(i64::MAX);
                        let state = published_state(&dev.current(), poll_ms, now_ms);
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
        let read = Instant::now();
        let seen = match wanted.is_empty() {
            true => HashMap::new(),
            false => (table.read(&wanted).await?.into_iter())
                .map(|p| (p.device.clone(), (p, read)))
                .collect(),
        };
        *lock(&self.ctx.owners_values.seen) = seen;
        Ok(())
    }
}
