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
    if snap.unreadable.is_empty() {
        return None;
    }
    let each: Vec<String> = snap
        .unreadable
        .iter()
        .map(|(name, (_, why))| format!("{name} cannot be read ({why})"))
        .collect();
    Some(format!(
        "{}. Check those signals' addresses and types in the plant file.",
        each.join("; ")
    ))
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
        Snapshot {
            liveness: Liveness::Offline,
            ..Snapshot::before_first_read()
        }
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
        let online = Snapshot {
            liveness: Liveness::Online,
            ..Snapshot::before_first_read()
        };
        assert_eq!(detail(&online, "lamp", "b", Some("a")), None);
    }
}
