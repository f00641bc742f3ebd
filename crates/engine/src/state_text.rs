//! What a device's state says in words beside its values (`DeviceState::detail`): the signals
//! the device refuses to read, and, when several gateways share the journal, that a device read
//! offline here is this gateway's view, not the one of the gateway that drives it. Every gateway
//! reads the devices it can open; one that cannot reach a device (a serial line on another
//! machine, a `gateways = [...]` list without it) reads it offline while its owner runs it.

use crate::device::Snapshot;
use closedloop_driver::sample::Liveness;

/// The detail of `device`'s state read at the gateway `here`, whose lease `owner` holds (if any).
pub(crate) fn detail(
    snap: &Snapshot,
    device: &str,
    here: &str,
    owner: Option<&str>,
) -> Option<String> {
    let parts: Vec<String> = [
        never_heard(snap.liveness, device),
        unreadable(snap),
        elsewhere(snap.liveness, device, here, owner),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// What `unknown` means, said where it is read: the one word the banner, the state and the
/// refusals use for a device nothing has been heard from since the start.
pub const UNKNOWN_MEANS: &str = "no answer since closedloop started (no reading, \
    heartbeat or status message); a retained MQTT message is not a sign of life";

/// "lamp is unknown: no answer since closedloop started …".
fn never_heard(liveness: Liveness, device: &str) -> Option<String> {
    (liveness == Liveness::Unknown).then(|| {
        format!("{device} is unknown: {UNKNOWN_MEANS}. Its values, if any, are not current.")
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
        .any(|(_, f)| f.code == closedloop_driver::ErrorCode::RegisterInvalid);
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
    fn nothing_is_added_for_the_owner_a_single_gateway_or_a_device_online_here() {
        assert_eq!(detail(&offline(), "lamp", "a", Some("a")), None);
        assert_eq!(detail(&offline(), "lamp", "a", None), None);
        let online = Snapshot::with_liveness(Liveness::Online);
        assert_eq!(detail(&online, "lamp", "b", Some("a")), None);
    }

    /// One word for "never heard": the state says what `unknown` means, with the same words
    /// as the banner, so a retained message is not taken for a device that answers.
    #[test]
    fn an_unknown_device_s_state_says_no_answer_since_start_and_that_retained_is_not_life() {
        let unknown = Snapshot::with_liveness(Liveness::Unknown);
        let text = detail(&unknown, "relay1", "a", None).unwrap();
        assert!(
            text.starts_with("relay1 is unknown: no answer since closedloop started"),
            "{text}"
        );
        assert!(
            text.contains("a retained MQTT message is not a sign of life"),
            "{text}"
        );
    }
}
