//! What a device's state says in words beside its values (`DeviceState::detail`): the signals
//! the device refuses to read, and, when several gateways share the journal, that a device read
//! offline here is this gateway's view, not the one of the gateway that drives it. Every gateway
//! reads the devices it can open; one that cannot reach a device (a serial line on another
//! machine, a `gateways = [...]` list without it) reads it offline while its owner runs it.

use crate::device::{DeviceRuntime, Snapshot};
use closedloop_contract::sample::Liveness;
use closedloop_plant::DriverConfig;

/// Where a state is read: the gateway `here`, and the gateway whose lease (`owner`) holds the
/// device, if any.
pub(crate) struct Where<'a> {
    pub(crate) here: &'a str,
    pub(crate) owner: Option<&'a str>,
}

/// The detail of `dev`'s state read at `at`.
pub(crate) fn detail(dev: &DeviceRuntime, snap: &Snapshot, at: Where<'_>) -> Option<String> {
    let offline_why =
        (snap.liveness == Liveness::Offline).then(|| crate::device::offline_detail(dev, snap));
    detail_of(dev.id(), &dev.spec.driver, snap, at, offline_why)
}

/// [`detail`], given why the device is offline when it is.
fn detail_of(
    device: &str,
    driver: &DriverConfig,
    snap: &Snapshot,
    Where { here, owner }: Where<'_>,
    offline_why: Option<String>,
) -> Option<String> {
    let driven_elsewhere = owner.is_some_and(|o| o != here);
    let parts: Vec<String> = [
        never_heard(snap.liveness, device, driver),
        offline_why.filter(|_| !driven_elsewhere),
        unreadable(snap),
        elsewhere(snap.liveness, device, here, owner),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// What `unknown` means for a device on `driver`, in its protocol's words: the one sentence
/// the banner and the state use for a device nothing has been heard from since the start.
pub fn unknown_means(driver: &DriverConfig) -> &'static str {
    match driver {
        DriverConfig::Sim(_) | DriverConfig::ModbusTcp { .. } | DriverConfig::ModbusRtu { .. } => {
            "no valid answer to a poll since closedloop started"
        }
        DriverConfig::Mqtt { .. } => {
            "no message since closedloop started (no reading, heartbeat or status message); a \
             retained message is not a sign of life"
        }
        DriverConfig::Opcua { .. } => "no good value read or notified since closedloop started",
        DriverConfig::Can { .. } => "no frame of its messages since closedloop started",
    }
}

/// "lamp is unknown: no valid answer to a poll since closedloop started …".
fn never_heard(liveness: Liveness, device: &str, driver: &DriverConfig) -> Option<String> {
    (liveness == Liveness::Unknown).then(|| {
        let means = unknown_means(driver);
        format!("{device} is unknown: {means}. Its values, if any, are not current.")
    })
}

/// "contact cannot be read (discrete_input:9 answered exception 2 (Illegal Data Address))."
fn unreadable(snap: &Snapshot) -> Option<String> {
    if !snap.has_unreadable() {
        return None;
    }
    let each: Vec<String> = snap
        .unreadable()
        .map(|(name, f)| {
            let since = crate::clock::rfc3339(f.since_ms);
            let history = snap.reading(name).and_then(|r| r.last_good());
            let shown = match history {
                Some(_) => ": the value shown is its last good one, not a current one",
                None => "",
            };
            format!("{name} cannot be read since {since} ({}){shown}", f.why)
        })
        .collect();
    let refused_address = snap
        .unreadable()
        .any(|(_, f)| f.code == closedloop_contract::ErrorCode::RegisterInvalid);
    let fix = match refused_address {
        true => "Check those signals' addresses and types in the plant file.",
        false => {
            "The device refuses to read them: check the device (a failed sensor, a busy or faulted unit)."
        }
    };
    Some(format!("{}. {fix}", each.join("; ")))
}

/// Says whose reads these are when another gateway drives a device this one does not read
/// online: "offline" here is no evidence that the device is down.
fn elsewhere(liveness: Liveness, device: &str, here: &str, owner: Option<&str>) -> Option<String> {
    let owner = owner.filter(|o| *o != here)?;
    if liveness == Liveness::Online {
        return None;
    }
    Some(format!(
        "{device} reads {} from this gateway ({here}), which does not drive it: gateway {owner} \
         does and may well reach it. A command sent here is handed to {owner}; ask {owner} for \
         the state it reads.",
        liveness.as_str()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offline() -> Snapshot {
        Snapshot::with_liveness(Liveness::Offline)
    }

    /// A device's driver table as a plant file gives it, with one `signal` of its protocol.
    fn driver_with(table: &str, signal: &str) -> DriverConfig {
        let src = format!(
            "[[device]]\nid = \"lamp\"\ndescription = \"d\"\ndriver = {table}\n\
             [device.signals]\ncontact = {signal}\n"
        );
        let plant = closedloop_plant::parse(&src, "p.toml", std::path::Path::new("/srv"));
        plant.expect("a plant").devices[0].driver.clone()
    }

    fn driver(table: &str) -> DriverConfig {
        driver_with(table, "{ discrete_input = 0 }")
    }

    fn sim() -> DriverConfig {
        driver("{ kind = \"sim\", model = \"relay\" }")
    }

    fn detail(snap: &Snapshot, device: &str, here: &str, owner: Option<&str>) -> Option<String> {
        let why = (snap.liveness == Liveness::Offline).then(|| {
            format!("{device} gave no valid answer for more than 1 s (last error: timeout).")
        });
        detail_of(device, &sim(), snap, Where { here, owner }, why)
    }

    #[test]
    fn a_device_offline_here_and_driven_elsewhere_says_whose_reads_these_are() {
        let text = detail(&offline(), "lamp", "b", Some("a")).unwrap();
        assert!(
            text.starts_with("lamp reads offline from this gateway (b)"),
            "{text}"
        );
        assert!(text.contains("handed to a"), "{text}");
    }

    #[test]
    fn the_owner_or_a_single_gateway_says_why_offline_and_an_online_device_adds_nothing() {
        let reason =
            Some("lamp gave no valid answer for more than 1 s (last error: timeout).".into());
        assert_eq!(detail(&offline(), "lamp", "a", Some("a")), reason);
        assert_eq!(detail(&offline(), "lamp", "a", None), reason);
        let online = Snapshot::with_liveness(Liveness::Online);
        assert_eq!(detail(&online, "lamp", "b", Some("a")), None);
    }

    /// One word for "never heard": the state says what `unknown` means, with the same words
    /// as the banner, so a retained message is not taken for a device that answers.
    #[test]
    fn an_unknown_device_s_state_says_no_answer_since_start_and_that_retained_is_not_life() {
        let unknown = Snapshot::with_liveness(Liveness::Unknown);
        let mqtt = driver_with(
            "{ kind = \"mqtt\", broker = \"mqtt://127.0.0.1:1883\", client_id = \"t\" }",
            "{ topic = \"t/state\", type = \"bool\" }",
        );
        let at = || Where {
            here: "a",
            owner: None,
        };
        let text = detail_of("relay1", &mqtt, &unknown, at(), None).unwrap();
        assert!(
            text.starts_with("relay1 is unknown: no message since closedloop started"),
            "{text}"
        );
        assert!(
            text.contains("a retained message is not a sign of life"),
            "{text}"
        );
        // A Modbus device in its own words: no MQTT sentence.
        let modbus = driver("{ kind = \"modbus-tcp\", address = \"127.0.0.1:502\", unit = 1 }");
        let text = detail_of("pump", &modbus, &unknown, at(), None).unwrap();
        assert_eq!(
            text,
            "pump is unknown: no valid answer to a poll since closedloop started. Its values, if any, are not current."
        );
    }
}

#[cfg(test)]
#[path = "state_text/golden.rs"]
mod golden;
