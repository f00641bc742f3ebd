//! Why a simulated device's table was refused.
//!
//! Every variant carries the plant-file key at fault (`speed_mm_s`, `faults[1].down_ms`) so that
//! `closedloop check` can point at the exact line, and its message says how to fix it.

use crate::faults::FaultKind;
use thiserror::Error;

/// The models a `kind = "sim"` table may name, for messages.
pub(crate) const MODEL_NAMES: &str = "`relay`, `stepper`, `heater`, `sensor`, `mqtt-relay`";

/// A sim table that cannot be run as written.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum SimConfigError {
    /// `model` names no simulated model.
    #[error("unknown sim model `{model}`: use one of {MODEL_NAMES}")]
    UnknownModel {
        /// The name as written.
        model: String,
    },
    /// An option that belongs to another model (`speed_mm_s` on a relay).
    #[error(
        "`{key}` is not an option of the sim model `{model}`: remove it (`{model}` takes {allowed})"
    )]
    OptionNotForModel {
        /// The offending option.
        key: String,
        /// The model of the table.
        model: String,
        /// The options that model takes.
        allowed: String,
    },
    /// A number outside what the simulator can honour.
    #[error("`{key}` = {value} is out of range: {expected}")]
    OutOfRange {
        /// The offending key.
        key: String,
        /// The value as written.
        value: String,
        /// What would be accepted.
        expected: String,
    },
    /// A required option is absent.
    #[error("`{key}` is required {what}: {fix}")]
    Missing {
        /// The missing key.
        key: String,
        /// For what it is required (`by the sim model \`mqtt-relay\``).
        what: String,
        /// How to add it.
        fix: String,
    },
    /// `kind` of a fault names no fault.
    #[error(
        "`{key}` = \"{kind}\" is not a fault kind: use one of stall, brownout, swapped_contacts, \
         power_off, zombie, nak, reboot, latency_ms, drop_rate, crc_error"
    )]
    UnknownFaultKind {
        /// `faults[i].kind`.
        key: String,
        /// The kind as written.
        kind: String,
    },
    /// A fault that cannot happen to this model (`stall` on a relay).
    #[error("the fault `{kind}` does not apply to the sim model `{model}` ({why}): remove `{key}`")]
    FaultNotForModel {
        /// `faults[i].kind`.
        key: String,
        /// The fault's kind.
        kind: FaultKind,
        /// The model of the table.
        model: String,
        /// Which models it applies to.
        why: String,
    },
    /// An option the fault's kind does not take (`down_ms` on `nak`).
    #[error("`{key}` is not an option of the fault `{kind}`: remove it ({allowed})")]
    FaultOptionNotAllowed {
        /// `faults[i].<option>`.
        key: String,
        /// The fault's kind.
        kind: FaultKind,
        /// What that kind takes.
        allowed: String,
    },
    /// Two options that contradict each other.
    #[error("`{key}` cannot be combined with `{other}`: {fix}")]
    Conflict {
        /// The offending key.
        key: String,
        /// The key it conflicts with.
        other: String,
        /// How to resolve it.
        fix: String,
    },
    /// The same fault kind given twice.
    #[error("`{key}`: the fault `{kind}` is already given at faults[{first}]: give each kind once")]
    DuplicateFault {
        /// `faults[i].kind`.
        key: String,
        /// The repeated kind.
        kind: FaultKind,
        /// Index of its first occurrence.
        first: usize,
    },
    /// A valid model that has no in-process register map.
    #[error(
        "the sim model `{model}` has no in-process register map: it runs only in `closedloop sim` \
         as an MQTT client of its broker (`[device.sim] model = \"mqtt-relay\"` with a `broker`); \
         use `model = \"relay\"` for an in-process relay"
    )]
    NotInProcess {
        /// The model.
        model: String,
    },
}

impl SimConfigError {
    /// The plant-file key at fault, relative to the sim table (`model`, `speed_mm_s`,
    /// `faults[1].down_ms`); injected faults use the prefix `fault` (`fault.p`).
    pub fn key(&self) -> String {
        match self {
            SimConfigError::UnknownModel { .. } | SimConfigError::NotInProcess { .. } => {
                "model".to_string()
            }
            SimConfigError::OptionNotForModel { key, .. }
            | SimConfigError::OutOfRange { key, .. }
            | SimConfigError::Missing { key, .. }
            | SimConfigError::UnknownFaultKind { key, .. }
            | SimConfigError::FaultNotForModel { key, .. }
            | SimConfigError::FaultOptionNotAllowed { key, .. }
            | SimConfigError::Conflict { key, .. }
            | SimConfigError::DuplicateFault { key, .. } => key.clone(),
        }
    }

    /// An [`SimConfigError::OutOfRange`] for `key`.
    pub(crate) fn range(key: &str, value: impl ToString, expected: &str) -> SimConfigError {
        SimConfigError::OutOfRange {
            key: key.to_string(),
            value: value.to_string(),
            expected: expected.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_key_and_the_fix() {
        let e = SimConfigError::OptionNotForModel {
            key: "speed_mm_s".into(),
            model: "relay".into(),
            allowed: "`feedback`, `pull_in_ms`".into(),
        };
        assert_eq!(e.key(), "speed_mm_s");
        let msg = e.to_string();
        assert!(msg.contains("speed_mm_s") && msg.contains("relay") && msg.contains("remove"));
        let e = SimConfigError::NotInProcess {
            model: "mqtt-relay".into(),
        };
        assert_eq!(e.key(), "model");
        assert!(e.to_string().contains("closedloop sim"));
    }
}
