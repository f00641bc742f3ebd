//! The registry and its watchers against hand-fed change feeds and a test sink.

use super::*;
use closedloop_engine::{Change, Liveness, Snapshot};
use tokio::sync::mpsc;
use tokio::sync::{broadcast, watch};

type Sent = mpsc::UnboundedReceiver<(String, Instant)>;

fn snapshot(seq: u64, liveness: Liveness) -> Snapshot {
    let mut snap = Snapshot::with_liveness(liveness);
    snap.seq = seq;
    snap
}

fn change(id: &str) -> Change {
    Change::Command {
        command_id: id.into(),
        device: "lamp".into(),
        status: "running".into(),
        elsewhere: false,
    }
}

async fn next_within(rx: &mut Sent, ms: u64) -> Option<Instant> {
    let got = tokio::time::timeout(Duration::from_millis(ms), rx.recv()).await;
    got.ok().flatten().map(|(_, at)| at)
}

#[tokio::test]
async fn a_burst_is_throttled_and_its_last_change_is_never_lost() {
    let hub = Arc::new(Subscriptions::with_limits(8, THROTTLE));
    let (tx, rx) = broadcast::channel(64);
    let (sink, mut sent) = mpsc::unbounded_channel();
    let source = Source::Command {
        id: "c1".into(),
        rx,
    };
    hub.add(
        "command://c1".into(),
        Owner::Listen(1),
        source,
        Sink::Test(sink),
    )
    .unwrap();
    let first = Instant::now();
    for _ in 0..5 {
        tx.send(change("c1")).unwrap();
        tx.send(change("other")).unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let last_change = Instant::now();
    let mut at = Vec::new();
    while let Some(t) = next_within(&mut sent, 400).await {
        at.push(t);
    }
    assert!(at.len() >= 2, "one at once, one trailing: {at:?}");
    let most = 2 + (last_change - first).as_millis() / THROTTLE.as_millis();
    assert!(at.len() as u128 <= most, "{} notifications", at.len());
    assert!(at.windows(2).all(|w| w[1] - w[0] >= THROTTLE), "{at:?}");
    assert!(
        *at.last().unwrap() >= last_change,
        "the last change was dropped"
    );
    // Another command's changes send nothing.
    tx.send(change("other")).unwrap();
    assert_eq!(next_within(&mut sent, 250).await, None);
}

#[tokio::test]
async fn a_read_cycle_without_a_new_value_sends_nothing() {
    let hub = Arc::new(Subscriptions::new());
    let (tx, rx) = watch::channel(snapshot(1, Liveness::Unknown));
    let (sink, mut sent) = mpsc::unbounded_channel();
    let uri = "device://lamp/state".to_string();
    hub.add(uri, Owner::Listen(1), Source::device(rx), Sink::Test(sink))
        .unwrap();
    tx.send_replace(snapshot(2, Liveness::Unknown));
    assert_eq!(next_within(&mut sent, 250).await, None);
    tx.send_replace(snapshot(3, Liveness::Online));
    assert!(next_within(&mut sent, 1000).await.is_some());
    tx.send_replace(snapshot(4, Liveness::Online));
    assert_eq!(next_within(&mut sent, 250).await, None);
}

#[tokio::test]
async fn subscriptions_are_bounded_deduplicated_and_removable() {
    let hub = Arc::new(Subscriptions::with_limits(2, THROTTLE));
    let sink = || Sink::Test(mpsc::unbounded_channel().0);
    let uri = "device://lamp/config".to_string();
    let client = Owner::Client(None);
    hub.add(uri.clone(), client.clone(), Source::fixed(), sink())
        .unwrap();
    hub.add(uri.clone(), client.clone(), Source::fixed(), sink())
        .unwrap();
    assert_eq!(
        hub.len(),
        1,
        "the same client subscribing twice is one subscription"
    );
    {
        let owner = hub.listen_owner();
        let _guard = hub.guard(owner.clone());
        hub.add(uri.clone(), owner.clone(), Source::fixed(), sink())
            .unwrap();
        let err = hub
            .add(uri.clone(), owner, Source::fixed(), sink())
            .unwrap_err();
        assert!(err.message.contains("limit 2"), "{}", err.message);
        assert_eq!(hub.len(), 2);
    }
    assert_eq!(
        hub.len(),
        1,
        "the listen stream's subscriptions end with it"
    );
    hub.remove_matching(&uri, &client);
    assert_eq!(hub.len(), 0);
}

#[tokio::test]
async fn a_subscription_whose_client_went_away_is_dropped() {
    let hub = Arc::new(Subscriptions::new());
    let (sink, sent) = mpsc::unbounded_channel();
    hub.add(
        "device://lamp/config".into(),
        Owner::Client(None),
        Source::fixed(),
        Sink::Test(sink),
    )
    .unwrap();
    assert_eq!(hub.len(), 1);
    drop(sent);
    let until = Instant::now() + CLOSED_CHECK * 3;
    while hub.len() > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(hub.len(), 0);
}
