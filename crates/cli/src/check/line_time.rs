//! Serial lines a plant's polls cannot fit on. Modbus RTU devices on one port share its line:
//! one request and one answer at a time, each byte 10 or 11 bits long and each frame followed by
//! a silence of 3.5 characters (1.75 ms above 19,200 baud: "MODBUS over Serial Line" 1.02,
//! §2.5.1.1). A plant whose polls ask more line time per second than there is gets its reads
//! late — later and later — while each value still claims the age of its last read, so
//! `closedloop check` warns, naming the figures and the poll period that would fit.
//!
//! The figure is a lower bound: the devices' own answer time comes on top, and writes too.

use super::sim_map::{Finding, Severity};
use closedloop_contract::{Area, Parity};
use closedloop_plant::{Device, DriverConfig, Plant, PlantError};
use std::collections::BTreeMap;

/// A warning for every serial line whose devices' polls ask more line time than one second has.
/// A line is a port on one machine: devices that name the same port but other `gateways` (each
/// cell's own PC) are on other lines.
pub fn lint(plant: &Plant, file: &str) -> Vec<Finding> {
    let mut ports: BTreeMap<(&str, &[String]), Vec<&Device>> = BTreeMap::new();
    for d in &plant.devices {
        if let DriverConfig::ModbusRtu { port, .. } = &d.driver {
            ports.entry((port, &d.gateways)).or_default().push(d);
        }
    }
    ports
        .into_iter()
        .filter_map(|((port, _), devices)| {
            let asked = asked_ms_per_s(&devices);
            (asked > 1000.0).then(|| Finding {
                severity: Severity::Warning,
                error: PlantError {
                    file: file.to_string(),
                    device: Some(devices[0].id.clone()),
                    key: Some("driver.port".into()),
                    line: None,
                    message: message(port, &devices, asked),
                },
            })
        })
        .collect()
}

/// Milliseconds of line time per second the devices' polls ask (at least).
fn asked_ms_per_s(devices: &[&Device]) -> f64 {
    devices
        .iter()
        .map(|d| cycle_ms(d) * 1000.0 / d.poll_ms.max(1) as f64)
        .sum()
}

/// The line time of one poll cycle of `device`: each read request and its answer, with the
/// silence after each frame.
fn cycle_ms(device: &Device) -> f64 {
    let DriverConfig::ModbusRtu { baud, parity, .. } = &device.driver else {
        return 0.0;
    };
    let bits = match parity {
        Parity::None => 10.0,
        Parity::Even | Parity::Odd => 11.0,
    };
    let char_ms = bits * 1000.0 / f64::from((*baud).max(1));
    let silence_ms = if *baud > 19_200 { 1.75 } else { 3.5 * char_ms };
    closedloop_connect::registers::poll_requests(device)
        .into_iter()
        .map(|(area, count)| {
            let data = match area {
                Area::Coil | Area::DiscreteInput => u32::from(count).div_ceil(8),
                Area::Holding | Area::Input => 2 * u32::from(count),
            };
            // Request: unit, function, address, count, CRC. Answer: unit, function, byte
            // count, the data, CRC.
            let bytes = 8 + 5 + data;
            f64::from(bytes) * char_ms + 2.0 * silence_ms
        })
        .sum()
}

/// The warning's words: what is asked, what the line has, and the poll period that would fit.
/// Every device on one port has its baud rate (`build_drivers` refuses a port opened two ways).
fn message(port: &str, devices: &[&Device], asked: f64) -> String {
    let baud = match &devices[0].driver {
        DriverConfig::ModbusRtu { baud, .. } => *baud,
        _ => unreachable!("lint groups Modbus RTU devices only"),
    };
    let ids: Vec<&str> = devices.iter().map(|d| d.id.as_str()).collect();
    // Every period scaled by the same factor fits; the factor shown is rounded up, so scaling
    // by the figure shown fits too, and the period named is rounded up to the next 10 ms.
    let factor = (asked / 10.0 - 1e-9).ceil() / 100.0;
    let slowest = devices.iter().map(|d| d.poll_ms).max().unwrap_or(0);
    let fits = ((slowest as f64 * factor) / 10.0).ceil() as u64 * 10;
    format!(
        "the polls of {} on {port} at {baud} baud ask {asked:.0} ms of line time per second, and \
         the line has 1000: reads fall further and further behind poll_ms, and every value \
         arrives later than its poll period says (a lower bound: each device's answer time and \
         the writes come on top). Poll less often (every device's poll_ms × {factor:.2}; \
         {slowest} ms becomes {fits} ms), raise the baud rate, or split the devices over two lines",
        ids.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plant(devices: usize, baud: u32, parity: &str, poll_ms: u64) -> Plant {
        on_gateways(devices, baud, parity, poll_ms, |_| "[]")
    }

    /// `devices` meters on one port name, device i on the gateways `gateways(i)`.
    fn on_gateways(
        devices: usize,
        baud: u32,
        parity: &str,
        poll_ms: u64,
        gateways: impl Fn(usize) -> &'static str,
    ) -> Plant {
        let mut text = String::new();
        for i in 0..devices {
            text.push_str(&format!(
                r#"
[[device]]
id = "m{i}"
description = "A meter"
driver = {{ kind = "modbus-rtu", port = "/dev/ttyUSB0", baud = {baud}, parity = "{parity}", unit = {u} }}
poll_ms = {poll_ms}
gateways = {g}
[device.signals]
power = {{ input = 0, type = "f32" }}
energy = {{ input = 2, type = "u32" }}
alarm = {{ discrete_input = 0 }}
"#,
                u = i + 1,
                g = gateways(i),
            ));
        }
        closedloop_plant::parse(&text, "t.toml", std::path::Path::new(".")).expect("parses")
    }

    #[test]
    fn a_cycle_costs_its_frames_and_silences_on_the_line() {
        // 9600 baud, no parity: 10 bits a byte, 1.0417 ms; silence 3.5 bytes.
        // Input 0..4 (one block of 4 words): 8 + 5 + 8 = 21 bytes; discrete input 0: 8 + 5 + 1 = 14.
        let p = plant(1, 9600, "N", 100);
        let char_ms = 10.0 * 1000.0 / 9600.0;
        let want = (21.0 + 14.0) * char_ms + 4.0 * 3.5 * char_ms;
        assert!((cycle_ms(&p.devices[0]) - want).abs() < 1e-9);
        // Above 19,200 baud the silence is a fixed 1.75 ms; parity makes a byte 11 bits.
        let p = plant(1, 115_200, "E", 100);
        let want = 35.0 * 11.0 * 1000.0 / 115_200.0 + 4.0 * 1.75;
        assert!((cycle_ms(&p.devices[0]) - want).abs() < 1e-9);
    }

    #[test]
    fn a_line_asked_more_than_a_second_per_second_is_warned_about_with_a_period_that_fits() {
        // Each meter's cycle at 9600 baud: 49 bytes ≈ 51 ms; 4 meters every 100 ms ask ≈ 2042 ms/s.
        let findings = lint(&plant(4, 9600, "N", 100), "t.toml");
        assert_eq!(findings.len(), 1, "{findings:?}");
        let text = findings[0].to_string();
        assert!(
            text.starts_with("warning: t.toml: device \"m0\", key driver.port: the polls of m0, m1, m2, m3 on /dev/ttyUSB0 at 9600 baud ask 2042 ms of line time per second"),
            "{text}"
        );
        assert!(
            text.contains("poll_ms × 2.05; 100 ms becomes 210 ms"),
            "{text}"
        );
        // The period it names fits.
        assert!(lint(&plant(4, 9600, "N", 210), "t.toml").is_empty());
        // The same meters fit at 115,200 baud, and one meter alone at 9600.
        assert!(lint(&plant(4, 115_200, "N", 100), "t.toml").is_empty());
        assert!(lint(&plant(1, 9600, "N", 100), "t.toml").is_empty());
    }

    #[test]
    fn the_same_port_name_on_other_gateways_is_another_line() {
        // Four meters every 110 ms ask ≈ 1856 ms/s of one line; two per cell's own line, ≈ 928.
        let one_line = on_gateways(4, 9600, "N", 110, |_| r#"["cell_a"]"#);
        assert_eq!(lint(&one_line, "t.toml").len(), 1);
        let two_lines = on_gateways(4, 9600, "N", 110, |i| match i {
            0 | 1 => r#"["cell_a"]"#,
            _ => r#"["cell_b"]"#,
        });
        assert!(lint(&two_lines, "t.toml").is_empty());
    }
}
