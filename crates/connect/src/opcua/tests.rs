//! The OPC UA link's numbering rules, fed by hand: only Good values enter the cache, and a
//! sample the server took before an acknowledgement is never fresh for it.

use super::*;
use tokio::time::Instant;

/// The last good reading of `name`, current or not.
fn last<'a>(snap: &'a Snapshot, name: &str) -> &'a closedloop_link::SignalValue {
    let reading = snap.reading(name).expect("read");
    reading.last_good().expect("a good value")
}

fn update(node: &str, value: Option<Value>, status: &str, seq: u64) -> Update {
    Update {
        node: node.into(),
        value,
        value_type: "Double".into(),
        status: status.into(),
        good: status == "Good",
        source_ms: None,
        server_ms: None,
        seq,
        from_read: false,
        received_at: Instant::now(),
        asked_at: None,
    }
}

/// A pump on an OPC UA endpoint that is never reached: updates are fed by hand.
fn pump() -> OpcuaLink {
    let plant = closedloop_plant::parse(
        r#"
[[device]]
id = "pump"
description = "t"
driver = { kind = "opcua", endpoint = "opc.tcp://127.0.0.1:9/x" }
[device.signals]
speed = { node = "ns=2;s=Pump1.Speed", unit = "rpm" }
running = { node = "ns=2;s=Pump1.Running", type = "bool" }
"#,
        "t.toml",
        std::path::Path::new("."),
    )
    .expect("plant parses");
    let client = OpcuaClient::connect(closedloop_opcua::OpcuaConfig::new(
        "opc.tcp://127.0.0.1:9/x",
    ))
    .expect("config");
    OpcuaLink::new(Arc::clone(&plant.devices[0]), client, Clock::new())
}

#[tokio::test]
async fn only_good_values_enter_the_cache_and_a_late_resync_never_replaces_a_newer_one() {
    let dev = pump();
    let mut snap = dev.base.snapshot();
    let mut bad = BTreeSet::new();
    let speed = "ns=2;s=Pump1.Speed";
    dev.take_update(
        &mut snap,
        &mut bad,
        &update(speed, Some(Value::Number(10.0)), "Good", 5),
    );
    assert_eq!(last(&snap, "speed").value, Value::Number(10.0));
    assert_eq!((last(&snap, "speed").seq, snap.seq), (5, 5));
    assert_eq!(last(&snap, "speed").source, speed);
    // A Bad value is named, and makes the signal unreadable: the last Good one stays as
    // history with its old number, never current.
    dev.take_update(
        &mut snap,
        &mut bad,
        &update(speed, None, "Bad_CommunicationError", 6),
    );
    assert_eq!(last(&snap, "speed").seq, 5);
    let reading = snap.reading("speed").unwrap();
    assert_eq!(reading.current(), None);
    let failure = reading.failure().expect("unreadable");
    assert_eq!(failure.code, ErrorCode::DeviceOffline);
    assert_eq!(failure.why, format!("{speed} reads Bad_CommunicationError"));
    assert!(bad.contains(speed));
    assert!(
        snap.last_error
            .as_deref()
            .unwrap()
            .contains("Bad_CommunicationError")
    );
    // A resync read issued before a newer update never replaces it.
    dev.take_update(
        &mut snap,
        &mut bad,
        &update(speed, Some(Value::Number(20.0)), "Good", 9),
    );
    dev.take_update(
        &mut snap,
        &mut bad,
        &update(speed, Some(Value::Number(15.0)), "Good", 8),
    );
    assert_eq!(last(&snap, "speed").value, Value::Number(20.0));
    assert!(!bad.contains(speed));
    // A sample the server took at or before a write's acknowledgement is never fresh for
    // it, even when it arrives (and is numbered) after it.
    *dev.ack.lock().unwrap() = Some((20, Some(5_000)));
    let mut early = update(speed, Some(Value::Number(30.0)), "Good", 21);
    early.server_ms = Some(4_990);
    dev.take_update(&mut snap, &mut bad, &early);
    assert_eq!(last(&snap, "speed").value, Value::Number(30.0));
    assert_eq!(last(&snap, "speed").seq, 20, "numbered at the fence");
    let mut late = update(speed, Some(Value::Number(31.0)), "Good", 22);
    late.server_ms = Some(5_010);
    dev.take_update(&mut snap, &mut bad, &late);
    assert_eq!(last(&snap, "speed").seq, 22);
    // A number on a bool signal is a bool.
    let running = "ns=2;s=Pump1.Running";
    dev.take_update(
        &mut snap,
        &mut bad,
        &update(running, Some(Value::Number(1.0)), "Good", 10),
    );
    assert_eq!(last(&snap, "running").value, Value::Bool(true));
}

#[tokio::test]
async fn a_read_after_the_ack_is_fresh_whatever_its_timestamp_a_subscription_sample_is_not() {
    let dev = pump();
    let mut snap = dev.base.snapshot();
    let mut bad = BTreeSet::new();
    let running = "ns=2;s=Pump1.Running";
    // The call set Running at 4_990 on the server's clock and was acknowledged at 5_000
    // with fence 20.
    *dev.ack.lock().unwrap() = Some((20, Some(5_000)));
    // The subscription's sample of that change (taken before the ack, received after it):
    // numbered at the fence, never fresh.
    let mut sample = update(running, Some(Value::Bool(true)), "Good", 21);
    (sample.source_ms, sample.server_ms) = (Some(4_990), Some(4_990));
    dev.take_update(&mut snap, &mut bad, &sample);
    assert_eq!(last(&snap, "running").value, Value::Bool(true));
    assert_eq!((last(&snap, "running").seq, snap.seq), (20, 20));
    // A read issued after the ack answers the value the call set, with the timestamps it
    // was set with: numbered at issue, fresh.
    let mut read = update(running, Some(Value::Bool(true)), "Good", 22);
    (read.source_ms, read.server_ms) = (Some(4_990), Some(4_990));
    read.from_read = true;
    dev.take_update(&mut snap, &mut bad, &read);
    assert_eq!((last(&snap, "running").seq, snap.seq), (22, 22));
    // Only a source timestamp (node-opcua sends no server timestamp on a read): a read is
    // fresh by its number, a subscription sample is not fresh at all.
    let mut sample = update(running, Some(Value::Bool(false)), "Good", 23);
    sample.source_ms = Some(4_990);
    dev.take_update(&mut snap, &mut bad, &sample);
    assert_eq!(
        last(&snap, "running").value,
        Value::Bool(true),
        "seq 20 < 22"
    );
    assert_eq!(last(&snap, "running").seq, 22);
    let mut read = update(running, Some(Value::Bool(true)), "Good", 24);
    read.source_ms = Some(4_990);
    read.from_read = true;
    dev.take_update(&mut snap, &mut bad, &read);
    assert_eq!(last(&snap, "running").seq, 24);
    // A read issued before the ack (in flight when it came) is numbered at issue, below the
    // fence: never fresh, whatever its timestamp.
    let mut stale = update(running, Some(Value::Bool(false)), "Good", 19);
    (stale.source_ms, stale.server_ms) = (Some(5_010), Some(5_010));
    stale.from_read = true;
    dev.take_update(&mut snap, &mut bad, &stale);
    assert_eq!(last(&snap, "running").value, Value::Bool(true));
    assert_eq!(last(&snap, "running").seq, 24);
}

#[tokio::test]
async fn a_subscription_sample_counts_as_taken_when_the_server_stamped_it_a_read_when_asked() {
    let dev = pump();
    let mut snap = dev.base.snapshot();
    let mut bad = BTreeSet::new();
    let running = "ns=2;s=Pump1.Running";
    let arrived = dev.base.clock.wall_ms(tokio::time::Instant::now());
    // Sampled 80 ms before it arrived (a late notification): it is as old as that.
    let mut sample = update(running, Some(Value::Bool(true)), "Good", 1);
    sample.server_ms = Some(arrived - 80);
    dev.take_update(&mut snap, &mut bad, &sample);
    assert_eq!(last(&snap, "running").at_ms, arrived - 80);
    // A read's timestamps say when the value last changed: it was read when asked for, here
    // 300 ms before its answer came (a slow server): the earliest the server can have read it.
    let mut read = update(running, Some(Value::Bool(true)), "Good", 2);
    (read.source_ms, read.server_ms) = (Some(arrived - 5_000), Some(arrived - 5_000));
    read.from_read = true;
    let now = tokio::time::Instant::now();
    read.asked_at = now.checked_sub(std::time::Duration::from_millis(300));
    let asked_ms = read.asked_at.map(|t| dev.base.clock.wall_ms(t));
    dev.take_update(&mut snap, &mut bad, &read);
    assert_eq!(Some(last(&snap, "running").at_ms), asked_ms);
    assert!(last(&snap, "running").at_ms <= arrived - 290);
    // Without the time of asking (none known), a read is taken when it arrived.
    read.asked_at = None;
    read.seq = 3;
    dev.take_update(&mut snap, &mut bad, &read);
    assert!(
        last(&snap, "running").at_ms >= arrived,
        "{:?}",
        last(&snap, "running")
    );
    // A server clock ahead of this one never makes a sample younger than its arrival.
    let mut ahead = update(running, Some(Value::Bool(false)), "Good", 4);
    ahead.server_ms = Some(arrived + 60_000);
    dev.take_update(&mut snap, &mut bad, &ahead);
    assert!(last(&snap, "running").at_ms < arrived + 60_000);
}

#[tokio::test]
async fn a_sample_without_a_server_timestamp_is_never_fresh_only_a_read_is() {
    let dev = pump();
    let mut snap = dev.base.snapshot();
    let mut bad = BTreeSet::new();
    let speed = "ns=2;s=Pump1.Speed";
    *dev.ack.lock().unwrap() = Some((20, Some(5_000)));
    // No timestamp at all, arriving after the acknowledgement: it may have been taken before.
    let bare = update(speed, Some(Value::Number(1.0)), "Good", 21);
    dev.take_update(&mut snap, &mut bad, &bare);
    assert_eq!(
        snap.read_after("speed", 20),
        None,
        "not fresh for the write"
    );
    // A device clock running a minute ahead stamps the source: still not fresh.
    let mut ahead = update(speed, Some(Value::Number(2.0)), "Good", 22);
    ahead.source_ms = Some(65_000);
    dev.take_update(&mut snap, &mut bad, &ahead);
    assert_eq!(
        snap.read_after("speed", 20),
        None,
        "a source timestamp proves nothing"
    );
    let arrived = dev.base.clock.wall_ms(ahead.received_at);
    assert!(
        last(&snap, "speed").at_ms <= arrived,
        "never younger than its arrival"
    );
    // The answer to a read issued after the acknowledgement is.
    let mut read = update(speed, Some(Value::Number(3.0)), "Good", 23);
    read.from_read = true;
    dev.take_update(&mut snap, &mut bad, &read);
    assert_eq!(
        snap.read_after("speed", 20).map(|v| v.value),
        Some(Value::Number(3.0))
    );
    // An acknowledgement without a server time: no subscription sample after it is fresh.
    *dev.ack.lock().unwrap() = Some((30, None));
    let mut stamped = update(speed, Some(Value::Number(4.0)), "Good", 31);
    stamped.server_ms = Some(99_000);
    dev.take_update(&mut snap, &mut bad, &stamped);
    assert_eq!(snap.read_after("speed", 30), None);
}

#[tokio::test]
async fn a_good_status_with_an_empty_variant_is_no_value_and_a_string_is_refused() {
    let dev = pump();
    let mut snap = dev.base.snapshot();
    let mut bad = BTreeSet::new();
    let speed = "ns=2;s=Pump1.Speed";
    dev.take_update(
        &mut snap,
        &mut bad,
        &update(speed, Some(Value::Number(10.0)), "Good", 5),
    );
    // Good, with nothing in it (a server whose device is starting): no value, the old number
    // history only; it says nothing of the wiring, so it is no refusal.
    let mut nothing = update(speed, None, "Good", 6);
    nothing.value_type = "Empty".into();
    dev.take_update(&mut snap, &mut bad, &nothing);
    let reading = snap.reading("speed").unwrap();
    assert_eq!(reading.current(), None);
    let failure = reading.failure().expect("unreadable");
    assert!(failure.no_value, "{failure:?}");
    assert_eq!(failure.code, ErrorCode::NoFeedback);
    assert_eq!(
        failure.why,
        format!("{speed} holds no value (Good, with an empty variant)")
    );
    assert_eq!(last(&snap, "speed").seq, 5);
    // A Bad status without a value stays the status's refusal.
    let mut dark = update(speed, None, "Bad_CommunicationError", 7);
    dark.value_type = "Empty".into();
    dev.take_update(&mut snap, &mut bad, &dark);
    let failure = snap.reading("speed").unwrap().failure().unwrap().clone();
    assert!(!failure.no_value);
    assert_eq!(failure.code, ErrorCode::DeviceOffline);
    // Good with a String: the plant names the wrong node or type, a refusal.
    let mut text = update(speed, None, "Good", 8);
    text.value_type = "String".into();
    dev.take_update(&mut snap, &mut bad, &text);
    let failure = snap.reading("speed").unwrap().failure().unwrap().clone();
    assert!(!failure.no_value);
    assert_eq!(failure.code, ErrorCode::RegisterInvalid);
    // The next value is current again.
    dev.take_update(
        &mut snap,
        &mut bad,
        &update(speed, Some(Value::Number(11.0)), "Good", 9),
    );
    assert_eq!(
        snap.reading("speed").unwrap().current().map(|v| v.value),
        Some(Value::Number(11.0))
    );
}
