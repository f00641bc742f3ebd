//! Device leases for gateways sharing one PostgreSQL journal: which instance may write to which
//! device, for how long, under which epoch. Every time is the database's (`now()`), so the
//! instances' clocks never have to agree; a lease's expiry is a promise the owner keeps by
//! stopping its writes before it (the engine's side, `closedloop_engine` ownership), and a
//! fenced write (`Journal::update_fenced`) checks it again in the transaction that journals a
//! dispatch.

use super::PgStore;
use crate::{Journal, JournalError};
use sqlx::postgres::PgPool;
use std::time::Duration;

/// The leases table and the instances' heartbeats, on a PostgreSQL journal.
#[derive(Clone, Debug)]
pub struct Leases {
    pool: PgPool,
}

/// One device's lease as the database holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    /// The device.
    pub device: String,
    /// The instance that holds (or last held) it.
    pub owner: String,
    /// Raised on every change of owner and on every claim after an expiry.
    pub epoch: i64,
    /// Milliseconds until it expires on the database's clock; zero or less once it has.
    pub expires_in_ms: i64,
}

impl Journal {
    /// The device leases, when the journal is on PostgreSQL (several gateways can share it);
    /// `None` on SQLite, which one gateway owns whole.
    pub fn leases(&self) -> Option<Leases> {
        match &self.store {
            crate::journal::Store::Postgres(p) => Some(p.leases()),
            crate::journal::Store::Sqlite(_) => None,
        }
    }
}

impl PgStore {
    pub(crate) fn leases(&self) -> Leases {
        Leases {
            pool: self.reader.clone(),
        }
    }
}

fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

impl Leases {
    /// Records that `instance` is alive now.
    pub async fn heartbeat(&self, instance: &str) -> Result<(), JournalError> {
        sqlx::query(
            "INSERT INTO instances (name, seen_at) VALUES ($1, now())
             ON CONFLICT (name) DO UPDATE SET seen_at = now()",
        )
        .bind(instance)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The instances seen within `within`, by name.
    pub async fn live_instances(&self, within: Duration) -> Result<Vec<String>, JournalError> {
        Ok(sqlx::query_scalar(
            "SELECT name FROM instances
             WHERE seen_at > now() - interval '1 millisecond' * $1 ORDER BY name",
        )
        .bind(ms(within))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Takes the lease on `device` for `instance` for `lease`, if no other instance holds it
    /// unexpired: the epoch it now holds, or `None` when another instance holds it. Every claim
    /// raises the epoch, even of a lease `instance` already held: a process claims only what it
    /// does not hold itself, so a claim under a held lease's name comes from a restarted process
    /// (or a second one misnamed alike), and the raised epoch fences out the writes of the one
    /// before. Extending a held lease is [`Leases::renew`].
    pub async fn claim(
        &self,
        device: &str,
        instance: &str,
        lease: Duration,
    ) -> Result<Option<i64>, JournalError> {
        Ok(sqlx::query_scalar(
            "INSERT INTO leases (device, owner, epoch, expires_at)
                 VALUES ($1, $2, 1, now() + interval '1 millisecond' * $3)
             ON CONFLICT (device) DO UPDATE SET
                 epoch = leases.epoch + 1,
                 owner = EXCLUDED.owner,
                 expires_at = EXCLUDED.expires_at
             WHERE leases.owner = EXCLUDED.owner OR leases.expires_at <= now()
             RETURNING epoch",
        )
        .bind(device)
        .bind(instance)
        .bind(ms(lease))
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Extends every unexpired lease `instance` holds on `held` (device, epoch) by `lease` from
    /// now: the devices renewed, with their epochs. A lease that already expired is not renewed
    /// (it must be claimed again, under a new epoch), nor one whose epoch moved on: another
    /// process claimed it, even under the same instance name, and its epoch is not this one's.
    /// Rows are locked in device order, as fenced writes lock them, so the two never deadlock.
    pub async fn renew(
        &self,
        instance: &str,
        held: &[(String, i64)],
        lease: Duration,
    ) -> Result<Vec<(String, i64)>, JournalError> {
        let (devices, epochs): (Vec<String>, Vec<i64>) = held.iter().cloned().unzip();
        Ok(sqlx::query_as(
            "WITH mine AS (
                 SELECT l.device FROM leases l
                 JOIN unnest($2::TEXT[], $3::BIGINT[]) AS h (device, epoch)
                   ON l.device = h.device AND l.epoch = h.epoch
                 WHERE l.owner = $1 AND l.expires_at > now()
                 ORDER BY l.device FOR UPDATE OF l)
             UPDATE leases SET expires_at = now() + interval '1 millisecond' * $4
             FROM mine WHERE leases.device = mine.device
             RETURNING leases.device, leases.epoch",
        )
        .bind(instance)
        .bind(devices)
        .bind(epochs)
        .bind(ms(lease))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Gives up `instance`'s lease on `device` at `epoch` (it expires now), so another instance
    /// can claim it at once; `false` when it was not held so.
    pub async fn release(
        &self,
        device: &str,
        instance: &str,
        epoch: i64,
    ) -> Result<bool, JournalError> {
        let done = sqlx::query(
            "UPDATE leases SET expires_at = now()
             WHERE device = $1 AND owner = $2 AND epoch = $3 AND expires_at > now()",
        )
        .bind(device)
        .bind(instance)
        .bind(epoch)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Every device's lease, by device.
    pub async fn all(&self) -> Result<Vec<Lease>, JournalError> {
        let rows: Vec<(String, String, i64, f64)> = sqlx::query_as(
            "SELECT device, owner, epoch,
                    EXTRACT(EPOCH FROM (expires_at - now()))::FLOAT8 * 1000
             FROM leases ORDER BY device",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(device, owner, epoch, left)| Lease {
                device,
                owner,
                epoch,
                expires_in_ms: left.round() as i64,
            })
            .collect())
    }
}
