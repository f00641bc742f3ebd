//! The validation pass over a sim table: from the flat, all-optional [`SimConfig`] to a typed
//! [`ValidSim`] whose every value the simulator can honour, or an error naming the key.
//!
//! `closedloop check` runs exactly this pass, so nothing that passes here may fail later in
//! [`crate::SimDevice::new`] — except the documented refusal of `mqtt-relay`, which is a valid
//! model that simply has no in-process form.

use crate::config::{FaultConfig, SimConfig};
use crate::error::SimConfigError;
use crate::faults::{Fault, FaultKind, FaultSpec};
use crate::model::{
    DEFAULT_SEED, DEFAULT_TIMEOUT_MS, HeaterOptions, Model, MqttRelayOptions, RelayOptions,
    SensorOptions, StepperOptions, ValidSim,
};

/// Largest absolute position a stepper can report: its i32 register holds 0.01 mm.
const MAX_ABS_MM: f64 = i32::MAX as f64 / 100.0;
/// Largest absolute temperature or value an i16 register in 0.1 units can hold.
const MAX_ABS_TENTHS: f64 = i16::MAX as f64 / 10.0;
/// Upper bounds that catch typos (a minute for a relay is a unit mix-up, not a relay).
const MAX_PULL_IN_MS: u64 = 60_000;
const MAX_TIMEOUT_MS: u64 = 600_000;
const MAX_AFTER_MS: u64 = 86_400_000;
const MAX_DOWN_MS: u64 = 3_600_000;
const MAX_LATENCY_MS: u64 = 600_000;

/// The model-specific options each model takes.
fn options_of(model: &str) -> Option<&'static [&'static str]> {
    Some(match model {
        "relay" => &["feedback", "pull_in_ms"],
        "stepper" => &["speed_mm_s", "travel_mm"],
        "heater" => &["rate_c_per_s", "cool_c_per_s", "ambient_c"],
        "sensor" => &["value", "noise"],
        "mqtt-relay" => &["prefix", "heartbeat_s", "pull_in_ms"],
        _ => return None,
    })
}

/// `` `a`, `b` `` for messages.
fn list(keys: &[&str]) -> String {
    keys.iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks that a number is finite and satisfies `ok`.
fn number(key: &str, v: f64, ok: bool, expected: &str) -> Result<f64, SimConfigError> {
    if v.is_finite() && ok {
        Ok(v)
    } else {
        Err(SimConfigError::range(key, v, expected))
    }
}

impl SimConfig {
    /// Checks the table and resolves defaults; the error names the key at fault.
    pub fn validate(&self) -> Result<ValidSim, SimConfigError> {
        let allowed = options_of(&self.model).ok_or_else(|| SimConfigError::UnknownModel {
            model: self.model.clone(),
        })?;
        if let Some(key) = self
            .given_options()
            .into_iter()
            .find(|k| !allowed.contains(k))
        {
            return Err(SimConfigError::OptionNotForModel {
                key: key.to_string(),
                model: self.model.clone(),
                allowed: list(allowed),
            });
        }
        let model = self.model_options()?;
        let timeout_ms = self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
        if !(1..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
            return Err(SimConfigError::range(
                "timeout_ms",
                timeout_ms,
                "1 to 600000 ms",
            ));
        }
        let mut faults: Vec<FaultSpec> = Vec::with_capacity(self.faults.len());
        for (i, fc) in self.faults.iter().enumerate() {
            let prefix = format!("faults[{i}]");
            let spec = validate_fault(fc, &model, &prefix)?;
            if let Some(first) = faults
                .iter()
                .position(|f| f.fault.kind() == spec.fault.kind())
            {
                return Err(SimConfigError::DuplicateFault {
                    key: format!("{prefix}.kind"),
                    kind: spec.fault.kind(),
                    first,
                });
            }
            faults.push(spec);
        }
        let seed = self.seed.unwrap_or(DEFAULT_SEED);
        Ok(ValidSim {
            model,
            faults,
            timeout_ms,
            seed,
        })
    }

    /// The model's options with defaults, range-checked. The model name is known to be valid.
    fn model_options(&self) -> Result<Model, SimConfigError> {
        let pull_in_ms = self.pull_in_ms.unwrap_or(10);
        if pull_in_ms > MAX_PULL_IN_MS {
            return Err(SimConfigError::range(
                "pull_in_ms",
                pull_in_ms,
                "0 to 60000 ms",
            ));
        }
        Ok(match self.model.as_str() {
            "relay" => Model::Relay(RelayOptions {
                feedback: self.feedback.unwrap_or(true),
                pull_in_ms,
            }),
            "stepper" => Model::Stepper(self.stepper()?),
            "heater" => Model::Heater(self.heater()?),
            "sensor" => Model::Sensor(self.sensor()?),
            _ => Model::MqttRelay(self.mqtt_relay(pull_in_ms)?),
        })
    }

    /// A stepper's speed and travel: its position register is an i32 in 0.01 mm, so the
    /// travel must fit in it.
    fn stepper(&self) -> Result<StepperOptions, SimConfigError> {
        let speed = self.speed_mm_s.unwrap_or(100.0);
        let speed_mm_s = number(
            "speed_mm_s",
            speed,
            speed >= 0.01,
            "a speed of at least 0.01 mm/s",
        )?;
        let [min, max] = self.travel_mm.unwrap_or([0.0, 300.0]);
        let fits = |v: f64| v.is_finite() && v.abs() <= MAX_ABS_MM;
        if !(fits(min) && fits(max) && min < max) {
            return Err(SimConfigError::range(
                "travel_mm",
                format!("[{min}, {max}]"),
                "[min, max] with min < max, within ±21474836 mm (an i32 in 0.01 mm)",
            ));
        }
        Ok(StepperOptions {
            speed_mm_s,
            travel_mm: [min, max],
        })
    }

    /// A heater's rates and ambient temperature: rates above 0 (or it never moves), and an
    /// ambient its i16 register in 0.1 °C can hold.
    fn heater(&self) -> Result<HeaterOptions, SimConfigError> {
        let r = self.rate_c_per_s.unwrap_or(2.0);
        let c = self.cool_c_per_s.unwrap_or(0.5);
        let a = self.ambient_c.unwrap_or(25.0);
        Ok(HeaterOptions {
            rate_c_per_s: number("rate_c_per_s", r, r > 0.0, "a rate above 0 °C/s")?,
            cool_c_per_s: number("cool_c_per_s", c, c > 0.0, "a rate above 0 °C/s")?,
            ambient_c: number(
                "ambient_c",
                a,
                a.abs() <= MAX_ABS_TENTHS,
                "within ±3276.7 °C (an i16 in 0.1 °C)",
            )?,
        })
    }

    /// A sensor's value and noise: value ± noise must fit its i16 register in 0.1 units.
    fn sensor(&self) -> Result<SensorOptions, SimConfigError> {
        let v = self.value.unwrap_or(0.0);
        let n = self.noise.unwrap_or(0.0);
        let value = number(
            "value",
            v,
            v.abs() <= MAX_ABS_TENTHS,
            "within ±3276.7 (an i16 in 0.1 units)",
        )?;
        let noise = number("noise", n, n >= 0.0, "0 or more")?;
        number(
            "noise",
            n,
            v.abs() + n <= MAX_ABS_TENTHS,
            "small enough that value ± noise stays within ±3276.7",
        )?;
        Ok(SensorOptions { value, noise })
    }

    /// An MQTT relay's topic prefix (required: it names every topic) and heartbeat period.
    fn mqtt_relay(&self, pull_in_ms: u64) -> Result<MqttRelayOptions, SimConfigError> {
        let prefix = self.prefix.clone().ok_or_else(|| SimConfigError::Missing {
            key: "prefix".into(),
            what: "by the sim model `mqtt-relay`".into(),
            fix: "add `prefix = \"lab/lamp\"` (the topics are {prefix}/set, /state, /status)"
                .into(),
        })?;
        if prefix.is_empty() || prefix.contains(['+', '#']) || prefix.ends_with('/') {
            return Err(SimConfigError::range(
                "prefix",
                format!("\"{prefix}\""),
                "a non-empty topic without wildcards (+, #) or a trailing /",
            ));
        }
        let h = self.heartbeat_s.unwrap_or(1.0);
        let heartbeat_s = number(
            "heartbeat_s",
            h,
            (0.01..=3600.0).contains(&h),
            "0.01 to 3600 s",
        )?;
        Ok(MqttRelayOptions {
            prefix,
            heartbeat_s,
            pull_in_ms,
        })
    }
}

/// Checks one fault entry against the model; `prefix` is `faults[i]` or `fault` (injection).
pub(crate) fn validate_fault(
    fc: &FaultConfig,
    model: &Model,
    prefix: &str,
) -> Result<FaultSpec, SimConfigError> {
    let kind: FaultKind = fc
        .kind
        .parse()
        .map_err(|_| SimConfigError::UnknownFaultKind {
            key: at(prefix, "kind"),
            kind: fc.kind.clone(),
        })?;
    fault_options(fc, kind, prefix)?;
    fits_model(kind, model, prefix)?;
    if let Some(ms) = fc.after_ms
        && ms > MAX_AFTER_MS
    {
        return Err(SimConfigError::range(
            &at(prefix, "after_ms"),
            ms,
            "0 to 86400000 ms (a day)",
        ));
    }
    Ok(FaultSpec {
        fault: fault(fc, kind, model, prefix)?,
        after_ms: fc.after_ms,
    })
}

/// The key `option` of the fault at `prefix`, as errors name it.
fn at(prefix: &str, option: &str) -> String {
    format!("{prefix}.{option}")
}

/// Refuses an option the fault kind does not take, which would otherwise be ignored.
fn fault_options(fc: &FaultConfig, kind: FaultKind, prefix: &str) -> Result<(), SimConfigError> {
    let allowed = kind.options();
    let Some(option) = fc
        .given_options()
        .into_iter()
        .find(|o| !allowed.contains(o))
    else {
        return Ok(());
    };
    Err(SimConfigError::FaultOptionNotAllowed {
        key: at(prefix, option),
        kind,
        allowed: match allowed {
            [] => "it takes only `after_ms`".to_string(),
            _ => format!("it takes {} and `after_ms`", list(allowed)),
        },
    })
}

/// Refuses a fault the model cannot have (a relay does not stall, MQTT has no CRC): it would
/// be accepted and then never happen.
fn fits_model(kind: FaultKind, model: &Model, prefix: &str) -> Result<(), SimConfigError> {
    let relay_like = matches!(model, Model::Relay(_) | Model::MqttRelay(_));
    let why = match kind {
        FaultKind::Stall if !matches!(model, Model::Stepper(_)) => "only a stepper stalls",
        FaultKind::Brownout | FaultKind::SwappedContacts if !relay_like => {
            "only a relay has a contact"
        }
        FaultKind::Nak if matches!(model, Model::MqttRelay(_)) => {
            "MQTT has no negative answer to a set: the broker acknowledges the publish, never the \
             device; use `zombie` or `drop_rate` for a relay that ignores sets"
        }
        FaultKind::CrcError if matches!(model, Model::MqttRelay(_)) => {
            "MQTT frames carry no CRC; it applies to register-mapped models"
        }
        _ => return Ok(()),
    };
    Err(SimConfigError::FaultNotForModel {
        key: at(prefix, "kind"),
        kind,
        model: model.name().to_string(),
        why: why.to_string(),
    })
}

/// A stall at a position (`at_mm`, within the stepper's travel) or at a time (`after_ms`),
/// not both: the two would race.
fn stall(fc: &FaultConfig, model: &Model, prefix: &str) -> Result<Fault, SimConfigError> {
    let key = |option: &str| at(prefix, option);
    if let (Some(_), Some(_)) = (fc.at_mm, fc.after_ms) {
        return Err(SimConfigError::Conflict {
            key: key("at_mm"),
            other: key("after_ms"),
            fix: "use `at_mm` for a stall at a position or `after_ms` for a stall at a \
                  time, not both"
                .into(),
        });
    }
    if let (Some(at), Model::Stepper(s)) = (fc.at_mm, model) {
        let [min, max] = s.travel_mm;
        number(
            &key("at_mm"),
            at,
            (min..=max).contains(&at),
            &format!("a position within travel_mm [{min}, {max}]"),
        )?;
    }
    Ok(Fault::Stall { at_mm: fc.at_mm })
}

/// The fault of `kind` with its options, each checked: one arm per kind.
fn fault(
    fc: &FaultConfig,
    kind: FaultKind,
    model: &Model,
    prefix: &str,
) -> Result<Fault, SimConfigError> {
    let option = |option, example| Needed {
        prefix,
        kind,
        option,
        example,
    };
    Ok(match kind {
        FaultKind::Stall => stall(fc, model, prefix)?,
        FaultKind::Brownout => Fault::Brownout,
        FaultKind::SwappedContacts => Fault::SwappedContacts,
        FaultKind::PowerOff => Fault::PowerOff,
        FaultKind::Zombie => Fault::Zombie,
        FaultKind::Nak => Fault::Nak,
        FaultKind::CrcError => Fault::CrcError,
        FaultKind::Reboot => Fault::Reboot {
            down_ms: option("down_ms", "500").check(
                fc.down_ms,
                |v| (1..=MAX_DOWN_MS).contains(&v),
                "1 to 3600000 ms",
            )?,
        },
        FaultKind::LatencyMs => Fault::LatencyMs {
            ms: option("ms", "200").check(fc.ms, |v| v <= MAX_LATENCY_MS, "0 to 600000 ms")?,
        },
        FaultKind::DropRate => Fault::DropRate {
            p: option("p", "0.5").check(
                fc.p,
                |p: f64| p.is_finite() && (0.0..=1.0).contains(&p),
                "a probability from 0 to 1",
            )?,
        },
    })
}

/// An option a fault kind cannot do without (`down_ms` of `reboot`): where it goes and a
/// value to suggest when it is missing.
struct Needed<'a> {
    prefix: &'a str,
    kind: FaultKind,
    option: &'a str,
    example: &'a str,
}

impl Needed<'_> {
    /// The option's value: refused when missing, or when it is not `ok` (`expected` says what
    /// would be).
    fn check<T: Copy + ToString>(
        &self,
        value: Option<T>,
        ok: impl Fn(T) -> bool,
        expected: &str,
    ) -> Result<T, SimConfigError> {
        let (option, kind) = (self.option, self.kind);
        let v = value.ok_or_else(|| SimConfigError::Missing {
            key: at(self.prefix, option),
            what: format!("by the fault `{kind}`"),
            fix: format!("add `{option} = {}` to the fault", self.example),
        })?;
        if !ok(v) {
            return Err(SimConfigError::range(&at(self.prefix, option), v, expected));
        }
        Ok(v)
    }
}
