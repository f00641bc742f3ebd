//! Raw register access for devices declared `raw_access = true`: reads and writes that bypass the
//! command lifecycle, for commissioning and diagnosis. A raw write is *not* a command: nothing
//! supervises it, nothing confirms its effect, and the answer says so.

use crate::contract::ErrorCode;
use crate::dispatch::plan;
use crate::engine::Engine;
use closedloop_contract::{Area, Data, Exception, TransportError, Write};
use closedloop_plant::Source;
use serde::Serialize;
use std::collections::BTreeMap;

/// Largest block a raw read may ask for (one Modbus request).
pub const MAX_RAW_COUNT: u16 = 125;

/// What a raw read returned.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RawRead {
    /// Device id.
    pub device: String,
    /// The area read.
    pub area: Area,
    /// First address.
    pub address: u16,
    /// Raw values: booleans for bit areas, 16-bit integers for registers.
    pub values: serde_json::Value,
    /// Declared signals lying entirely inside the block, decoded to engineering units.
    pub signals: BTreeMap<String, serde_json::Value>,
    /// When the answer arrived.
    pub at: String,
}

pub use closedloop_link::RawError;

pub(crate) fn refuse(code: ErrorCode, detail: impl Into<String>) -> RawError {
    RawError {
        code,
        detail: detail.into(),
    }
}

impl Engine {
    /// The device of a raw or bridge tool: one the plant declares `raw_access = true`, or why
    /// not (`access` names what was asked for, e.g. "raw register access"). Every tool that
    /// bypasses the command lifecycle goes through here, so none can forget the check.
    pub(crate) fn raw_access_device(
        &self,
        device: &str,
        access: &str,
    ) -> Result<&std::sync::Arc<crate::device::DeviceRuntime>, RawError> {
        let dev = self
            .ctx
            .devices
            .get(device)
            .ok_or_else(|| refuse(ErrorCode::InvalidParams, format!("no device {device:?}")))?;
        if !dev.spec.raw_access {
            return Err(refuse(
                ErrorCode::Unauthorized,
                format!(
                    "{device} does not allow {access} (set raw_access = true in the plant file)"
                ),
            ));
        }
        Ok(dev)
    }

    /// The link of a `raw_access` device, for a bridge tool of its protocol
    /// (`closedloop_connect::bridge`), with the engine's clock reading now.
    pub fn raw_access_link(
        &self,
        device: &str,
    ) -> Result<(std::sync::Arc<dyn closedloop_link::Link>, i64), RawError> {
        let dev = self.raw_access_device(device, "bridge access")?;
        Ok((std::sync::Arc::clone(dev.link()), self.ctx.clock.now_ms()))
    }

    fn raw_device(
        &self,
        device: &str,
    ) -> Result<&std::sync::Arc<crate::device::DeviceRuntime>, RawError> {
        let dev = self.raw_access_device(device, "raw register access")?;
        if !dev.has_registers() {
            return Err(refuse(
                ErrorCode::InvalidParams,
                format!(
                    "{device} is a {} device and has no Modbus registers; raw register tools apply to sim and Modbus devices",
                    dev.spec.driver.kind()
                ),
            ));
        }
        Ok(dev)
    }

    /// Reads `count` items of `area` from `address` on a `raw_access` device.
    pub async fn raw_read(
        &self,
        device: &str,
        area: Area,
        address: u16,
        count: u16,
    ) -> Result<RawRead, RawError> {
        let dev = self.raw_device(device)?;
        if count == 0 || count > MAX_RAW_COUNT {
            return Err(refuse(
                ErrorCode::InvalidParams,
                format!("count must be 1..={MAX_RAW_COUNT}"),
            ));
        }
        let data = match dev.read(area, address, count).await {
            Ok(Ok(d)) => d,
            Ok(Err(e)) => return Err(exception(e)),
            Err(e) => return Err(transport(e)),
        };
        let at = crate::clock::rfc3339(self.ctx.clock.now_ms());
        let mut signals = BTreeMap::new();
        for s in &dev.spec.signals {
            let Source::Register {
                area: a,
                address: start,
                encoding,
            } = &s.source
            else {
                continue;
            };
            let width = if a.is_bit() { 1 } else { encoding.words() };
            if *a != area
                || *start < address
                || u32::from(*start) + u32::from(width) > u32::from(address) + u32::from(count)
            {
                continue;
            }
            let i = usize::from(start - address);
            let value = match &data {
                Data::Bits(b) => b.get(i).map(|v| serde_json::json!(v)),
                Data::Words(w) => w
                    .get(i..i + usize::from(width))
                    .map(|w| plan::value_json(encoding.decode(w))),
            };
            if let Some(value) = value {
                let mut v =
                    serde_json::json!({"value": value, "source": format!("{area}:{start}")});
                if let Some(u) = &s.unit {
                    v["unit"] = serde_json::json!(u);
                }
                signals.insert(s.name.clone(), v);
            }
        }
        let values = match data {
            Data::Bits(b) => serde_json::json!(b),
            Data::Words(w) => serde_json::json!(w),
        };
        Ok(RawRead {
            device: device.to_string(),
            area,
            address,
            values,
            signals,
            at,
        })
    }

    /// Writes one block to a `raw_access` device that no command holds. Returns when the device
    /// acknowledged the write — which says nothing about its effect. Every raw write that
    /// reaches the device is journaled with its caller (`caller`), as a command of action
    /// `raw_write` that ends `sent` or `failed`, so `closedloop commands` and the audit show it.
    pub async fn raw_write(
        &self,
        device: &str,
        write: Write,
        caller: Option<String>,
    ) -> Result<(), RawError> {
        let result = self.raw_write_unjournaled(device, write.clone()).await;
        self.journal_raw_write(device, &write, caller, &result)
            .await;
        result
    }

    async fn raw_write_unjournaled(&self, device: &str, write: Write) -> Result<(), RawError> {
        let dev = self.raw_device(device)?;
        // Only the lease holder writes to a device, raw writes too: a gateway that does not
        // hold it refuses, naming the holder, so the caller can send the write there.
        self.owned(device)
            .map_err(|not| refuse(ErrorCode::DeviceBusy, format!("{}.", not.detail())))?;
        // Every exclusive group an action of this device uses (its own id among them), taken
        // in name order: a raw write must never cut into a command holding any of them.
        let mut groups: Vec<&str> = dev
            .spec
            .actions
            .iter()
            .map(|a| a.exclusive.as_str())
            .collect();
        groups.push(device);
        groups.sort_unstable();
        groups.dedup();
        let mut _permits = Vec::with_capacity(groups.len());
        for name in groups {
            let Some(permit) = self.ctx.group(name).try_acquire() else {
                return Err(refuse(
                    ErrorCode::DeviceBusy,
                    format!(
                        "{device} is in use: a command holds its exclusive group {name:?}; cancel it or wait before writing raw registers"
                    ),
                ));
            };
            _permits.push(permit);
        }
        // Checked again next to the write: the lease may have lapsed while the permits were taken.
        if self.ctx.ownership.fence(device).is_err() {
            return Err(refuse(
                ErrorCode::DeviceBusy,
                format!("this gateway lost {device}'s lease before writing; nothing was written."),
            ));
        }
        let answer = dev.write(write.clone()).await;
        closedloop_contract::contract::register_write(answer, &write)
            .map_err(|e| refuse(e.code, e.detail))
    }
}

impl Engine {
    /// The journal entry of a raw write: params are the block written, the status `sent` (the
    /// device acknowledged; nothing confirms the effect) or `failed` with the refusal's code.
    async fn journal_raw_write(
        &self,
        device: &str,
        write: &Write,
        caller: Option<String>,
        result: &Result<(), RawError>,
    ) {
        let now = self.ctx.clock.now_ms();
        let (area, start, values) = match write {
            Write::Coils { start, values } => (write.area(), *start, serde_json::json!(values)),
            Write::Registers { start, values } => (write.area(), *start, serde_json::json!(values)),
        };
        let (status, code, detail) = match result {
            Ok(()) => ("sent", None, None),
            Err(e) => (
                "failed",
                Some(e.code.as_str().to_string()),
                Some(e.detail.clone()),
            ),
        };
        let id = uuid::Uuid::now_v7().to_string();
        let row = closedloop_journal::CommandRow {
            command_id: id.clone(),
            request_id: format!("raw_{id}"),
            device: device.to_string(),
            action: "raw_write".into(),
            params: serde_json::json!({"area": area.to_string(), "address": start, "values": values}),
            status: status.into(),
            verified: false,
            verification: "none".into(),
            error_code: code.clone(),
            detail: detail.clone(),
            hint: None,
            evidence: serde_json::json!({}),
            readback_matched: None,
            accepted_at_ms: now,
            updated_at_ms: now,
            deadline_ms: None,
            dispatched: result.is_ok(),
            caller,
            idempotency_key: None,
        };
        let events = [closedloop_journal::EventRow {
            at_ms: now,
            event: status.into(),
            data: serde_json::json!({"code": code, "detail": detail}),
        }];
        if let Err(e) = self.ctx.journal.insert(&row, &events).await {
            tracing::error!(device, error = %e, "raw write not journaled");
        }
    }
}

fn exception(e: Exception) -> RawError {
    let code = match e.0 {
        1..=3 => ErrorCode::RegisterInvalid,
        0x0A | 0x0B => ErrorCode::DeviceOffline,
        _ => ErrorCode::BusNak,
    };
    refuse(code, format!("the device answered {e}"))
}

fn transport(e: TransportError) -> RawError {
    let code = if matches!(e, TransportError::Crc) {
        ErrorCode::CrcMismatch
    } else {
        ErrorCode::DeviceOffline
    };
    refuse(code, e.to_string())
}
