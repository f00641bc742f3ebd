//! Device values the owning gateway publishes for the others, on a PostgreSQL journal: a
//! gateway that cannot read a device itself (a serial line, `gateways = [...]`, a network it
//! does not reach) shows the owner's values instead of nothing.
//!
//! # Invariants
//! - The owner writes a device's row only when what it shows changed (liveness, a value, a
//!   signal becoming unreadable), and stamps its own `published_at` on every round, changed
//!   rows or none: a row is as current as its owner's last round, which is what readers are
//!   told (`confirmed_ms_ago`).
//! - A row is read only while its writer holds the device's lease under the same epoch,
//!   unexpired: values of an owner that died or lost the device are never shown as current.
//! - A row is never overwritten under an older epoch: a former owner that resumes cannot hide
//!   the new owner's values.
//! - The state is opaque here (JSON the engine writes and reads); times are the database's.

use super::PgStore;
use crate::{Journal, JournalError};
use sqlx::postgres::PgPool;

/// The `device_values` table of a PostgreSQL journal.
#[derive(Clone, Debug)]
pub struct DeviceValues {
    pool: PgPool,
}

/// One device's values as its owner last published them.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    /// The device.
    pub device: String,
    /// The gateway that read and published them (the lease holder).
    pub owner: String,
    /// Its lease epoch.
    pub epoch: i64,
    /// What it published (the engine's JSON).
    pub state: serde_json::Value,
    /// Milliseconds since the owner last confirmed its published rows current (its last round).
    pub confirmed_ms_ago: i64,
}

impl Journal {
    /// The published device values, when the journal is on PostgreSQL (shared); `None` on
    /// SQLite, whose one gateway reads every device it shows.
    pub fn device_values(&self) -> Option<DeviceValues> {
        match &self.store {
            crate::journal::Store::Postgres(p) => Some(p.device_values()),
            crate::journal::Store::Sqlite(_) => None,
        }
    }
}

impl PgStore {
    pub(crate) fn device_values(&self) -> DeviceValues {
        DeviceValues {
            pool: self.reader.clone(),
        }
    }
}

impl DeviceValues {
    /// One round of `instance`'s: the rows of `changed` (device, epoch, state) written, and its
    /// `published_at` set to now, in one transaction.
    pub async fn publish(
        &self,
        instance: &str,
        changed: &[(String, i64, serde_json::Value)],
    ) -> Result<(), JournalError> {
        let devices: Vec<&str> = changed.iter().map(|(d, _, _)| d.as_str()).collect();
        let epochs: Vec<i64> = changed.iter().map(|(_, e, _)| *e).collect();
        let states: Vec<String> = changed.iter().map(|(_, _, s)| s.to_string()).collect();
        let mut tx = self.pool.begin().await?;
        if !changed.is_empty() {
            sqlx::query(
                "INSERT INTO device_values (device, owner, epoch, state, changed_at)
                 SELECT d, $1, e, s, now() FROM unnest($2::TEXT[], $3::BIGINT[], $4::TEXT[])
                     AS c (d, e, s)
                 ON CONFLICT (device) DO UPDATE SET owner = EXCLUDED.owner,
                     epoch = EXCLUDED.epoch, state = EXCLUDED.state, changed_at = now()
                 WHERE device_values.epoch <= EXCLUDED.epoch",
            )
            .bind(instance)
            .bind(&devices)
            .bind(&epochs)
            .bind(&states)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "INSERT INTO instances (name, seen_at, published_at) VALUES ($1, now(), now())
             ON CONFLICT (name) DO UPDATE SET published_at = now()",
        )
        .bind(instance)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The values published for `devices` by the gateways holding their leases now.
    pub async fn read(&self, devices: &[String]) -> Result<Vec<Published>, JournalError> {
        let rows: Vec<(String, String, i64, String, i64)> = sqlx::query_as(
            "SELECT v.device, v.owner, v.epoch, v.state,
                 (extract(epoch FROM now() - i.published_at) * 1000)::BIGINT
             FROM device_values v
             JOIN leases l ON l.device = v.device AND l.owner = v.owner AND l.epoch = v.epoch
             JOIN instances i ON i.name = v.owner
             WHERE v.device = ANY($1) AND l.expires_at > now() AND i.published_at IS NOT NULL",
        )
        .bind(devices)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(device, owner, epoch, state, ago)| {
                let state = serde_json::from_str(&state).map_err(|e| JournalError::Corrupt {
                    command_id: format!("(device values of {device})"),
                    reason: e.to_string(),
                })?;
                Ok(Published {
                    device,
                    owner,
                    epoch,
                    state,
                    confirmed_ms_ago: ago.max(0),
                })
            })
            .collect()
    }
}
