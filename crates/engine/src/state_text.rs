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
        unreadable(snap),
        elsewhere(snap.liveness, device, here, owner),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
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
}
