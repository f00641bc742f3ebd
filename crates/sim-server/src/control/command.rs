//! [`ControlCommand`]: one request line of the control endpoint, parsed, written back and
//! carried out on the simulator's devices.

use crate::Simulated;
use closedloop_sim::{FaultConfig, FaultKind};
use std::collections::BTreeMap;

/// One control request, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum ControlCommand {
    /// Inject (or replace) a fault.
    Fault {
        /// Device id.
        device: String,
        /// The fault as a plant file would write it; validated when injected.
        fault: FaultConfig,
    },
    /// Clear one fault kind, or every fault.
    Clear {
        /// Device id.
        device: String,
        /// `None`: every fault.
        kind: Option<FaultKind>,
    },
}

impl ControlCommand {
    /// Parses the words of a request (`["fault", "slide", "nak"]`). Errors name the wrong word.
    pub fn from_words<S: AsRef<str>>(words: &[S]) -> Result<ControlCommand, String> {
        let words: Vec<&str> = words.iter().map(AsRef::as_ref).collect();
        if let Some(w) = words
            .iter()
            .find(|w| w.is_empty() || w.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Err(format!(
                "{w:?} is not one word: devices, kinds and key=value options contain no spaces"
            ));
        }
        match words.as_slice() {
            ["fault", device, kind, options @ ..] => {
                let mut fault = FaultConfig {
                    kind: (*kind).to_string(),
                    ..FaultConfig::default()
                };
                for option in options {
                    set_option(&mut fault, option)?;
                }
                Ok(ControlCommand::Fault {
                    device: (*device).to_string(),
                    fault,
                })
            }
            ["clear", device] => Ok(ControlCommand::Clear {
                device: (*device).to_string(),
                kind: None,
            }),
            ["clear", device, kind] => Ok(ControlCommand::Clear {
                device: (*device).to_string(),
                kind: Some(kind.parse().map_err(|e| format!("{e}"))?),
            }),
            ["fault", ..] => Err("usage: fault DEVICE KIND [KEY=VALUE ...]".into()),
            ["clear", ..] => Err("usage: clear DEVICE [KIND]".into()),
            [other, ..] => Err(format!(
                "unknown request {other:?}: use `fault DEVICE KIND [KEY=VALUE ...]` or `clear DEVICE [KIND]`"
            )),
            [] => Err("empty request: use `fault DEVICE KIND ...` or `clear DEVICE [KIND]`".into()),
        }
    }

    /// Parses one request line.
    pub fn parse(line: &str) -> Result<ControlCommand, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        ControlCommand::from_words(&words)
    }

    /// The request line (without its newline); [`ControlCommand::parse`] reads it back.
    pub fn to_line(&self) -> String {
        match self {
            ControlCommand::Fault { device, fault } => {
                let mut line = format!("fault {device} {}", fault.kind);
                let options = [
                    ("after_ms", fault.after_ms.map(|v| v.to_string())),
                    ("at_mm", fault.at_mm.map(|v| v.to_string())),
                    ("down_ms", fault.down_ms.map(|v| v.to_string())),
                    ("ms", fault.ms.map(|v| v.to_string())),
                    ("p", fault.p.map(|v| v.to_string())),
                ];
                for (key, value) in options {
                    if let Some(v) = value {
                        line.push_str(&format!(" {key}={v}"));
                    }
                }
                line
            }
            ControlCommand::Clear { device, kind: None } => format!("clear {device}"),
            ControlCommand::Clear {
                device,
                kind: Some(k),
            } => format!("clear {device} {k}"),
        }
    }

    /// Carries the request out on `devices`.
    pub fn execute(&self, devices: &BTreeMap<String, Simulated>) -> Result<(), String> {
        let device_id = match self {
            ControlCommand::Fault { device, .. } | ControlCommand::Clear { device, .. } => device,
        };
        let Some(device) = devices.get(device_id) else {
            let known: Vec<&str> = devices.keys().map(String::as_str).collect();
            return Err(format!(
                "unknown device {device_id:?}: this simulator runs {}",
                if known.is_empty() {
                    "no device".to_string()
                } else {
                    known.join(", ")
                }
            ));
        };
        match self {
            ControlCommand::Fault { fault, .. } => device
                .inject_config(fault)
                .map_err(|e| format!("device {device_id:?}: {e}")),
            ControlCommand::Clear { kind: Some(k), .. } => {
                device.clear(*k);
                Ok(())
            }
            ControlCommand::Clear { kind: None, .. } => {
                device.clear_all();
                Ok(())
            }
        }
    }
}

/// Sets one `key=value` option of a fault entry.
fn set_option(fault: &mut FaultConfig, option: &str) -> Result<(), String> {
    let Some((key, value)) = option.split_once('=') else {
        return Err(format!(
            "{option:?} is not key=value: write e.g. ms=200 or p=0.5"
        ));
    };
    let whole = |v: &str| {
        v.parse::<u64>()
            .map_err(|_| format!("{key}={v}: {key} must be a whole number of milliseconds"))
    };
    let number = |v: &str| {
        v.parse::<f64>()
            .map_err(|_| format!("{key}={v}: {key} must be a number"))
    };
    let fresh = match key {
        "after_ms" => fault.after_ms.replace(whole(value)?).is_none(),
        "down_ms" => fault.down_ms.replace(whole(value)?).is_none(),
        "ms" => fault.ms.replace(whole(value)?).is_none(),
        "at_mm" => fault.at_mm.replace(number(value)?).is_none(),
        "p" => fault.p.replace(number(value)?).is_none(),
        _ => {
            return Err(format!(
                "unknown fault option {key:?}: use after_ms, at_mm, down_ms, ms or p"
            ));
        }
    };
    if fresh {
        Ok(())
    } else {
        Err(format!("{key} is given twice: give it once"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use closedloop_sim::{Fault, FaultSpec, SimConfig, SimDevice};

    fn devices() -> BTreeMap<String, Simulated> {
        let relay = SimConfig {
            model: "relay".into(),
            ..SimConfig::default()
        };
        BTreeMap::from([(
            "lamp".to_string(),
            SimDevice::from_config(&relay).unwrap().into(),
        )])
    }

    #[test]
    fn lines_round_trip() {
        for line in [
            "fault slide stall at_mm=70 after_ms=200",
            "fault lamp nak",
            "clear lamp",
            "clear lamp latency_ms",
        ] {
            let cmd = ControlCommand::parse(line).unwrap();
            let again = ControlCommand::parse(&cmd.to_line()).unwrap();
            assert_eq!(cmd, again, "{line}");
        }
    }

    #[test]
    fn bad_requests_name_the_wrong_word() {
        let e = ControlCommand::parse("fault lamp latency_ms ms=soon").unwrap_err();
        assert!(e.contains("ms=soon") && e.contains("whole number"), "{e}");
        let e = ControlCommand::parse("fault lamp latency_ms speed=2").unwrap_err();
        assert!(e.contains("speed"), "{e}");
        let e = ControlCommand::parse("clear lamp nope").unwrap_err();
        assert!(e.contains("nope"), "{e}");
        let e = ControlCommand::parse("reset lamp").unwrap_err();
        assert!(e.contains("reset"), "{e}");
        let e = ControlCommand::from_words(&["fault", "lamp x", "nak"]).unwrap_err();
        assert!(e.contains("lamp x"), "{e}");
    }

    #[test]
    fn requests_are_checked_like_the_plant_file() {
        let devices = devices();
        let nak = ControlCommand::parse("fault lamp nak").unwrap();
        assert_eq!(nak.execute(&devices), Ok(()));
        assert_eq!(devices["lamp"].faults(), vec![FaultSpec::now(Fault::Nak)]);
        let e = ControlCommand::parse("fault lamp stall at_mm=3")
            .unwrap()
            .execute(&devices)
            .unwrap_err();
        assert!(e.contains("lamp") && e.contains("stall"), "{e}");
        let e = ControlCommand::parse("fault lamp latency_ms")
            .unwrap()
            .execute(&devices)
            .unwrap_err();
        assert!(e.contains("ms"), "{e}");
        let e = ControlCommand::parse("fault oven nak")
            .unwrap()
            .execute(&devices)
            .unwrap_err();
        assert!(e.contains("oven") && e.contains("lamp"), "{e}");
        ControlCommand::parse("clear lamp")
            .unwrap()
            .execute(&devices)
            .unwrap();
        assert!(devices["lamp"].faults().is_empty());
    }
}
