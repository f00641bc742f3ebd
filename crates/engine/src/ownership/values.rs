//! Live values from the owner: on a journal several gateways share, each gateway publishes what
//! it reads of the devices it drives, and shows the owner's values for a device it cannot read
//! itself (a serial line, `gateways = [...]`, a network it does not reach) instead of nothing.
//!
//! Every half second ([`ROUND`]) a gateway writes the devices it holds whose liveness, values
//! or unreadable signals changed since it last wrote them (with its lease epoch), and stamps its
//! round, changed rows or none (`closedloop_journal::DeviceValues`). In the same round it reads
//! the owners' values of the devices that do not read online here and that another gateway
//! holds. `get_device_state` and `list_devices` then show those, naming the gateway that read
//! them (`read_by`), each value's age bounded from below by when the owner last confirmed it
//! current plus the device's poll period: a value shown is never younger than it is.
//!
//! A device this gateway reads online is always shown from its own reads.

use crate::api::{DeviceState, SignalState, UnreadableSignal};
use crate::device::Liveness;
use closedloop_journal::Published;
use closedloop_link::Shown;
use closedloop_link::clock::rfc3339;
use closedloop_plant::Device;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a gateway publishes its devices' changes and reads the owners' values.
pub(crate) const ROUND: Duration = Duration::from_millis(500);

/// This gateway's side of the published values.
#[derive(Debug, Default)]
pub(crate) struct OwnersValues {
    /// What this gateway last published, by device: the epoch and a fingerprint of the state.
    pub(crate) published: Mutex<HashMap<String, (i64, u64)>>,
    /// The owners' values of the devices this gateway cannot read, as of the last round that
    /// read them, with when it did: their age grows from then on, and a round that fails
    /// forgets them all rather than let them look fresh.
    pub(crate) seen: Mutex<HashMap<String, (Published, Instant)>>,
}

/// A value the owner read within this many poll periods (plus [`FRESH_SLACK_MS`]) is published
/// as fresh; one read longer ago carries its read time, and readers count its age from that.
const FRESH_POLLS: i64 = 2;
/// Slack on [`FRESH_POLLS`] for a cycle's own duration.
const FRESH_SLACK_MS: i64 = 100;

/// How long the owner's values stay shown after the round that read them: beyond it (rounds
/// failing or stuck), they are not shown at all.
const SHOWN_AT_MOST: Duration = Duration::from_secs(5);

/// A device's state as published: what a reader shows — liveness, each signal's value and
/// source, and the unreadable signals with their code, words and since when. Read times change
/// on every poll and are left out while a value is fresh (read within [`FRESH_POLLS`] polls),
/// so a row is written only when something a reader shows changes; a value older than that
/// (its signal unreadable, the device silent, or a payload that names an old time) carries its
/// time as this gateway's views date it (`Shown::dated`), and so does the device's last answer:
/// readers then show them as old as they are.
pub(crate) fn published_state(snap: &crate::device::Snapshot, poll_ms: i64, now_ms: i64) -> Value {
    let fresh_within = FRESH_POLLS * poll_ms + FRESH_SLACK_MS;
    let old = |t: i64| now_ms - t > fresh_within;
    // Dated as this gateway's own views date it (a payload's time when it names one), so a value
    // is never younger at another gateway than here.
    let values: serde_json::Map<String, Value> = snap
        .readings()
        .filter_map(|(name, r)| {
            let shown = Shown::dated(r.last_good()?, None).published(|t| !old(t));
            Some((name.to_string(), shown))
        })
        .collect();
    let unreadable: serde_json::Map<String, Value> = snap
        .unreadable()
        .map(|(name, f)| {
            let why =
                json!({"error_code": f.code.as_str(), "detail": f.why, "since_ms": f.since_ms});
            (name.to_string(), why)
        })
        .collect();
    let last_seen_ms = snap.last_seen_ms.filter(|t| old(*t));
    json!({"liveness": snap.liveness.as_str(), "values": values, "unreadable": unreadable,
           "last_seen_ms": last_seen_ms})
}

pub(crate) fn fingerprint(state: &Value) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    state.to_string().hash(&mut h);
    h.finish()
}

impl OwnersValues {
    /// The owner's values of `device`, if this gateway read them in its last round.
    /// Its `confirmed_ms_ago` counts the time since that round read it too.
    pub(crate) fn of(&self, device: &str) -> Option<Published> {
        let seen = lock(&self.seen);
        let (owner, read) = seen.get(device)?;
        let since = read.elapsed();
        (since <= SHOWN_AT_MOST).then(|| {
            let mut owner = owner.clone();
            owner.confirmed_ms_ago += i64::try_from(since.as_millis()).unwrap_or(i64::MAX);
            owner
        })
    }

    /// The liveness `list_devices`, `/metrics` and device state show: this gateway's own,
    /// unless it does not read the device online and the owner's published one is at hand —
    /// then never fresher than the owner's last round allows (`window_ms`: the device's
    /// liveness window).
    pub(crate) fn liveness(&self, device: &str, own: Liveness, window_ms: i64) -> Liveness {
        match (own, self.of(device)) {
            (Liveness::Online, _) | (_, None) => own,
            (_, Some(p)) => liveness_of(&p, window_ms),
        }
    }
}

impl OwnersValues {
    /// The unreadable signals `list_devices` shows: this gateway's own (`own`), unless it does
    /// not read the device online and the owner's published list is at hand.
    pub(crate) fn unreadable(
        &self,
        device: &str,
        liveness: Liveness,
        own: Vec<String>,
    ) -> Vec<String> {
        match (liveness, self.of(device)) {
            (Liveness::Online, _) | (_, None) => own,
            (_, Some(p)) => (p.state["unreadable"].as_object())
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default(),
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The owner's published liveness, no fresher than its last round allows: `online` only while
/// the owner confirmed it within the device's liveness window (`window_ms`). An owner that froze
/// stops confirming, and its device is then `offline` here — not `online` 3.2 s after the owner
/// froze, with a 1 s window, as a non-owner once showed.
fn liveness_of(p: &Published, window_ms: i64) -> Liveness {
    // Two rounds of slack: a healthy owner confirms once a round, and its reader reads once a
    // round too — a 1 s window would otherwise flap at every reader.
    let slack = 2 * i64::try_from(ROUND.as_millis()).unwrap_or(i64::MAX);
    match p.state["liveness"].as_str() {
        Some("online") if p.confirmed_ms_ago <= window_ms + slack => Liveness::Online,
        Some("online") | Some("offline") => Liveness::Offline,
        _ => Liveness::Unknown,
    }
}

/// A device's liveness window in milliseconds.
pub(crate) fn window_ms(spec: &Device) -> i64 {
    (spec.liveness.max_silence_s * 1000.0).ceil() as i64
}

/// `state` (this gateway's, of a device it does not read online) with the owner's published
/// values in place of its own: liveness, signals, the unreadable list and `read_by`. A value
/// published with its read time is as old as that (on the owner's clock: keep the clocks in
/// step); one published as fresh was read within the owner's fresh bound of its last round, so
/// it is shown that much older than the round: never younger than it is.
pub(crate) fn from_owner(state: &mut DeviceState, owner: &Published, spec: &Device, now_ms: i64) {
    let poll_ms = i64::try_from(spec.poll_ms).unwrap_or(i64::MAX);
    let fresh_within = FRESH_POLLS * poll_ms + FRESH_SLACK_MS;
    let fresh_age = owner.confirmed_ms_ago + fresh_within;
    let age_of = |at_ms: Option<i64>| at_ms.map_or(fresh_age, |t| (now_ms - t).max(fresh_age));
    state.liveness = liveness_of(owner, window_ms(spec));
    let unreadable = owner.state["unreadable"].as_object();
    state.unreadable = (unreadable.into_iter().flatten())
        .map(|(name, u)| {
            let since = u["since_ms"].as_i64().unwrap_or(now_ms);
            let signal = UnreadableSignal {
                error_code: u["error_code"].as_str().unwrap_or_default().to_string(),
                detail: u["detail"].as_str().unwrap_or_default().to_string(),
                since: rfc3339(since),
            };
            (name.clone(), signal)
        })
        .collect();
    state.signals = (owner.state["values"].as_object().into_iter().flatten())
        .map(|(name, v)| {
            let unit = spec.signal(name).and_then(|s| s.unit.as_deref());
            let shown = Shown::from_published(v, unit, now_ms, fresh_age);
            let unreadable = state.unreadable.contains_key(name);
            (name.clone(), SignalState::shown(&shown, now_ms, unreadable))
        })
        .collect();
    let last_seen_ms = owner.state["last_seen_ms"].as_i64();
    state.last_seen_ms = Some(now_ms - age_of(last_seen_ms));
    state.last_seen = state.last_seen_ms.map(rfc3339);
    state.read_by = Some(owner.owner.clone());
    let unreadable = match state.unreadable.is_empty() {
        true => String::new(),
        false => {
            let names: Vec<&str> = state.unreadable.keys().map(String::as_str).collect();
            format!(" It cannot read {} there.", names.join(", "))
        }
    };
    state.detail = Some(format!(
        "{} cannot be read from this gateway; these are the reads of gateway {}, which drives \
         it, each shown as old as it is.{unreadable}",
        state.device, owner.owner
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn published(confirmed_ms_ago: i64, state: Value) -> Published {
        Published {
            device: "lamp".into(),
            owner: "a".into(),
            epoch: 1,
            state,
            confirmed_ms_ago,
        }
    }

    #[test]
    fn owners_values_age_from_the_round_that_read_them_and_go_unshown_past_a_bound() {
        let v = OwnersValues::default();
        let state = json!({"liveness": "online", "values": {}});
        let read = Instant::now() - Duration::from_millis(1500);
        lock(&v.seen).insert("lamp".into(), (published(200, state.clone()), read));
        let shown = v.of("lamp").expect("shown within the bound");
        assert!(shown.confirmed_ms_ago >= 1700, "{shown:?}");
        let long_ago = Instant::now() - SHOWN_AT_MOST - Duration::from_millis(1);
        lock(&v.seen).insert("lamp".into(), (published(200, state), long_ago));
        assert_eq!(
            v.of("lamp"),
            None,
            "not shown once the rounds stopped reading it"
        );
    }

    #[test]
    fn an_owners_online_is_shown_only_while_its_rounds_confirm_it_within_the_window() {
        let online = json!({"liveness": "online", "values": {}});
        assert_eq!(
            liveness_of(&published(1900, online.clone()), 1000),
            Liveness::Online
        );
        assert_eq!(
            liveness_of(&published(3200, online), 1000),
            Liveness::Offline,
            "an owner that froze confirms nothing"
        );
        let unknown = json!({"liveness": "unknown", "values": {}});
        assert_eq!(
            liveness_of(&published(10, unknown), 1000),
            Liveness::Unknown
        );
    }

    #[test]
    fn an_owner_whose_last_answer_is_old_publishes_it_and_readers_count_from_it() {
        let mut snap = crate::device::Snapshot::before_first_read();
        snap.last_seen_ms = Some(10_000);
        let fresh = published_state(&snap, 20, 10_100);
        assert!(fresh["last_seen_ms"].is_null(), "{fresh}");
        let stale = published_state(&snap, 20, 13_000);
        assert_eq!(stale["last_seen_ms"], 10_000, "{stale}");
        assert_ne!(
            fingerprint(&fresh),
            fingerprint(&stale),
            "going stale is a change"
        );
    }
    /// A plant with one MQTT lamp: what `from_owner` shows is judged against its poll period.
    fn lamp() -> std::sync::Arc<Device> {
        let src = "[[device]]\nid = \"lamp\"\ndescription = \"d\"\n\
                   driver = { kind = \"sim\", model = \"relay\" }\n\
                   [device.signals]\ncontact = { discrete_input = 0 }\n";
        let plant = closedloop_plant::parse(src, "p.toml", std::path::Path::new("/srv"));
        plant.expect("a plant").devices.remove(0)
    }

    fn empty_state() -> DeviceState {
        DeviceState {
            device: "lamp".into(),
            liveness: Liveness::Unknown,
            last_seen: None,
            last_seen_ms: None,
            signals: Default::default(),
            unreadable: Default::default(),
            alarms: vec![],
            detail: None,
            owner: None,
            epoch: None,
            read_by: None,
        }
    }

    #[test]
    fn a_retained_value_dated_by_its_payload_reaches_other_gateways_as_old_as_that() {
        let mut snap = crate::device::Snapshot::before_first_read();
        // Retained (read 0) at 10 s, its payload taken at 1 s; another retained, undated.
        snap.record_taken(
            "contact",
            closedloop_contract::Value::Bool(true),
            (10_000, Some(1_000)),
            0,
            || "t".into(),
        );
        snap.record_taken(
            "level",
            closedloop_contract::Value::Number(3.0),
            (10_000, None),
            0,
            || "t".into(),
        );
        let state = published_state(&snap, 100, 10_050);
        assert_eq!(state["values"]["contact"]["retained"], true, "{state}");
        assert_eq!(state["values"]["contact"]["at_ms"], 1_000, "{state}");
        assert_eq!(state["values"]["level"]["retained"], true, "{state}");
        assert!(
            state["values"]["level"]["at_ms"].is_null(),
            "no time, no age: {state}"
        );
        let mut shown = empty_state();
        from_owner(&mut shown, &published(50, state), &lamp(), 10_050);
        let contact = &shown.signals["contact"];
        assert!(contact.retained);
        assert_eq!(
            contact.age_ms,
            Some(9_050),
            "as old as its payload says: {contact:?}"
        );
        assert_eq!(contact.at.as_deref(), Some(rfc3339(1_000).as_str()));
        let level = &shown.signals["level"];
        assert!(level.retained);
        assert_eq!(
            (level.at.as_deref(), level.age_ms),
            (None, None),
            "undated: {level:?}"
        );
    }

    #[test]
    fn a_live_value_whose_payload_names_an_old_time_reaches_other_gateways_as_old_as_here() {
        // Read live (number 7) at 10 s, its payload taken at 4 s: here it is shown 6 s old, and
        // another gateway once showed it as fresh as the owner's round (read times only).
        let mut snap = crate::device::Snapshot::before_first_read();
        snap.record_taken(
            "contact",
            closedloop_contract::Value::Bool(true),
            (10_000, Some(4_000)),
            7,
            || "t".into(),
        );
        let now = 10_050;
        let (_, reading) = snap.readings().next().expect("recorded");
        let here = SignalState::of(reading.last_good().expect("good"), None, now, false);
        let state = published_state(&snap, 100, now);
        assert_eq!(state["values"]["contact"]["at_ms"], 4_000, "{state}");
        assert!(state["values"]["contact"]["retained"].is_null(), "{state}");
        let mut shown = empty_state();
        from_owner(&mut shown, &published(50, state), &lamp(), now);
        let there = &shown.signals["contact"];
        assert_eq!(there.age_ms, here.age_ms, "{there:?} / {here:?}");
        assert_eq!(
            (there.at.as_deref(), there.age_ms),
            (Some(rfc3339(4_000).as_str()), Some(6_050))
        );
    }
}
