//! Helpers shared by the simulator's behaviour tests: build devices from plant-file TOML, talk to
//! them through the `Driver` trait exactly as the engine does, and move paused time.

#![allow(dead_code)] // each test binary uses a different subset

use closedloop_contract::{Answer, Area, Data, Driver, Exception, TransportError, Write};
use closedloop_sim::{SimConfig, SimDevice};
use std::future::Future;
use std::time::Duration;

/// A device from the inside of a `driver = { kind = "sim", ... }` table, written as TOML lines.
pub fn device(toml_table: &str) -> SimDevice {
    let cfg: SimConfig = toml::from_str(toml_table).expect("test TOML parses");
    SimDevice::from_config(&cfg).expect("test config is valid")
}

/// Moves paused time forward.
pub async fn advance_ms(ms: u64) {
    tokio::time::advance(Duration::from_millis(ms)).await;
}

/// The answer of a read.
pub async fn read(d: &SimDevice, area: Area, start: u16, count: u16) -> Answer<Data> {
    d.read(area, start, count).await
}

/// Bits that must be readable.
pub async fn bits(d: &SimDevice, area: Area, start: u16, count: u16) -> Vec<bool> {
    match d.read(area, start, count).await {
        Ok(Ok(Data::Bits(b))) => b,
        other => panic!("expected bits from {area}:{start}, got {other:?}"),
    }
}

/// One bit that must be readable.
pub async fn bit(d: &SimDevice, area: Area, addr: u16) -> bool {
    bits(d, area, addr, 1).await[0]
}

/// Registers that must be readable.
pub async fn words(d: &SimDevice, area: Area, start: u16, count: u16) -> Vec<u16> {
    match d.read(area, start, count).await {
        Ok(Ok(Data::Words(w))) => w,
        other => panic!("expected words from {area}:{start}, got {other:?}"),
    }
}

/// The stepper's encoder position in 0.01 mm (holding 2–3, i32 high word first).
pub async fn position_raw(d: &SimDevice) -> i32 {
    let w = words(d, Area::Holding, 2, 2).await;
    ((u32::from(w[0]) << 16) | u32::from(w[1])) as i32
}

/// Writes coils.
pub async fn coils(d: &SimDevice, start: u16, values: &[bool]) -> Answer<()> {
    d.write(Write::Coils {
        start,
        values: values.to_vec(),
    })
    .await
}

/// Writes registers.
pub async fn regs(d: &SimDevice, start: u16, values: &[u16]) -> Answer<()> {
    d.write(Write::Registers {
        start,
        values: values.to_vec(),
    })
    .await
}

/// Writes a stepper target in mm as one i32 request to holding 0–1.
pub async fn target(d: &SimDevice, mm: f64) -> Answer<()> {
    let raw = (mm * 100.0).round() as i32 as u32;
    regs(d, 0, &[(raw >> 16) as u16, raw as u16]).await
}

/// Whether a request stays unanswered for (paused) 5 s — the engine's view of "silent".
pub async fn never_answers<T>(fut: impl Future<Output = T>) -> bool {
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .is_err()
}

/// A device exception as an answer.
pub fn exception<T>(code: u8) -> Answer<T> {
    Ok(Err(Exception(code)))
}

/// A checksum failure as an answer.
pub fn crc<T>() -> Answer<T> {
    Err(TransportError::Crc)
}
